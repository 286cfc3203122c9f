"""bnpmix: Bayesian nonparametric mixture models for corpora stored as Parquet partitions."""

from bnpmix.storage import (
    BnpmixError,
    Corpus,
    DataError,
    RunDir,
    ingest_array,
    ingest_csv,
    ingest_docword,
    ingest_npy,
    ingest_text,
)

__version__ = "0.1.0"

__all__ = [
    "BnpmixError",
    "Corpus",
    "DataError",
    "RunDir",
    "__version__",
    "ingest_array",
    "ingest_csv",
    "ingest_docword",
    "ingest_npy",
    "ingest_text",
]
