"""
The scikit-learn estimator on iris
==================================

:class:`bnpmix.BayesianMixture` with its defaults (memo: births, merges and deletes from one
component) on scikit-learn's iris, standardised. The number of clusters is inferred; the
labels are only used to score the clustering afterwards.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score

import bnpmix

X, y = load_iris(return_X_y=True)
X = (X - X.mean(axis=0)) / X.std(axis=0)

model = bnpmix.BayesianMixture(random_state=0).fit(X)
labels = model.predict(X)
print(f"components: {model.n_components_}, weights: {np.round(model.weights_, 3)}")
print(f"ELBO: {model.lower_bound_:.2f}, laps: {model.n_iter_}, converged: {model.converged_}")
print(f"ARI against the species: {adjusted_rand_score(y, labels):.3f}")

# %%
# The clusters on the first two principal axes, with each component's mean.
_, _, axes = np.linalg.svd(X, full_matrices=False)
P, M = X @ axes[:2].T, model.means_ @ axes[:2].T
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
left.scatter(P[:, 0], P[:, 1], c=labels, cmap="tab10", s=14)
left.scatter(M[:, 0], M[:, 1], c="k", marker="x", s=80)
left.set(xlabel="PC 1", ylabel="PC 2", title="clusters found")
right.bar(np.arange(model.n_components_), model.weights_)
right.set(xlabel="component", ylabel="E[w_k]", title="weights")
fig.tight_layout()
plt.show()
