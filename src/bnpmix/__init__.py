"""bnpmix: Bayesian nonparametric mixture models for corpora stored as Parquet partitions."""

from bnpmix.pipeline import settings as _settings  # noqa: F401  (bnpmix.yaml -> dask.config)
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


def __getattr__(name: str) -> object:
    """``bnpmix.BayesianMixture``, imported on first use (it pulls in the engines)."""
    if name == "BayesianMixture":
        from bnpmix.pipeline.estimator import BayesianMixture

        return BayesianMixture
    raise AttributeError(f"module 'bnpmix' has no attribute {name!r}")


def load(run_dir: str) -> object:
    """The fitted model of a finished run directory, whatever engine produced it: ``weights_``,
    ``means_``, ``predict``, ``predict_proba``, ``score_samples`` (bnpmix.pipeline.evaluate)."""
    from bnpmix.pipeline.evaluate import load as load_run

    return load_run(run_dir)

__all__ = [
    "BayesianMixture",
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
    "load",
]
