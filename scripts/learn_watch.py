#!/usr/bin/env python3
"""learn_watch.py: runs one `earlybird flows` command and watches its
threads in wall time, to see whether the training thread of `--learn`
stalls the shards (issue 39). Used by scripts/learn_rate.sh.

Usage: learn_watch.py [--interval S] [--metrics PORT] -- COMMAND...

COMMAND is run as is (it may start with `chrt -f 40` or `taskset`, which
exec earlybird, so the process started is earlybird's). Every --interval
seconds of wall time (default 0.005) the watcher reads, for every thread
of the process, its name and /proc/PID/task/TID/schedstat: the
nanoseconds it ran on a CPU and the nanoseconds it waited runnable for
one. With --metrics PORT (the command must listen there with
--metrics-listen 127.0.0.1:PORT) it also reads earlybird_packets_total
from /metrics at each sample: the packets of the seconds the exporter
thread has merged, so the run's packets in wall time.

Only the intervals while shard threads run are counted. An interval is a
training interval when the training thread (`eb-learn`)
ran for at least half of it. Prints one JSON object: the summary's rate
(`packets: N read ... in T s`), the shards' rate (the packets over the
wall time from the first sample that saw a shard thread to the last),
and for the training intervals and the
others: wall seconds, per thread name (the shards are `eb-shardN`, the
exporter `eb-export`, the process's first thread `earlybird`) the share
of the wall time it ran and the share it waited runnable, the states
(R, S, D) the shards and the exporter were seen in at the samples, the run's packets a second from
/metrics, and the longest stretch of consecutive intervals in which
/metrics showed no new packet. Wall-time figures: they say what the
scheduler did on this machine, compare them only within one invocation.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import time


def threads(pid):
    """{tid: (name, ran_ns, waited_ns, state)} of the process's threads
    now (state: R running or runnable, S sleeping, D in the kernel,
    waiting for a page or a disk...)."""
    out = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{base}/{tid}/schedstat") as f:
                ran, waited, _ = f.read().split()
            with open(f"{base}/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            continue
        out[int(tid)] = (name, int(ran), int(waited), state)
    return out


class Scraper:
    """Reads earlybird_packets_total over one kept-alive connection."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def packets(self):
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            self.conn.request("GET", "/metrics")
            body = self.conn.getresponse().read().decode()
        except (OSError, http.client.HTTPException):
            self.conn = None
            return None
        m = re.search(r"^earlybird_packets_total (\d+)", body, re.M)
        return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--metrics", type=int)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    scraper = Scraper(a.metrics) if a.metrics else None
    samples = []  # (t, {tid: (name, ran, waited)}, packets or None)
    while proc.poll() is None:
        t = time.monotonic()
        th = threads(proc.pid)
        pk = scraper.packets() if scraper else None
        if th:
            samples.append((t, th, pk))
        time.sleep(a.interval)
    err = proc.stderr.read()
    if proc.returncode != 0:
        sys.stderr.write(err)
        sys.exit(f"learn_watch: the command ended with {proc.returncode}")
    m = re.search(r"^packets: (\d+) read .* in ([0-9.]+) s ", err, re.M)
    if not m:
        sys.stderr.write(err)
        sys.exit("learn_watch: no `packets:` line in the summary")
    result = {
        "packets": int(m.group(1)),
        "seconds": float(m.group(2)),
        "mpps": int(m.group(1)) / float(m.group(2)) / 1e6 if float(m.group(2)) > 0 else None,
    }
    kept = re.search(r"^earlybird: learning: .*", err, re.M)
    if kept:
        result["learning"] = kept.group(0)
    parts = {
        p: {"wall": 0.0, "ran": {}, "waited": {}, "state": {}, "packets": 0, "metered": 0.0, "gap": 0.0}
        for p in ("training", "other")
    }
    run = {"training": 0.0, "other": 0.0}

    def shards(th):
        return any(n.startswith("eb-shard") for n, *_ in th.values())

    alive = [t for t, th, _ in samples if shards(th)]
    if len(alive) >= 2:
        # The shards' own time: from the first sample that saw a shard
        # thread to the last (the run's summary time also holds start-up
        # and, with --learn, the last model trained after the input).
        result["shards_s"] = round(alive[-1] - alive[0], 4)
        result["shards_mpps"] = round(result["packets"] / (alive[-1] - alive[0]) / 1e6, 4)
    for (t0, a0, p0), (t1, a1, p1) in zip(samples, samples[1:]):
        dt = t1 - t0
        if dt <= 0 or not (shards(a0) and shards(a1)):
            continue
        d = {}
        for tid, (name, ran, waited, _) in a1.items():
            if tid in a0:
                d[tid] = (name, (ran - a0[tid][1]) / 1e9, (waited - a0[tid][2]) / 1e9)
        learn = sum(r for n, r, _ in d.values() if n == "eb-learn")
        part = "training" if learn >= dt / 2 else "other"
        s = parts[part]
        s["wall"] += dt
        for name, ran, waited in d.values():
            s["ran"][name] = s["ran"].get(name, 0.0) + ran
            s["waited"][name] = s["waited"].get(name, 0.0) + waited
        for name, _, _, state in a1.values():
            if name.startswith("eb-shard") or name == "eb-export":
                c = s["state"].setdefault(name, {})
                c[state] = c.get(state, 0) + 1
        if p0 is not None and p1 is not None:
            s["packets"] += p1 - p0
            s["metered"] += dt
            # Stretches without new packets on /metrics, within the part
            # (a stretch ends where the part changes).
            other = "other" if part == "training" else "training"
            run[other] = 0.0
            run[part] = run[part] + dt if p1 == p0 else 0.0
            s["gap"] = max(s["gap"], run[part])
    for p, s in parts.items():
        w = s["wall"]
        result[p] = {
            "wall_s": round(w, 4),
            "ran": {k: round(v / w, 4) for k, v in sorted(s["ran"].items()) if v > 0} if w else {},
            "waited": {k: round(v / w, 4) for k, v in sorted(s["waited"].items()) if v > 0} if w else {},
            "states": s["state"],
        }
        if s["metered"] > 0:
            result[p]["mpps_metrics"] = round(s["packets"] / s["metered"] / 1e6, 4)
            result[p]["longest_no_progress_s"] = round(s["gap"], 4)
    result["samples"] = len(samples)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
