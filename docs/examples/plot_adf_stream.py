"""
Streaming ADF with ``partial_fit``
==================================

``BayesianMixture(algorithm="adf")`` absorbs each block once, in order, and then pools
clusters whose merge raises the evidence (``merges="auto"``, the default for dense data; with
``merges="none"`` ten blocks give exactly the one-pass result over the same rows). Here six
2-D Gaussians arrive in blocks of 300 items; after each block we record the number of clusters
and the held-out log-likelihood per item.
"""

import matplotlib.pyplot as plt
import numpy as np

import bnpmix

rng = np.random.default_rng(0)
centres = np.array([[-6, -6], [-6, 0], [-6, 6], [6, -6], [6, 0], [6, 6]], dtype=float)


def draw(n):
    z = rng.integers(0, len(centres), size=n)
    return centres[z] + rng.normal(scale=0.7, size=(n, 2))


X, X_test = draw(3000), draw(1000)
model = bnpmix.BayesianMixture(algorithm="adf", obs="gauss", random_state=0)
ks, heldout = [], []
for block in np.array_split(X, 10):
    model.partial_fit(block)
    ks.append(model.n_components_)
    heldout.append(model.score(X_test))
print("clusters after each block:", ks)

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
seen = 300 * np.arange(1, 11)
left.plot(seen, heldout, "o-")
left.set(xlabel="items absorbed", ylabel="held-out log-likelihood per item")
right.scatter(X[:, 0], X[:, 1], c=model.predict(X), cmap="tab10", s=4)
right.scatter(model.means_[:, 0], model.means_[:, 1], c="k", marker="x")
right.set(title=f"{model.n_components_} clusters after one pass")
fig.tight_layout()
plt.show()
