"""Corpus format, ingestion, partition readers and run directories (installed as bnpmix.storage).

Only the errors are imported with the package; every other name is imported from its module on
first use (PEP 562), so that reading a manifest or a run's JSON does not load pyarrow, pandas
and scipy, which the readers and writers of partitions need."""

from importlib import import_module

from .errors import BnpmixError, CorruptPartitionError, DataError, DataWarning, local_path

# name -> the module of this package that defines it
_LAZY = {
    "Batch": "corpus", "Corpus": "corpus", "Manifest": "corpus", "PartitionInfo": "corpus",
    "ingest_array": "dense", "ingest_csv": "csvfile", "ingest_npy": "npyfile",
    "ingest_docword": "docword", "read_vocab": "docword",
    "RunDir": "rundir", "validate_summary": "runsummary",
    "ingest_text": "text", "tokenize": "text",
    "DOCUMENTS_PER_PARTITION": "writer", "VALUES_PER_PARTITION": "writer",
    "partition_rows": "writer",
}


def __getattr__(name: str) -> object:
    """A re-exported name, imported from its module the first time it is asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DOCUMENTS_PER_PARTITION",
    "VALUES_PER_PARTITION",
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
    "partition_rows",
    "read_vocab",
    "tokenize",
    "validate_summary",
]
