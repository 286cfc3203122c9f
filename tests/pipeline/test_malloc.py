"""glibc malloc thresholds in Dask worker processes: with MALLOC_TRIM_THRESHOLD_ set (as Dask's
nanny sets it) every large numpy temporary is mmap'd and faulted in afresh; set_thresholds
restores reuse. Counted as page faults of the thread doing the allocations, in a fresh
interpreter and on real worker processes started by a nanny."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dask
import numpy as np
import pytest

from bnpmix.pipeline.malloc import glibc, set_thresholds
from bnpmix.pipeline.runtime.executors import DaskExecutor
from bnpmix.storage import Corpus, ingest_array
from helpers import local_client

pytestmark = pytest.mark.skipif(glibc() is None, reason="glibc's mallopt: Linux with glibc only")

ROUNDS = 40  # allocations of 1 MiB (256 pages each) per count


def faulting():
    """A task counting the page faults of ROUNDS allocations of 1 MiB in its own thread; made
    here so that it is pickled by value (workers cannot import this file)."""
    def faults(*_):
        import resource

        import numpy as np

        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(ROUNDS):
            a = np.ones(1 << 17)
            del a
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

    return faults


def test_thresholds_stop_the_faults_that_a_set_trim_threshold_causes():
    code = (
        "import json, resource\n"
        "import numpy as np\n"
        "from bnpmix.pipeline.malloc import set_thresholds\n"
        "def faults():\n"
        "    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt\n"
        f"    for _ in range({ROUNDS}):\n"
        "        a = np.ones(1 << 17)\n"
        "        del a\n"
        "    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before\n"
        "before = faults()\n"
        "ok = set_thresholds(64 << 20), set_thresholds(64 << 20)\n"
        "faults()\n"
        "print(json.dumps([before, faults(), ok]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after, ok = json.loads(done.stdout)
    assert before >= ROUNDS * 200  # each 1 MiB array mmap'd and faulted in again
    assert after < 50  # the freed memory is reused
    assert ok == [True, True]


def test_zero_leaves_malloc_alone():
    assert set_thresholds(0) is False


def test_a_dask_worker_sets_its_thresholds_unless_the_setting_is_zero(tmp_path):
    """Nanny-started workers (MALLOC_TRIM_THRESHOLD_=65536): with bnpmix.worker-malloc-trim 0
    the tasks fault on every allocation; with the default, after the first task, they do not."""
    ingest_array(np.zeros((40, 2)), tmp_path / "c", partition_rows=10)
    corpus = Corpus(tmp_path / "c")
    faults = faulting()
    with local_client() as client:
        env = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        assert set(env.values()) == {"65536"}  # what Dask's nanny gives its workers
        with dask.config.set({"bnpmix.worker-malloc-trim": 0}):
            alone = DaskExecutor(client, corpus)
        assert min(alone.map(faults, range(4))) >= ROUNDS * 200
        tuned = DaskExecutor(client, corpus)
        assert tuned.worker_options.malloc_trim == 64 << 20
        tuned.map(faults, range(4))  # every worker's first task: thresholds set, memory taken
        assert max(tuned.map(faults, range(4))) < 50


ARENAS_PROBE = """
import ctypes, sys, threading
import numpy as np
if sys.argv[1] == "limited":
    from bnpmix.pipeline.malloc import process_allocators
    assert process_allocators()
import pyarrow as pa
print(pa.default_memory_pool().backend_name, flush=True)
go = threading.Barrier(4)
def churn():
    go.wait()  # all four allocating at once: glibc gives contending threads arenas of their own
    for _ in range(2000):
        blocks = [np.ones(4096) for _ in range(8)]  # 32 KiB each: below the mmap threshold
        del blocks
threads = [threading.Thread(target=churn) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL("libc.so.6").malloc_stats()  # to stderr, one "Arena i:" block per arena
"""


@pytest.mark.parametrize("mode", ["limited", "default"])
def test_a_bnpmix_process_has_one_arena_and_arrow_allocates_through_it(mode):
    """process_allocators (the console script's first step): four threads allocating at once
    share one glibc arena, and Arrow's default pool is the system allocator; a plain Python
    process gets an arena per contending thread and Arrow's own pool."""
    env = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL",
                                                              "MALLOC_ARENA_MAX")}
    done = subprocess.run([sys.executable, "-c", ARENAS_PROBE, mode], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    arenas = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    backend = done.stdout.strip()
    if mode == "limited":
        assert (arenas, backend) == (1, "system")
    else:
        assert arenas > 1 and backend != "system"


THRESHOLDS_PROBE = """
import json, sys
import numpy as np
from bnpmix.pipeline.malloc import process_allocators
if sys.argv[1] != "adaptive":
    assert process_allocators()
def anon():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("RssAnon:"))  # KiB
start = anon()
for _ in range(2):  # glibc's adaptive threshold rises to the first 8 MiB block freed
    a = np.ones(1 << 20)  # 8 MiB, written
    del a
print(json.dumps(anon() - start))
"""


@pytest.mark.parametrize("mode,env,returned", [
    ("fixed", {}, True),
    ("adaptive", {}, False),
    ("fixed", {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)},
     False),
    ("fixed", {"GLIBC_TUNABLES": f"glibc.malloc.mmap_threshold={64 << 20}:"
                                 f"glibc.malloc.trim_threshold={128 << 20}"}, False)])
def test_a_bnpmix_process_maps_large_blocks_and_returns_them(mode, env, returned):
    """process_allocators fixes the mmap threshold (1 MiB): an 8 MiB block is mapped and its
    memory returned to the system when freed, where glibc's adaptive threshold keeps it in the
    heap after the first such block; thresholds the environment sets are kept. Measured as the
    process's anonymous resident memory across two allocations and frees."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", THRESHOLDS_PROBE, mode], capture_output=True,
                          text=True, timeout=120, env={**base, **env})
    assert done.returncode == 0, done.stderr
    kept_kib = json.loads(done.stdout)
    if returned:
        assert kept_kib < 1024
    else:
        assert kept_kib > 6 * 1024
