"""
A fit on a Dask cluster equals the threaded fit
===============================================

Each partition visit of a fit is a task: on a Dask cluster the worker reads its partition
itself, keeps it cached from lap to lap and sends back only its summary, and the driver applies
the summaries in visiting order, never in completion order. So the result depends on the corpus,
the options and the seed only: here a local cluster of two worker processes on the loopback
interface, started by ``bnpmix fit --cluster`` from a profile as ``cluster-configs/local.yaml``
is, fits the same model as local threads, bit for bit.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import bnpmix

work = Path(tempfile.mkdtemp(prefix="bnpmix-example-"))

# %%
# A corpus of 12 partitions: five 3-D Gaussians of different shapes.

rng = np.random.default_rng(0)
centres = rng.normal(scale=5, size=(5, 3))
y = rng.integers(0, 5, 12_000)
noise = rng.normal(size=(12_000, 3))
scales = rng.uniform(0.5, 1.5, size=(5, 3))
X = centres[y] + scales[y] * noise
manifest = bnpmix.ingest_array(X, work / "corpus", partition_rows=1_000)
print(manifest.n_items, "items in", len(manifest.partitions), "partitions")

# %%
# A cluster profile: ``kind: local`` is a ``distributed.LocalCluster`` with the
# keyword arguments under ``cluster`` (here two single-threaded worker processes
# on loopback). ``bnpmix fit --cluster PROFILE`` starts it, fits on it and
# closes it; ``--scheduler tcp://HOST:PORT`` uses a running one instead.

profile = work / "local.yaml"
profile.write_text("""\
kind: local
dask-config:
  distributed.comm.timeouts.connect: 5s   # a lost worker is noticed in seconds
cluster:
  n_workers: 2
  threads_per_worker: 1
  processes: true
  host: 127.0.0.1
  dashboard_address: 127.0.0.1:0
""")
print("profile:", profile)

# %%
# The same job twice: on two local threads, and on the cluster.

for out, where in (("threads", "--threads 2"), ("dask", "--cluster local.yaml")):
    command = f"fit corpus --obs gauss --seed 3 --out {out} {where}"
    print("$ bnpmix", command)
    done = subprocess.run([sys.executable, "-m", "bnpmix", *command.split()],
                          cwd=work, capture_output=True, text=True)
    print(done.stdout + done.stderr)
    done.check_returncode()

# %%
# The two runs hold the same model and the same assignments, and the Dask run's
# workers kept their partitions cached between laps (summary.json's ``cache``).

threads, dask = (bnpmix.RunDir(work / out) for out in ("threads", "dask"))
a, b = bnpmix.load(str(threads.path)), bnpmix.load(str(dask.path))
print("same weights and means:", np.array_equal(a.weights_, b.weights_)
      and np.array_equal(a.means_, b.means_))
print("same assignments:",
      threads.load_assignments().equals(dask.load_assignments()))
print("cache:", json.loads((dask.path / "summary.json").read_text())["cache"])

fig, ax = plt.subplots(figsize=(5, 4.5))
ax.scatter(X[:, 0], X[:, 1], c=b.predict(X), cmap="tab10", s=2)
ax.scatter(b.means_[:, 0], b.means_[:, 1], c="k", marker="x", s=60)
ax.set(title=f"fitted on Dask: {b.n_components_} clusters (dimensions 1, 2)")
fig.tight_layout()
plt.show()

# %%
# The example's scratch directory (corpus and runs) is removed when it ends.

shutil.rmtree(work)
