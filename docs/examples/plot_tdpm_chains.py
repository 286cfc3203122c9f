"""
Clusters that drift over time: the temporal DP mixture
======================================================

Data from the temporal DP mixture itself (``bnpmix.datasets.tdpm_gaussian``: chains born,
drifting as a random walk and dying, 10 epochs of 40 points). The ``tdpm`` engine reads the
corpus's ``time`` column and samples the chains by Gibbs sampling; ``chains.parquet`` holds each
chain's state per epoch.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

import bnpmix
from bnpmix.datasets import tdpm_gaussian
from bnpmix.pipeline.fit import fit, job_config

X, epochs, truth, _ = tdpm_gaussian(n_epochs=10, per_epoch=40, alpha=1.0, seed=3)

with tempfile.TemporaryDirectory() as tmp:
    bnpmix.ingest_array(X, Path(tmp) / "corpus", columns={"time": epochs})
    job = job_config(algorithm="tdpm", sweeps=30, burn_in=20, thin=5, seed=0)
    summary = fit(Path(tmp) / "corpus", Path(tmp) / "run", job)
    chains = pd.read_parquet(Path(tmp) / "run" / "chains.parquet")
    epochs_table = pd.read_parquet(Path(tmp) / "run" / "epochs.parquet")

print(f"true chains: {truth.max() + 1}, chains in the final sample: {chains['chain'].nunique()}")
print(epochs_table.head())

# %%
# Each chain's posterior mean state, first coordinate (``state_0``), over the epochs it is
# alive, over the data; and the number of chains with items per epoch (``epochs.parquet``)
# against the truth.
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
left.scatter(epochs, X[:, 0], s=3, c="0.6")
for _, chain in chains.groupby("chain"):
    left.plot(chain["epoch"], chain["state_0"], lw=2)
left.set(xlabel="epoch", ylabel="x[0]", title="chains' states")
occupied = [len(set(truth[epochs == t])) for t in range(epochs.max() + 1)]
right.step(epochs_table["epoch"], epochs_table["occupied"], where="mid", label="final sample")
right.step(epochs_table["epoch"], occupied, where="mid", ls="--", label="truth")
right.set(xlabel="epoch", ylabel="chains with items", title="chains per epoch")
right.legend()
fig.tight_layout()
plt.show()
