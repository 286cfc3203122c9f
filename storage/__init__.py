"""Corpus format, ingestion, partition readers and run directories (installed as bnpmix.storage)."""

from .corpus import Batch, Corpus, Manifest, PartitionInfo
from .dense import ingest_array, ingest_csv, ingest_npy
from .docword import ingest_docword, read_vocab
from .errors import BnpmixError, CorruptPartitionError, DataError, DataWarning, local_path
from .rundir import RunDir, validate_summary
from .text import ingest_text, tokenize
from .writer import DEFAULT_PARTITION_ROWS

__all__ = [
    "DEFAULT_PARTITION_ROWS",
    "Batch",
    "BnpmixError",
    "Corpus",
    "CorruptPartitionError",
    "DataError",
    "DataWarning",
    "Manifest",
    "PartitionInfo",
    "RunDir",
    "ingest_array",
    "ingest_csv",
    "ingest_docword",
    "ingest_npy",
    "ingest_text",
    "local_path",
    "read_vocab",
    "tokenize",
    "validate_summary",
]
