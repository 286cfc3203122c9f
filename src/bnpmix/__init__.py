"""bnpmix: Bayesian nonparametric mixture models for corpora stored as Parquet partitions.

Importing it loads neither Dask nor pyarrow, pandas or scipy: the storage names below and
``BayesianMixture`` are imported on first use (PEP 562)."""

from importlib import import_module

from bnpmix.pipeline import settings as _settings  # noqa: F401  (bnpmix.yaml -> dask.config)
from bnpmix.storage import BnpmixError, DataError

__version__ = "0.1.0"

# name -> the module it is imported from when first asked for
_LAZY = {
    "BayesianMixture": "bnpmix.pipeline.estimator",  # it pulls in the engines
    **dict.fromkeys(("Corpus", "RunDir", "ingest_array", "ingest_csv", "ingest_docword",
                     "ingest_npy", "ingest_text"), "bnpmix.storage"),
}


def __getattr__(name: str) -> object:
    """``bnpmix.BayesianMixture``, ``bnpmix.Corpus``, ...: imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'bnpmix' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
