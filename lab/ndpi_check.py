#!/usr/bin/env python3
"""ndpi_check.py: compare a lab truth CSV with nDPI's verdicts, flow by flow.

Contract
--------
``ndpi_check.py LAB.pcap LAB.truth.csv [--ndpi-reader PATH] [--json OUT]``
runs ``ndpiReader -i LAB.pcap -v 2`` (libndpi-bin), parses its per-flow
lines (``TCP a:p <-> b:q [proto: N/NAME]...[Confidence: KIND]``, unknown
flows included, which its ``-C`` CSV leaves out), matches them to the truth
rows by 5-tuple in either direction and prints, per lab label, how many
flows nDPI saw, how many it named with the lab's ``master_proto`` (the part
of nDPI's name before the first ".", case-insensitive), and what it said
otherwise. Exit status 0 when the comparison ran, whatever the agreement;
2 when ndpiReader fails or gives no flow. The lab's labels are the
reference: the lab knows which server each flow talked to.
"""

import argparse
import collections
import csv
import json
import re
import subprocess
import sys

LINE = re.compile(
    r"^\s*\d+\s+(TCP|UDP)\s+([0-9.]+):(\d+)\s+<->\s+([0-9.]+):(\d+)\s+"
    r"\[proto: [0-9.]+/([^\]]+)\]")
CONFIDENCE = re.compile(r"\[Confidence: ([^\]]+)\]")


def ndpi_flows(pcap, reader):
    r = subprocess.run([reader, "-i", pcap, "-v", "2"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ndpi_check: {reader} failed on {pcap}: {r.stderr.strip()[:500]}")
    flows = {}
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        proto, a, ap, b, bp, name = m.groups()
        c = CONFIDENCE.search(line)
        conf = c.group(1) if c else None
        flows[(proto, a, int(ap), b, int(bp))] = (name, conf or "")
    if not flows:
        sys.exit(f"ndpi_check: {reader} printed no flow for {pcap}")
    return flows


def main():
    p = argparse.ArgumentParser(description="Compare lab labels with ndpiReader.")
    p.add_argument("pcap")
    p.add_argument("truth")
    p.add_argument("--ndpi-reader", default="ndpiReader")
    p.add_argument("--json", help="write the figures as JSON here")
    a = p.parse_args()
    flows = ndpi_flows(a.pcap, a.ndpi_reader)
    per = collections.defaultdict(lambda: {"flows": 0, "ndpi_seen": 0, "agree": 0,
                                           "other": collections.Counter()})
    for r in csv.DictReader(open(a.truth, newline="")):
        k = (r["proto"], r["src"], int(r["sport"]), r["dst"], int(r["dport"]))
        rk = (k[0], k[3], k[4], k[1], k[2])
        d = per[r["app_label"]]
        d["flows"] += 1
        got = flows.get(k) or flows.get(rk)
        if got is None:
            continue
        d["ndpi_seen"] += 1
        name, conf = got
        if name.split(".")[0].lower() == r["master_proto"].lower():
            d["agree"] += 1
        else:
            d["other"][f"{name} ({conf})"] += 1
    tot = {"flows": 0, "ndpi_seen": 0, "agree": 0}
    print(f"{'lab label':<22} {'flows':>6} {'nDPI saw':>9} {'agree':>6}  nDPI said otherwise")
    for lab in sorted(per):
        d = per[lab]
        for k in tot:
            tot[k] += d[k]
        other = ", ".join(f"{n} x{c}" for n, c in d["other"].most_common(3))
        print(f"{lab:<22} {d['flows']:>6} {d['ndpi_seen']:>9} {d['agree']:>6}  {other}")
    share = tot["agree"] / tot["ndpi_seen"] if tot["ndpi_seen"] else 0.0
    print(f"{'all':<22} {tot['flows']:>6} {tot['ndpi_seen']:>9} {tot['agree']:>6}"
          f"  agreement {share:.3f} of the flows nDPI saw")
    if a.json:
        out = {lab: {**{k: v for k, v in d.items() if k != "other"},
                     "other": dict(d["other"])} for lab, d in per.items()}
        out["all"] = {**tot, "agreement": share}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
