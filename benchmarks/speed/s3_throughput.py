"""Partitions read per second from an S3-compatible server against the local file system: the same
corpus (dense, N items × D, partitions of P rows) read partition by partition with ``Corpus.read``
(bytes, size and SHA-256 check, Parquet decode) from a local directory and from a bucket on a moto
server started here on 127.0.0.1 (a Python server, so an upper bound on the store's own cost; a real
S3 endpoint adds network latency), repeated R times in fresh Corpus objects; and the time of
``Corpus(url)`` itself (the manifest). Prints partitions/s and MB/s for both and their ratio.

    python benchmarks/speed/s3_throughput.py [--items 200000] [--dim 16] [--rows 10000] [--repeat 3]
        [--json [PATH]]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from bnpmix.storage import Corpus, ingest_array
from helpers import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import json_option, write_json


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return proc, url
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.2)


def read_all(where: str | Path, repeat: int) -> tuple[float, float, int]:
    """Seconds per full read of every partition (best of ``repeat``), seconds to open the
    corpus (best), bytes per read."""
    reads, opens = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        corpus = Corpus(where)
        t1 = time.perf_counter()
        for i in range(corpus.n_partitions):
            corpus.read(i)
        reads.append(time.perf_counter() - t1)
        opens.append(t1 - t0)
    return min(reads), min(opens), corpus.manifest.n_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--rows", type=int, default=10_000, help="rows a partition")
    ap.add_argument("--repeat", type=int, default=3)
    json_option(ap, "s3_throughput")
    args = ap.parse_args()
    import boto3

    server, endpoint = start_moto()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"})
    try:
        with tempfile.TemporaryDirectory(prefix="bnpmix-s3-bench-") as tmp:
            local = Path(tmp) / "corpus"
            X = np.random.default_rng(0).normal(size=(args.items, args.dim))
            ingest_array(X, local, partition_rows=args.rows)
            client = boto3.client("s3")
            client.create_bucket(Bucket="bench")
            for path in local.iterdir():
                client.upload_file(str(path), "bench", f"corpus/{path.name}")
            n = Corpus(local).n_partitions
            rows = []
            for name, where in (("local file system", local), ("moto S3 server", "s3://bench/corpus")):
                seconds, opened, size = read_all(where, args.repeat)
                rows.append((name, n / seconds, size / seconds / 1e6, opened * 1e3))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{args.items} items x {args.dim} float64 in {n} partitions of {args.rows} rows "
          f"({size / 1e6:.1f} MB); best of {args.repeat} full reads, checksums verified")
    print(f"{'':20} {'partitions/s':>13} {'MB/s':>8} {'open (ms)':>10}")
    for name, pps, mbs, ms in rows:
        print(f"{name:20} {pps:13.1f} {mbs:8.1f} {ms:10.2f}")
    print(f"S3 / local: {rows[1][1] / rows[0][1]:.3f} of the local partitions/s")
    write_json(args.json, {"args": vars(args), "partitions": n, "bytes": size, "reads": [
        dict(zip(("where", "partitions_per_s", "mb_per_s", "open_ms"), r, strict=True))
        for r in rows]})


if __name__ == "__main__":
    main()
