"""Object-storage URLs where bnpmix cannot write are refused by name (issue 14; corpora and run
directories can be URLs: tests/storage/test_s3.py): ``Path("s3://b/c")`` is the local
path ``s3:/b/c``, so ``bnpmix ingest x.npy s3://bucket/corpus`` used to exit 0 after writing a
directory named ``s3:`` in the working directory (it now ingests into the bucket)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bnpmix.storage import BnpmixError, Manifest, RunDir, local_path
from bnpmix.storage.writer import new_corpus

URLS = ["s3://bucket/corpus", "gs://bucket/c", "abfs://container/c", "file:///tmp/c",
        "https://example.org/c"]


@pytest.mark.parametrize("url", URLS)
def test_the_python_api_refuses_urls(url):
    scheme = url.split("://")[0]
    for make in (RunDir, local_path):
        with pytest.raises(BnpmixError, match=f"{scheme}:// URLs are not supported here"):
            make(url)
    manifest = Manifest(kind="dense", dim=2, dtype="float64", columns=())
    with pytest.raises(BnpmixError, match="not supported here"), new_corpus(url, manifest):
        pass


def test_local_paths_and_scheduler_addresses_pass():
    for fine in ("corpus", "/tmp/a:b/c", "tcp://127.0.0.1:8786", "tls://host:8786"):
        assert str(local_path(fine)) == fine.replace("//", "/")


@pytest.mark.parametrize(("argv", "says"), [
    (["ingest", "{npy}", "{corpus}", "--labels", "s3://bucket/labels.txt"],
     "URLs are not supported here"),
    (["fit", "{corpus}", "--out", "{corpus}/r", "--cluster", "s3://b/profile.yaml"],
     "URLs are not supported here"),
    (["ingest", "{npy}", "s3://bucket/c", "--append"], "need a local corpus directory"),
    (["report", "s3://bucket/run"], "needs --out DIR")])
def test_the_cli_refuses_urls_naming_the_argument_and_writes_nothing(tmp_path, argv, says):
    np.save(tmp_path / "x.npy", np.zeros((4, 2)))
    (tmp_path / "corpus").mkdir()
    argv = [a.format(npy=tmp_path / "x.npy", corpus=tmp_path / "corpus") for a in argv]
    done = subprocess.run([sys.executable, "-m", "bnpmix", *argv], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "x.npy"]
