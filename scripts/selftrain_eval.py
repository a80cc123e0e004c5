#!/usr/bin/env python3
"""Self-labels against nDPI's labels on the shared dev corpus.

Splits the dev captures by file (a fixed hash of the file name: the same
split on every run), trains on one side

  * a model on self-labels (`earlybird train --self-labels`: the flows'
    own TLS/QUIC server names, HTTP Hosts, DNS queries, SSH banners,
    named by the service map), and
  * the same algorithm on nDPI's labels of the same captures
    (`earlybird train --labels ndpi_truth.csv ...`),

both at the category level, and scores both with `earlybird evaluate` on
nDPI's labels of the OTHER side's captures: on all their labelled flows,
on those that have a payload label, and on those that have none (the
flows a reservoir of self-labels never sees), with the share of those
flows whose class each model knows (the most it can get right) and its
accuracy on them. Prints a Markdown table.

Usage: scripts/selftrain_eval.py [--corpus DIR] [--earlybird BIN]
       [--algo c45] [--use-ports] [--work DIR]
Needs only the standard library and an earlybird binary.
"""

import argparse
import csv
import hashlib
import os
import re
import subprocess
import sys
import tempfile

PAYLOAD = ["sni", "http_host", "dns_query", "ssh_client", "ssh_server"]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def captures(d):
    out = []
    for root, _, names in os.walk(d):
        for n in sorted(names):
            if not n.startswith(".") and not n.endswith((".csv", ".md", ".txt", ".out", ".json")):
                out.append(os.path.join(root, n))
    return sorted(out)


def held_out(path, fraction):
    h = hashlib.sha256(os.path.basename(path).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < fraction


def canon(proto, a, ap, b, bp):
    return (proto, *min((a, ap), (b, bp)), *max((a, ap), (b, bp)))


def payload_flows(eb, path):
    """5-tuples of the capture's flows that have a payload name."""
    out = run([eb, "flows", path, "-q", "--analyzer", "tls,http,dns,ssh", "-f", "csv", "-o", "-"])
    rows = csv.DictReader(out.splitlines())
    named = set()
    for r in rows:
        if any(r.get(f) for f in PAYLOAD):
            proto = {"6": "TCP", "17": "UDP"}.get(r["proto"], r["proto"]).upper()
            named.add(canon(proto, r["src"], int(r["sport"]), r["dst"], int(r["dport"])))
    return named


def scores(text):
    """(flows, accuracy, precision, coverage, flows of classes the model
    knows, accuracy on those)."""
    m = re.search(r"(\d+) flows, accuracy ([\d.]+) %", text)
    p = re.search(r"precision ([\d.]+) % where it answers, coverage ([\d.]+) %", text)
    if not m or not p:
        sys.exit(f"cannot read the evaluation:\n{text}")
    flows, acc = int(m.group(1)), float(m.group(2))
    # evaluate says this line only when some flows are of classes the
    # model does not know.
    k = re.search(r"accuracy on the other (\d+): ([\d.]+) %", text)
    known, known_acc = (int(k.group(1)), float(k.group(2))) if k else (flows, acc)
    return flows, acc, float(p.group(1)), float(p.group(2)), known, known_acc


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=os.path.join(here, "..", "..", "shared", "corpus"))
    ap.add_argument("--earlybird", default=os.environ.get("EARLYBIRD", "earlybird"))
    ap.add_argument("--algo", default="c45")
    ap.add_argument("--use-ports", action="store_true")
    ap.add_argument("--test-fraction", type=float, default=0.3)
    ap.add_argument("--work", default=None, help="keep the models and CSVs here")
    a = ap.parse_args()
    eb = a.earlybird
    dev = os.path.join(a.corpus, "classify", "dev")
    truth = [os.path.join(dev, "ndpi_truth.csv"), os.path.join(dev, "nfstream_truth.csv")]
    files = captures(os.path.join(dev, "ndpi", "pcap")) + captures(os.path.join(dev, "nfstream", "pcap"))
    test = [f for f in files if held_out(f, a.test_fraction)]
    train = [f for f in files if not held_out(f, a.test_fraction)]
    work = a.work or tempfile.mkdtemp(prefix="selftrain-")
    os.makedirs(work, exist_ok=True)
    common = ["--algo", a.algo, "--level", "category", "--seed", "1"] + (["--use-ports"] if a.use_ports else [])
    models = {}
    models["self-labels"] = os.path.join(work, "self.ebm")
    out = run([eb, "train", "--self-labels", *common, *train, "-o", models["self-labels"]])
    print(f"self-labels: {out.strip().splitlines()[0]}", file=sys.stderr)
    models["nDPI labels"] = os.path.join(work, "ndpi.ebm")
    labels = [x for t in truth for x in ("--labels", t)]
    out = run([eb, "train", *labels, *common, *train, "-o", models["nDPI labels"]])
    print(f"nDPI labels: {out.strip().splitlines()[0]}", file=sys.stderr)

    # nDPI's labels of the held-out captures, split by whether the flow
    # has a payload name.
    named = {}
    for f in test:
        named[os.path.basename(f)] = payload_flows(eb, f)
    names = ["all", "with a payload label", "without a payload label"]
    files_of = {n: [] for n in names}
    for ti, t in enumerate(truth):
        with open(t, newline="") as fh:
            r = csv.reader(fh)
            header = next(r)
            col = {n: i for i, n in enumerate(header)}
            subsets = {n: [] for n in names}
            for row in r:
                pcap = row[col["pcap"]]
                if pcap not in named:
                    continue
                key = canon(row[col["proto"]].upper(), row[col["src"]], int(row[col["sport"]]),
                            row[col["dst"]], int(row[col["dport"]]))
                subsets["all"].append(row)
                side = names[1] if key in named[pcap] else names[2]
                subsets[side].append(row)
        for n in names:
            path = os.path.join(work, f"truth{ti}-{n.replace(' ', '_')}.csv")
            with open(path, "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(header)
                w.writerows(subsets[n])
            files_of[n] += ["--labels", path]
    rows = []
    for name in names:
        for m, mp in models.items():
            text = run([eb, "evaluate", "--model", mp, *files_of[name], *test])
            rows.append((name, m, *scores(text)))
    ports = "sizes, directions, gaps and ports" if a.use_ports else "sizes, directions and gaps"
    print(f"{a.algo}, category level, {ports}; trained on {len(train)} dev captures, "
          f"scored on nDPI's labels of the other {len(test)}")
    print()
    print("| held-out flows | trained on | flows | accuracy % | precision where it answers % | coverage % "
          "| flows of classes the model knows | accuracy on them % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, m, flows, acc, prec, cov, known, known_acc in rows:
        print(f"| {name} | {m} | {flows} | {acc:.2f} | {prec:.2f} | {cov:.2f} "
              f"| {known} ({100.0 * known / flows:.2f} %) | {known_acc:.2f} |")


if __name__ == "__main__":
    main()
