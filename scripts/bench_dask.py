#!/usr/bin/env python3
"""earlybird.dask.flows on a LocalCluster of 1 then 2 workers (one thread
each): captures to a Parquet dataset, best of 2 rounds after a warm-up
task per cluster (workers import the package).

Usage: scripts/bench_dask.py 'GLOB' OUT_DIR
e.g. captures made with `earlybird gen realistic -n 400000 --seed I -o rI.pcap`
for I = 1..8. Needs the package (docs/PYTHON.md) and dask distributed.
"""

import glob
import os
import shutil
import sys
import time

from distributed import Client, LocalCluster

import earlybird.dask as ebd


def main():
    pattern, out = sys.argv[1], sys.argv[2]
    first = sorted(glob.glob(pattern))[0]
    for n in (1, 2):
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as c, Client(c) as cl:
            ebd.flows(first, cl, os.path.join(out, "warm"), model=None)
            best = None
            for _ in range(2):
                shutil.rmtree(os.path.join(out, "run"), ignore_errors=True)
                t = time.perf_counter()
                got = ebd.flows(pattern, cl, os.path.join(out, "run"), model=None)
                dt = time.perf_counter() - t
                best = dt if best is None else min(best, dt)
            pk = sum(r["packets"] for r in got["done"])
            print(f"{n} worker(s): {len(got['done'])} files, {pk} packets, {best:.2f} s, "
                  f"{pk / best / 1e6:.2f} Mpps, errors {len(got['errors'])}")


if __name__ == "__main__":
    main()
