"""Bad input to `bnpmix ingest` gets a clear one-line error and leaves nothing behind.

Every case runs the real CLI in a subprocess and checks: the exit code (1 for bad data, 2 for
argparse usage errors); that stderr is one line, without a traceback, naming the offending file,
the line (CSV, docword, text: 1-based) or row (npy: 0-based) where one applies, and the problem;
and that neither the corpus directory nor a temporary sibling of it (a "." name) is left behind.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from bnpmix.storage import Corpus, CorruptPartitionError, ingest_array
from helpers import cli

ERROR_PREFIX = "bnpmix: error: "


# --------------------------------------------------------------------------------------------
# helpers


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every path under ``directory`` (hidden ones too) with its bytes (None for folders)."""
    return {
        str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(directory.rglob("*"))
    }


def write_files(root: Path, files: dict[str, object]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.mkdir()
        elif isinstance(content, np.ndarray):
            np.save(path, content)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(str(content), encoding="utf-8")


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a clean error report (asserts there is exactly one)."""
    detail = f"exit {proc.returncode}\nstdout: {proc.stdout!r}\nstderr: {proc.stderr!r}"
    assert "Traceback" not in proc.stderr, detail
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, detail
    msg = lines[0]
    assert msg.startswith(ERROR_PREFIX), detail
    # An anticipated error is reported as such, not as an unexpected exception's type and text.
    assert "--debug" not in msg, detail
    return msg


def assert_nothing_left(out_parent: Path, corpus: Path) -> None:
    assert not corpus.exists(), f"{corpus} was left behind"
    leftovers = sorted(p.name for p in out_parent.iterdir())
    assert leftovers == [], f"left behind in {out_parent}: {leftovers}"


@dataclass(frozen=True)
class Bad:
    """A bad source: the files to write under src/, the CLI arguments and the expected report."""

    files: dict[str, object]
    src: str  # source argument, relative to src/
    culprit: str  # the file (relative to src/) the message must name
    where: str | None  # "line N" (1-based), "row N" (0-based) or None when neither applies
    phrase: str  # regex for the problem, searched case-insensitively
    args: tuple[str, ...] = ()  # extra arguments; "{src}" expands to the src/ folder


def check_rejected(tmp_path: Path, case: Bad) -> str:
    """Write the source, run `bnpmix ingest`, do the common assertions; return the message."""
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    write_files(src_dir, case.files)
    before = snapshot(src_dir)
    out_parent = tmp_path / "out"
    out_parent.mkdir()
    corpus = out_parent / "corpus"
    args = [a.replace("{src}", str(src_dir)) for a in case.args]

    proc = cli("ingest", src_dir / case.src, corpus, *args, cwd=tmp_path)

    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    msg = one_line_error(proc)
    culprit = str(src_dir / case.culprit)
    assert culprit in msg, f"{msg!r} does not name {culprit}"
    if case.where is not None:
        pattern = re.escape(culprit) + r"\b.*\b" + re.escape(case.where) + r"\b"
        assert re.search(pattern, msg), f"{msg!r} does not name {case.where} of {culprit}"
    assert re.search(case.phrase, msg, re.IGNORECASE), f"{msg!r} lacks /{case.phrase}/"
    assert_nothing_left(out_parent, corpus)
    assert snapshot(src_dir) == before, "the source was modified"
    return msg


# --------------------------------------------------------------------------------------------
# npy

GOOD_X = np.arange(12, dtype=np.float64).reshape(4, 3)


def _with(value: float, row: int, col: int) -> np.ndarray:
    X = GOOD_X.copy()
    X[row, col] = value
    return X


_GOOD_NPY = npy_bytes(GOOD_X)
_HEADER_LEN = len(_GOOD_NPY) - GOOD_X.nbytes

# --partition-rows 1: every bad row comes after partitions were already written.
NPY_ARGS = ("--partition-rows", "1")
NON_NUMERIC_DTYPE = r"dtype|numeric|object|pickle"
NOT_READABLE = r"not a readable|truncat|corrupt"

NPY_CASES = {
    "nan-row": Bad({"x.npy": _with(np.nan, 2, 1)}, "x.npy", "x.npy", "row 2",
                   r"non-finite|nan", NPY_ARGS),
    "inf-row": Bad({"x.npy": _with(np.inf, 3, 0)}, "x.npy", "x.npy", "row 3",
                   r"non-finite|inf", NPY_ARGS),
    "neg-inf-row-0": Bad({"x.npy": _with(-np.inf, 0, 2)}, "x.npy", "x.npy", "row 0",
                         r"non-finite|inf", NPY_ARGS),
    "nan-float32": Bad({"x.npy": _with(np.nan, 1, 0).astype(np.float32)}, "x.npy", "x.npy",
                       "row 1", r"non-finite|nan", NPY_ARGS),
    "1-d": Bad({"x.npy": np.arange(5.0)}, "x.npy", "x.npy", None, r"2-D", NPY_ARGS),
    "3-d": Bad({"x.npy": np.zeros((2, 3, 4))}, "x.npy", "x.npy", None, r"2-D", NPY_ARGS),
    "0-d": Bad({"x.npy": np.array(1.5)}, "x.npy", "x.npy", None, r"2-D", NPY_ARGS),
    "strings": Bad({"x.npy": np.array([["a", "b"], ["c", "d"]])}, "x.npy", "x.npy", None,
                   NON_NUMERIC_DTYPE, NPY_ARGS),
    "objects": Bad({"x.npy": np.array([[1, "b"], [None, 2.0]], dtype=object)}, "x.npy", "x.npy",
                   None, NON_NUMERIC_DTYPE, NPY_ARGS),
    "complex": Bad({"x.npy": GOOD_X.astype(np.complex128)}, "x.npy", "x.npy", None,
                   NON_NUMERIC_DTYPE, NPY_ARGS),
    "bool": Bad({"x.npy": GOOD_X > 3}, "x.npy", "x.npy", None, NON_NUMERIC_DTYPE, NPY_ARGS),
    "truncated-data": Bad({"x.npy": _GOOD_NPY[:-5]}, "x.npy", "x.npy", None, NOT_READABLE,
                          NPY_ARGS),
    "truncated-header": Bad({"x.npy": _GOOD_NPY[: _HEADER_LEN // 2]}, "x.npy", "x.npy", None,
                            NOT_READABLE, NPY_ARGS),
    "truncated-magic": Bad({"x.npy": _GOOD_NPY[:4]}, "x.npy", "x.npy", None, NOT_READABLE,
                           NPY_ARGS),
    "truncated-to-0-bytes": Bad({"x.npy": b""}, "x.npy", "x.npy", None,
                                NOT_READABLE + r"|empty", NPY_ARGS),
}


@pytest.mark.parametrize("case", NPY_CASES.values(), ids=NPY_CASES.keys())
def test_npy_rejected(tmp_path: Path, case: Bad) -> None:
    check_rejected(tmp_path, case)


# --------------------------------------------------------------------------------------------
# csv

CSV_HEADER = "a,b,label,t\n"
CSV_ROWS = ["1.0,2.0,x,10\n", "3.0,4.0,y,20\n", "5.0,6.0,z,30\n"]
CSV_ARGS = ("--label-column", "label", "--time-column", "t", "--partition-rows", "1")


def _csv(line: int, text: str) -> str:
    """The good CSV with file line ``line`` (1-based; line 1 is the header) replaced."""
    lines = [CSV_HEADER, *CSV_ROWS]
    lines[line - 1] = text + "\n"
    return "".join(lines)


def _csv_case(content: str, where: str | None, phrase: str, args: tuple[str, ...] = CSV_ARGS):
    return Bad({"data.csv": content}, "data.csv", "data.csv", where, phrase, args)


CSV_CASES = {
    "nan": _csv_case(_csv(3, "3.0,nan,y,20"), "line 3", r"non-finite|nan"),
    "NaN-first-row": _csv_case(_csv(2, "NaN,2.0,x,10"), "line 2", r"non-finite|nan"),
    "inf": _csv_case(_csv(4, "5.0,inf,z,30"), "line 4", r"non-finite|inf"),
    "minus-inf": _csv_case(_csv(4, "-inf,6.0,z,30"), "line 4", r"non-finite|inf"),
    "non-numeric": _csv_case(_csv(3, "3.0,abc,y,20"), "line 3", r"not a number"),
    "empty-field": _csv_case(_csv(3, "3.0,,y,20"), "line 3", r"not a number|empty|missing"),
    "too-many-fields": _csv_case(_csv(3, "3.0,4.0,y,20,99"), "line 3", r"fields"),
    "too-few-fields": _csv_case(_csv(4, "5.0,6.0,z"), "line 4", r"fields"),
    "empty-file": _csv_case("", None, r"empty"),
    "header-only": _csv_case(CSV_HEADER, None, r"no data rows|empty"),
    "missing-label-column": _csv_case(
        _csv(1, "a,b,label,t"), "line 1", r"no column 'nope'",
        ("--label-column", "nope", "--time-column", "t"),
    ),
    "missing-time-column": _csv_case(
        _csv(1, "a,b,label,t"), "line 1", r"no column 'when'",
        ("--label-column", "label", "--time-column", "when"),
    ),
    "non-integer-time": _csv_case(_csv(3, "3.0,4.0,y,2.5"), "line 3", r"not an integer"),
    "non-numeric-time": _csv_case(_csv(4, "5.0,6.0,z,noon"), "line 4",
                                  r"not a number|not an integer"),
}


@pytest.mark.parametrize("case", CSV_CASES.values(), ids=CSV_CASES.keys())
def test_csv_rejected(tmp_path: Path, case: Bad) -> None:
    check_rejected(tmp_path, case)


# --------------------------------------------------------------------------------------------
# docword (UCI): lines 1-3 are D, W, NNZ; lines 4-8 the triples

DOCWORD = "docword.test.txt"
GOOD_HEADER = ["3", "4", "5"]
GOOD_TRIPLES = ["1 1 2", "1 3 1", "2 2 4", "3 1 1", "3 4 2"]
GOOD_VOCAB = "apple\nbanana\ncherry\ndate\n"
DOCWORD_ARGS = ("--partition-rows", "1")


def _docword(*, header: list[str] | None = None, triples: list[str] | None = None) -> str:
    lines = (GOOD_HEADER if header is None else header) + (
        GOOD_TRIPLES if triples is None else triples
    )
    return "".join(line + "\n" for line in lines)


def _triples(line: int, text: str) -> list[str]:
    """The good triples with file line ``line`` (4..8) replaced."""
    out = list(GOOD_TRIPLES)
    out[line - 4] = text
    return out


def _dw_case(content: str, where: str | None, phrase: str, *, culprit: str = DOCWORD,
             files: dict[str, object] | None = None, args: tuple[str, ...] = DOCWORD_ARGS):
    return Bad({DOCWORD: content, **(files or {})}, DOCWORD, culprit, where, phrase, args)


DOCWORD_CASES = {
    "negative-count": _dw_case(_docword(triples=_triples(6, "2 2 -4")), "line 6", r"negative"),
    "non-integer-count": _dw_case(_docword(triples=_triples(6, "2 2 2.5")), "line 6",
                                  r"not an integer"),
    "word-id-0": _dw_case(_docword(triples=_triples(6, "2 0 4")), "line 6", r"word id 0"),
    "word-id-W+1": _dw_case(_docword(triples=_triples(6, "2 5 4")), "line 6", r"word id 5"),
    "doc-id-0": _dw_case(_docword(triples=_triples(4, "0 1 2")), "line 4", r"document id 0"),
    "doc-id-D+1": _dw_case(_docword(triples=_triples(8, "4 4 2")), "line 8", r"document id 4"),
    "nnz-too-large": _dw_case(_docword(header=["3", "4", "6"]), "line 3", r"NNZ"),
    "nnz-too-small": _dw_case(_docword(header=["3", "4", "4"]), "line 3", r"NNZ"),
    "non-integer-header-W": _dw_case(_docword(header=["3", "four", "5"]), "line 2",
                                     r"not an integer"),
    "non-integer-header-D": _dw_case(_docword(header=["3.5", "4", "5"]), "line 1",
                                     r"not an integer"),
    "empty-file": _dw_case("", None, r"empty"),
    "header-D-only": _dw_case("3\n", "line 2", r"missing header"),
    "header-D-W-only": _dw_case("3\n4\n", "line 3", r"missing header"),
    "four-fields": _dw_case(_docword(triples=_triples(6, "2 2 4 9")), "line 6", r"3 fields"),
    "four-fields-first-triple": _dw_case(_docword(triples=_triples(4, "1 1 2 7")), "line 4",
                                         r"3 fields"),
    "four-fields-every-line": _dw_case(
        _docword(triples=[f"9 {t}" for t in GOOD_TRIPLES]), "line 4", r"3 fields"
    ),
    "two-fields": _dw_case(_docword(triples=_triples(6, "2 2")), "line 6", r"3 fields"),
    "two-fields-first-triple": _dw_case(_docword(triples=_triples(4, "1 1")), "line 4",
                                        r"3 fields"),
    "non-numeric-token": _dw_case(_docword(triples=_triples(6, "2 two 4")), "line 6",
                                  r"not a number"),
    "not-sorted-by-document": _dw_case(
        _docword(triples=["1 1 2", "1 3 1", "3 1 1", "2 2 4", "3 4 2"]), "line 7", r"not sorted"
    ),
    "repeated-pair": _dw_case(
        _docword(triples=["1 1 2", "1 3 1", "1 1 5", "3 1 1", "3 4 2"]), "line 6", r"repeated"
    ),
    "missing-vocab": _dw_case(_docword(), None, r"not found", culprit="vocab.missing.txt",
                              args=(*DOCWORD_ARGS, "--vocab", "{src}/vocab.missing.txt")),
    "vocab-too-short": _dw_case(_docword(), None, r"3 words.*W=4", culprit="words.txt",
                                files={"words.txt": "apple\nbanana\ncherry\n"},
                                args=(*DOCWORD_ARGS, "--vocab", "{src}/words.txt")),
    "vocab-too-long": _dw_case(_docword(), None, r"5 words.*W=4", culprit="words.txt",
                               files={"words.txt": GOOD_VOCAB + "elder\n"},
                               args=(*DOCWORD_ARGS, "--vocab", "{src}/words.txt")),
    "default-vocab-too-short": _dw_case(_docword(), None, r"2 words.*W=4",
                                        culprit="vocab.test.txt",
                                        files={"vocab.test.txt": "apple\nbanana\n"}),
}


@pytest.mark.parametrize("case", DOCWORD_CASES.values(), ids=DOCWORD_CASES.keys())
def test_docword_rejected(tmp_path: Path, case: Bad) -> None:
    check_rejected(tmp_path, case)


# --------------------------------------------------------------------------------------------
# text

TEXT_DOCS = {"docs/a.txt": "The cat sat on the mat.\n", "docs/b.txt": "A dog ate the cat food.\n"}

TEXT_CASES = {
    "empty-folder": Bad({"docs": None}, "docs", "docs", None, r"no documents|empty"),
    "non-utf8-file-in-folder": Bad(
        {**TEXT_DOCS, "docs/c.txt": b"caf\xe9 au lait\n"}, "docs", "docs/c.txt", None, r"UTF-8"
    ),
    "non-utf8-line-in-file": Bad(
        {"lines.txt": b"the cat sat\ncaf\xe9 au lait\nthe dog ate\n"}, "lines.txt", "lines.txt",
        "line 2", r"UTF-8",
    ),
    "pruning-removes-every-word": Bad(TEXT_DOCS, "docs", "docs", None, r"prun|no word",
                                      ("--min-df", "5")),
    "missing-stopwords": Bad(TEXT_DOCS, "docs", "stop.txt", None, r"not found",
                             ("--stopwords", "{src}/stop.txt")),
}


@pytest.mark.parametrize("case", TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_text_rejected(tmp_path: Path, case: Bad) -> None:
    check_rejected(tmp_path, case)


# --------------------------------------------------------------------------------------------
# more bad input beyond the cases above: encodings, compression, overflowing integers

_GOOD_GZ = gzip.compress(_docword().encode())

OTHER_CASES = {
    "csv-non-utf8": _csv_case(_csv(3, "3.0,4.0,caf\udce9,20").encode("utf-8", "surrogateescape"),
                              "line 3", r"UTF-8"),
    "csv-time-overflows-int64": _csv_case(_csv(2, "1.0,2.0,x,1e30"), "line 2",
                                          r"range|too large|overflow"),
    "docword-non-utf8": _dw_case(
        _docword(triples=_triples(6, "2 2 \udce9")).encode("utf-8", "surrogateescape"),
        "line 6", r"UTF-8",
    ),
    "docword-count-overflows-int32": _dw_case(_docword(triples=_triples(6, "2 2 3000000000")),
                                              "line 6", r"range|too large|overflow"),
    "docword-gz-not-gzip": Bad({DOCWORD + ".gz": b"3\n4\n5\n"}, DOCWORD + ".gz",
                               DOCWORD + ".gz", None, r"gzip", DOCWORD_ARGS),
    "docword-gz-truncated": Bad({DOCWORD + ".gz": _GOOD_GZ[: len(_GOOD_GZ) // 2]},
                                DOCWORD + ".gz", DOCWORD + ".gz", None,
                                r"gzip|truncat|ended|corrupt", DOCWORD_ARGS),
    "vocab-non-utf8": _dw_case(_docword(), None, r"UTF-8", culprit="words.txt",
                               files={"words.txt": b"apple\nbanana\ncaf\xe9\ndate\n"},
                               args=(*DOCWORD_ARGS, "--vocab", "{src}/words.txt")),
    "stopwords-non-utf8": Bad({**TEXT_DOCS, "stop.txt": b"the\ncaf\xe9\n"}, "docs", "stop.txt",
                              None, r"UTF-8", ("--stopwords", "{src}/stop.txt")),
}


@pytest.mark.parametrize("case", OTHER_CASES.values(), ids=OTHER_CASES.keys())
def test_other_bad_input_rejected(tmp_path: Path, case: Bad) -> None:
    check_rejected(tmp_path, case)


# --------------------------------------------------------------------------------------------
# argparse usage errors: exit 2, argparse's usage report, nothing created


@pytest.mark.parametrize(
    "args",
    [("--partition-rows", "0"), ("--format", "xls"), ("--min-df", "many")],
    ids=["partition-rows-0", "unknown-format", "min-df-not-int"],
)
def test_usage_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    src = tmp_path / "src" / "data.csv"
    src.parent.mkdir()
    src.write_text(CSV_HEADER + "".join(CSV_ROWS))
    out_parent = tmp_path / "out"
    out_parent.mkdir()
    corpus = out_parent / "corpus"
    proc = cli("ingest", src, corpus, *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("usage: ")
    assert re.search(r"^bnpmix ingest: error: .*" + re.escape(args[0]), proc.stderr, re.M)
    assert_nothing_left(out_parent, corpus)


# --------------------------------------------------------------------------------------------
# existing output directory


def _existing(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, bytes | None]]:
    src = tmp_path / "src" / "data.csv"
    src.parent.mkdir()
    src.write_text(CSV_HEADER + "".join(CSV_ROWS))
    out_parent = tmp_path / "out"
    corpus = out_parent / "corpus"  # an older corpus (--overwrite replaces only a corpus)
    ingest_array(np.zeros((4, 2)), corpus, partition_rows=2)
    (corpus / "sub").mkdir(parents=True)
    (corpus / "keep.txt").write_text("precious\n")
    (corpus / "sub" / "more.bin").write_bytes(b"\x00\x01\x02")
    return src, out_parent, corpus, snapshot(corpus)


def test_existing_output_refused_without_overwrite(tmp_path: Path) -> None:
    src, out_parent, corpus, before = _existing(tmp_path)
    proc = cli("ingest", src, corpus, "--label-column", "label", cwd=tmp_path)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    msg = one_line_error(proc)
    assert str(corpus) in msg
    assert re.search(r"not empty|exists", msg) and "--overwrite" in msg, msg
    assert snapshot(corpus) == before, "the existing directory was modified"
    assert sorted(p.name for p in out_parent.iterdir()) == ["corpus"]


def test_existing_output_replaced_with_overwrite(tmp_path: Path) -> None:
    src, out_parent, corpus, _ = _existing(tmp_path)
    proc = cli("ingest", src, corpus, "--label-column", "label", "--time-column", "t",
               "--overwrite", cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stderr == ""
    assert not (corpus / "keep.txt").exists()
    assert not (corpus / "sub").exists()
    assert (corpus / "manifest.json").is_file()
    assert sorted(p.name for p in out_parent.iterdir()) == ["corpus"]
    c = Corpus(corpus)
    assert (c.kind, c.n_items, c.dim) == ("dense", 3, 2)
    batch = c.read_all()
    np.testing.assert_array_equal(batch.X, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert list(batch.columns["time"]) == [10, 20, 30]


def test_overwrite_with_bad_input_keeps_existing_output(tmp_path: Path) -> None:
    src, out_parent, corpus, before = _existing(tmp_path)
    src.write_text(_csv(3, "3.0,nan,y,20"))
    proc = cli("ingest", src, corpus, "--label-column", "label", "--time-column", "t",
               "--partition-rows", "1", "--overwrite", cwd=tmp_path)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    msg = one_line_error(proc)
    assert re.search(re.escape(str(src)) + r".*\bline 3\b", msg), msg
    assert snapshot(corpus) == before, "a failed --overwrite ingest modified the old directory"
    assert sorted(p.name for p in out_parent.iterdir()) == ["corpus"]


# --------------------------------------------------------------------------------------------
# partitions damaged after ingestion


def _ingest_good(tmp_path: Path, kind: str) -> tuple[Path, int]:
    """A valid corpus of 3 partitions; returns its path and its number of items."""
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    corpus = tmp_path / "corpus"
    if kind == "dense":
        src = src_dir / "x.npy"
        np.save(src, np.arange(18, dtype=np.float64).reshape(6, 3))
        n = 6
    else:
        src = src_dir / DOCWORD
        src.write_text(_docword())
        n = 3
    proc = cli("ingest", src, corpus, "--partition-rows", "2" if kind == "dense" else "1",
               cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert Corpus(corpus).n_partitions == 3
    return corpus, n


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("kind", ["dense", "bow"])
@pytest.mark.parametrize("damage", [_flip_byte, _truncate], ids=["flipped-byte", "truncated"])
def test_damaged_partition(tmp_path: Path, kind: str, damage) -> None:
    corpus, n = _ingest_good(tmp_path, kind)
    part = corpus / "part-00001.parquet"
    assert Corpus(corpus).partition_file(1) == part
    original = part.read_bytes()
    damage(part)
    assert part.read_bytes() != original

    # `bnpmix info` reads only the manifest.
    proc = cli("info", corpus, "--json", cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    info = json.loads(proc.stdout)
    assert (info["kind"], info["n_items"], info["n_partitions"]) == (kind, n, 3)
    proc = cli("info", corpus, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert re.search(rf"^items\s+{n}$", proc.stdout, re.M), proc.stdout

    c = Corpus(corpus)
    with pytest.raises(CorruptPartitionError) as excinfo:
        c.read(1)
    assert str(part) in str(excinfo.value)
    # The other partitions are still readable: reading one never reads another.
    assert len(c.read(0)) == len(c.read(2)) > 0
    with pytest.raises(CorruptPartitionError, match=re.escape(str(part))):
        c.read_all()
