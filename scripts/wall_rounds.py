#!/usr/bin/env python3
"""wall_rounds.py: alternating whole-process rounds of `earlybird flows`.

    scripts/wall_rounds.py -r ROUNDS [-w WORKDIR] IN.pcap X=BIN Y=BIN -- 'OPTIONS' ...

For each OPTIONS (split on spaces), one warm-up run of X (the capture in
the page cache), then ROUNDS rounds, each running both binaries once:
X then Y in odd rounds, Y then X in even ones. Each run is `BIN flows
IN.pcap OPTIONS -q --no-progress` in a fresh directory under WORKDIR
(default: a temporary one); its wall time is taken around the process
(`time.perf_counter` from the start to `os.wait4`), its CPU time is the
user + system time `wait4` reports (every thread). Prints one line per
run, then per OPTIONS and binary the median and best wall time and the
median CPU time, and Y's medians over X's. A run that fails stops the
script with its exit code and standard error.

An A/A run (X and a byte-identical copy of it as Y) beside an A/B run
shows how far two medians of the same binary move on this machine.

`--x-opts` and `--y-opts` add options to X's or Y's runs only, so that
one binary can be set against itself with and without an option:

    scripts/wall_rounds.py -r 10 IN X=BIN Y=BIN --x-opts=--no-labellers -- '-f null -s 1'

`--per N` also prints N over each median wall time (e.g. the input's
flows: new flows a second).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def one(binary, capture, opts, work):
    d = tempfile.mkdtemp(dir=work)
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [binary, "flows", capture, *opts, "-q", "--no-progress"],
            cwd=d,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{binary} flows {capture} {' '.join(opts)}: exit {code}\n{err}")
        return wall, ru.ru_utime + ru.ru_stime
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-r", "--rounds", type=int, default=10)
    ap.add_argument("-w", "--work", default=None)
    ap.add_argument("capture")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--x-opts", default="")
    ap.add_argument("--y-opts", default="")
    ap.add_argument("--per", type=float, default=None)
    a = ap.parse_args()
    (xn, xb), (yn, yb) = (s.split("=", 1) for s in (a.x, a.y))
    xb, yb = os.path.abspath(xb), os.path.abspath(yb)
    work = a.work or tempfile.mkdtemp(prefix="wall_rounds.")
    os.makedirs(work, exist_ok=True)
    capture = os.path.abspath(a.capture)
    configs = [c for c in a.configs if c != "--"]
    summary = []
    for cfg in configs:
        opts = cfg.split()
        extra = {xn: a.x_opts.split(), yn: a.y_opts.split()}
        one(xb, capture, opts + extra[xn], work)  # warm-up
        res = {xn: [], yn: []}
        for r in range(1, a.rounds + 1):
            order = [(xn, xb), (yn, yb)] if r % 2 else [(yn, yb), (xn, xb)]
            for name, b in order:
                wall, cpu = one(b, capture, opts + extra[name], work)
                res[name].append((wall, cpu))
                print(f"{r}\t{name}\t{cfg}\t{wall:.3f}\t{cpu:.3f}", flush=True)
        med = {n: (statistics.median(w for w, _ in v), min(w for w, _ in v), statistics.median(c for _, c in v))
               for n, v in res.items()}
        summary.append((cfg, med))
    print()
    print(f"| configuration | wall median {xn} → {yn} (s) | best {xn} → {yn} (s) | CPU median {xn} → {yn} (s) "
          f"| wall median {yn}/{xn} | CPU median {yn}/{xn} |")
    print("|---|---|---|---|---:|---:|")
    for cfg, m in summary:
        (xw, xbst, xc), (yw, ybst, yc) = m[xn], m[yn]
        print(f"| `{cfg}` | {xw:.3f} → {yw:.3f} | {xbst:.3f} → {ybst:.3f} | {xc:.3f} → {yc:.3f} "
              f"| {yw / xw:.3f} | {yc / xc:.3f} |")
        if a.per:
            print(f"  {cfg}: {a.per / xw:,.0f} ({xn}) and {a.per / yw:,.0f} ({yn}) a second of median wall time")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
