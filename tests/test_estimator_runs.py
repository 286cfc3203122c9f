"""The estimator's fits as runs (issue 48): ``BayesianMixture.save`` writes a run directory
every command reads (no pickle), and errors and warnings name the user's data (X, the corpus
given), never a temporary directory of the estimator."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bnpmix import BayesianMixture
from helpers import blobs


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("sparse", [False, True])
def test_non_finite_x_names_its_row_and_column_as_ingest_does(bad, sparse):
    """fit, predict and score name the first row and column holding NaN or inf, 0-based, in
    the words of storage's check_finite (what `bnpmix ingest` and `fit` say of a file)."""
    X, _ = blobs(40, 0)
    X = np.abs(np.round(X * 3))
    est = BayesianMixture(algorithm="adf", obs="gauss" if not sparse else "mult",
                          random_state=0).fit(sp.csr_matrix(X) if sparse else X)
    X[5, 1], X[9, 0] = bad, bad
    wanted = f"X, row 5: non-finite value {bad} in column 1 (row and column 0-based)"
    for call in (est.fit, est.predict, est.score):
        with pytest.raises(ValueError, match=wanted.replace("(", r"\(").replace(")", r"\)")):
            call(sp.csr_matrix(X) if sparse else X)
