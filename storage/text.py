"""Ingestion of plain text into a bag-of-words corpus.

Tokeniser: the text is lower-cased and every maximal run of letters (Unicode letters, no digits or
underscores) is a token. Vocabulary: the words left after removing stop words (one per line in an
optional file), words in fewer than ``min_df`` documents and words in more than ``max_df_fraction``
of the documents; ordered alphabetically. Documents with fewer than ``min_doc_length`` vocabulary
tokens are dropped. This is the preprocessing of the NYT experiment of Tank, Foti & Fox (2015,
Sec. 4.4): min_df=20, max_df_fraction=0.9, min_doc_length=20.

Two streaming passes: the first counts document frequencies (memory O(distinct words)), the second
writes partitions. Each document keeps its origin in the ``item`` column (file name, or line number
when the source is one document per line).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .corpus import Manifest
from .errors import DataError
from .textio import numbered_lines
from .writer import DEFAULT_PARTITION_ROWS, new_corpus

TOKEN = re.compile(r"[^\W\d_]+")


def tokenize(text: str) -> list[str]:
    """Lower-case, then split into maximal runs of letters."""
    return TOKEN.findall(text.lower())


def _documents(source: Path) -> Iterator[tuple[str, str]]:
    """(item id, text) for each document: each file of a folder, or each line of one file."""
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.is_file() and not p.name.startswith("."))
        for p in files:
            try:
                yield p.name, p.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(p, f"not UTF-8 text (byte {exc.start})") from None
            except OSError as exc:
                raise DataError(p, f"cannot read ({exc})") from None
    elif source.is_file():
        for lineno, line in numbered_lines(source):
            yield str(lineno), line
    else:
        raise DataError(source, "source not found")


def read_stopwords(path: str | Path) -> set[str]:
    """Stop words, one per line (lower-cased; blank lines ignored)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "stop-word file not found")
    return {w.strip().lower() for _, w in numbered_lines(path) if w.strip()}


def build_vocabulary(
    source: Path, stopwords: set[str], min_df: int, max_df_fraction: float
) -> list[str]:
    """Pass 1: the alphabetically ordered words kept by the document-frequency rules."""
    df: Counter[str] = Counter()
    n_docs = 0
    for _, text in _documents(source):
        n_docs += 1
        df.update(set(tokenize(text)) - stopwords)
    if n_docs == 0:
        raise DataError(source, "empty source: no documents")
    limit = max_df_fraction * n_docs
    vocab = sorted(w for w, c in df.items() if min_df <= c <= limit)
    if not vocab:
        raise DataError(source, f"no word survives pruning (min_df={min_df}, "
                        f"max_df_fraction={max_df_fraction}, {n_docs} documents)")
    return vocab


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


def ingest_text(
    source: str | Path,
    out: str | Path,
    *,
    stopwords: str | Path | None = None,
    min_df: int = 1,
    max_df_fraction: float = 1.0,
    min_doc_length: int = 1,
    partition_rows: int = DEFAULT_PARTITION_ROWS,
    overwrite: bool = False,
) -> Manifest:
    """Ingest a folder of text files, or a file with one document per line."""
    source = Path(source)
    stop = read_stopwords(stopwords) if stopwords is not None else set()
    vocab = build_vocabulary(source, stop, min_df, max_df_fraction)
    index = {w: i for i, w in enumerate(vocab)}
    manifest = Manifest(kind="bow", dim=len(vocab), dtype="int32", columns=("item",), vocab=vocab)
    with new_corpus(out, manifest, overwrite=overwrite) as writer:
        ids: list[str] = []
        words: list[np.ndarray] = []
        counts: list[np.ndarray] = []

        def flush() -> None:
            lengths = [len(w) for w in words]
            indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            writer.add_bow(indptr, _concat(words), _concat(counts),
                           {"item": np.asarray(ids, dtype=str)})
            ids.clear()
            words.clear()
            counts.clear()

        for item, text in _documents(source):
            c = Counter(index[t] for t in tokenize(text) if t in index)
            if sum(c.values()) < min_doc_length:
                continue
            w = np.fromiter(sorted(c), dtype=np.int64, count=len(c))
            ids.append(item)
            words.append(w)
            counts.append(np.array([c[i] for i in w], dtype=np.int64))
            if len(ids) == partition_rows:
                flush()
        if ids:
            flush()
        if manifest.n_items == 0:
            raise DataError(source, f"no document has {min_doc_length} or more vocabulary words")
    return manifest
