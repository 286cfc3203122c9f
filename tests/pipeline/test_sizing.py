"""`bnpmix plan`: the sizing model's projection (pipeline/sizing.py) of an ingested corpus, read
from its manifest, checked against the model's formula recomputed here from the shipped
coefficients (pipeline/sizing.json), and its errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bnpmix.pipeline import sizing
from bnpmix.storage import ingest_array
from helpers import cli


def terms_value(coef: dict[str, float], terms: dict[str, float]) -> float:
    return sum(coef.get(k, 0.0) * v for k, v in terms.items())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "corpus"
    X = np.random.default_rng(0).normal(size=(3_000, 6))
    ingest_array(X, out, partition_rows=500)
    return out


def test_plan_follows_the_model(corpus):
    """Every figure `plan --json` prints is the formula of the sizing model over the corpus's
    manifest (6 partitions of 500 rows, D = 6) and the shipped coefficients: a lap is
    ceil(P / W) waves of (ceil(W / slots) tasks + W driver visits + the wave's globals and
    round trip) plus the lap end (the moves and birth.per_lap births' creation) and the
    checkpoint; the driver holds S0, q twice, every summary (within the budget), a wave's
    results and globals, the births' rows and one birth's stacked."""
    done = cli("plan", corpus, "--workers", 2, "--K", 7, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["kind"], out["items"], out["dim"], out["partitions"]) == ("dense", 3000, 6, 6)
    coef = sizing.load_coefficients()
    plans = {p["obs"]: p for p in out["plans"]}
    assert plans and set(plans) <= set(coef["models"])
    for obs, p in plans.items():
        model = coef["models"][obs]
        K, D, P, W, rows = 7, 6, 6, 4, 500
        n = min(coef["birth"]["max_collect"], 3000 / K)  # rows a birth's target collects
        sizes = {"rows": rows, "K": K, "D": D, "P": P, "nnz": rows * D, "W": W, "n": n,
                 "adopting": 1.0}
        terms = sizing.features(model["structure"], sizes)
        s = p["seconds"]
        for part in ("visit", "globals", "checkpoint"):
            assert s[part] == pytest.approx(terms_value(model[part], terms[part]))
        births = coef["birth"]["per_lap"] * terms_value(model["birth"], terms["birth"])
        assert s["lap_end"] == pytest.approx(terms_value(model["lap_end"], terms["lap_end"])
                                             + births)
        assert s["cache_miss"] == 0 and s["task"] == pytest.approx(
            terms_value(model["task"], terms["task"]))
        summary = terms_value(model["memory"]["summary"],
                              sizing.MEMORY_FEATURES[model["structure"]]["summary"](sizes))
        d = coef["dask"]
        dask = d["per_wave"] + d["per_task"] * W + d["per_byte"] * (p["bytes"]["post"]
                                                                      + W * summary)
        wave = math.ceil(W / 2) * s["task"] + W * s["visit"] + s["globals"] + dask
        assert s["per_wave"] == pytest.approx(wave)
        assert p["waves"] == 2 and s["lap"] == pytest.approx(
            2 * wave + s["lap_end"] + s["checkpoint"])
        b = p["bytes"]
        assert b["summaries"] == pytest.approx(P * summary) and b["spilled"] == 0
        row_bytes = 8 * D
        # the births' rows (per_lap targets of n rows) held beside the summaries (all within
        # the budget here), and one birth's stacked at the lap's end
        collected = coef["birth"]["per_lap"] * n * row_bytes
        driver = (coef["base_bytes"]["driver"] + b["S0"] + 2 * b["post"] + P * summary
                  + collected + W * summary + b["post"] + 2 * n * row_bytes)
        assert b["driver"] == pytest.approx(driver)


def test_a_workers_working_memory_is_a_block_not_a_partition():
    """A visit runs over blocks of rows (algorithms/vb/local.blocks), so doubling the rows of
    a partition adds to a worker's projected memory only the partition itself (per thread) and
    its cache, not a working set per row: at K 200, D 128 a block is 1,024 rows."""
    coef = sizing.load_coefficients()
    small, large = (sizing.Shape("dense", 200_000 * P, 128, P, 200_000 * 128.0) for P in (10, 5))
    a, b = (sizing.project(coef, "gauss", s, 200, 4, threads=2, cache_bytes=0) for s in
            (small, large))
    assert sizing.block_rows(large, 200) == 1024
    grown = b["bytes"]["worker"] - a["bytes"]["worker"]
    assert grown == pytest.approx(2 * (large.partition_bytes - small.partition_bytes))


def test_plan_prints_lap_and_memory(corpus):
    done = cli("plan", corpus, "--workers", 8, "--K", 5, "--summary-bytes", "1KiB")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "seconds per lap" in text and "driver memory" in text and "per-worker memory" in text
    assert "--summary-bytes (1.0 KiB) bounds the driver" in text
    assert "only 4 of 8 slots are busy: --wave 8" in text


def test_plan_names_a_bad_path(tmp_path):
    missing = tmp_path / "no-such-corpus"
    done = cli("plan", missing, "--workers", 2)
    assert done.returncode == 1 and str(missing) in done.stderr and done.stdout == ""
    done = cli("plan", "--workers", 2)
    assert done.returncode == 2 and "a corpus directory or --shape" in done.stderr
    done = cli("plan", "--shape", "dense:10", "--workers", 2)
    assert done.returncode == 1 and "dense:ITEMS:D" in done.stderr
