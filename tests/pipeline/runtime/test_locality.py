"""Partition locality and the cache figures: rendezvous homes (stable, and only a lost worker's
partitions move), submit / Pending beside map, parallelism, the caches' hit counts, and
summary.json's "cache"; then for real, a scheduler and two or three worker processes on
127.0.0.1: a memo fit whose partitions stay on their home workers (read from Dask's own task
stream) with warm caches, and a worker removed mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.runtime.data import PartitionCache, partition_refs
from bnpmix.pipeline.runtime.executors import (
    DaskExecutor,
    LocalExecutor,
    bounded_placement,
    partition_key,
    ranking,
    rendezvous,
    submit_kwargs,
)
from bnpmix.storage import BnpmixError, Corpus, RunDir, ingest_array
from helpers import blobs

WORKERS = [f"tcp://10.0.0.{n}:8786" for n in (1, 2, 3)]
KEYS = [f"{n:064x}:{n}" for n in range(300)]


def homes(workers: list[str]) -> dict[str, str | None]:
    return {k: rendezvous(k, workers) for k in KEYS}


def test_removing_one_of_three_workers_moves_only_its_partitions():
    three = homes(WORKERS)
    assert all(30 <= n <= 170 for n in Counter(three.values()).values())  # all three get some
    assert set(three.values()) == set(WORKERS)
    lost = WORKERS[1]
    two = homes([WORKERS[0], WORKERS[2]])
    moved = {k for k in KEYS if two[k] != three[k]}
    assert moved == {k for k in KEYS if three[k] == lost}
    assert {two[k] for k in moved} == {WORKERS[0], WORKERS[2]}  # spread over both survivors
    assert homes(WORKERS[::-1]) == three  # the order workers are listed in does not matter
    assert homes(WORKERS) == three and rendezvous(KEYS[0], []) is None


def test_homes_are_the_same_in_every_process():
    """Not Python's salted hash(): other interpreters with other hash seeds agree."""
    code = ("import json; from bnpmix.pipeline.runtime.executors import rendezvous; "
            f"print(json.dumps([rendezvous(k, {WORKERS!r}) for k in {KEYS[:40]!r}]))")
    want = [rendezvous(k, WORKERS) for k in KEYS[:40]]
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == want


def test_a_partition_is_keyed_by_its_checksum_and_index(tmp_path):
    ingest_array(np.zeros((10, 2)), tmp_path / "c", partition_rows=5)
    ingest_array(np.ones((10, 2)), tmp_path / "d", partition_rows=5)
    same, other = partition_refs(Corpus(tmp_path / "c")), partition_refs(Corpus(tmp_path / "d"))
    assert partition_key(same[1]) == f"{same[1].sha256}:1"
    assert partition_key(same[0]) != partition_key(other[0])  # other contents, another key


def test_a_ranking_starts_at_the_home_and_keeps_its_order_without_a_worker():
    for k in KEYS[:50]:
        full = ranking(k, WORKERS)
        assert sorted(full) == sorted(WORKERS) and full[0] == rendezvous(k, WORKERS)
        assert ranking(k, [w for w in WORKERS if w != full[0]]) == full[1:]
        assert ranking(k, WORKERS[::-1]) == full


def test_bounded_placement_gives_no_worker_more_than_its_share():
    a, b, c = WORKERS
    # two tasks whose home is a: the second goes to its next choice
    assert bounded_placement([[a, b, c], [a, c, b]], {a: 1, b: 1, c: 1}) == [a, c]
    assert bounded_placement([[a, b], [a, b]], {a: 1, b: 1}) == [a, b]
    assert bounded_placement([[a, b]], {a: 1, b: 1}) == [a]  # a lone task always goes home
    assert bounded_placement([[b, a], [a, b]], {a: 1, b: 1}) == [b, a]  # homes apart: kept
    # a worker with two threads takes twice the share: ceil(3 * 2 / 3) = 2 against 1
    assert bounded_placement([[a, b]] * 3, {a: 2, b: 1}) == [a, a, b]
    assert bounded_placement([[], [a]], {a: 1}) == [None, a]  # no worker to place it on
    assert bounded_placement([[a]], {}) == [None]
    rng = np.random.default_rng(0)
    threads = {a: 1, b: 2, c: 3}
    for n in (1, 2, 5, 6, 20, 101):
        keys = [KEYS[j] for j in rng.choice(len(KEYS), n, replace=False)]
        rankings = [ranking(k, WORKERS) for k in keys]
        placed = bounded_placement(rankings, threads)
        assert placed == bounded_placement(rankings, threads)  # the same every time
        load = Counter(placed)
        assert all(load[w] <= -(-n * t // 6) for w, t in threads.items()), (n, load)
        # a task is away from home only when its home already had its share before it
        for j, (r, w) in enumerate(zip(rankings, placed, strict=True)):
            if w != r[0]:
                assert Counter(placed[:j])[r[0]] == -(-n * threads[r[0]] // 6)


def test_tasks_go_to_their_home_and_may_run_elsewhere():
    assert submit_kwargs(WORKERS[0]) == {"workers": [WORKERS[0]], "allow_other_workers": True}
    assert submit_kwargs(None) == {}  # no worker yet: the scheduler places it


@pytest.fixture
def corpus(tmp_path):
    ingest_array(np.arange(60.0).reshape(30, 2), tmp_path / "c", partition_rows=5)  # 6 parts
    return Corpus(tmp_path / "c")


def tagged(batch, own, shared):
    return batch.index, float(batch.X[0, 0]), own, shared


def failing(batch):
    if batch.index == 3:
        raise ValueError("partition three is bad")
    return batch.index


@pytest.mark.parametrize("mode", ["threads", "synchronous"])
def test_submit_then_result_equals_map_with_several_outstanding(corpus, mode):
    ex = LocalExecutor(corpus, mode, workers=3)
    try:
        first = ex.submit(tagged, [5, 0, 3], "a", payloads=["x", "y", "z"])
        second = ex.submit(tagged, [1, 2], "b", payloads=[1, 2])
        assert second.result() == ex.map(tagged, [1, 2], "b", payloads=[1, 2])
        assert first.result() == ex.map(tagged, [5, 0, 3], "a", payloads=["x", "y", "z"])
        assert first.result() == [(5, 50.0, "x", "a"), (0, 0.0, "y", "a"), (3, 30.0, "z", "a")]
        assert ex.parallelism == (3 if mode == "threads" else 1)
    finally:
        ex.close()


@pytest.mark.parametrize("mode", ["threads", "synchronous"])
def test_an_error_is_raised_by_result_as_map_raises_it(corpus, mode):
    ex = LocalExecutor(corpus, mode, workers=2)
    try:
        pending = ex.submit(failing, [1, 3, 5])  # submitting does not raise
        for _ in range(2):  # nor does asking twice change what is raised
            with pytest.raises(ValueError, match="partition three is bad"):
                pending.result()
        with pytest.raises(ValueError, match="partition three is bad"):
            ex.map(failing, [3])
        assert ex.map(failing, [4, 1]) == [4, 1]
    finally:
        ex.close()


def test_synchronous_runs_at_submit_and_threads_at_once(corpus):
    ran = []

    def note(batch):
        ran.append(batch.index)
        return batch.index

    sync = LocalExecutor(corpus, "synchronous")
    pending = sync.submit(note, [2, 4])
    assert ran == [2, 4]  # before result() is asked for
    assert pending.result() == [2, 4]
    go = threading.Event()
    threads = LocalExecutor(corpus, "threads", workers=2)
    try:
        blocked = threads.submit(lambda batch: go.wait(60) and batch.index, [0, 1])
        go.set()  # the tasks were already running: result() only collects them
        assert blocked.result() == [0, 1]
    finally:
        threads.close()


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_a_thread_pool_runs_blas_on_one_thread_until_it_closes(corpus):
    """Two pool threads each calling a two-thread BLAS oversubscribe two cores."""
    with threadpool_limits(2, user_api="blas"):
        sync = LocalExecutor(corpus, "synchronous")
        assert sync.map(lambda batch: blas_threads(), [0]) == [{2}]
        sync.close()
        threads = LocalExecutor(corpus, "threads", workers=2)
        try:
            assert threads.map(lambda batch: blas_threads(), [0, 1]) == [{1}, {1}]
        finally:
            threads.close()
        assert blas_threads() == {2}


def test_the_cache_counts_hits_and_misses(corpus):
    cache = PartitionCache(max_bytes=5 * 2 * 8)  # room for one partition
    refs = partition_refs(corpus)
    assert cache.lookup(refs[0])[1] is False and cache.lookup(refs[0])[1] is True
    cache.get(refs[1])  # evicts partition 0
    assert cache.lookup(refs[0])[1] is False
    assert (cache.hits, cache.misses) == (1, 3)


def test_local_cache_stats_count_every_task(corpus):
    ex = LocalExecutor(corpus, "synchronous", cache_bytes=3 * 5 * 2 * 8)  # room for 3 partitions
    assert ex.cache_stats() == {"tasks": 0, "hits": 0, "misses": 0, "hit_rate": None,
                                "warm_hit_rate": None, "home_rate": None}
    ex.map(failing, [0, 1])  # two reads
    ex.map(failing, [0, 1, 2])  # two hits, a read
    ex.map(failing, [1, 4, 1])  # a hit, a read (evicting 0), a hit
    assert ex.cache_stats() == {"tasks": 8, "hits": 4, "misses": 4, "hit_rate": 0.5,
                                "warm_hit_rate": 1.0, "home_rate": None}
    assert ex.task_counts()[1] == (4, 3, 0, 3, 3)  # tasks, hits, at home, warm, warm hits
    ex.map(failing, [0])  # read again: a warm task that missed
    assert ex.cache_stats()["warm_hit_rate"] == 4 / 5
    threads = LocalExecutor(corpus, "threads", workers=2)
    try:
        pending = threads.submit(failing, [0, 1])
        assert threads.cache_stats()["tasks"] == 0  # counted when collected
        pending.result()
        assert threads.cache_stats()["tasks"] == 2
    finally:
        threads.close()


SUMMARY = {"algorithm": "memo", "K": 3, "elbo": -10.5, "elbo_per_item": -0.1, "laps": 2,
           "n_items": 105, "wall_seconds": 0.5, "config": {"seed": 0}}
CACHE = {"tasks": 8, "hits": 6, "misses": 2, "hit_rate": 0.75, "warm_hit_rate": 1.0,
         "home_rate": None}


@pytest.mark.parametrize(("key", "bad"), [("tasks", -1), ("hits", 1.5), ("misses", True),
                                          ("hit_rate", 1.5), ("home_rate", "all"),
                                          ("warm_hit_rate", "missing")])
def test_summary_validation_checks_the_cache_figures(tmp_path, key, bad):
    run = RunDir(tmp_path / "run").create()
    run.write_summary({**SUMMARY, "cache": CACHE})
    assert run.load_summary()["cache"] == CACHE
    run.write_summary(SUMMARY)  # runs written before the figures still load
    cache = {k: v for k, v in CACHE.items() if bad != "missing" or k != key}
    if bad != "missing":
        cache[key] = bad
    with pytest.raises(BnpmixError, match=f"field 'cache' has no valid '{key}'"):
        run.write_summary({**SUMMARY, "cache": cache})


def test_a_local_fit_writes_its_cache_figures(tmp_path):
    ingest_array(blobs(600, 0)[0], tmp_path / "c", partition_rows=100)  # six partitions
    summary = fit(tmp_path / "c", tmp_path / "run",
                  job_config(K=3, laps=2, tol=0, moves="", scheduler="synchronous"))
    assert summary["laps"] == 2
    # --obs auto's race: the two laps of each candidate (nobody leaves before two lap ends,
    # and the run's 2 laps are the budget), the winner's being the run's; then the
    # assignments: every partition 2 c + 1 times; read once, then hits
    visits = 6 * (2 * len(summary["obs_candidates"]) + 1)
    assert summary["cache"] == {"tasks": visits, "hits": visits - 6, "misses": 6,
                                "hit_rate": (visits - 6) / visits, "warm_hit_rate": 1.0,
                                "home_rate": None}
    assert RunDir(tmp_path / "run").load_summary()["cache"] == summary["cache"]


# --- on a real cluster -------------------------------------------------------------------------


@pytest.fixture
def cluster(dask_cluster):
    """The session's cluster (tests/conftest.py)."""
    return dask_cluster


@pytest.fixture
def client(cluster):
    from distributed import Client

    with Client(cluster.address, timeout="10s") as c:
        yield c


@pytest.fixture
def own_client(own_dask_cluster):
    from distributed import Client

    with Client(own_dask_cluster.address, timeout="10s") as c:
        yield c


def worker_addresses(client) -> list[str]:
    return sorted(client.scheduler_info()["workers"])


def wait_for_exactly(client, n: int) -> list[str]:
    deadline = time.time() + 60
    while len(workers := worker_addresses(client)) != n:
        assert time.time() < deadline, f"{len(workers)} workers, waiting for {n}"
        time.sleep(0.1)
    return workers


def twenty(tmp_path):
    X, y = blobs(4000, 3)
    ingest_array(X, tmp_path / "c", partition_rows=200, columns={"label": y})  # 20 partitions
    return tmp_path / "c"


@pytest.mark.slow  # a real cluster
def test_a_memo_fit_runs_each_wave_where_bounded_placement_sends_it(tmp_path, client):
    """Two single-threaded workers and W = 2: each wave's first task goes to its partition's
    home and the second to the other worker when they share a home. Dask runs them there, the
    caches stay warm, and the tasks' own reports give the same home rate as Dask's stream."""
    from distributed import get_task_stream

    corpus = twenty(tmp_path)
    workers = worker_addresses(client)
    rank = {r.index: ranking(partition_key(r), workers) for r in partition_refs(Corpus(corpus))}
    assert {r[0] for r in rank.values()} == set(workers)  # both are home to some partitions
    with get_task_stream(client) as stream:
        summary = fit(corpus, tmp_path / "run",
                      job_config(K=2, laps=3, tol=0, seed=5, wave=2, obs="gauss"),
                      client=client)  # obs named: no --obs auto passes before the laps
    assert summary["laps"] == 3 and summary["config"]["run"]["wave"] == 2
    waves = defaultdict(dict)  # wave id -> {position in the submit: (partition, worker)}
    for task in stream.data:
        if task["key"].startswith("bnpmix-partition-"):
            _, _, i, wave, n = task["key"].split("-")
            waves[wave][int(n)] = int(i), task["worker"]
    ran = [task for wave in waves.values() for task in wave.values()]  # (partition, worker)
    assert len(ran) == 80 and sorted(Counter(i for i, _ in ran).values()) == [4] * 20
    placed = honoured = shared_home = 0
    for wave in waves.values():
        parts = [wave[n][0] for n in sorted(wave)]
        want = bounded_placement([rank[i] for i in parts], dict.fromkeys(workers, 1))
        got = [wave[n][1] for n in sorted(wave)]
        placed += len(parts)
        honoured += sum(a == b for a, b in zip(want, got, strict=True))
        if len(parts) == 2:
            assert want[0] == rank[parts[0]][0] and want[0] != want[1]  # never both on one
            shared_home += rank[parts[0]][0] == rank[parts[1]][0]
    assert honoured >= 0.9 * placed
    assert shared_home  # some waves had both partitions at home on one worker, and were split
    cache = RunDir(tmp_path / "run").load_summary()["cache"]
    assert cache["tasks"] == 80 and cache["hits"] + cache["misses"] == 80
    assert cache["warm_hit_rate"] >= 0.6  # a partition is read at most once on each worker
    at_home = sum(w == rank[i][0] for i, w in ran)
    assert cache["home_rate"] == at_home / 80 < 1  # the tasks' own reports agree with Dask's


def where_it_ran():
    """A task naming its partition, its shared argument, its data's sum and its worker; made
    here so that it is pickled by value (the workers cannot import this file)."""
    def task(batch, tag):
        from distributed import get_worker

        return batch.index, tag, float(batch.X.sum()), get_worker().address

    return task


def test_dask_submit_then_result_equals_map_and_parallelism(tmp_path, client):
    def fails_on_3(batch):
        if batch.index == 3:
            raise ValueError("partition three is bad")
        return batch.index

    ex = DaskExecutor(client, Corpus(twenty(tmp_path)), retries=0)
    task = where_it_ran()
    first, second = ex.submit(task, range(20), "a"), ex.submit(task, [7], "b")
    def values(results):  # not where each ran (a worker may take another's task)
        return [r[:3] for r in results]

    assert values(second.result()) == values(ex.map(task, [7], "b"))
    assert values(first.result()) == values(ex.map(task, range(20), "a"))
    sums = Corpus(tmp_path / "c").read_all().X.reshape(20, 200, -1).sum(axis=(1, 2))
    assert values(first.result()) == [(i, "a", pytest.approx(sums[i])) for i in range(20)]
    assert ex.parallelism == 2  # two single-threaded workers
    pending = ex.submit(fails_on_3, [1, 3])
    for _ in range(2):
        with pytest.raises(BnpmixError, match="partition 3 failed after 0 retries: ValueError"):
            pending.result()


@pytest.mark.slow  # a worker added and lost (real processes)
def test_a_lost_worker_moves_only_its_partitions(tmp_path, own_dask_cluster, own_client):
    cluster, client = own_dask_cluster, own_client  # its processes are under test: its own
    extra = cluster.start_worker()
    cluster.workers.append(extra)  # ended with the cluster whatever happens here
    three = wait_for_exactly(client, 3)
    ex = DaskExecutor(client, Corpus(twenty(tmp_path)))
    ex.workers_ttl = 0  # list the workers at every submit
    before = {i: ex.home(i) for i in range(20)}
    assert set(before.values()) == set(three)
    task = where_it_ran()

    def one_by_one(tag):  # a lone task goes to its home (a whole pass would bound the loads)
        return [ex.map(task, [i], tag)[0] for i in range(20)]

    runs = one_by_one(0)
    assert sum(w == before[i] for i, *_, w in runs) >= 18
    extra.terminate()
    extra.wait(timeout=30)
    two = wait_for_exactly(client, 2)
    lost = (set(three) - set(two)).pop()
    runs = one_by_one(1)
    after = {i: ex.home(i) for i in range(20)}
    moved = {i for i in range(20) if after[i] != before[i]}
    assert moved == {i for i in range(20) if before[i] == lost} and moved
    assert set(after.values()) <= set(two)
    assert sum(w == after[i] for i, *_, w in runs) >= 18
    stats = ex.task_counts()
    kept = [i for i in range(20) if i not in moved]
    # the partitions that stayed were read from their worker's cache the second time
    assert sum(stats[i].warm_hits for i in kept) >= 0.9 * len(kept)
