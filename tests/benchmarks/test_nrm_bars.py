"""The bars of Tank, Foti & Fox (2015), Sec. 4.1, with the adf and ep engines: the fast version
of ``benchmarks/reproductions/nrm_experiments.py --only bars`` (three seeds, EP with two passes).

Every one of the 16 bars must be matched by a posterior-mean component within the true-label
oracle's Hellinger distance + 0.06, for ADF and EP, with and without merges; merges (Hellinger
threshold 0.45: true bars are 0.633 apart, the extra clusters lie 0.19-0.36 from their bar) must
not add clusters on any seed and must remove the extras that a = 1000, tau = 1000 leaves.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, folder: str = ""):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _BENCH / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, and nrm_experiments' `import nrm_data`
    spec.loader.exec_module(module)
    return module


nrm_data = _load("nrm_data")
exp = _load("nrm_experiments", "reproductions")

SEEDS = (0, 1, 2)
PASSES = 2
TUNED = {"nrm_prior": "ig", "nrm_a": 1.0, "nrm_tau": 0.1}  # what bnpmix tune picks on these
LARGE = {"nrm_prior": "ig", **exp.LARGE}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """Per seed: the images, their corpus and the oracle's distance to each bar."""
    work = tmp_path_factory.mktemp("bars")
    out = {}
    for seed in SEEDS:
        docs = nrm_data.bars(seed)
        nrm_data.write_corpus(docs, work / f"bars-{seed}", 200)
        out[seed] = (docs, work / f"bars-{seed}", exp.bars_oracle(docs))
    return out


def _fit(corpora, tmp_path, seed, algorithm, merge, nrm):
    docs, corpus, oracle_H = corpora[seed]
    out = tmp_path / f"run-{seed}-{algorithm}-{merge}-{nrm['nrm_a']:g}"
    return exp.bars_fit(corpus, out, docs, oracle_H, algorithm, merge, PASSES, **nrm)


def test_oracle_is_close_to_the_bars(corpora):
    for docs, _, oracle_H in corpora.values():
        assert np.all(oracle_H < 0.2)  # 50 tokens an image, about 12 images a bar
        H = exp.hellinger(docs.topics, docs.topics)
        assert H[~np.eye(16, dtype=bool)].min() > 0.6  # distinct bars are far apart


@pytest.mark.parametrize("algorithm", ["adf", "ep"])
@pytest.mark.parametrize("nrm", [TUNED, LARGE], ids=["tuned", "large"])
def test_every_bar_is_recovered_without_merges(corpora, tmp_path, algorithm, nrm):
    for seed in SEEDS:
        row = _fit(corpora, tmp_path, seed, algorithm, 0.0, nrm)
        assert "error" not in row, row.get("traceback")
        assert row["matched"], (seed, row["bar_distance"], corpora[seed][2].tolist())
        assert row["K"] >= 16
        if nrm is TUNED:
            assert row["K"] == 16, (seed, row["K"])


@pytest.mark.parametrize("algorithm", ["adf", "ep"])
def test_merges_keep_every_bar_and_remove_extra_clusters(corpora, tmp_path, algorithm):
    before, after = [], []
    for seed in SEEDS:
        plain = _fit(corpora, tmp_path, seed, algorithm, 0.0, LARGE)
        merged = _fit(corpora, tmp_path, seed, algorithm, exp.MERGE_THRESHOLD, LARGE)
        assert "error" not in merged, merged["error"]
        assert merged["matched"], (seed, merged["bar_distance"])
        assert merged["extra"] <= plain["extra"]
        assert merged["extra_mass"] <= plain["extra_mass"]
        before.append(plain["extra"])
        after.append(merged["extra"])
    assert sum(before) > 0  # the setting leaves extra clusters to remove
    assert sum(after) < sum(before), (before, after)


@pytest.mark.parametrize("algorithm", ["adf", "ep"])
def test_merges_change_nothing_when_there_is_nothing_to_merge(corpora, tmp_path, algorithm):
    for seed in SEEDS:
        row = _fit(corpora, tmp_path, seed, algorithm, exp.MERGE_THRESHOLD, TUNED)
        assert "error" not in row, row.get("traceback")
        assert row["matched"] and row["K"] == 16 and row["merges"] == 0
