"""JobKeeper's rules on a stand-in for a SpecCluster (no scheduler, no SLURM): which jobs it
closes and when it asks for its scale again. tests/pipeline/test_slurm.py runs it on real SLURM
jobs."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from bnpmix.pipeline.clusters import JobKeeper


class Job:
    """A SpecCluster "worker" (a dask-jobqueue job): closing it cancels it."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class Cluster:
    """What JobKeeper reads and calls of a SpecCluster: worker_spec, workers, scheduler_info,
    scale (which, as SpecCluster's, starts a job for each spec without one)."""

    def __init__(self, spec: dict[str, dict[str, Any]]) -> None:
        self.worker_spec = spec
        self.workers = {name: Job() for name in spec}
        self.scheduler_info: dict[str, Any] = {"workers": {}}
        self.scaled: list[int] = []

    def present(self, *names: str) -> None:
        self.scheduler_info = {"workers": {f"tcp://127.0.0.1:{i}": {"name": n}
                                           for i, n in enumerate(names)}}

    def scale(self, n: int) -> None:
        self.scaled.append(n)
        for name in set(self.worker_spec) - set(self.workers):
            self.workers[name] = Job()


def keeper(cluster: Cluster, grace: float = 0.0) -> JobKeeper:
    return JobKeeper(cluster, scale=3, grace=grace)


def check(k: JobKeeper) -> None:
    asyncio.run(k.check())


def test_a_job_whose_workers_left_is_closed_and_replaced():
    cluster = Cluster({"J0": {}, "J1": {}})
    k = keeper(cluster)
    cluster.present("J0", "J1")
    check(k)
    assert cluster.scaled == []
    old = cluster.workers["J0"]
    cluster.present("J1")
    check(k)
    assert old.closed and cluster.workers["J0"] is not old and cluster.scaled == [3]
    assert not cluster.workers["J1"].closed
    check(k)  # the replacement has not joined yet: left alone
    assert not cluster.workers["J0"].closed and cluster.scaled == [3]


def test_a_job_none_of_whose_workers_joined_is_never_closed():
    cluster = Cluster({"J0": {}})
    k = keeper(cluster)
    for _ in range(3):  # queued, or failing at start
        check(k)
    assert not cluster.workers["J0"].closed and cluster.scaled == []


def test_a_job_of_several_workers_is_kept_while_one_is_left():
    cluster = Cluster({"J0": {"group": ["-0", "-1"]}})
    k = keeper(cluster)
    job = cluster.workers["J0"]
    cluster.present("J0-0", "J0-1")
    check(k)
    cluster.present("J0-1")
    check(k)
    assert not job.closed
    cluster.present()
    check(k)
    assert job.closed and cluster.scaled == [3]


def test_the_grace_period_and_a_worker_back_within_it():
    cluster = Cluster({"J0": {}})
    k = keeper(cluster, grace=3600)
    cluster.present("J0")
    check(k)
    cluster.present()
    check(k)
    assert not cluster.workers["J0"].closed  # gone for less than the grace
    cluster.present("J0")  # back (a nanny restarted it)
    check(k)
    k.grace = 0
    check(k)
    assert not cluster.workers["J0"].closed


def test_a_worker_that_joined_and_left_between_two_looks_counts():
    cluster = Cluster({"J0": {}})
    k = keeper(cluster)
    scheduler = SimpleNamespace(workers={"tcp://127.0.0.1:1": SimpleNamespace(name="J0")})
    k._seen.add_worker(scheduler=scheduler, worker="tcp://127.0.0.1:1")  # the plugin's hook
    job = cluster.workers["J0"]
    check(k)  # never seen in scheduler_info
    assert job.closed and cluster.scaled == [3]


def test_a_job_that_spec_cluster_forgot_is_asked_for_again():
    """SpecCluster drops a lost one-worker job from ``workers`` itself, submitting none."""
    cluster = Cluster({"J0": {}})
    k = keeper(cluster, grace=3600)
    cluster.present("J0")
    check(k)
    del cluster.workers["J0"]
    cluster.present()
    check(k)
    assert cluster.scaled == [3] and "J0" in cluster.workers
    check(k)  # its replacement, not yet joined, is left alone
    assert not cluster.workers["J0"].closed and cluster.scaled == [3]
