"""tdpm's kept samples written in chunks as they are kept (checkpoint.chunks_dir), each file once:
a checkpoint holds only the samples since the last chunk, whatever the sweeps done, and a run
resumed from it keeps exactly the uninterrupted run's samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bnpmix.pipeline.engines import tdpm_kept
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.runtime import checkpoint
from bnpmix.storage import BnpmixError, RunDir, ingest_array
from bnpmix.storage.arrays import read_arrays


class Stop(KeyboardInterrupt):
    pass


@pytest.mark.usefixtures("lap_checkpoints")
def test_kept_samples_go_to_chunks_and_a_resume_reads_them_back(tmp_path, monkeypatch):
    monkeypatch.setattr(tdpm_kept, "CHUNK", 4)
    rng = np.random.default_rng(0)
    ingest_array(rng.normal(size=(60, 2)), tmp_path / "c",
                 columns={"time": np.repeat(np.arange(3), 20)})
    job = job_config(algorithm="tdpm", sweeps=30, burn_in=5, thin=1, seed=2)
    whole = fit(tmp_path / "c", tmp_path / "whole", job)
    assert not (tmp_path / "whole" / "chunks").exists()  # gone once the run is published
    seen = {}

    def stop_at_sweep_19(engine, step):
        if engine.sweep == 19:  # 14 kept: three chunks of 4 and 2 in the checkpoint
            run = RunDir(engine.ctx.chunks.parent)
            with checkpoint.open_checkpoint(run, "tdpm") as ckpt:
                seen["meta"] = dict(ckpt.meta["state"])
                seen["kept"] = np.array(ckpt["kept"])
            seen["chunks"] = sorted(p.name for p in engine.ctx.chunks.iterdir())
            raise Stop

    with pytest.raises(Stop):
        fit(tmp_path / "c", tmp_path / "cut", job, on_step=stop_at_sweep_19)
    assert seen["meta"]["kept"] == 14 and seen["meta"]["chunked"] == 12
    assert seen["kept"].shape == (2, 60)
    assert seen["chunks"] == ["kept-000000.npz", "kept-000001.npz", "kept-000002.npz"]
    with read_arrays(tmp_path / "cut" / "chunks" / "kept-000001.npz",
                     "bnpmix-kept-samples", 1) as chunk:
        assert chunk["kept"].shape == (4, 60)
    resumed = resume(tmp_path / "cut")
    assert resumed["log_joint"] == whole["log_joint"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "cut" / "samples.parquet"),
                                  pd.read_parquet(tmp_path / "whole" / "samples.parquet"))
    # a chunk the checkpoint relies on, lost: an error naming it
    cut = tmp_path / "cut2"
    with pytest.raises(Stop):
        fit(tmp_path / "c", cut, job, on_step=stop_at_sweep_19)
    (cut / "chunks" / "kept-000001.npz").unlink()
    with pytest.raises(BnpmixError, match=r"kept-000001\.npz: missing"):
        resume(cut)
