"""The per-commit suite, on asv's conventions: ``setup`` prepares the data once, each
``time_<case>`` is one fit the runner (run.py) times (after its own ``setup``, untimed), each
``track_<case>_<figure>`` returns a figure of that case's last fit in the unit its ``unit``
attribute names.

The cases are small versions of what users run: memo with the plain defaults on real data
(iris, wine and digits, 80/20 split, seed 0, as benchmarks/acceptance/real_data.py scores
them) and on 20,000 synthetic Gaussian rows in 10-D, adf and vb on iris, and memo on a small
synthetic text corpus. The quality figures are deterministic
given the seed, so two records of one commit agree on them exactly; the times depend on the
machine and its load, which the record names."""

from __future__ import annotations

import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, corpus_of, run_fit
from acceptance.real_data import bnpmix_run, corpus, split
from bnpmix.datasets import bag_of_words_topics, gaussian_clusters
from bnpmix.pipeline.fit import job_config

_LAST: dict[str, dict[str, Any]] = {}  # each case's last fit: what the track_ functions read


@cache
def _dense_corpus() -> Path:
    X, labels = gaussian_clusters(n=20_000, D=10, separated=8, overlapping=2, seed=0)
    return corpus_of(X, labels, 4, "history-gauss")


@cache
def _text_corpus() -> Path:
    X, labels, _ = bag_of_words_topics(2_000, V=500, K=10, seed=0)
    return corpus_of(X, labels, 4, "history-topics")


def _real(name: str, **options: Any) -> dict[str, Any]:
    """One fit of a real data set's training rows, scored on its test rows (seed 0)."""
    return bnpmix_run(name, 0, split(name, 0), **options)


CASES = {
    "memo_iris": lambda: _real("iris"),
    "memo_wine": lambda: _real("wine"),
    "memo_digits": lambda: _real("digits"),
    "memo_gauss": lambda: run_fit(_dense_corpus(), job_config(seed=0), "history-memo-gauss"),
    "adf_iris": lambda: _real("iris", algorithm="adf"),
    "vb_iris": lambda: _real("iris", algorithm="vb"),
    "memo_text": lambda: run_fit(_text_corpus(), job_config(algorithm="memo", obs="mult",
                                                             seed=0), "history-memo-text"),
}


def setup() -> None:
    """The corpus of every case, made once and not timed (asv runs a module's setup before its
    benchmarks)."""
    _dense_corpus()
    _text_corpus()
    for name in ("iris", "wine", "digits"):
        corpus(name, 0, split(name, 0)[0])


def _fit(case: str) -> None:
    """Fit ``case`` afresh (what its time_ function measures) and keep its figures."""
    _LAST[case] = CASES[case]()


def _figure(case: str, key: str) -> float:
    """A figure of the case's last fit, fitting it first if the runner has not."""
    if case not in _LAST:
        _fit(case)
    return float(_LAST[case][key])


def _clear_runs() -> None:
    """Remove the run directories of earlier fits, so that a fit can write its own again."""
    for run in WORK.glob("run-*"):
        shutil.rmtree(run)


def _fresh(f):
    """A time_ function whose every timing starts without earlier runs (asv's per-benchmark
    ``setup``, which the runner calls before each timing)."""
    f.setup = _clear_runs
    return f


def _unit(unit: str):
    def mark(f):
        f.unit = unit
        return f
    return mark


@_fresh
def time_memo_iris() -> None:
    _fit("memo_iris")


@_fresh
def time_memo_wine() -> None:
    _fit("memo_wine")


@_fresh
def time_memo_digits() -> None:
    _fit("memo_digits")


@_fresh
def time_memo_gauss() -> None:
    _fit("memo_gauss")


@_fresh
def time_adf_iris() -> None:
    _fit("adf_iris")


@_fresh
def time_vb_iris() -> None:
    _fit("vb_iris")


@_fresh
def time_memo_text() -> None:
    _fit("memo_text")


@_unit("ARI")
def track_memo_iris_ari() -> float:
    return _figure("memo_iris", "ari")


@_unit("nats per test item")
def track_memo_iris_heldout() -> float:
    return _figure("memo_iris", "heldout")


@_unit("ARI")
def track_memo_wine_ari() -> float:
    return _figure("memo_wine", "ari")


@_unit("nats per test item")
def track_memo_wine_heldout() -> float:
    return _figure("memo_wine", "heldout")


@_unit("ARI")
def track_memo_digits_ari() -> float:
    return _figure("memo_digits", "ari")


@_unit("nats per test item")
def track_memo_digits_heldout() -> float:
    return _figure("memo_digits", "heldout")


@_unit("ARI")
def track_memo_gauss_ari() -> float:
    return _figure("memo_gauss", "ari")


@_unit("ELBO per item")
def track_memo_gauss_elbo() -> float:
    return _figure("memo_gauss", "elbo_per_item")


@_unit("ARI")
def track_adf_iris_ari() -> float:
    return _figure("adf_iris", "ari")


@_unit("ARI")
def track_vb_iris_ari() -> float:
    return _figure("vb_iris", "ari")


@_unit("ELBO per item")
def track_vb_iris_elbo() -> float:
    return _figure("vb_iris", "elbo_per_item")


@_unit("ELBO per item")
def track_memo_text_elbo() -> float:
    return _figure("memo_text", "elbo_per_item")


@_unit("ARI")
def track_memo_text_ari() -> float:
    return _figure("memo_text", "ari")
