"""`bnpmix ingest SRC.csv CORPUS --sequence-column NAME`: a sequence (the ddCRP's independent
problem, issue 12) is never split between partitions, keeps its rows in file order, must be
contiguous in the source, and an append may only bring new sequences.

The CLI cases run the real command in a subprocess, on real files under tmp_path.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bnpmix.storage import Corpus, DataError, csvfile, ingest_array, ingest_csv
from helpers import cli

ERROR_PREFIX = "bnpmix: error: "


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    detail = f"exit {proc.returncode}\nstdout: {proc.stdout!r}\nstderr: {proc.stderr!r}"
    assert proc.returncode == 1, detail
    assert "Traceback" not in proc.stderr, detail
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), detail
    assert "--debug" not in lines[0], detail  # an anticipated error, not an unexpected one
    return lines[0]


def write_csv(path: Path, seqs: list[int], *, column: str = "seq", start: int = 0) -> None:
    """Rows ``x,y,<column>`` whose x is the row's global number (start, start + 1, ...)."""
    rows = [f"{start + i},{(start + i) * 0.5},{s}" for i, s in enumerate(seqs)]
    path.write_text("\n".join([f"x,y,{column}", *rows]) + "\n", encoding="utf-8")


def partitions(corpus: Path) -> list[tuple[list[int], list[int]]]:
    """(row numbers from x, sequence ids) of each partition, in partition order."""
    c = Corpus(corpus)
    return [(b.X[:, 0].astype(int).tolist(), b.columns["sequence"].tolist()) for b in c]


def snapshot(directory: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(directory.rglob("*"))}


LENGTHS = {10: 3, 11: 1, 12: 9, 13: 2, 14: 5, 15: 4, 16: 7}  # 7 sequences, 1..9 rows, 31 rows


def seven_sequences() -> list[int]:
    return [s for s, n in LENGTHS.items() for _ in range(n)]


# --------------------------------------------------------------------------------------------
# partitioning


def test_sequences_are_kept_whole_and_partitions_close_at_boundaries(tmp_path):
    seqs = seven_sequences()
    write_csv(tmp_path / "s.csv", seqs)
    proc = cli("ingest", tmp_path / "s.csv", tmp_path / "c", "--sequence-column", "seq",
               "--partition-rows", "5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr

    parts = partitions(tmp_path / "c")
    # the first boundary at or after 5 rows: 3+1+9 = 13 | 2+5 = 7 | 4+7 = 11
    assert [len(rows) for rows, _ in parts] == [13, 7, 11]
    assert [sorted(set(ids)) for _, ids in parts] == [[10, 11, 12], [13, 14], [15, 16]]
    home = {}
    for p, (_, ids) in enumerate(parts):
        for s in set(ids):
            assert home.setdefault(s, p) == p, f"sequence {s} straddles partitions"
    assert set(home) == set(LENGTHS)
    # every row present, once, in file order (within each sequence too); the ids came back
    rows = [r for part_rows, _ in parts for r in part_rows]
    assert rows == list(range(len(seqs)))
    assert [s for _, ids in parts for s in ids] == seqs
    # each partition closed at a boundary, at the first one at or after 5 rows
    for rows_p, ids in parts[:-1]:
        assert len(rows_p) >= 5
        within = np.flatnonzero(np.diff(ids)) + 1  # boundaries inside the partition
        assert all(b < 5 for b in within), "a partition ran past an earlier boundary"

    c = Corpus(tmp_path / "c")
    assert c.manifest.columns == ("sequence",)
    assert c.read(0).columns["sequence"].dtype == np.int64
    info = json.loads(cli("info", tmp_path / "c", "--json", cwd=tmp_path).stdout)
    assert info["columns"] == ["sequence"] and info["n_items"] == len(seqs)


def test_a_sequence_longer_than_partition_rows_makes_one_partition(tmp_path):
    seqs = [1] * 2 + [2] * 12 + [3] * 3
    write_csv(tmp_path / "s.csv", seqs)
    ingest_csv(tmp_path / "s.csv", tmp_path / "c", sequence_column="seq", partition_rows=4)
    parts = partitions(tmp_path / "c")
    assert [ids for _, ids in parts] == [[1, 1] + [2] * 12, [3, 3, 3]]
    assert [len(r) for r, _ in parts] == [14, 3]

    # a single long sequence as the middle of three: it alone fills its partition
    seqs = [1] * 4 + [2] * 10 + [3] * 4
    write_csv(tmp_path / "t.csv", seqs)
    ingest_csv(tmp_path / "t.csv", tmp_path / "d", sequence_column="seq", partition_rows=4)
    assert [ids for _, ids in partitions(tmp_path / "d")] == [[1] * 4, [2] * 10, [3] * 4]


def test_without_a_sequence_column_partitions_are_unchanged(tmp_path):
    write_csv(tmp_path / "s.csv", seven_sequences())
    ingest_csv(tmp_path / "s.csv", tmp_path / "c", partition_rows=5)
    c = Corpus(tmp_path / "c")
    assert [p.rows for p in c.manifest.partitions] == [5] * 6 + [1]
    # the column is then an ordinary feature
    assert c.dim == 3 and c.manifest.columns == ()


def test_sequence_alongside_the_other_columns(tmp_path):
    (tmp_path / "s.csv").write_text("id,a,seq,t,label\nu,1,7,0,x\nv,2,7,1,y\nw,3,-2,0,x\n")
    ingest_csv(tmp_path / "s.csv", tmp_path / "c", id_column="id", time_column="t",
               label_column="label", sequence_column="seq", partition_rows=1)
    c = Corpus(tmp_path / "c")
    assert c.manifest.columns == ("item", "label", "sequence", "time")
    assert [p.rows for p in c.manifest.partitions] == [2, 1]
    b = c.read_all()
    assert b.X.ravel().tolist() == [1.0, 2.0, 3.0]
    assert b.columns["sequence"].tolist() == [7, 7, -2]
    assert b.columns["time"].tolist() == [0, 1, 0]
    assert b.columns["item"].tolist() == ["u", "v", "w"]


def test_many_sequences_are_checked_after_compaction(tmp_path, monkeypatch):
    """The contiguity check remembers old sequences in compacted sorted arrays: a reappearance
    found there names the same lines as one found among the recent sequences."""
    monkeypatch.setattr(csvfile._SequenceOrder, "RECENT", 3)
    seqs = [s for s in range(40) for _ in range(1 + s % 3)]
    write_csv(tmp_path / "ok.csv", seqs)
    ingest_csv(tmp_path / "ok.csv", tmp_path / "c", sequence_column="seq", partition_rows=7)
    assert [s for _, ids in partitions(tmp_path / "c") for s in ids] == seqs

    bad = [*seqs, 5]  # 5's rows were on lines 11..13 (1-based, after the header)
    write_csv(tmp_path / "bad.csv", bad)
    with pytest.raises(DataError) as err:
        ingest_csv(tmp_path / "bad.csv", tmp_path / "d", sequence_column="seq")
    assert err.value.line == len(bad) + 1 and err.value.field == "seq"
    last = 1 + max(i for i, s in enumerate(seqs) if s == 5) + 1
    assert f"last seen on line {last}" in str(err.value)
    assert not (tmp_path / "d").exists()


def test_ingest_array_keeps_sequences_whole(tmp_path):
    seqs = np.array(seven_sequences())
    X = np.arange(len(seqs), dtype=float)[:, None]
    ingest_array(X, tmp_path / "c", partition_rows=5, columns={"sequence": seqs})
    assert [len(r) for r, _ in partitions(tmp_path / "c")] == [13, 7, 11]
    with pytest.raises(DataError, match=r"row 5: sequence 1 reappears .*last seen at row 2"):
        ingest_array(np.zeros((6, 1)), tmp_path / "d",
                     columns={"sequence": np.array([1, 1, 1, 2, 2, 1])})
    with pytest.raises(DataError, match="must hold integers"):
        ingest_array(np.zeros((2, 1)), tmp_path / "d", columns={"sequence": np.array([1.0, 2])})
    assert not (tmp_path / "d").exists()


# --------------------------------------------------------------------------------------------
# bad sources: one-line errors, nothing left behind


def rejected(tmp_path: Path, seqs_text: list[str], *args: str) -> str:
    src = tmp_path / "src"
    src.mkdir()
    lines = ["x,y,seq", *(f"{i},{i},{s}" for i, s in enumerate(seqs_text))]
    (src / "s.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    # enough rows before the culprit that a partition or two was already written when it fails
    proc = cli("ingest", src / "s.csv", out / "corpus", "--partition-rows", "2", *args,
               cwd=tmp_path)
    msg = one_line_error(proc)
    assert str(src / "s.csv") in msg, msg
    assert sorted(p.name for p in out.iterdir()) == [], "something was left behind"
    return msg


def test_a_non_contiguous_sequence_is_refused_and_nothing_is_left(tmp_path):
    # lines: 1 header, 2-3 seq 4, 4-6 seq 9, 7-8 seq 2, 9 seq 9 again
    msg = rejected(tmp_path, ["4", "4", "9", "9", "9", "2", "2", "9"], "--sequence-column", "seq")
    assert re.search(r"s\.csv, line 9\b", msg), msg
    assert "'seq'" in msg and "sequence 9 " in msg and "last seen on line 6" in msg, msg
    assert "grouped by sequence" in msg and "sorted stably by 'seq'" in msg, msg


def test_a_non_integer_sequence_names_line_and_column(tmp_path):
    msg = rejected(tmp_path, ["1", "1", "2", "2.5"], "--sequence-column", "seq")
    assert re.search(r"s\.csv, line 5, field 'seq': not an integer: '2\.5'", msg), msg


def test_a_non_numeric_sequence_names_line_and_column(tmp_path):
    msg = rejected(tmp_path, ["1", "a"], "--sequence-column", "seq")
    assert re.search(r"s\.csv, line 3, field 'seq': not a number: 'a'", msg), msg


def test_a_missing_sequence_column_is_refused(tmp_path):
    msg = rejected(tmp_path, ["1", "2"], "--sequence-column", "session")
    assert re.search(r"s\.csv, line 1: no column 'session' for --sequence-column", msg), msg


# --------------------------------------------------------------------------------------------
# --append


def test_append_refuses_an_existing_sequence_and_leaves_the_corpus_unchanged(tmp_path):
    write_csv(tmp_path / "a.csv", [1, 1, 2, 2, 2, 3])
    corpus = tmp_path / "c"
    proc = cli("ingest", tmp_path / "a.csv", corpus, "--sequence-column", "seq",
               "--partition-rows", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = (corpus / "manifest.json").read_bytes()
    before = snapshot(corpus)

    write_csv(tmp_path / "b.csv", [7, 7, 3, 3, 2], start=6)  # 3 and 2 exist already
    proc = cli("ingest", tmp_path / "b.csv", corpus, "--sequence-column", "seq", "--append",
               "--partition-rows", "2", cwd=tmp_path)
    msg = one_line_error(proc)
    assert str(tmp_path / "b.csv") in msg, msg
    assert "sequence ids 3, 2 already in the corpus" in msg, msg
    assert (corpus / "manifest.json").read_bytes() == manifest
    after = snapshot(corpus)
    after.pop(".lock", None)  # the append lock file may remain (it is how appends serialise)
    assert after == before
    assert not list(corpus.glob(".append.*"))

    # new ids append, each sequence still in one partition
    write_csv(tmp_path / "b.csv", [7, 7, 5, 5, 5, 4], start=6)
    proc = cli("ingest", tmp_path / "b.csv", corpus, "--sequence-column", "seq", "--append",
               "--partition-rows", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    parts = partitions(corpus)
    assert [ids for _, ids in parts] == [[1, 1], [2, 2, 2], [3], [7, 7], [5, 5, 5], [4]]
    assert [r for rows, _ in parts for r in rows] == list(range(12))


def test_append_under_the_lock_refuses_existing_sequences_too(tmp_path):
    """append_corpus itself (what runs under the corpus lock) refuses, naming the source."""
    from bnpmix.storage.append import append_corpus

    write_csv(tmp_path / "a.csv", [1, 2, 3])
    write_csv(tmp_path / "b.csv", [4, 2])
    ingest_csv(tmp_path / "a.csv", tmp_path / "c", sequence_column="seq", partition_rows=1)
    ingest_csv(tmp_path / "b.csv", tmp_path / "new", sequence_column="seq")
    before = (tmp_path / "c" / "manifest.json").read_bytes()
    with pytest.raises(DataError, match=r"b\.csv: cannot append .*sequence id 2 already"):
        append_corpus(tmp_path / "c", tmp_path / "new", source=tmp_path / "b.csv")
    assert (tmp_path / "c" / "manifest.json").read_bytes() == before
    assert Corpus(tmp_path / "c").n_partitions == 3


@pytest.mark.parametrize("with_sequence", ["corpus", "new data"])
def test_append_refuses_when_only_one_side_has_a_sequence_column(tmp_path, with_sequence):
    """Same kind, dim and dtype; only the columns differ (one side has no `seq` at all)."""
    write_csv(tmp_path / "seq.csv", [1, 1, 2])
    (tmp_path / "plain.csv").write_text("x,y\n3,1.5\n4,2\n", encoding="utf-8")
    corpus = tmp_path / "c"
    if with_sequence == "corpus":
        first = (tmp_path / "seq.csv", "--sequence-column", "seq")
        second = (tmp_path / "plain.csv",)
    else:
        first = (tmp_path / "plain.csv",)
        second = (tmp_path / "seq.csv", "--sequence-column", "seq")
    assert cli("ingest", first[0], corpus, *first[1:], cwd=tmp_path).returncode == 0
    manifest = (corpus / "manifest.json").read_bytes()
    proc = cli("ingest", second[0], corpus, *second[1:], "--append", cwd=tmp_path)
    msg = one_line_error(proc)
    assert "cannot append: the new data's columns differs" in msg, msg
    shown = "(none vs sequence)" if with_sequence == "corpus" else "(sequence vs none)"
    assert shown in msg, msg
    assert (corpus / "manifest.json").read_bytes() == manifest
    assert not list(corpus.glob(".append.*"))


def test_help_documents_the_flag():
    proc = cli("ingest", "--help", cwd=Path.cwd())
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--sequence-column" in text
    assert "integer sequence id; a sequence is kept whole in one partition, rows in file order" \
        in text
    assert "one bigger partition" in text
