"""Helpers shared by the tests (on sys.path through pytest's `pythonpath`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp


def write_docword(path: Path, X: sp.csr_matrix, vocab: list[str] | None = None) -> None:
    """Write a CSR count matrix in the UCI docword format (1-based triples sorted by document)."""
    X = sp.csr_matrix(X)
    X.sort_indices()
    coo = X.tocoo()
    lines = [str(X.shape[0]), str(X.shape[1]), str(X.nnz)]
    triples = zip(coo.row, coo.col, coo.data, strict=True)
    lines += [f"{d + 1} {w + 1} {int(c)}" for d, w, c in triples]
    path.write_text("\n".join(lines) + "\n")
    if vocab is not None:
        name = path.name.removeprefix("docword.")
        (path.parent / f"vocab.{name}").write_text("\n".join(vocab) + "\n")


def random_counts(rng: np.random.Generator, D: int, V: int, density: float) -> sp.csr_matrix:
    """A random document-word count matrix with positive integer counts."""
    X = sp.random(D, V, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.integers(1, 6, size=X.nnz).astype(np.float64)
    return X


def engine_for(corpus_dir: Path, **options):
    """A started engine over a corpus, in this process (synchronous executor); options as in
    job files."""
    from bnpmix.pipeline.fit import job_config
    from bnpmix.pipeline.runtime.context import make_context
    from bnpmix.pipeline.runtime.engine import engine_class
    from bnpmix.pipeline.runtime.executors import LocalExecutor
    from bnpmix.storage import Corpus

    job = job_config(**options)
    corpus = Corpus(corpus_dir)
    ctx = make_context(corpus, job.run, job.model, LocalExecutor(corpus, "synchronous"))
    engine = engine_class(job.algorithm)(ctx, job.engine)
    engine.start()
    return engine


def run_to_end(engine):
    while not engine.done:
        engine.step()
    return engine


def run_lap(engine) -> None:
    """Step the engine up to and including its next lap end."""
    while not engine.step().lap_end:
        pass
