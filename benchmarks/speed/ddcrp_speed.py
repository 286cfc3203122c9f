"""Speed of variational inference for the sequential distance-dependent CRP
(``bnpmix.algorithms.ddcrp``) on this machine.

per iteration: one sequence of 2-D data (five unit Gaussians at (0, 0) and (±5, ±5), items in
random order), α = 1, decay none and exponential (a = 50), N = 1,000 and 3,000; four
configurations from the same drawn start (the same rng seed): (a) no window, prune = 0 (every
table with q(c_j = j) > 0 keeps its column of R: the dense algorithm), (b) no window,
prune = 1e-6 (the default), (c) windows W = 50 and W = 200 with prune = 1e-6 (different models:
their link prior, hence their drawn start and their ELBO, differ). Each configuration runs in its
own subprocess: a fixed number of coordinate-ascent iterations (links sweep + tables update,
tol = 0), seconds an iteration (mean, first, last), seconds of the links sweeps alone, the ELBO
after each iteration, E[#tables], live columns of R and the process's peak RSS (ru_maxrss, before
the fit and at the end). Ratios of seconds an iteration against (a) and (b).
pruning: (a) against (b) at N = 1,000, the same start and update order: the ELBO difference after
each iteration, the largest |Δq(c_i)| and the items whose most probable table differs.
engine: ``bnpmix fit CORPUS --algorithm ddcrp --iterations 10 --restarts 1`` (the engine's
default is 10 restarts a sequence; --seq-iterations, --restarts) on 200 sequences of 300 items
(each from 2-3 of the five Gaussians), ingested from one CSV with ``--sequence-column sequence``
at ``--partition-rows`` 3000 (10 sequences a partition) and 300 (one a partition): wall time
(summary's ``wall_seconds`` and the whole command) with --scheduler synchronous, threads
(--threads 2) and a real local Dask cluster (``dask scheduler`` + ``dask worker --nworkers 1|2
--nthreads 1`` on 127.0.0.1, stopped by PID), whether all four give the same summary ELBO (a
failed run is kept with its error), speedups against synchronous. The two layouts draw
different prior-scaling samples (--init-sample), so their ELBOs differ from each other.

Prints tables; writes JSON (--json, default benchmarks/results/ddcrp_speed.json).

    python benchmarks/speed/ddcrp_speed.py [--quick] [--parts iterations engine] [--sizes 1000 3000]
        [--iterations 5 2] [--dense-iterations 5 0] [--windows 50 200] [--layouts 3000 300]
        [--seq-iterations 10] [--restarts 1] [--seed 0] [--json PATH]

--dense-iterations 0 skips (a) at that size (by default at N = 3,000: about 27 x 2.35 s = 64 s
an iteration); the table's "N³ est" column scales the smallest size's seconds by (N / N_0)³. A
run of some --parts keeps the other parts of an existing JSON.

Measured (2 cores at a load average of 1.3-2.0, 5.5 min): seconds per iteration, f ≡ 1 |
exponential a = 50: N = 1,000 dense 2.35 | 0.54, pruned 0.120 | 0.129, W = 50 0.060 | 0.063,
W = 200 0.080 | 0.084; N = 3,000 pruned 2.97 | 3.17, W = 50 0.31 | 0.37, W = 200 0.39 | 0.48.
Pruning changes the ELBO by at most 2.6e-11 and no item's most probable table. Engine, 200 x 300
items: 10 sequences a partition: synchronous 32.4 s, threads 44.9 s (0.72x: the coordinate steps
are small numpy calls under the GIL), Dask 1 worker 38.2 s (0.85x), 2 workers 21.1 s (1.54x);
one sequence a partition: 31.3, 40.0, 37.2, 22.4 s (1.40x); the same ELBO bit for bit on all.
These engine figures are of fits with the engine's defaults, which this script runs: restart 0
starts from DP VB tables and every start's ascent is followed by table moves (``--starts``,
``--table-rounds``). Measured outside this script: a whole fit of 40 sequences of 300 items,
``fit_restarts`` with 1 restart and 10 iterations, under load, takes 166 s with them against
135 s without (a drawn start and its ascent alone, as ``--starts drawn --table-rounds 0``
fits), 1.23x, for 23.6 nats more bound a sequence on average. The iteration figures time
``ascend`` alone, which the starts and the moves leave as it is: with and without them, back to
back under a load of 12-15, the same ELBOs to the last digit and seconds per iteration 0.80 vs
0.90 (N = 1,000, pruned), 7.97 vs 9.92 (N = 3,000, pruned), 1.90 vs 2.42 (N = 3,000, W = 50)
with vs without.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "results"
CENTRES = np.array([[0, 0], [5, 5], [5, -5], [-5, 5], [-5, -5]], float)
ALPHA = 1.0
DECAYS = [("none", 1.0), ("exponential", 50.0)]
PRUNE = 1e-6
DASK = str(Path(sys.executable).parent / "dask")
ENV = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s"}


def five_gaussians(n: int, rng: np.random.Generator, which: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """n items from unit Gaussians at CENTRES (or the subset ``which``), in random order."""
    which = np.arange(len(CENTRES)) if which is None else which
    z = which[rng.integers(len(which), size=n)]
    return CENTRES[z] + rng.standard_normal((n, 2)), z


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# ---- one configuration, in a child process ----------------------------------------------------

def one_config(spec: dict) -> dict:
    """Fit one sequence for ``spec['iterations']`` iterations (tol 0) and time every one."""
    from bnpmix.algorithms.ddcrp import fit as vi_fit
    from bnpmix.algorithms.ddcrp.fit import ascend, sampled_links
    from bnpmix.algorithms.ddcrp.links import decay, log_link_band
    from bnpmix.algorithms.ddcrp.vi import sweep
    from bnpmix.algorithms.obs.gauss import Gauss

    marks: list[tuple[float, float]] = []

    def timed_sweep(links, ell, ell_empty, rng):
        """``vi.sweep``, noting when each sweep starts and ends."""
        t = time.perf_counter()
        out = sweep(links, ell, ell_empty, rng)
        marks.append((t, time.perf_counter()))
        return out

    vi_fit.sweep = timed_sweep  # what ascend calls, in this child process only

    N = spec["N"]
    X, _ = five_gaussians(N, np.random.default_rng(spec["seed"]))
    obs = Gauss.default(X)
    rng = np.random.default_rng(spec["seed"] + 1)  # the start's draws, then the update orders
    before = maxrss_mb()
    t0 = time.perf_counter()
    logp = log_link_band(np.arange(N, dtype=float), ALPHA, decay(spec["decay"], spec["a"]),
                         spec["window"])
    links = sampled_links(X, logp, obs, rng, spec["prune"])
    start_s = time.perf_counter() - t0
    start_tables = len(links.cols)
    t1 = time.perf_counter()
    fit = ascend(X, links, obs, rng, max_iter=spec["iterations"], tol=0.0)
    end = time.perf_counter()
    links = fit.links
    starts = [m[0] for m in marks] + [end]
    per_iter = np.diff(starts)
    sweeps = np.array([b - a for a, b in marks])
    elbos = [after for _, after in fit.trace]
    if spec.get("save"):
        table = links.cols[links.responsibilities.argmax(1)]
        np.savez(spec["save"], q=links.q, table=table)
    return {**{k: v for k, v in spec.items() if k != "save"},
            "start_s": start_s, "ascend_s": end - t1, "iter_s": per_iter.tolist(),
            "s_per_iter": float(per_iter.mean()), "first_iter_s": float(per_iter[0]),
            "last_iter_s": float(per_iter[-1]), "sweep_s_per_iter": float(sweeps.mean()),
            "elbo_start": fit.trace[0][0], "elbo_trace": elbos, "elbo": fit.elbo,
            "n_tables": fit.n_tables, "live_columns": len(links.cols),
            "start_live_columns": start_tables, "W": links.W,
            "rss_before_fit_mb": before, "rss_peak_mb": maxrss_mb()}


def run_child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"configuration {spec} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- part 1 and 2 ------------------------------------------------------------------------------

def configurations(windows: list[int]) -> list[tuple[str, int | None, float]]:
    return ([("a dense", None, 0.0), ("b pruned", None, PRUNE)]
            + [(f"c W={w}", w, PRUNE) for w in windows])


def per_iteration(sizes: list[int], iterations: list[int], dense_iterations: list[int],
                  windows: list[int], seed: int, tmp: Path) -> list[dict]:
    rows = []
    for N, iters, dense_iters in zip(sizes, iterations, dense_iterations, strict=True):
        for kind, a in DECAYS:
            for name, window, prune in configurations(windows):
                n_it = dense_iters if prune == 0 else iters
                if n_it == 0:
                    continue
                spec = {"config": name, "N": N, "decay": kind, "a": a, "window": window,
                        "prune": prune, "iterations": n_it, "seed": seed,
                        "save": str(tmp / f"q-{N}-{kind}-{name.split()[0]}.npz")}
                r = run_child(spec)
                r["q_file"] = spec["save"]
                rows.append(r)
                print(f"  N={N} {kind:<11} {name:<9} {n_it} it: {r['s_per_iter']:.3f} s/it, "
                      f"ELBO {r['elbo']:.6g}, tables {r['n_tables']:.2f} "
                      f"(cols {r['live_columns']}), peak {r['rss_peak_mb']:.0f} MB", flush=True)
    small = min(sizes)
    for r in rows:
        base = [s for s in rows if s["N"] == small and s["decay"] == r["decay"]
                and s["config"] == r["config"]]
        r["cubic_from_smallest_s"] = (base[0]["s_per_iter"] * (r["N"] / small) ** 3
                                      if base else None)
        for ref in ("a", "b"):
            base = [s for s in rows if s["N"] == r["N"] and s["decay"] == r["decay"]
                    and s["config"].startswith(ref)]
            r[f"ratio_vs_{ref}"] = r["s_per_iter"] / base[0]["s_per_iter"] if base else None
    return rows


def print_iterations(rows: list[dict]) -> None:
    print("\nseconds per iteration (links sweep + tables update), one sequence, same seed")
    print(f"{'N':>6} {'decay':<12}{'config':<10}{'W':>5}{'prune':>7}{'its':>4}{'start s':>8}"
          f"{'s/it':>9}{'first':>8}{'last':>8}{'sweep':>8}{'vs a':>7}{'vs b':>7}"
          f"{'ELBO start':>12}{'ELBO it 1':>12}{'ELBO end':>12}{'tables':>8}{'cols':>6}"
          f"{'RSS MB':>8}{'N³ est':>8}")
    for r in rows:
        va = f"{r['ratio_vs_a']:.3f}" if r["ratio_vs_a"] is not None else "-"
        vb = f"{r['ratio_vs_b']:.3f}" if r["ratio_vs_b"] is not None else "-"
        print(f"{r['N']:>6} {r['decay']:<12}{r['config']:<10}{r['W']:>5}{r['prune']:>7.0e}"
              f"{r['iterations']:>4}{r['start_s']:>8.2f}{r['s_per_iter']:>9.3f}"
              f"{r['first_iter_s']:>8.3f}{r['last_iter_s']:>8.3f}{r['sweep_s_per_iter']:>8.3f}"
              f"{va:>7}{vb:>7}{r['elbo_trace'][0]:>12.2f}{r['elbo_trace'][1]:>12.2f}"
              f"{r['elbo']:>12.2f}"
              f"{r['n_tables']:>8.3f}{r['live_columns']:>6}{r['rss_peak_mb']:>8.0f}"
              f"{r['cubic_from_smallest_s'] or 0:>8.2f}")
    print("  (N³ est: the smallest size's s/it scaled by (N / N_smallest)³; vs a, vs b: s/it "
          "ratio to the dense (a) and pruned (b) runs of the same N and decay)")


def pruning_effect(rows: list[dict], N: int) -> list[dict]:
    from bnpmix.algorithms.metrics import adjusted_rand_index

    out = []
    for kind, _ in DECAYS:
        pick = {r["config"][0]: r for r in rows if r["N"] == N and r["decay"] == kind}
        if "a" not in pick or "b" not in pick:
            continue
        a, b = pick["a"], pick["b"]
        n = min(len(a["elbo_trace"]), len(b["elbo_trace"]))
        da, db = np.load(a["q_file"]), np.load(b["q_file"])
        same_n = a["iterations"] == b["iterations"]
        diff = np.array(b["elbo_trace"][:n]) - np.array(a["elbo_trace"][:n])
        rel_change = [abs(r["elbo_trace"][-1] - r["elbo_trace"][-2]) / abs(r["elbo_trace"][-1])
                      if len(r["elbo_trace"]) > 1 else None for r in (a, b)]
        out.append({"N": N, "decay": kind, "iterations": n - 1, "same_start":
                    a["elbo_start"] == b["elbo_start"],
                    "elbo_start_a": a["elbo_start"], "elbo_start_b": b["elbo_start"],
                    "elbo_dense": a["elbo_trace"][:n], "elbo_pruned": b["elbo_trace"][:n],
                    "delta_b_minus_a": diff.tolist(), "max_abs_delta": float(np.abs(diff).max()),
                    "max_abs_dq": float(np.abs(da["q"] - db["q"]).max()) if same_n else None,
                    "map_table_differs": int((da["table"] != db["table"]).sum())
                    if same_n else None,
                    "ari_a_b": adjusted_rand_index(da["table"], db["table"]) if same_n else None,
                    "tables_a": a["n_tables"], "tables_b": b["n_tables"],
                    "columns_a": a["live_columns"], "columns_b": b["live_columns"],
                    "last_rel_change_a": rel_change[0], "last_rel_change_b": rel_change[1]})
    if out:
        print(f"\npruning at N = {N}: (b) prune 1e-6 minus (a) prune 0, same start and order")
        print(f"{'decay':<12}{'its':>4}{'same start':>11}{'ELBO a':>14}{'ELBO b':>14}"
              f"{'b - a':>11}{'max|Δ| trace':>13}{'max|Δq|':>10}{'MAP≠':>6}{'ARI':>6}"
              f"{'tables a':>10}{'tables b':>10}{'cols a/b':>10}{'rel Δ last a':>13}")
        for p in out:
            dq = "-" if p["max_abs_dq"] is None else f"{p['max_abs_dq']:.1e}"
            mp = "-" if p["map_table_differs"] is None else str(p["map_table_differs"])
            ari = "-" if p["ari_a_b"] is None else f"{p['ari_a_b']:.3f}"
            print(f"{p['decay']:<12}{p['iterations']:>4}{p['same_start']!s:>11}"
                  f"{p['elbo_dense'][-1]:>14.6f}{p['elbo_pruned'][-1]:>14.6f}"
                  f"{p['delta_b_minus_a'][-1]:>11.2e}{p['max_abs_delta']:>13.2e}{dq:>10}"
                  f"{mp:>6}{ari:>6}{p['tables_a']:>10.4f}{p['tables_b']:>10.4f}"
                  f"{p['columns_a']:>5}/{p['columns_b']:<4}{p['last_rel_change_a']:>13.1e}")
        for p in out:
            print(f"  {p['decay']}: b - a per iteration: "
                  + " ".join(f"{d:.2e}" for d in p["delta_b_minus_a"]))
    return out


# ---- part 3: the engine over many sequences ----------------------------------------------------

def sequence_csv(path: Path, n_seq: int, n_items: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lines = ["x0,x1,sequence"]
    for s in range(n_seq):
        which = rng.choice(len(CENTRES), size=int(rng.integers(2, 4)), replace=False)
        X, _ = five_gaussians(n_items, rng, which)
        lines += [f"{x:.17g},{y:.17g},{s}" for x, y in X]
    path.write_text("\n".join(lines) + "\n")


def timed_command(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=False)
    return time.perf_counter() - t, out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(*procs: subprocess.Popen) -> None:
    for proc in procs:  # only the processes started here, by their handle
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    deadline = time.time() + 90
    while True:
        try:
            with Client(address, timeout="5s") as client:
                client.wait_for_workers(n, timeout=60)
                return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.3)


def engine_runs(corpus: Path, seq_iterations: int, restarts: int, tmp: Path) -> list[dict]:
    """``bnpmix fit --algorithm ddcrp`` on one corpus with the four executors; a failed run is
    kept with its error (last stderr line) and the time it took to fail."""
    bn = [sys.executable, "-m", "bnpmix"]
    runs = []

    def fit(label: str, *flags: str, cluster: dict | None = None) -> None:
        out = tmp / f"run-{corpus.name}-{label.replace(' ', '-')}"
        cmd = [*bn, "fit", str(corpus), "--algorithm", "ddcrp", "--out", str(out),
               "--iterations", str(seq_iterations), "--restarts", str(restarts), *flags]
        seconds, proc = timed_command(cmd)
        r = {"label": label, "command": " ".join(["bnpmix", *cmd[3:]]), "command_s": seconds,
             "returncode": proc.returncode, "cluster": cluster}
        if proc.returncode == 0:
            summary = json.loads((out / "summary.json").read_text())
            r |= {"wall_seconds": summary["wall_seconds"], "elbo": summary["elbo"],
                  "info": summary.get("info")}
            print(f"  {label:<16} wall {r['wall_seconds']:.1f} s, command {seconds:.1f} s, "
                  f"ELBO {r['elbo']:.10g}", flush=True)
        else:
            r["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
            print(f"  {label:<16} FAILED after {seconds:.1f} s: {r['error']}", flush=True)
        runs.append(r)

    fit("synchronous", "--scheduler", "synchronous")
    fit("threads 2", "--scheduler", "threads", "--threads", "2")
    for nworkers in (1, 2):
        port = free_port()
        address = f"tcp://127.0.0.1:{port}"
        sched_cmd = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                     "--dashboard-address", "127.0.0.1:0"]
        worker_cmd = [DASK, "worker", address, "--nworkers", str(nworkers), "--nthreads", "1",
                      "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "30"]
        scheduler = subprocess.Popen(sched_cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=ENV)
        worker = subprocess.Popen(worker_cmd, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=ENV)
        try:
            wait_for_workers(address, nworkers)
            fit(f"dask {nworkers} worker{'s' if nworkers > 1 else ''}", "--scheduler", address,
                cluster={"scheduler": " ".join(["dask", *sched_cmd[1:]]),
                         "worker": " ".join(["dask", *worker_cmd[1:]])})
        finally:
            stop(worker, scheduler)
    base = runs[0]
    for r in runs:
        ok = r["returncode"] == 0 and base["returncode"] == 0
        r["speedup_wall"] = base["wall_seconds"] / r["wall_seconds"] if ok else None
        r["speedup_command"] = base["command_s"] / r["command_s"] if ok else None
        r["same_elbo_as_synchronous"] = r["elbo"] == base["elbo"] if ok else None
        r["elbo_minus_synchronous"] = r["elbo"] - base["elbo"] if ok else None
    return runs


def engine_part(n_seq: int, n_items: int, layouts: list[int], seq_iterations: int,
                restarts: int, seed: int, tmp: Path) -> dict:
    csv = tmp / "sequences.csv"
    sequence_csv(csv, n_seq, n_items, seed)
    out = {"sequences": n_seq, "items_per_sequence": n_items, "seq_iterations": seq_iterations,
           "restarts": restarts, "corpora": []}
    for rows in layouts:
        corpus = tmp / f"corpus-{rows}"
        ingest = [sys.executable, "-m", "bnpmix", "ingest", str(csv), str(corpus),
                  "--sequence-column", "sequence", "--partition-rows", str(rows)]
        ingest_s, proc = timed_command(ingest)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(ingest)} failed:\n{proc.stderr}")
        partitions = len(list(corpus.glob("part-*.parquet")))
        print(f"\n{n_seq} x {n_items} items, --partition-rows {rows}: {partitions} partitions "
              f"({n_seq / partitions:.0f} sequences each), ingested in {ingest_s:.1f} s",
              flush=True)
        runs = engine_runs(corpus, seq_iterations, restarts, tmp)
        ok = [r for r in runs if r["returncode"] == 0]
        same = len(ok) == len(runs) and all(r["same_elbo_as_synchronous"] for r in ok)
        out["corpora"].append({"partition_rows": rows, "partitions": partitions,
                               "ingest_command": " ".join(["bnpmix", *ingest[3:]]),
                               "ingest_s": ingest_s, "runs": runs, "all_ok": len(ok) == len(runs),
                               "same_elbo": same})
    print(f"\nbnpmix fit --algorithm ddcrp: {n_seq} sequences x {n_items} items, --iterations "
          f"{seq_iterations} --restarts {restarts} (otherwise the defaults: no window, "
          "prune 1e-6, tol 1e-7)")
    print(f"{'rows/part':>9} {'executor':<16}{'wall s':>8}{'command s':>11}{'speedup':>9}"
          f"{'(cmd)':>7}{'ELBO':>20}{'Δ vs sync':>11}")
    for c in out["corpora"]:
        for r in c["runs"]:
            if r["returncode"] != 0:
                print(f"{c['partition_rows']:>9} {r['label']:<16}{'FAILED':>8}"
                      f"{r['command_s']:>11.1f}   {r['error'][:90]}")
                continue
            su = "-" if r["speedup_wall"] is None else f"{r['speedup_wall']:.2f}"
            sc = "-" if r["speedup_command"] is None else f"{r['speedup_command']:.2f}"
            d = r["elbo_minus_synchronous"]
            dl = "-" if d is None else f"{d:.1e}"
            print(f"{c['partition_rows']:>9} {r['label']:<16}{r['wall_seconds']:>8.1f}"
                  f"{r['command_s']:>11.1f}{su:>9}{sc:>7}{r['elbo']:>20.10f}{dl:>11}")
        print(f"{'':>9} all four ran and give the same summary elbo (bit for bit): "
              f"{c['same_elbo']}")
    return out


def machine() -> dict:
    load = os.getloadavg()
    return {"python": platform.python_version(), "numpy": np.__version__,
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "loadavg": list(load), "platform": platform.platform(),
            "blas": "scipy-openblas (numpy's)",
            "blas_threads_env": {k: os.environ.get(k) for k in
                                 ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run (small sizes, < 1 min)")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000])
    p.add_argument("--iterations", type=int, nargs="+", default=[5, 2],
                   help="iterations per size of (b) and (c)")
    p.add_argument("--dense-iterations", type=int, nargs="+", default=[5, 0],
                   help="iterations per size of (a), the dense algorithm (0: skip)")
    p.add_argument("--windows", type=int, nargs="+", default=[50, 200])
    p.add_argument("--sequences", type=int, default=200)
    p.add_argument("--items", type=int, default=300, help="items per sequence (engine part)")
    p.add_argument("--layouts", type=int, nargs="+", default=[3000, 300],
                   help="ingest --partition-rows of the corpora (300: one sequence each)")
    p.add_argument("--seq-iterations", type=int, default=10,
                   help="bnpmix fit --iterations for the engine part")
    p.add_argument("--restarts", type=int, default=1,
                   help="bnpmix fit --restarts for the engine part (the engine's default is 10)")
    p.add_argument("--parts", nargs="+", choices=("iterations", "engine"),
                   default=["iterations", "engine"],
                   help="what to run (the JSON keeps the other parts of an earlier run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=RESULTS / "ddcrp_speed.json")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_config(json.loads(args.one))))
        return
    if args.quick:
        args.sizes, args.iterations, args.dense_iterations = [150, 300], [2, 2], [2, 1]
        args.sequences, args.items, args.seq_iterations = 16, 100, 3
        args.layouts = [800]
    wall = time.perf_counter()
    load_start = os.getloadavg()
    print(f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} "
          f"({os.cpu_count()} cpus)", flush=True)
    # a run of some parts keeps the other parts of an existing JSON
    result = json.loads(args.json.read_text()) if args.json.exists() else {}
    if args.quick or set(args.parts) == {"iterations", "engine"}:
        result = {}
    result.setdefault("runs", [])
    result["runs"].append({"command": " ".join(["python", *sys.argv]), "parts": args.parts,
                           "machine": machine(), "load_at_start": list(load_start)})
    tmp = Path(tempfile.mkdtemp(prefix="bnpmix-ddcrp-speed-"))
    try:
        if "iterations" in args.parts:
            rows = per_iteration(args.sizes, args.iterations, args.dense_iterations,
                                 args.windows, args.seed, tmp)
            print_iterations(rows)
            result["pruning"] = pruning_effect(rows, args.sizes[0])
            for r in rows:
                r.pop("q_file", None)
            result["per_iteration"] = rows
            result["iteration_settings"] = {
                "alpha": ALPHA, "decays": DECAYS, "prune": PRUNE, "dim": 2,
                "centres": CENTRES.tolist(), "seed": args.seed, "sizes": args.sizes,
                "iterations": args.iterations, "dense_iterations": args.dense_iterations,
                "windows": args.windows, "quick": args.quick}
        if "engine" in args.parts:
            result["engine"] = engine_part(args.sequences, args.items, args.layouts,
                                           args.seq_iterations, args.restarts, args.seed, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["runs"][-1]["wall_seconds"] = time.perf_counter() - wall
    result["runs"][-1]["load_at_end"] = list(os.getloadavg())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.json}; wall {result['runs'][-1]['wall_seconds']:.0f} s; load average "
          "now " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
