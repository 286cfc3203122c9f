"""Issue 45, item 5: do the plain fit's small components earn their keep on the exact ELBO?

For each set (real_data.py's split of the seed: the training rows, prepared as that script
prepares them) and seed: the plain-default fit (`--obs auto`, whatever it chooses, with the
prior it learns). Its state is first taken to full-data VB convergence (the fit's own ELBO
per item, which memo reached; the table shows both). Then, for each component holding at most
--small items (by hard assignment), the two moves that would remove it, each scored by the
exact full-data ELBO after full VB to convergence under the fit's own model (observation model,
its final prior, DP prior):
- delete: the component's mass to the others (a local step without it), then VB;
- merge: its responsibilities added to another component's, for each other component, then VB
  (the best of these).
A component "earns its keep" when both moves lower the ELBO; then the splinter is the model's
own optimum, and only a change of the model removes it. A move that raises the ELBO is one the
search missed; beside each, the change "at once" (the global update from the moved summary and
its ELBO, no local step after: how memo judges a merge or delete) says whether memo's own test
would have taken it had it been tried (> 0) or only its convergence pays (< 0). Printed per
small component: its size, the ELBO change (nats, whole training set) of the delete and of the
best merge, and the verdict; per set and seed, the structure chosen, K, sizes and ARI.

Measured (3 seeds each, 2 cores shared): of 32 components of at most 5 items, 23 earn their keep
(wine seeds 0 and 2, breast cancer seeds 0 and 2: deletes -4 to -254 nats, merges -3 to -45);
9 do not (breast cancer seed 1, tied-gauss at K 21: merges +3.6 to +26.4 nats, one delete +22;
wine seed 1: a merge +2.0), and every one of those 9 is negative at once (-14 to -390 nats): a
removal that pays only after the items have moved again, which memo's one-step test of a
tried merge or delete cannot see.

    python benchmarks/acceptance/splinters.py [--sets wine,breast_cancer] [--seeds 3] [--small 5]
        [--json [PATH]]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, converge, json_option, write_json
from acceptance.real_data import split
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.vb.local import batch_step, excluding, responsibilities, summarize
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array


def one_step(obs, alloc, S) -> float:
    """The ELBO right after a move, as memo judges it: the global update from the moved
    summary S and Eq. 8 with S's own q(z) (no local step after it)."""
    return Mixture.from_summary(obs, alloc, S).elbo(S)


def removals(X: np.ndarray, model: Mixture, small: int) -> tuple[list[dict], float, np.ndarray]:
    """The delete and the best merge of each component of at most ``small`` items, each
    scored by the converged ELBO's change against the model's own (converged) ELBO."""
    obs, alloc = model.obs, model.alloc
    model, _, base = converge(X, obs, alloc, batch_step(X, obs, model.globals()).summary)
    g = model.globals()
    R = responsibilities(X, obs, g)[0]
    sizes = np.bincount(R.argmax(axis=1), minlength=R.shape[1])
    rows = []
    for k in np.flatnonzero(sizes <= small):
        keep = np.delete(np.arange(R.shape[1]), k)
        uids = model.uids[keep]
        Rd = responsibilities(X, obs, excluding(g, (int(model.uids[k]),)))[0][:, keep]
        S_d = summarize(X, obs, Rd, None, uids)
        _, _, deleted = converge(X, obs, alloc, S_d)
        best, partner, first = -np.inf, -1, -np.inf
        for j in keep:
            Rm = R.copy()
            Rm[:, j] += Rm[:, k]
            S_m = summarize(X, obs, Rm[:, keep], None, uids)
            _, _, merged = converge(X, obs, alloc, S_m)
            if merged > best:
                best, partner, first = merged, int(j), one_step(obs, alloc, S_m)
        rows.append({"size": int(sizes[k]), "delete": deleted - base, "merge": best - base,
                     "delete_now": one_step(obs, alloc, S_d) - base, "merge_now": first - base,
                     "partner_size": int(sizes[partner])})
    return rows, base, sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="wine,breast_cancer")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--small", type=int, default=5, help="a component of at most this many "
                    "items is a splinter")
    json_option(ap, "splinters")
    args = ap.parse_args()
    earn = missed = 0
    fits = []
    for name in args.sets.split(","):
        for seed in range(args.seeds):
            Xtr, ytr, _, _ = split(name, seed)
            corpus, run = WORK / f"splinters-{name}", WORK / f"splinters-{name}-run"
            for path in (corpus, run):
                if path.exists():
                    shutil.rmtree(path)
            ingest_array(Xtr, corpus)
            summary = fit(corpus, run, job_config(seed=seed))
            model = load(run).model
            rows, base, sizes = removals(Xtr, model, args.small)
            ari = adjusted_rand_index(ytr, load(run).predict(Xtr))
            fits.append({"set": name, "seed": seed, "obs": model.obs.name, "K": summary["K"],
                         "sizes": sorted(sizes, reverse=True), "ari": ari,
                         "elbo_per_item": summary["elbo_per_item"],
                         "converged_per_item": base / len(Xtr), "small": rows})
            print(f"{name} seed {seed}: {model.obs.name}, K = {summary['K']} (sizes "
                  f"{', '.join(map(str, sorted(sizes, reverse=True)))}), ELBO per item fit "
                  f"{summary['elbo_per_item']:.4f}, converged {base / len(Xtr):.4f}, ARI {ari:.3f}")
            for r in rows:
                keeps = r["delete"] < 0 and r["merge"] < 0
                earn += keeps
                missed += not keeps
                print(f"  {r['size']:>3} items: delete {r['delete']:+9.3f} nats "
                      f"({r['delete_now']:+9.3f} at once), best merge {r['merge']:+9.3f} "
                      f"({r['merge_now']:+9.3f} at once; into {r['partner_size']} items): "
                      f"{'earns its keep' if keeps else 'a gainful removal the search missed'}")
    print(f"small components: {earn} earn their keep on the exact ELBO, {missed} do not")
    write_json(args.json, {"args": vars(args), "fits": fits, "earn": earn, "missed": missed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
