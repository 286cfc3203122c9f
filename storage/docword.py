"""Ingestion of the UCI bag-of-words format (KOS, NIPS, Enron, NYTimes, PubMed ship in it).

``docword.NAME.txt`` (optionally gzipped): three header lines D, W, NNZ, then one 1-based
``doc word count`` triple per line, sorted by document. ``vocab.NAME.txt``: word ``w`` on line
``w``. Triples are parsed about 130,000 at a time (pandas' C parser) and checked vectorised; the
corpus is written one partition of documents at a time. A zero count is dropped (it adds no word).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from .corpus import MANIFEST, Corpus, Manifest
from .errors import DataError
from .labels import LabelStream, open_labels, streaming
from .textio import decoding_errors, numbered_lines, open_binary
from .writer import CorpusWriter, new_corpus
from .writer import partition_rows as rows_per_partition

HEADER = ("D (number of documents)", "W (vocabulary size)", "NNZ (number of triples)")
CHUNK_LINES = 1 << 17
MAX_EMPTY_PARTITIONS = 100  # in a row: empty documents happen, whole runs of them do not


def read_vocab(path: str | Path) -> list[str]:
    """One word per line; line w names word w (1-based). A corpus directory stands for its
    vocabulary (``vocab.txt``, or the manifest's ``vocab`` for corpora written before it)."""
    path = Path(path)
    if path.is_dir() and (path / MANIFEST).is_file():
        words = Corpus(path).manifest.vocab
        if words is None:
            raise DataError(path, "this corpus has no vocabulary (a dense corpus)")
        return words
    if not path.is_file():
        raise DataError(path, "vocabulary file not found")
    words = []
    for lineno, line in numbered_lines(path):
        word = line.strip()
        if not word:
            raise DataError(path, "empty vocabulary entry", line=lineno)
        words.append(word)
    return words


def default_vocab_path(docword: Path) -> Path | None:
    """``vocab.NAME.txt`` beside ``docword.NAME.txt[.gz]``, if it exists."""
    name = docword.name.removesuffix(".gz")
    if not name.startswith("docword."):
        return None
    candidate = docword.with_name("vocab." + name.removeprefix("docword."))
    return candidate if candidate.is_file() else None


def _read_header(fh: IO[bytes], path: Path) -> tuple[int, int, int]:
    values = []
    for i, what in enumerate(HEADER):
        raw = fh.readline()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(path, f"not UTF-8 text (byte {exc.start} of the line)",
                            line=i + 1) from None
        if not line:
            if i == 0:
                raise DataError(path, "empty source: no header")
            raise DataError(path, f"missing header line {what}", line=i + 1)
        try:
            value = int(line.strip())
        except ValueError:
            raise DataError(path, f"header {what} is not an integer: {line.strip()!r}",
                            line=i + 1) from None
        if value < 0:
            raise DataError(path, f"header {what} is negative", line=i + 1)
        if i < 2 and value > np.iinfo(np.int32).max:
            raise DataError(path, f"header {what} = {value} is beyond the int32 range of "
                            "document and word ids", line=i + 1)
        values.append(value)
    return values[0], values[1], values[2]


def _locate_syntax_error(path: Path) -> None:
    """Scan the triples line by line and raise a DataError at the first malformed one."""
    for lineno, line in numbered_lines(path):
        if lineno > len(HEADER):
            fields = line.split()
            if len(fields) != 3:
                raise DataError(path, f"expected 3 fields (doc word count), found {len(fields)}",
                                line=lineno)
            for name, text in zip(("doc", "word", "count"), fields, strict=True):
                try:
                    float(text)
                except ValueError:
                    raise DataError(path, f"not a number: {text!r}", line=lineno,
                                    field=name) from None


def _triple_chunks(fh: IO[bytes], path: Path) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (first line number, float array (n, 3)) blocks of triples."""
    line = len(HEADER) + 1
    try:
        with warnings.catch_warnings():
            # a line with extra fields must fail, not shift the columns into an index
            warnings.simplefilter("error", pd.errors.ParserWarning)
            reader = pd.read_csv(
                fh, encoding="utf-8", sep=r"\s+", header=None, names=["doc", "word", "count"],
                index_col=False, dtype=np.float64, chunksize=CHUNK_LINES, skip_blank_lines=False,
                engine="c",
            )
        while True:
            with warnings.catch_warnings():
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = next(reader, None)
            if frame is None:
                return
            block = frame.to_numpy()
            if len(block):
                yield line, block
            line += len(block)
    except pd.errors.EmptyDataError:
        return
    except (ValueError, pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        _locate_syntax_error(path)
        raise DataError(path, f"unparseable triples ({exc})") from None


def _check_block(block: np.ndarray, first_line: int, path: Path, D: int, W: int) -> None:
    """Vectorised checks of a block of triples; errors name the first offending line."""

    def fail(mask: np.ndarray, message: str, field: str | None = None) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise DataError(path, message.format(*block[i]), line=first_line + i, field=field)

    fail(np.isnan(block).any(axis=1), "expected 3 fields (doc word count)")
    fail(block[:, 0] != np.floor(block[:, 0]), "document id {0} is not an integer", "doc")
    fail(block[:, 1] != np.floor(block[:, 1]), "word id {1} is not an integer", "word")
    fail(block[:, 2] != np.floor(block[:, 2]), "count {2} is not an integer", "count")
    fail((block[:, 0] < 1) | (block[:, 0] > D), f"document id {{0:.0f}} outside 1..{D}", "doc")
    fail((block[:, 1] < 1) | (block[:, 1] > W), f"word id {{1:.0f}} outside 1..{W}", "word")
    fail(block[:, 2] < 0, "negative count {2:.0f}", "count")
    fail(block[:, 2] > np.iinfo(np.int32).max, "count {2:.0f} too large for int32", "count")


class _PartitionBuffer:
    """Collects sorted triples and writes each full partition of R documents.

    Pieces are kept as compact int32 copies with the line number of their first triple (lines
    are consecutive within a piece), so memory stays near one partition's triples.
    """

    def __init__(self, writer: CorpusWriter, path: Path, D: int, R: int,
                 labels: LabelStream | None = None) -> None:
        self.writer, self.path, self.D, self.R = writer, path, D, R
        self.labels = labels
        self.current = 0  # partition being filled
        self.pieces: list[tuple[np.ndarray, int]] = []  # (int32 triples, line of first triple)
        self.last_doc = 0
        self.empty_run = 0  # partitions in a row without a word

    def add(self, block: np.ndarray, first_line: int) -> None:
        triples = block.astype(np.int32)
        docs = triples[:, 0]
        bad = np.flatnonzero(np.diff(docs, prepend=self.last_doc) < 0)
        if len(bad):
            i = int(bad[0])
            prev = docs[i - 1] if i else self.last_doc
            raise DataError(self.path, f"triples are not sorted by document: document {docs[i]} "
                            f"after {prev}", line=first_line + i)
        self.last_doc = int(docs[-1])
        part = (docs - 1) // self.R
        cuts = np.flatnonzero(np.diff(part)) + 1
        bounds = np.concatenate([[0], cuts, [len(docs)]])
        for begin, end in itertools.pairwise(bounds):
            p = int(part[begin])
            while self.current < p:
                self.flush()
            self.pieces.append((triples[begin:end].copy(), first_line + int(begin)))

    def _lines(self) -> np.ndarray:
        """Source line of every buffered triple (only built to report an error)."""
        return np.concatenate([np.arange(f, f + len(t)) for t, f in self.pieces])

    def flush(self) -> None:
        start = self.current * self.R
        n = min(self.R, self.D - start)
        if self.pieces:
            triples = np.concatenate([t for t, _ in self.pieces])
        else:
            triples = np.zeros((0, 3), np.int32)
        key = triples[:, 0].astype(np.int64) << 32 | triples[:, 1]
        order = None
        if not (np.diff(key) > 0).all():  # UCI files are sorted by (doc, word): usually skipped
            order = np.argsort(key, kind="stable")
            dup = np.flatnonzero(np.diff(key[order]) == 0)
            if len(dup):
                i = int(order[dup[0] + 1])
                raise DataError(self.path, f"word {triples[i, 1]} repeated in document "
                                f"{triples[i, 0]}", line=int(self._lines()[i]))
            triples = triples[order]
        if (triples[:, 2] == 0).any():
            triples = triples[triples[:, 2] > 0]
        self.empty_run = 0 if len(triples) else self.empty_run + 1
        if self.empty_run > MAX_EMPTY_PARTITIONS:  # a header D far beyond the data stops here
            first = start + 1 - (self.empty_run - 1) * self.R
            raise DataError(self.path, f"documents {first}..{start + n} have no words "
                            f"({self.empty_run} partitions in a row): the header's "
                            f"D={self.D} is far beyond the documents in the file", line=1)
        doc = triples[:, 0] - 1 - start
        indptr = np.concatenate([[0], np.cumsum(np.bincount(doc, minlength=n))])
        columns = None if self.labels is None else {"label": self.labels.take(n)}
        self.writer.add_bow(indptr, triples[:, 1] - 1, triples[:, 2], columns)
        self.pieces = []
        self.current += 1

    def finish(self) -> None:
        n_parts = -(-self.D // self.R)
        while self.current < n_parts:
            self.flush()


def ingest_docword(
    path: str | Path,
    out: str | Path,
    *,
    vocab: str | Path | None = None,
    labels: str | Path | None = None,
    partition_rows: int | None = None,
    overwrite: bool = False,
) -> Manifest:
    """Ingest a UCI ``docword`` file; ``vocab`` (a file, or a corpus directory) defaults to
    ``vocab.NAME.txt`` beside it. ``labels``: a file with one label per document (see
    storage/labels.py), stored as the ``label`` column. ``partition_rows``: documents per
    partition (None: DOCUMENTS_PER_PARTITION)."""
    path = Path(path)
    partition_rows = rows_per_partition(partition_rows, None)
    if not path.is_file():
        raise DataError(path, "source file not found")
    vocab_path = Path(vocab) if vocab is not None else default_vocab_path(path)
    words = read_vocab(vocab_path) if vocab_path is not None else None
    label_file = open_labels(labels)
    with decoding_errors(path), open_binary(path) as fh:
        D, W, NNZ = _read_header(fh, path)
        if D == 0:
            raise DataError(path, "empty source: header says 0 documents", line=1)
        if words is not None and len(words) != W:
            raise DataError(vocab_path, f"has {len(words)} words but {path} says W={W}")
        if label_file is not None:
            label_file.check_count(D, path, "documents (its header's D)")
        manifest = Manifest(kind="bow", dim=W, dtype="int32", vocab=words,
                            columns=("label",) if label_file is not None else (),
                            ingest=None if label_file is None else {
                                "format": "docword", "labels": label_file.meta()})
        with streaming(label_file) as stream, \
                new_corpus(out, manifest, overwrite=overwrite) as writer:
            buffer = _PartitionBuffer(writer, path, D, partition_rows, stream)
            n_triples = 0
            for first_line, block in _triple_chunks(fh, path):
                _check_block(block, first_line, path, D, W)
                buffer.add(block, first_line)
                n_triples += len(block)
            if n_triples != NNZ:
                raise DataError(path, f"header says NNZ={NNZ} but the file has {n_triples} "
                                "triples", line=3)
            buffer.finish()
    return manifest
