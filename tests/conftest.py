"""What the whole suite shares: the parallel default, the count of the tests it leaves out, and
one Dask cluster of real processes per test process.

The default run is parallel over this machine's cores (pytest-xdist's ``-n auto``, set below
only when no ``-n`` was given) and leaves out the tests marked ``slow`` (``-m "not slow"`` in
pyproject.toml's addopts). To run one test in this process: ``python -m pytest -n0 tests/x.py::t``
(or ``-p no:xdist``); the slow tests alone: ``python -m pytest -m slow``; everything:
``python -m pytest -m ""``.
"""

from __future__ import annotations

import os

import pytest

from helpers import DaskCluster


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n auto`` unless ``-n`` was given (``-n0``: no workers) or xdist is not loaded
    (``-p no:xdist``). Runs before xdist's own hook, which turns ``auto`` into the core count.
    Never in an xdist worker: its own ``-n`` is unset, and each would start workers of its own."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None:
        config.option.numprocesses = "auto"


_deselected: dict[str, int] = {"here": 0, "workers": -1}


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected["here"] += len(items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker tells the controller how many tests it deselected (-m "not slow")."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["deselected"] = _deselected["here"]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist's controller: every worker collects and deselects the same tests."""
    _deselected["workers"] = max(_deselected["workers"],
                                 getattr(node, "workeroutput", {}).get("deselected", -1))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """Under xdist pytest's own summary does not count the deselected tests: say it here."""
    if _deselected["workers"] > 0:
        terminalreporter.write_line(
            f"{_deselected['workers']} deselected (-m {config.option.markexpr!r}; "
            "`python -m pytest -m slow` runs the slow tests)")


@pytest.fixture(scope="session")
def dask_cluster():
    """A `dask scheduler` and two single-threaded `dask worker` processes on 127.0.0.1, one
    cluster per test process (each xdist worker its own), for the tests that need *a* cluster.
    Tests that kill, add or lose its processes start their own (helpers.DaskCluster)."""
    cluster = DaskCluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def dask_client(dask_cluster):
    """A distributed.Client of the session's cluster, for one module's tests (a client is the
    default scheduler while it lives: not the whole session's)."""
    from distributed import Client

    with Client(dask_cluster.address, timeout="10s") as client:
        yield client


@pytest.fixture
def own_dask_cluster():
    """A cluster of the same shape for one test that kills, adds or loses its processes."""
    cluster = DaskCluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def lap_checkpoints(monkeypatch):
    """A checkpoint at every lap end, in this process and in the commands the test starts: the
    Dask setting bnpmix.checkpoint-interval at 0 (the shipped 10 s skips the checkpoints of
    quick laps, as tests/pipeline/runtime/test_checkpoint.py checks)."""
    import dask

    monkeypatch.setenv("DASK_BNPMIX__CHECKPOINT_INTERVAL", "0")
    with dask.config.set({"bnpmix.checkpoint-interval": 0}):
        yield
