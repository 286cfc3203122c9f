"""Ingestion of plain text into a bag-of-words corpus.

Tokeniser: the text is lower-cased and every maximal run of letters (Unicode letters, no digits or
underscores) is a token. Vocabulary: the words left after removing stop words, words in fewer than
``min_df`` documents and words in more than ``max_df_fraction`` of the documents; ordered
alphabetically. Documents with fewer than ``min_doc_length`` vocabulary tokens are dropped. This is
the preprocessing of the NYT experiment of Tank, Foti & Fox (2015, Sec. 4.4): min_df=20,
max_df_fraction=0.9, min_doc_length=20.

Defaults: the English stop-word list shipped in ``stopwords_en.txt`` (about 270 function words:
without it every cluster's top words are "the to of and a in"), and ``min_df=2`` (a word met in a
single document says nothing about which documents belong together; such words, typos and rare
names, are often half of the distinct words). ``stopwords=None`` (or ``"none"``) keeps every word;
a file replaces the list.

A fixed vocabulary (``vocab``: a file with one word per line, or a corpus directory) replaces all
of that: the corpus's columns are exactly that file's words in its order, every other token is
dropped, and no stop-word or document-frequency rule applies. Held-out text ingested with a
training corpus's ``vocab.txt`` gets the training columns.

Two streaming passes: the first counts document frequencies (memory O(distinct words)), the second
writes partitions. Each document keeps its origin in the ``item`` column (file name, or line number
when the source is one document per line). ``labels``: a file with one label per source document
(each file of the folder in name order, or each line of the file, blank lines included); the
labels of dropped documents are dropped with them.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .corpus import Manifest, sha256_bytes
from .docword import read_vocab
from .errors import DataError, DataWarning
from .labels import LabelStream, open_labels, streaming
from .textio import numbered_lines
from .writer import CorpusWriter, new_corpus
from .writer import partition_rows as rows_per_partition

TOKEN = re.compile(r"[^\W\d_]+")
BUILTIN_STOPWORDS = {"english": "stopwords_en.txt"}  # name -> package data file
DEFAULT_STOPWORDS = "english"
NO_STOPWORDS = "none"
DEFAULT_MIN_DF = 2


def tokenize(text: str) -> list[str]:
    """Lower-case, then split into maximal runs of letters."""
    return TOKEN.findall(text.lower())


def _files(source: Path) -> list[Path]:
    """The documents of a folder: its files, hidden ones excepted, in name order."""
    return sorted(p for p in source.iterdir() if p.is_file() and not p.name.startswith("."))


def _documents(source: Path) -> Iterator[tuple[str, str]]:
    """(item id, text) for each document: each file of a folder, or each line of one file."""
    if source.is_dir():
        for p in _files(source):
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


def _words_of(lines: Iterator[tuple[int, str]]) -> set[str]:
    """Lower-cased words, one a line; blank lines and lines starting with '#' skipped."""
    return {w for _, line in lines if (w := line.strip().lower()) and not w.startswith("#")}


def read_stopwords(path: str | Path) -> set[str]:
    """Stop words, one per line (lower-cased; blank lines and '#' comment lines ignored)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "stop-word file not found")
    return _words_of(numbered_lines(path))


def builtin_stopwords(name: str = DEFAULT_STOPWORDS) -> set[str]:
    """A stop-word list shipped with bnpmix (``english``)."""
    text = resources.files(__package__).joinpath(BUILTIN_STOPWORDS[name]).read_text("utf-8")
    return _words_of(enumerate(text.splitlines(), start=1))


def stopword_list(spec: str | Path | None) -> tuple[set[str], dict[str, Any] | None]:
    """The stop words ``spec`` names and what the manifest records of them: ``"english"`` (the
    shipped list), ``None`` or ``"none"`` (no stop words), or a file (any Path, or a string
    other than those names; write ``./english`` for a file of that name)."""
    if spec is None or (isinstance(spec, str) and spec == NO_STOPWORDS):
        return set(), None
    if isinstance(spec, str) and spec in BUILTIN_STOPWORDS:
        words, source = builtin_stopwords(spec), f"bnpmix:{spec}"
    else:
        words, source = read_stopwords(spec), str(Path(spec).resolve())
    digest = sha256_bytes("\n".join(sorted(words)).encode())
    return words, {"list": source, "n_words": len(words), "sha256": digest}


def build_vocabulary(
    source: Path, stopwords: set[str], min_df: int, max_df_fraction: float
) -> tuple[list[str], int]:
    """Pass 1: the alphabetically ordered words kept by the document-frequency rules, and the
    number of documents."""
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
                        f"max_df_fraction={max_df_fraction}, {n_docs} documents; "
                        "a lower --min-df or --stopwords none keeps more)")
    return vocab, n_docs


def count_documents(source: Path) -> int:
    """How many documents the source holds (files of a folder, or lines of a file)."""
    if source.is_dir():
        n = len(_files(source))
    elif source.is_file():
        n = sum(1 for _ in numbered_lines(source))
    else:
        raise DataError(source, "source not found")
    if n == 0:
        raise DataError(source, "empty source: no documents")
    return n


def fixed_vocabulary(vocab: str | Path) -> list[str]:
    """The words of a vocabulary file (or corpus directory), each once; a DataError names a
    repeated word's line. Words that no token can equal (not lower-case letter runs) are kept,
    with a warning: their columns stay empty."""
    words = read_vocab(vocab)
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in seen:
            raise DataError(vocab, f"word {w!r} repeats line {seen[w] + 1}", line=i + 1)
        seen[w] = i
    never = [w for w in words if not TOKEN.fullmatch(w) or w != w.lower()]
    if never:
        warnings.warn(f"{vocab}: {len(never)} of {len(words)} words can never occur in "
                      f"tokenised text (lower-case runs of letters), e.g. {never[0]!r}; their "
                      "columns stay empty", DataWarning, stacklevel=3)
    return words


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


def ingest_text(
    source: str | Path,
    out: str | Path,
    *,
    stopwords: str | Path | None = DEFAULT_STOPWORDS,
    min_df: int = DEFAULT_MIN_DF,
    max_df_fraction: float = 1.0,
    min_doc_length: int = 1,
    vocab: str | Path | None = None,
    labels: str | Path | None = None,
    partition_rows: int | None = None,
    overwrite: bool = False,
) -> Manifest:
    """Ingest a folder of text files, or a file with one document per line (see the module's
    docstring for the vocabulary rules, ``vocab`` and ``labels``), ``partition_rows`` documents
    a partition (None: DOCUMENTS_PER_PARTITION)."""
    source = Path(source)
    partition_rows = rows_per_partition(partition_rows, None)
    label_file = open_labels(labels)
    if vocab is not None:
        words = fixed_vocabulary(vocab)
        n_docs = count_documents(source) if label_file is not None else None
        record: dict[str, Any] = {"vocab_file": str(Path(vocab).resolve()), "stopwords": None,
                                  "min_df": None, "max_df_fraction": None}
    else:
        stop, stop_record = stopword_list(stopwords)
        words, n_docs = build_vocabulary(source, stop, min_df, max_df_fraction)
        record = {"vocab_file": None, "stopwords": stop_record, "min_df": min_df,
                  "max_df_fraction": max_df_fraction}
    if label_file is not None:
        what = "documents (files)" if source.is_dir() else "documents (lines)"
        label_file.check_count(n_docs or 0, source, what)
    index = {w: i for i, w in enumerate(words)}
    ingest = {"format": "text", "source": str(source.resolve()), **record,
              "min_doc_length": min_doc_length}
    if label_file is not None:
        ingest["labels"] = label_file.meta()
    columns = ("item", "label") if label_file is not None else ("item",)
    manifest = Manifest(kind="bow", dim=len(words), dtype="int32", columns=columns, vocab=words,
                        ingest=ingest)
    with streaming(label_file) as stream, \
            new_corpus(out, manifest, overwrite=overwrite) as writer:
        seen = _write_documents(writer, stream, source, index, min_doc_length, partition_rows)
        if seen == 0:
            raise DataError(source, "empty source: no documents")
        if manifest.n_items == 0:
            raise DataError(source, f"no document has {min_doc_length} or more vocabulary words")
    return manifest


def _write_documents(writer: CorpusWriter, stream: LabelStream | None, source: Path,
                     index: dict[str, int], min_doc_length: int, partition_rows: int) -> int:
    """Pass 2: each document's vocabulary-word counts (columns ascending), ``partition_rows``
    kept documents a partition; a document with fewer than ``min_doc_length`` vocabulary tokens
    is dropped with its label. Returns how many documents the source held."""
    ids: list[str] = []
    kept_labels: list[str] = []
    word_ids: list[np.ndarray] = []
    counts: list[np.ndarray] = []

    def flush() -> None:
        lengths = [len(w) for w in word_ids]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        cols = {"item": np.asarray(ids, dtype=str)}
        if stream is not None:
            cols["label"] = np.asarray(kept_labels, dtype=str)
        writer.add_bow(indptr, _concat(word_ids), _concat(counts), cols)
        for pending in (ids, kept_labels, word_ids, counts):
            pending.clear()

    seen = 0
    for item, text in _documents(source):
        seen += 1
        label = stream.next_label() if stream is not None else None
        c = Counter(index[t] for t in tokenize(text) if t in index)
        if sum(c.values()) < min_doc_length:
            continue
        w = np.fromiter(sorted(c), dtype=np.int64, count=len(c))
        ids.append(item)
        if label is not None:
            kept_labels.append(label)
        word_ids.append(w)
        counts.append(np.array([c[i] for i in w], dtype=np.int64))
        if len(ids) == partition_rows:
            flush()
    if ids:
        flush()
    return seen
