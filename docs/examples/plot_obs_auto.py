"""
``--obs auto``: choosing the covariance structure on wine
=========================================================

For dense data the default observation model is ``auto``: memo runs of ``gauss``,
``tied-gauss`` and ``diag-gauss`` on the whole corpus race a lap at a time, a candidate leaving
once the leader's ELBO per item is further ahead than it can make up, and the winner's run
continues. The run's summary lists every candidate's bound (``obs_candidates``) and its laps
(``obs_auto``). Here on scikit-learn's wine,
standardised, through the same :func:`~bnpmix.pipeline.fit.fit` that ``bnpmix fit`` runs.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from sklearn.datasets import load_wine

import bnpmix
from bnpmix.pipeline.fit import fit, job_config

X, y = load_wine(return_X_y=True)
X = (X - X.mean(axis=0)) / X.std(axis=0)

with tempfile.TemporaryDirectory() as tmp:
    bnpmix.ingest_array(X, Path(tmp) / "corpus", columns={"label": y})
    summary = fit(Path(tmp) / "corpus", Path(tmp) / "run", job_config(seed=0))

candidates = summary["obs_candidates"]
print("chosen:", summary["obs"], " K:", summary["K"])
race = summary["obs_auto"]["candidates"]
for name, bound in candidates.items():
    print(f"{name:>10}: ELBO {bound:.4f} per item after {race[name]['laps']} laps "
          f"({race[name]['result']})")

# %%
# The candidates' ELBO per item on the corpus when they left the race (higher is better).
names = list(candidates)
bounds = [candidates[n] for n in names]
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(names, bounds, color=["C2" if n == summary["obs"] else "C0"
                               for n in names])
ax.set(xlabel="ELBO per item", title="--obs auto candidates on wine")
fig.tight_layout()
plt.show()
