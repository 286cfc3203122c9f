"""Throughput and peak memory of ``bnpmix ingest`` on sources far larger than one partition.

What is measured
    Two synthetic sources are ingested with ``python -m bnpmix ingest SRC OUT --partition-rows N``,
    each in its own child process:

    * a dense ``.npy`` of ``--rows`` x 25 float64 values (seeded standard normal, 200 MB at the
      default 1,000,000 rows), and
    * a UCI ``docword`` file of ``--docs`` documents over a ``--vocab``-word vocabulary, each
      document holding 50-200 distinct words with small positive counts (about 12.5 million
      triples, about 160 MB of text at the default 100,000 documents).

    For each we report wall time, items per second (and non-zeros per second for docword), CPU
    time and the child's peak resident set size (RSS). The wall time includes interpreter start-up
    and imports; the bare ``python -c "import bnpmix.pipeline.cli"`` child is measured too, so its
    start-up time and RSS can be read off.

Why
    The storage layer promises that ingestion streams its source one partition at a time, so its
    memory is bounded by a few partitions rather than by the size of the source. The check is:
    peak RSS < (size of the 3 largest partitions) + 300 MB, where 300 MB covers the interpreter,
    numpy, pandas, pyarrow and scipy (the baseline child shows how much of it they take). A
    partition's size is the larger of its bytes on disk (from the manifest) and its decoded size
    in memory as ``Corpus.read`` returns it: rows x dim x itemsize for dense data, and
    nnz x (8 + 4) + (rows + 1) x 4 bytes for a CSR matrix (float64 values, int32 indices and
    indptr) for bag-of-words. Snappy-compressed random floats are about as large as the raw
    values, but the decoded size is the honest measure of what a partition costs in memory.

How the peak RSS is taken
    Each child is started with ``subprocess.Popen`` and reaped with ``os.wait4``, whose resource
    usage is that child's alone (``RUSAGE_CHILDREN`` would be the maximum over all children).
    Caveat: on Linux a process's ``ru_maxrss`` starts from the high-water RSS of the process it was
    forked from (``exec`` keeps the old address space's peak), so a child of a large parent
    reports at least the parent's peak. This script therefore keeps its own process small: it
    imports only the standard library, generates the data in a worker process, and reads manifests
    with ``json``. Its own peak is printed as the floor below which no child measurement can go.

MB means 10**6 bytes throughout. Exit status: 0 if every limit holds, 1 if a limit is exceeded,
2 if an ingestion fails or produces a corpus that does not match its source.

    python benchmarks/speed/ingest.py [--rows 1000000] [--docs 100000] [--vocab 10000]
        [--partition-rows 10000] [--seed 0] [--workdir DIR] [--keep] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import json_option, write_json

MB = 1_000_000
DIM = 25
MIN_DOC_WORDS, MAX_DOC_WORDS = 50, 200
OVERHEAD_MB = 300
N_PARTITIONS_ALLOWED = 3
ITEMSIZE = {"float32": 4, "float64": 8}
# ru_maxrss is in KiB on Linux and in bytes on macOS.
MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024


# --------------------------------------------------------------------------------------------
# Data generation: runs in a worker process, so numpy never enters this (measuring) process.
# --------------------------------------------------------------------------------------------


def make_dense(path: str, rows: int, dim: int, seed: int, chunk_rows: int = 50_000) -> int:
    """Write a (rows, dim) float64 standard-normal ``.npy`` chunk by chunk; return its bytes.

    The file is re-mapped for every chunk, so at most one chunk's pages are ever resident.
    """
    import numpy as np
    from numpy.lib.format import open_memmap

    rng = np.random.default_rng(seed)
    header = open_memmap(path, mode="w+", dtype=np.float64, shape=(rows, dim))  # sized file
    del header
    for start in range(0, rows, chunk_rows):
        stop = min(start + chunk_rows, rows)
        out = open_memmap(path, mode="r+")
        out[start:stop] = rng.standard_normal((stop - start, dim))
        out.flush()
        del out
    return os.path.getsize(path)


def make_docword(
    path: str, docs: int, vocab: int, seed: int, chunk_docs: int = 5_000
) -> tuple[int, int]:
    """Write a UCI docword file (header D, W, NNZ; 1-based ``doc word count`` triples sorted by
    document, then word) chunk by chunk; return (NNZ, bytes).

    Each document has 50-200 distinct words drawn uniformly from the vocabulary; counts are
    geometric(0.5), i.e. 1, 2, 3, ... with probabilities 1/2, 1/4, 1/8, ...
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.integers(MIN_DOC_WORDS, MAX_DOC_WORDS + 1, size=docs)
    nnz = int(lengths.sum())
    with open(path, "w", encoding="ascii") as fh:
        fh.write(f"{docs}\n{vocab}\n{nnz}\n")
        for start in range(0, docs, chunk_docs):
            lens = lengths[start : start + chunk_docs]
            doc_ids = np.repeat(np.arange(start + 1, start + 1 + len(lens)), lens)
            words = np.concatenate(
                [np.sort(rng.choice(vocab, size=n, replace=False)) for n in lens]
            )
            counts = rng.geometric(0.5, size=len(doc_ids))
            np.savetxt(fh, np.column_stack([doc_ids, words + 1, counts]), fmt="%d")
    return nnz, os.path.getsize(path)


# --------------------------------------------------------------------------------------------
# Measuring children
# --------------------------------------------------------------------------------------------


def own_peak_rss() -> int:
    """This process's peak RSS in bytes: the floor of every child's ``ru_maxrss`` (see above)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * MAXRSS_UNIT


@dataclass
class ChildRun:
    argv: list[str]
    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss: int  # bytes
    stdout: str
    stderr: str


def run_child(argv: list[str], log_dir: Path, name: str) -> ChildRun:
    """Run ``argv`` to completion; its output goes to files (no pipe can fill up and block)."""
    out_path, err_path = log_dir / f"{name}.stdout", log_dir / f"{name}.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # e.g. Ctrl-C: do not leave the child writing into the work dir
            proc.kill()
            proc.wait()
            raise
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait
    return ChildRun(
        argv=argv,
        returncode=proc.returncode,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss=usage.ru_maxrss * MAXRSS_UNIT,
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
    )


# --------------------------------------------------------------------------------------------
# Partition sizes from the manifest
# --------------------------------------------------------------------------------------------


def decoded_bytes(manifest: dict, part: dict) -> int:
    """Bytes of one partition as ``Corpus.read`` returns it (dense array or CSR matrix)."""
    if manifest["kind"] == "dense":
        return part["rows"] * manifest["dim"] * ITEMSIZE[manifest["dtype"]]
    return part["nnz"] * (8 + 4) + (part["rows"] + 1) * 4


@dataclass
class PartitionSizes:
    count: int
    largest_disk: int
    largest_decoded: int
    top: int  # sum of the N_PARTITIONS_ALLOWED largest max(disk, decoded)


def partition_sizes(manifest: dict) -> PartitionSizes:
    parts = manifest["partitions"]
    sizes = sorted((max(p["bytes"], decoded_bytes(manifest, p)) for p in parts), reverse=True)
    return PartitionSizes(
        count=len(parts),
        largest_disk=max(p["bytes"] for p in parts),
        largest_decoded=max(decoded_bytes(manifest, p) for p in parts),
        top=sum(sizes[:N_PARTITIONS_ALLOWED]),
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def mb(n_bytes: float) -> str:
    return f"{n_bytes / MB:.1f} MB"


def ingest_and_report(
    title: str,
    src: Path,
    out: Path,
    partition_rows: int,
    n_items: int,
    item_name: str,
    nnz: int | None,
    baseline: ChildRun,
    log_dir: Path,
    figures: dict,
) -> bool | None:
    """Ingest ``src`` in a child and print its numbers (kept in ``figures``); True/False = limit
    held, None = failure."""
    argv = [sys.executable, "-m", "bnpmix", "ingest", str(src), str(out),
            "--partition-rows", str(partition_rows)]
    print(f"\n{title}")
    print(f"  command        {' '.join(argv)}")
    run = run_child(argv, log_dir, out.name)
    if run.returncode != 0:
        print(f"  FAILED         exit status {run.returncode}\n{run.stderr.rstrip()}")
        return None
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    problems = []
    if manifest["n_items"] != n_items:
        problems.append(f"corpus has {manifest['n_items']} {item_name}, source has {n_items}")
    if nnz is not None and manifest["nnz"] != nnz:
        problems.append(f"corpus has {manifest['nnz']} non-zeros, source has {nnz}")
    if problems:
        print("  FAILED         " + "; ".join(problems))
        return None

    sizes = partition_sizes(manifest)
    limit = sizes.top + OVERHEAD_MB * MB
    passed = run.peak_rss < limit
    startup = baseline.wall_s
    print(f"  child said     {run.stdout.strip()}")
    print(f"  wall time      {run.wall_s:.2f} s (about {startup:.2f} s of it start-up and imports)"
          f"; CPU {run.cpu_s:.2f} s")
    print(f"  throughput     {n_items / run.wall_s:,.0f} {item_name}/s"
          + (f", {nnz / run.wall_s:,.0f} non-zeros/s" if nnz is not None else ""))
    print(f"  peak RSS       {mb(run.peak_rss)} "
          f"({mb(run.peak_rss - baseline.peak_rss)} above the import baseline)")
    print(f"  partitions     {sizes.count}; largest {mb(sizes.largest_disk)} on disk, "
          f"{mb(sizes.largest_decoded)} decoded")
    print(f"  3 partitions   {mb(sizes.top)} (3 largest of max(on disk, decoded))")
    print(f"  limit          {mb(limit)} (3 partitions + {OVERHEAD_MB} MB)")
    print(f"  result         {'PASS' if passed else 'FAIL'}: peak RSS {mb(run.peak_rss)} "
          f"{'<' if passed else '>='} {mb(limit)}")
    figures.update({"wall_s": run.wall_s, "cpu_s": run.cpu_s, "startup_s": startup,
                    "items_per_s": n_items / run.wall_s, "peak_rss": run.peak_rss,
                    "baseline_rss": baseline.peak_rss, "partitions": sizes.count,
                    "limit": limit, "pass": passed})
    return passed


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=positive_int, default=1_000_000,
                        help="dense rows (default 1,000,000)")
    parser.add_argument("--docs", type=positive_int, default=100_000,
                        help="docword documents (default 100,000)")
    parser.add_argument("--vocab", type=positive_int, default=10_000,
                        help=f"docword vocabulary size, at least {MAX_DOC_WORDS} (default 10,000)")
    parser.add_argument("--partition-rows", type=positive_int, default=10_000,
                        help="items per partition (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="make the temporary directory here (default: system tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    json_option(parser, "ingest")
    args = parser.parse_args(argv)
    if args.vocab < MAX_DOC_WORDS:
        parser.error(f"--vocab must be at least {MAX_DOC_WORDS} (the longest document)")
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bnpmix-ingest-bench-", dir=args.workdir))
    try:
        return run_benchmark(args, work)
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run_benchmark(args: argparse.Namespace, work: Path) -> int:
    npy = work / "dense.npy"
    docword = work / "docword.synthetic.txt"
    print(f"bnpmix ingest benchmark: python {sys.version.split()[0]} on {sys.platform}, "
          f"{os.cpu_count()} CPUs")
    print(f"work directory {work}")

    start = time.perf_counter()
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        dense_job = pool.submit(make_dense, str(npy), args.rows, DIM, args.seed)
        docword_job = pool.submit(make_docword, str(docword), args.docs, args.vocab, args.seed)
        npy_bytes = dense_job.result()
        nnz, docword_bytes = docword_job.result()
    print(f"generated      {npy.name}: {args.rows:,} x {DIM} float64, {mb(npy_bytes)}; "
          f"{docword.name}: {args.docs:,} documents, W={args.vocab:,}, {nnz:,} triples, "
          f"{mb(docword_bytes)} ({time.perf_counter() - start:.1f} s)")

    baseline = run_child([sys.executable, "-c", "import bnpmix.pipeline.cli"], work, "baseline")
    if baseline.returncode != 0:
        print(f"baseline child failed:\n{baseline.stderr}")
        return 2
    print(f"baseline       python -c \"import bnpmix.pipeline.cli\": peak RSS "
          f"{mb(baseline.peak_rss)}, wall {baseline.wall_s:.2f} s")

    figures: dict[str, dict] = {"dense": {}, "docword": {}}
    results = [
        ingest_and_report(
            f"dense .npy: {args.rows:,} rows x {DIM} float64", npy, work / "dense-corpus",
            args.partition_rows, args.rows, "rows", None, baseline, work, figures["dense"],
        ),
        ingest_and_report(
            f"UCI docword: {args.docs:,} documents, {nnz:,} non-zeros", docword,
            work / "docword-corpus", args.partition_rows, args.docs, "documents", nnz, baseline,
            work, figures["docword"],
        ),
    ]
    write_json(args.json, {"args": {k: v for k, v in vars(args).items() if k != "json"},
                           **figures})

    floor = own_peak_rss()
    print(f"\nthis process's peak RSS {mb(floor)}: no child's peak RSS can read lower "
          "(Linux ru_maxrss carries the parent's peak across fork+exec)")
    if baseline.peak_rss <= floor:
        print("warning: the baseline is at the floor, so the RSS figures overstate the children")
    if None in results:
        return 2
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
