"""
Corpus, fit, interrupt, resume, evaluate, report
================================================

The life of a run on the command line: a corpus is written, ``bnpmix fit`` runs as its own
process and is interrupted by Ctrl-C (SIGINT) after its first checkpoint, ``bnpmix resume``
continues it, and the resumed run is the run that was never interrupted, bit for bit. Then the
run is scored on held-out items (``bnpmix evaluate``) and drawn (``bnpmix report``).

Every command below is the one a user types; ``run`` prints it and its output.
"""

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import bnpmix

work = Path(tempfile.mkdtemp(prefix="bnpmix-example-"))
BNPMIX = [sys.executable, "-m", "bnpmix"]  # this environment's bnpmix


def run(command):
    """Run ``bnpmix COMMAND``, print it and its output; stop if it failed."""
    print("$ bnpmix", command)
    done = subprocess.run([*BNPMIX, *command.split()], cwd=work,
                          capture_output=True, text=True)
    print(done.stdout + done.stderr)
    done.check_returncode()


# %%
# A corpus
# --------
# Eight 2-D Gaussians, 16,000 items to fit in 16 partitions of 1,000 rows and
# 4,000 held out, each with its true label in a ``label`` column.

rng = np.random.default_rng(3)
angles = np.linspace(0, 2 * np.pi, 8, endpoint=False)
centres = 6 * np.c_[np.cos(angles), np.sin(angles)]
y = rng.integers(0, 8, 20_000)
X = centres[y] + rng.normal(size=(20_000, 2))
train, test = slice(0, 16_000), slice(16_000, None)
bnpmix.ingest_array(X[train], work / "corpus", partition_rows=1_000,
                    columns={"label": y[train]})
bnpmix.ingest_array(X[test], work / "heldout", columns={"label": y[test]})
run("info corpus")

# %%
# Fit, interrupted
# ----------------
# ``--checkpoint-every 4`` writes a checkpoint after every four partition visits
# (by default a run checkpoints at lap ends once a few minutes have passed). The
# fit is started as a process, and SIGINT, what Ctrl-C sends, reaches it as soon
# as its first checkpoint exists.

options = "--obs gauss --seed 7 --checkpoint-every 4"
print(f"$ bnpmix fit corpus --out run {options}   # then Ctrl-C")
proc = subprocess.Popen([*BNPMIX, "fit", "corpus", "--out", "run",
                         *options.split()], cwd=work, text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
while not (work / "run" / "checkpoint.npz").exists() and proc.poll() is None:
    time.sleep(0.01)
proc.send_signal(signal.SIGINT)
print(proc.communicate()[0])
print("exit status", proc.returncode)

# %%
# The checkpoint is in the run directory; ``resume`` continues from it.

run("resume run")

# %%
# The same fit, never interrupted, for comparison: the model, the assignments
# and the trace (timings aside) are identical.

run(f"fit corpus --out whole {options}")


def outcome(name):
    """A finished run's model, assignments, trace (without timings), ELBO."""
    rundir = bnpmix.RunDir(work / name)
    summary = json.loads((work / name / "summary.json").read_text())
    return (bnpmix.load(str(work / name)), rundir.load_assignments(),
            rundir.load_trace().drop(columns="seconds"), summary["elbo"])


(resumed, assigned, trace, elbo), (whole, *uninterrupted) = map(
    outcome, ("run", "whole"))
print("same model:", np.array_equal(resumed.weights_, whole.weights_)
      and np.array_equal(resumed.means_, whole.means_))
print("same assignments:", assigned.equals(uninterrupted[0]))
print("same trace:", trace.equals(uninterrupted[1]))
print("ELBO:", elbo, "resumed,", uninterrupted[2], "uninterrupted")

# %%
# Evaluate and report
# -------------------
# Held-out log-likelihood per item under the posterior predictive, and with the
# held-out labels the agreement of the clusters with them.

run("evaluate run --heldout heldout --label-column label")
run("report run")
print(sorted(p.name for p in (work / "run" / "report").iterdir()))

# %%
# The report (``run/report/index.html``) draws the objective against the items
# seen, the weights and the components; here the resumed run's trace (the
# ELBO after every step) over the uninterrupted one's.

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
for rows, style, label in ((uninterrupted[1], "o-", "uninterrupted"),
                           (trace, "x--", "interrupted + resumed")):
    left.plot(rows["lap"], rows["elbo"], style, ms=6, label=label)
left.set(xlabel="laps (a fraction: partitions visited so far)", ylabel="ELBO",
         ylim=(trace["elbo"].quantile(0.05), None))
left.legend()
right.scatter(X[train, 0], X[train, 1], c=assigned["cluster"], s=2,
              cmap="tab10")
right.set(title=f"{resumed.n_components_} clusters")
fig.tight_layout()
plt.show()

# %%
# The example's scratch directory (corpus and runs) is removed when it ends.

shutil.rmtree(work)
