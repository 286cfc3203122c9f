"""memo on real text against ADF and EP: docstrings of the installed scientific Python packages
as short documents.

The corpus: the docstrings (functions, classes, modules) found by parsing — never importing —
the ``.py`` files of numpy, scipy, pandas, dask, distributed, pyarrow and scikit-learn (when
installed) in this interpreter's site-packages; lower-cased words of 3+ letters, English stop
words dropped, documents of at least 20 such words; a seeded sample of 1,500 documents, 1,200
to fit and 300 held out (the sample and split are fixed by --seed; which packages are installed
and their versions decide the text, printed with V). The vocabulary: words in at least 5 of the
training documents. Both sets are ingested as bag-of-words corpora in 6 partitions.

Fits, each with its defaults and nothing else but the seed: memo (the plain `bnpmix fit`), adf,
ep. Printed per fit: K, laps, wall seconds (the median of --repeats fits: ADF's fit takes a
fraction of a second and its timings swing on a shared machine, 0.22 to 0.51 s over three
repeats; the repeats must agree on every other figure), held-out log-likelihood per document
(`bnpmix evaluate`), and for memo the K at each lap end. The target: memo converged in <= 15
laps and <= 3x ADF's time, at held-out >= ADF's.

    python benchmarks/text_docstrings.py [--seed 0] [--docs 1500] [--repeats 3] [--json [PATH]]

--json writes the figures to PATH (alone: benchmarks/results/text_docstrings.json).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from _common import RESULTS, WORK
from bnpmix.pipeline.evaluate import evaluate
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_docword

PACKAGES = ("numpy", "scipy", "pandas", "dask", "distributed", "pyarrow", "sklearn")
STOP = set("""the and for are with that this from its not but all any can has have was were
will one two use used uses using also than then them they their there these those which what
when where who whom how into onto over under such only same other each more most some many
may must should would could shall been being does did doing done per via see returns return
default defaults none true false object objects value values given given type types instance
parameters parameter optional array arrays list int float str bool self cls""".split())  # noqa: SIM905 (a word list reads better as text)
WORD = re.compile(r"[a-z]{3,}")


def docstrings(root: Path) -> list[str]:
    """Docstrings of every module, class and function in the .py files under ``root``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    out.append(doc)
    return out


def documents(seed: int, n_docs: int) -> tuple[list[list[str]], list[str]]:
    site = Path(sysconfig.get_paths()["purelib"])
    found = [p for p in PACKAGES if (site / p).is_dir()]
    texts = [t for p in found for t in docstrings(site / p)]
    tokens = [[w for w in WORD.findall(t.lower()) if w not in STOP] for t in texts]
    tokens = [t for t in tokens if len(t) >= 20]
    pick = np.random.default_rng(seed).choice(len(tokens), size=min(n_docs, len(tokens)),
                                              replace=False)
    return [tokens[i] for i in pick], found


def write_docword(path: Path, docs: list[list[str]], vocab: dict[str, int]) -> None:
    """UCI docword format: D, V, NNZ, then "doc word count" lines (1-based ids)."""
    lines = []
    for d, doc in enumerate(docs, start=1):
        for w, c in sorted(Counter(vocab[w] for w in doc if w in vocab).items()):
            lines.append(f"{d} {w + 1} {c}")
    path.write_text(f"{len(docs)}\n{len(vocab)}\n{len(lines)}\n" + "\n".join(lines) + "\n",
                    encoding="utf-8")


def corpora(seed: int, n_docs: int) -> tuple[Path, Path, int, list[str]]:
    docs, found = documents(seed, n_docs)
    n_train = round(0.8 * len(docs))
    train, test = docs[:n_train], docs[n_train:]
    df = Counter(w for doc in train for w in set(doc))
    words = sorted(w for w, c in df.items() if c >= 5)
    vocab = {w: i for i, w in enumerate(words)}
    test = [d for d in test if any(w in vocab for w in d)]
    train = [d for d in train if any(w in vocab for w in d)]
    (WORK / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    out = []
    for name, part in (("train", train), ("test", test)):
        write_docword(WORK / f"docword.{name}.txt", part, vocab)
        ingest_docword(WORK / f"docword.{name}.txt", WORK / name, vocab=WORK / "vocab.txt",
                       partition_rows=-(-len(part) // 6))
        out.append(WORK / name)
    print(f"{len(train)} training and {len(test)} held-out docstrings of {', '.join(found)}; "
          f"V = {len(vocab):,}", flush=True)
    return out[0], out[1], len(vocab), found


def run(algorithm: str, train: Path, test: Path, seed: int, repeats: int) -> dict:
    out = WORK / f"run-{algorithm}"
    times, summaries = [], []
    for r in range(repeats):
        t = time.perf_counter()
        summaries.append(fit(train, out / str(r), job_config(algorithm=algorithm, seed=seed)))
        times.append(time.perf_counter() - t)
    summary, seconds, out = summaries[0], float(np.median(times)), out / "0"
    if any((s["K"], s["laps"], s["weights"]) != (summary["K"], summary["laps"], summary["weights"])
           for s in summaries):
        raise SystemExit(f"{algorithm}: the repeated fits differ (same corpus, options, seed)")
    heldout = float(evaluate(out, test)["heldout_loglik_per_item"])
    row = {"algorithm": algorithm, "K": summary["K"], "laps": summary["laps"],
           "seconds": seconds, "seconds_each": times, "heldout": heldout,
           "stopped": summary.get("stopped", "")}
    if algorithm == "memo":
        trace = pd.read_csv(out / "trace.csv")
        row["K_per_lap"] = trace[trace["batch"] == -1]["K"].astype(int).tolist()
    print(f"  {algorithm:5s} K={row['K']:4d}  laps {row['laps']:3d}  {seconds:7.1f} s  "
          f"held-out {heldout:9.3f} per doc  {row['stopped']}", flush=True)
    if algorithm == "memo":
        print(f"        K at lap ends: {row['K_per_lap']}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=1500)
    ap.add_argument("--algorithms", default="adf,ep,memo")
    ap.add_argument("--repeats", type=int, default=3, help="fits per algorithm (median time)")
    ap.add_argument("--json", nargs="?", type=Path, const=RESULTS / "text_docstrings.json",
                    help="also write the figures to this file (alone: results/"
                    "text_docstrings.json)")
    args = ap.parse_args()
    train, test, V, found = corpora(args.seed, args.docs)
    rows = {a: run(a, train, test, args.seed, args.repeats) for a in args.algorithms.split(",")}
    if {"memo", "adf"} <= set(rows):
        m, a = rows["memo"], rows["adf"]
        ok = (m["laps"] <= 15 and m["stopped"].startswith("converged")
              and m["seconds"] <= 3 * a["seconds"] and m["heldout"] >= a["heldout"])
        print(f"memo: {m['laps']} laps, {m['seconds'] / a['seconds']:.1f}x ADF's time, held-out "
              f"{m['heldout'] - a['heldout']:+.3f} against ADF's: {'PASS' if ok else 'FAIL'}")
    if args.json:
        args.json.write_text(json.dumps({"V": V, "packages": found, "seed": args.seed,
                                         "repeats": args.repeats, "fits": rows}, indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
