#!/usr/bin/env python3
"""Mpps from capture file to pandas DataFrame: the earlybird Python package
with one and two shards, beside NFStream (NFStreamer(...).to_pandas()) and
the earlybird CLI writing Parquet, on the same files in the same run.

Usage: scripts/bench_python.py CLI FILE... [--rounds R]
CLI is the earlybird binary for the Parquet row (a release build). Each
figure is the best of R rounds (default 3) of wall time; packets are those
the engine read. Needs the package installed (docs/PYTHON.md), pandas, and
nfstream for its row (skipped with a note when missing).
"""

import argparse
import os
import subprocess
import tempfile
import time

import earlybird


def best(rounds, fn):
    t = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        t.append(time.perf_counter() - start)
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    try:
        from nfstream import NFStreamer
    except ImportError:
        NFStreamer = None
    print("| file | packets | earlybird 1 shard | earlybird 2 shards | CLI -o .parquet (1 shard) | NFStream to_pandas | 1 shard / NFStream |")
    print("|---|---|---|---|---|---|---|")
    for f in a.files:
        probe = earlybird.flows(f, model=None)
        probe.to_arrow()
        packets = probe.report["packets_read"]
        mpps = lambda s: packets / s / 1e6  # noqa: E731
        one = best(a.rounds, lambda: earlybird.flows(f, shards=1).to_pandas())
        two = best(a.rounds, lambda: earlybird.flows(f, shards=2).to_pandas())
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "f.parquet")
            cli = best(a.rounds, lambda: subprocess.run(
                [a.cli, "flows", f, "-o", out, "--quiet", "--no-progress"], check=True))
        if NFStreamer is not None:
            nfs = best(a.rounds, lambda: NFStreamer(source=f, n_dissections=0).to_pandas())
            nfs_txt, ratio = f"{mpps(nfs):.3f}", f"{nfs / one:.0f}×"
        else:
            nfs_txt, ratio = "not installed", "—"
        print(f"| {os.path.basename(f)} | {packets} | {mpps(one):.2f} | {mpps(two):.2f} | {mpps(cli):.2f} | {nfs_txt} | {ratio} |")


if __name__ == "__main__":
    main()
