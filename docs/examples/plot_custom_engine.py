"""
Writing and registering an engine
=================================

An engine is a class that the runtime steps: a frozen ``Config`` dataclass (its fields become
``bnpmix fit`` flags, job-file keys and the estimator's keyword parameters) and the methods of
the :doc:`engine contract <../engine_contract>`. The runtime does everything else: the corpus,
the executor, the observation model and its data-scaled prior, checkpoints, resume, the run
directory, evaluation, ``bnpmix.load``.

The engine below is hard-assignment variational Bayes, a k-means with a Dirichlet-process
prior: each lap, every partition gives each of its items wholly to its most probable
component under the current q (on the executor, where the partition is read), the driver adds
the partitions' summaries and updates q from them (Eq. 10), until the components' counts stop
changing. Like k-means it keeps the K components it starts from (it has no births, merges or
deletes). It is about fifty lines.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

import bnpmix
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb.init import hard_summary, seeded_summary
from bnpmix.algorithms.vb.local import responsibilities
from bnpmix.pipeline.runtime import Engine, Fitted, Step, register


def assign_partition(batch, obs, g):
    """A partition's visit: its items to their most probable components."""
    R, _ = responsibilities(batch.X, obs, g)
    return hard_summary(batch.X, obs, R.argmax(axis=1), g.uids)


@dataclass(frozen=True)
class HardConfig:
    K: int = 4  # K and laps share the other engines' rows of the option table
    laps: int = 20


@register
class HardVB(Engine):
    """Hard-assignment VB: items to their most probable components, q from
    the sums, until the components' counts no longer change."""

    name = "hard-vb"
    Config = HardConfig
    summary = "hard-assignment VB (a k-means with a DP prior)"

    def start(self):
        ctx, K = self.ctx, self.cfg.K
        sample = ctx.source.sample(ctx.init_sample, ctx.rng.init)
        S = seeded_summary(sample, ctx.obs, K, ctx.new_uids(K), ctx.rng.init)
        self.set(S, lap=0, moved=True)

    def set(self, S, lap, moved):
        self.S, self.lap, self.moved = S, lap, moved
        self.model = Mixture.from_summary(self.ctx.obs, self.ctx.alloc, S)

    @property
    def done(self):
        return self.lap >= self.cfg.laps or not self.moved

    def step(self):
        ctx, n = self.ctx, self.ctx.corpus.n_partitions
        g = self.model.globals()
        parts = ctx.executor.map(assign_partition, range(n), ctx.obs, g)
        S = sum(parts[1:], parts[0])
        moved = self.lap == 0 or not np.array_equal(S.N, self.S.N)
        self.set(S, self.lap + 1, moved)
        elbo = self.model.elbo(S)
        self.trace.append(ctx.trace_row(self.lap, -1, elbo, self.model.K))
        return Step(visits=n, lap_end=True)

    def state(self):  # the checkpoint: JSON-able meta and named arrays
        arrays = {f"S/{k}": v for k, v in self.S.to_arrays().items()}
        return {"lap": self.lap, "moved": self.moved}, iter(arrays.items())

    def restore(self, meta, arrays):
        self.set(Summary.from_arrays(arrays.group("S")), **meta)

    def result(self):
        elbo = self.model.elbo(self.S)
        return Fitted(self.model, {"elbo": elbo}, converged=not self.moved)


# %%
# Fitting it through the normal path
# ----------------------------------
# ``@register`` makes ``algorithm="hard-vb"`` known to this process (a package declares it as an
# entry point in the group ``bnpmix.engines`` so that every process, ``bnpmix fit`` included,
# finds it). The estimator, ``bnpmix.pipeline.fit.fit`` and job files now take it, with its
# options under their names: here four Gaussian blobs, and K = 4.

rng = np.random.default_rng(1)
centres = np.array([[-5.0, -5.0], [-5.0, 5.0], [5.0, -5.0], [5.0, 5.0]])
X = centres[rng.integers(0, 4, 2000)] + rng.normal(size=(2000, 2))

model = bnpmix.BayesianMixture(
    algorithm="hard-vb", obs="gauss", K=4, random_state=0
).fit(X)
print(
    f"{model.n_components_} components after {model.n_iter_} laps, "
    f"converged: {model.converged_}, ELBO {model.lower_bound_:.1f}"
)
print("weights:", np.round(model.weights_, 3))

# %%
# Its result is a fitted model like any engine's: ``predict``, ``means_``, ``score``, ...

fig, ax = plt.subplots(figsize=(5, 4.5))
ax.scatter(X[:, 0], X[:, 1], c=model.predict(X), cmap="tab10", s=4)
ax.scatter(model.means_[:, 0], model.means_[:, 1], c="k", marker="x", s=60)
ax.set(
    title=f"hard-vb: {model.n_components_} components, "
    f"log density {model.score(X):.2f} per item"
)
fig.tight_layout()
plt.show()

# sphinx_gallery_start_ignore
# a registration lasts as long as the process: the rest of this documentation build lists
# bnpmix's own engines only
from bnpmix.pipeline.runtime import ENGINES  # noqa: E402

ENGINES.pop(HardVB.name)
# sphinx_gallery_end_ignore
