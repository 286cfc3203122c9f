"""Ingest loses nothing and leaves nothing half-done: concurrent appends, --overwrite, signals,
stale staging, file modes, hostile headers, a full disk. Real processes and real files."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bnpmix.storage import Corpus, ingest_array
from helpers import cli_process

BNPMIX = [sys.executable, "-m", "bnpmix"]


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


@pytest.mark.slow  # stress: 20 rounds of two racing CLI processes
def test_twenty_rounds_of_two_concurrent_appends_keep_every_row(tmp_path):
    """Each round: two `ingest --append` processes started together into one corpus. Before the
    corpus lock both could exit 0 while one's partitions were overwritten by the other's."""
    ingest_array(np.zeros((10, 2)), tmp_path / "c", partition_rows=10)
    sizes = {"a": 30, "b": 50}
    for name, n in sizes.items():
        np.save(tmp_path / f"{name}.npy", np.full((n, 2), float(n)))
    expected = 10
    for _ in range(20):
        procs = [subprocess.Popen([*BNPMIX, "ingest", str(tmp_path / f"{name}.npy"),
                                   str(tmp_path / "c"), "--append", "--partition-rows", "20"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for name in sizes]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        expected += sum(sizes.values())
    corpus = Corpus(tmp_path / "c")
    assert corpus.n_items == expected
    X = corpus.read_all().X  # every partition read and checked against its checksum
    assert X.shape[0] == expected
    assert {float(v): int(c) for v, c in zip(*np.unique(X[:, 0], return_counts=True),
                                             strict=True)} == {0.0: 10, 30.0: 600, 50.0: 1000}
    assert not list((tmp_path / "c").glob(".append.*"))  # no staging left behind


def test_overwrite_never_deletes_its_own_source(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    np.save(proj / "data.npy", np.ones((5, 2)))
    before = tree(proj)
    res = cli_process("ingest", str(proj / "data.npy"), str(proj), "--overwrite")
    assert res.returncode == 1
    assert f"{proj}: --overwrite would delete the source" in res.stderr
    assert tree(proj) == before


@pytest.mark.parametrize("what", ["run directory", "someone's files"])
def test_overwrite_replaces_only_a_corpus(tmp_path, what):
    np.save(tmp_path / "x.npy", np.ones((40, 2)))
    target = tmp_path / "target"
    if what == "run directory":
        ingest_array(np.random.default_rng(0).normal(size=(40, 2)), tmp_path / "c",
                     partition_rows=20)
        assert cli_process("fit", str(tmp_path / "c"), "--out", str(target), "--laps", "1",
                           "--K", "2", "--moves", "").returncode == 0
    else:
        target.mkdir()
        (target / "thesis.tex").write_text("years of work")
    before = tree(target)
    res = cli_process("ingest", str(tmp_path / "x.npy"), str(target), "--overwrite")
    assert res.returncode == 1
    assert f"{target}: --overwrite replaces only a bnpmix corpus" in res.stderr
    assert tree(target) == before
    ingest_array(np.zeros((4, 2)), tmp_path / "old", partition_rows=2)
    assert cli_process("ingest", str(tmp_path / "x.npy"), str(tmp_path / "old"),
                       "--overwrite").returncode == 0  # a corpus is replaced
    assert Corpus(tmp_path / "old").n_items == 40


@pytest.mark.slow  # a real process stopped by SIGTERM mid-ingest
def test_sigterm_mid_ingest_leaves_no_staging_and_keeps_the_old_corpus(tmp_path):
    ingest_array(np.zeros((4, 2)), tmp_path / "c", partition_rows=2)
    before = tree(tmp_path / "c")
    np.save(tmp_path / "big.npy", np.random.default_rng(0).normal(size=(400_000, 8)))
    proc = subprocess.Popen([*BNPMIX, "ingest", str(tmp_path / "big.npy"), str(tmp_path / "c"),
                             "--overwrite", "--partition-rows", "500"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not list(tmp_path.glob(".c.*.tmp/part-00003.parquet")):  # writing partitions
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.npy", "c"]
    assert tree(tmp_path / "c") == before


def test_staging_of_a_killed_ingest_is_removed_by_the_next(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((30, 2)))
    dead = subprocess.Popen(["true"])
    dead.wait()  # a PID that no longer exists
    stale = tmp_path / f".c.{dead.pid}-abcd.tmp"
    stale.mkdir()
    (stale / "part-00000.parquet").write_bytes(b"half")
    live = tmp_path / f".c.{os.getpid()}-efgh.tmp"  # a writer still alive: kept
    live.mkdir()
    assert cli_process("ingest", str(tmp_path / "x.npy"), str(tmp_path / "c")).returncode == 0
    assert not stale.exists() and live.exists()


@pytest.mark.parametrize("mask, dirs, files", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640)])
def test_outputs_get_the_modes_the_umask_allows(tmp_path, mask, dirs, files):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(40, 2)))

    def umask() -> None:
        os.umask(mask)

    for args in (["ingest", str(tmp_path / "x.npy"), str(tmp_path / "c")],
                 ["fit", str(tmp_path / "c"), "--out", str(tmp_path / "r"), "--laps", "1"]):
        done = subprocess.run([*BNPMIX, *args], capture_output=True, text=True,
                              preexec_fn=umask, timeout=300)
        assert done.returncode == 0, done.stderr
    for root in (tmp_path / "c", tmp_path / "r"):
        for p in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(p.stat().st_mode)
            assert mode == (dirs if p.is_dir() else files), (p, oct(mode))


def write_docword(path: Path, header: tuple[int, int, int], triples: list[str]) -> Path:
    path.write_text("\n".join([*map(str, header), *triples]) + "\n")
    return path


def test_docword_header_beyond_int32_is_refused(tmp_path):
    src = write_docword(tmp_path / "docword.x.txt", (2, 2**31, 1), ["1 1 1"])
    res = cli_process("ingest", str(src), str(tmp_path / "c"))
    assert res.returncode == 1
    assert f"{src}, line 2" in res.stderr and "int32" in res.stderr
    assert not (tmp_path / "c").exists()


def test_docword_header_claiming_millions_of_empty_documents_stops_at_once(tmp_path):
    """A header D = 2,000,000 with one triple used to write empty partitions without end."""
    src = write_docword(tmp_path / "docword.x.txt", (2_000_000, 3, 1), ["1 2 1"])
    t = time.time()
    res = cli_process("ingest", str(src), str(tmp_path / "c"), "--partition-rows", "10")
    assert res.returncode == 1 and time.time() - t < 30
    assert f"{src}, line 1: documents 11..1020 have no words (101 partitions in a row)" in (
        res.stderr) and "D=2000000" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docword.x.txt"]


def test_dense_sources_that_cannot_be_stored_faithfully_are_named(tmp_path):
    np.save(tmp_path / "zero.npy", np.zeros((5, 0)))
    np.save(tmp_path / "huge.npy", np.array([[1, 2], [3, 2**62]], dtype=np.int64))
    (tmp_path / "wide.csv").write_text("a,b\n1,2\n3," + "x" * 200_000 + "\n")
    cases = {"zero.npy": "no feature columns", "huge.npy": "row 1: integer 4611686018427387904 "
             "in column 1 is beyond 2^53", "wide.csv": "line 3: malformed CSV (field larger"}
    for name, message in cases.items():
        res = cli_process("ingest", str(tmp_path / name), str(tmp_path / f"out-{name}"))
        assert res.returncode == 1 and f"{tmp_path / name}" in res.stderr, res.stderr
        assert message in res.stderr, res.stderr
        assert not (tmp_path / f"out-{name}").exists()


def test_a_full_disk_names_the_file_and_publishes_nothing(tmp_path):
    """RLIMIT_FSIZE makes writes fail with EFBIG ('File too large'), as a full disk would."""
    import resource

    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(200_000, 10)))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    res = subprocess.run([*BNPMIX, "ingest", str(tmp_path / "x.npy"), str(tmp_path / "c"),
                          "--partition-rows", "100000"], capture_output=True, text=True,
                         preexec_fn=limit, timeout=300)
    assert res.returncode == 1
    assert f"{tmp_path / 'c' / 'part-00000.parquet'}: cannot write (File too large)" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]
