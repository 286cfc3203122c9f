"""The plain install (``pip install .``, no scikit-learn): ``bnpmix.BayesianMixture`` and
``bnpmix tune --algorithm memo`` work, and give what they give with scikit-learn installed.

Each runs in a fresh interpreter where ``import sklearn`` fails (``sys.modules['sklearn'] =
None``); .ci/run also runs this file (``-m plain``) in a virtual environment with only
``pip install .`` and pytest, so nothing here may import a test extra."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.pipeline.engines.memo_tune import tune_memo
from bnpmix.storage import ingest_array
from helpers import blobs

pytestmark = pytest.mark.plain

BLOCK = "import sys; sys.modules['sklearn'] = None\n"  # `import sklearn...` raises ImportError

ESTIMATOR = BLOCK + """
import json
import numpy as np
from bnpmix import BayesianMixture
from bnpmix.pipeline.estimator import NotFittedError
X = np.load(sys.argv[1])
est = BayesianMixture(random_state=3)
try:
    est.predict(X)
except NotFittedError as exc:
    refused = str(exc)
est.fit(X)
print(json.dumps({"refused": refused, "labels": est.predict(X).tolist(),
                  "weights": est.weights_.tolist(), "score": est.score(X),
                  "sklearn": sys.modules["sklearn"] is None}))
"""

TUNE = BLOCK + """
from bnpmix.pipeline.cli import entry
sys.argv = ["bnpmix", *sys.argv[1:]]
entry()
"""


def run_python(script: str, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def test_the_estimator_fits_and_predicts_without_scikit_learn(tmp_path):
    """Without scikit-learn: fit, predict and score work, the three blobs are found, and the
    fit is the one this interpreter's estimator makes (with scikit-learn, if installed)."""
    from bnpmix import BayesianMixture

    X, z = blobs(400, 0)
    np.save(tmp_path / "X.npy", X)
    done = run_python(ESTIMATOR, tmp_path / "X.npy")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["sklearn"] and "not fitted" in got["refused"]
    assert adjusted_rand_index(z, np.array(got["labels"])) > 0.99
    here = BayesianMixture(random_state=3).fit(X)
    assert got["labels"] == here.predict(X).tolist()
    np.testing.assert_allclose(got["weights"], here.weights_, rtol=1e-12)
    assert got["score"] == pytest.approx(here.score(X), rel=1e-12)


def test_tune_memo_runs_without_scikit_learn(tmp_path):
    """`bnpmix tune --algorithm memo` without scikit-learn: the table of tune_memo's grid, with
    the same held-out scores."""
    X, _ = blobs(300, 1)
    ingest_array(X, tmp_path / "corpus", partition_rows=100)
    done = run_python(TUNE, "tune", tmp_path / "corpus", "--algorithm", "memo",
                      "--alpha-grid", "0.5,5", "--scale-grid", "1", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    here = tune_memo(tmp_path / "corpus", alpha_grid=(0.5, 5), scale_grid=(1,))
    assert [r["alpha0"] for r in got["rows"]] == [r["alpha0"] for r in here["rows"]]
    np.testing.assert_allclose([r["heldout_loglik_per_item"] for r in got["rows"]],
                               [r["heldout_loglik_per_item"] for r in here["rows"]], rtol=1e-12)
