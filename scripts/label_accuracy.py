#!/usr/bin/env python3
"""Precision and coverage of earlybird's labels per category against nDPI's
truth on the shared corpus's dev captures (docs/SERVICES.md, "Accuracy").

For every capture of classify/dev/ndpi/pcap that ndpi_truth.csv lists, runs
`earlybird flows CAPTURE -f jsonl -o -` (with OPTIONS such as --labellers; the
default model, the shipped map; OPTIONS are added to it) and
matches each record to nDPI's flow of the same transport and ends (either
direction). Only flows nDPI labelled by payload (confidence DPI) with a
category count. For each nDPI category: the flows, the share of them with a
payload label (label_source sni, quic, http, dns or ssh) and how many of
those carry nDPI's category (precision), then the same for the default
label (every label_source but none).

usage: scripts/label_accuracy.py EARLYBIRD [CORPUS [OPTIONS...]]   (CORPUS: ../shared/corpus)
"""

import csv
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

PAYLOAD = {"sni", "quic", "http", "dns", "ssh"}


def key(proto, a, ap, b, bp):
    ends = sorted([(a, int(ap)), (b, int(bp))])
    return (proto.upper(), ends[0], ends[1])


def main():
    eb = sys.argv[1]
    root = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parents[1] / "../shared/corpus")
    dev = root / "classify/dev"
    truth = defaultdict(dict)
    for r in csv.DictReader(open(dev / "ndpi_truth.csv")):
        if r["confidence"] == "DPI" and r["category"]:
            k = key(r["proto"], r["src"], r["sport"] or 0, r["dst"], r["dport"] or 0)
            truth[r["pcap"]][k] = r["category"]
    protos = {6: "TCP", 17: "UDP"}
    stats = defaultdict(lambda: [0, 0, 0, 0, 0])  # flows, payload, payload ok, default, default ok
    for pcap in sorted(truth):
        path = dev / "ndpi/pcap" / pcap
        if not path.exists():
            continue
        out = subprocess.run(
            [eb, "flows", str(path), "-f", "jsonl", "-o", "-", "-q"] + sys.argv[3:],
            capture_output=True, text=True,
        )
        seen = {}
        for line in out.stdout.splitlines():
            r = json.loads(line)
            if r["proto"] not in protos:
                continue
            k = key(protos[r["proto"]], r["src"], r["sport"], r["dst"], r["dport"])
            seen.setdefault(k, r)  # the first record of a conversation
        for k, cat in truth[pcap].items():
            r = seen.get(k)
            s = stats[cat]
            s[0] += 1
            if r is None:
                continue
            if r["label_source"] in PAYLOAD:
                s[1] += 1
                s[2] += r["category"] == cat
            if r["label_source"] != "none":
                s[3] += 1
                s[4] += r["category"] == cat
    pct = lambda a, b: f"{100 * a / b:.0f} %" if b else "–"
    print("| category | flows | payload label: coverage | precision | default: coverage | precision |")
    print("|---|---:|---:|---:|---:|---:|")
    total = [0] * 5
    for cat, s in sorted(stats.items(), key=lambda x: -x[1][0]):
        total = [a + b for a, b in zip(total, s)]
        print(f"| {cat} | {s[0]} | {pct(s[1], s[0])} | {pct(s[2], s[1])} | {pct(s[3], s[0])} | {pct(s[4], s[3])} |")
    s = total
    print(f"| **all** | {s[0]} | {pct(s[1], s[0])} | {pct(s[2], s[1])} | {pct(s[3], s[0])} | {pct(s[4], s[3])} |")


if __name__ == "__main__":
    main()
