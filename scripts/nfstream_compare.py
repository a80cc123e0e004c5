#!/usr/bin/env python3
"""The same captures side by side: earlybird, NFStream + scikit-learn, nDPI.

Takes the split by capture file from an earlybird features directory (written
by `earlybird evaluate --algos ... --features-out DIR`: DIR/train.csv and
DIR/test.csv, column `capture` = capture file base name), runs NFStream over
every capture of that split, labels NFStream's bidirectional flows from the
ground-truth CSV(s) by file name + IP protocol + both endpoints in either
direction (earlybird's rule; an earlier label file wins a duplicate 5-tuple,
rows labelled Unknown or empty are skipped), keeps at most
--max-per-capture flows per (capture, class) chosen with --seed (the same
rule as earlybird, not the same random draw), and prints for k = 1..N the
held-out accuracy of

* scikit-learn's DecisionTreeClassifier(criterion="entropy",
  min_samples_leaf=2) and RandomForestClassifier(20 trees) trained on
  NFStream's SPLT features of the training captures;
* the same two learners on earlybird's own feature rows (DIR/*.csv, as
  scripts/sklearn_compare.py does, whose loader this script imports);
* nDPI as NFStream runs it (application_name, n_dissections=20), against
  the same truth on the held-out NFStream flows. It reads payload and the
  truth came from a newer nDPI, so its figure is agreement, not accuracy;
  it does not depend on k.

Feature mapping (NFStream -> earlybird's layout, so both tables use the same
columns size_i, gap_us_i [, proto, server_port]):

* size_i = splt_ps[i] if splt_direction[i] == 0 (src -> dst, NFStream's
  src is the sender of the flow's first packet) else -splt_ps[i];
  NFStream pads missing packets with -1 in all three lists; a missing
  packet becomes size 0, as earlybird writes it.
* gap_us_i = 1000 * splt_piat_ms[i] (NFStream's resolution is whole
  milliseconds; earlybird's is microseconds); missing -> -1, as earlybird.
* sizes are IP-layer sizes (accounting_mode=1), as earlybird's.
* with --use-ports: proto = NFStream's protocol, server_port = dst_port.

It also reports how many flows each side kept per held-out (capture,
class) (--differences lists the pairs that differ), and, for NFStream,
which held-out truth rows it found as one flow, as several (a 5-tuple split
by a timeout) or not at all, and NFStream's wall clock time and flows per
second (one NFStreamer per capture, started and stopped, included). The
flow definitions differ by default: NFStream's idle timeout is 120 s,
earlybird's 15 s (earlybird also ends a TCP flow 2 s after FIN/RST and keeps
GTP tunnel ids in the flow key, NFStream does not), so
earlybird cuts periodic UDP exchanges (SIP, LAN discovery) into more
flows; --idle-timeout 15 gives NFStream earlybird's idle timeout.

Install (in a virtual environment, not the system Python):
    python3 -m venv /tmp/nfs-venv
    /tmp/nfs-venv/bin/pip install nfstream==6.6.0 scikit-learn==1.9.1
Give it the captures given to earlybird (the report counts the split's
captures not given, whose flows then count as earlybird's only).
Run:
    earlybird evaluate --algos c45,forest --packets 8 --split 0.3 \\
        --max-per-capture 20 --seed 1 --level proto --labels T1 --labels T2 \\
        CAPTURES... --features-out feat/
    /tmp/nfs-venv/bin/python scripts/nfstream_compare.py feat/ \\
        --labels T1 --labels T2 --packets 8 --max-per-capture 20 --seed 1 \\
        --level proto CAPTURES... [--idle-timeout 15] [--use-ports] \\
        [--differences] [--json]
"""

import argparse
import csv
import ipaddress
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklearn_compare  # noqa: E402  (the loader and matrix of earlybird's rows)

LEVEL_COLUMN = {"proto": "master_proto", "app": "app_label", "category": "category"}
PROTO_NUMBER = {
    "TCP": 6, "UDP": 17, "ICMP": 1, "ICMPV6": 58, "IGMP": 2, "SCTP": 132,
    "ESP": 50, "OSPF": 89, "PGM": 113, "GRE": 47,
}


def proto_number(s):
    s = s.strip().upper()
    if s in PROTO_NUMBER:
        return PROTO_NUMBER[s]
    return int(s)


def canon(proto, a, ap, b, bp):
    """Endpoint pair in canonical order, IPv4 as IPv4-mapped IPv6 (earlybird)."""
    def addr(x):
        ip = ipaddress.ip_address(x.strip())
        if ip.version == 4:
            ip = ipaddress.IPv6Address("::ffff:" + str(ip))
        return ip.packed
    ea, eb = (addr(a), int(ap)), (addr(b), int(bp))
    return (proto, *ea, *eb) if ea <= eb else (proto, *eb, *ea)


def load_truth(paths, level):
    """capture name -> {5-tuple key -> label}; the first file wins a duplicate."""
    col = LEVEL_COLUMN[level]
    truth = defaultdict(dict)
    stats = Counter()
    for path in paths:
        try:
            f = open(path, newline="")
        except OSError as e:
            sys.exit(f"{path}: {e.strerror}")
        with f:
            reader = csv.DictReader(f)
            need = ["pcap", "proto", "src", "sport", "dst", "dport", col]
            missing = [c for c in need if c not in (reader.fieldnames or [])]
            if missing:
                sys.exit(f"{path}: no column {missing[0]}")
            for row in reader:
                label = (row[col] or "").strip()
                if not label or label == "Unknown":
                    stats["unknown"] += 1
                    continue
                try:
                    key = canon(proto_number(row["proto"]), row["src"], row["sport"],
                                row["dst"], row["dport"])
                except ValueError:
                    stats["unparsed"] += 1
                    continue
                per = truth[os.path.basename(row["pcap"].strip())]
                if key in per:
                    stats["duplicate"] += 1
                else:
                    per[key] = label
                    stats["kept"] += 1
    return truth, stats


def capture_files(inputs):
    out = []
    for p in inputs:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out += [os.path.join(root, f) for f in sorted(files)]
        elif os.path.exists(p):
            out.append(p)
        else:
            sys.exit(f"{p}: no such file or directory")
    return out


def nfs_features(flow, n):
    """NFStream SPLT lists -> earlybird's size_i, gap_us_i (see the docstring)."""
    v = []
    for i in range(n):
        ps, d, piat = flow.splt_ps[i], flow.splt_direction[i], flow.splt_piat_ms[i]
        if ps < 0 or d < 0:
            v += [0.0, -1.0]
        else:
            v += [float(ps if d == 0 else -ps), float(piat) * 1000.0]
    return v


def run_nfstream(files, truth, level, n, idle=120, active=1800):
    """Runs NFStream over each capture; returns the labelled flows and stats."""
    from nfstream import NFStreamer

    flows, stats, failed = [], Counter(), []
    seen = Counter()  # (capture, truth key) -> NFStream flows matched
    start = time.perf_counter()
    for path in files:
        cap = os.path.basename(path)
        per = truth.get(cap, {})
        try:
            streamer = NFStreamer(source=path, splt_analysis=n, n_dissections=20,
                                  statistical_analysis=False, accounting_mode=1,
                                  n_meters=1, idle_timeout=idle, active_timeout=active)
            for f in streamer:
                stats["flows"] += 1
                try:
                    key = canon(f.protocol, f.src_ip, f.src_port, f.dst_ip, f.dst_port)
                except ValueError:
                    stats["unparsed"] += 1
                    continue
                label = per.get(key)
                if label is None:
                    stats["unlabelled"] += 1
                    continue
                seen[(cap, key)] += 1
                if level == "proto":
                    ndpi = f.application_name.split(".")[0]
                elif level == "app":
                    ndpi = f.application_name
                else:
                    ndpi = f.application_category_name
                flows.append({
                    "capture": cap, "label": label, "x": nfs_features(f, n),
                    "proto": f.protocol, "server_port": f.dst_port, "ndpi": ndpi,
                })
        except Exception as e:  # NFStream raises plain exceptions on bad input
            failed.append(f"{path}: {e}")
    stats["seconds"] = time.perf_counter() - start
    return flows, stats, seen, failed


def cap_per_group(flows, k, seed):
    """At most k flows per (capture, class), drawn with seed; order kept."""
    rng = random.Random(seed)
    buckets = defaultdict(list)
    for i, f in enumerate(flows):
        buckets[(f["capture"], f["label"])].append(i)
    keep = set()
    for key in sorted(buckets):
        idx = buckets[key]
        rng.shuffle(idx)
        keep.update(idx[:k])
    return [f for i, f in enumerate(flows) if i in keep]


def nfs_matrix(flows, k, use_ports):
    return [f["x"][: 2 * k] + ([float(f["proto"]), float(f["server_port"])] if use_ports else [])
            for f in flows]


def load_rows(path):
    """earlybird's feature rows (sklearn_compare.load), a missing file named."""
    if not os.path.isfile(path):
        sys.exit(f"{path}: no such file (write it with earlybird evaluate --features-out)")
    return sklearn_compare.load(path)


def accuracy(pred, truth):
    return sum(p == y for p, y in zip(pred, truth)) / len(truth) if truth else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="earlybird's --features-out directory (train.csv, test.csv)")
    ap.add_argument("captures", nargs="+", help="capture files or directories")
    ap.add_argument("--labels", action="append", required=True, help="ground-truth CSV (repeatable)")
    ap.add_argument("--level", choices=sorted(LEVEL_COLUMN), default="proto")
    ap.add_argument("--packets", type=int, default=8, help="N: largest k (default 8)")
    ap.add_argument("--max-per-capture", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--use-ports", action="store_true", help="also the protocol and the server port")
    ap.add_argument("--idle-timeout", type=int, default=120,
                    help="NFStream's idle timeout in s (its default 120; earlybird's is 15)")
    ap.add_argument("--active-timeout", type=int, default=1800,
                    help="NFStream's active timeout in s (default 1800, as earlybird)")
    ap.add_argument("--differences", action="store_true",
                    help="also list the held-out (capture, class) pairs where the sides differ")
    ap.add_argument("--json", action="store_true", help="JSON lines instead of the text table")
    a = ap.parse_args()
    try:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.tree import DecisionTreeClassifier
        import nfstream
    except ImportError as e:
        sys.exit(f"{e.name} is not installed: pip install nfstream==6.6.0 scikit-learn==1.9.1")
    if a.packets < 1:
        sys.exit("--packets must be at least 1")

    eb_train = load_rows(os.path.join(a.dir, "train.csv"))
    eb_test = load_rows(os.path.join(a.dir, "test.csv"))
    eb_n = sum(1 for c in eb_train[0] if c.startswith("size_"))
    if eb_n < a.packets:
        sys.exit(f"{os.path.join(a.dir, 'train.csv')}: {eb_n} packets per flow, "
                 f"fewer than --packets {a.packets}")
    train_caps = {r["capture"] for r in eb_train}
    test_caps = {r["capture"] for r in eb_test}

    truth, tstats = load_truth(a.labels, a.level)
    files = capture_files(a.captures)
    in_split = [f for f in files if os.path.basename(f) in train_caps | test_caps]
    outside = len(files) - len(in_split)
    absent = len((train_caps | test_caps) - {os.path.basename(f) for f in in_split})
    flows, nstats, seen, failed = run_nfstream(in_split, truth, a.level, a.packets,
                                                a.idle_timeout, a.active_timeout)
    for msg in failed:
        print(f"nfstream_compare: warning: skipped {msg}", file=sys.stderr)
    capped = cap_per_group(flows, max(1, a.max_per_capture), a.seed)
    nf_train = [f for f in capped if f["capture"] in train_caps]
    nf_test = [f for f in capped if f["capture"] in test_caps]
    if not nf_train or not nf_test:
        sys.exit("NFStream found no labelled flow on one side of the split")

    # Flows per held-out (capture, class) on each side.
    eb_b = Counter((r["capture"], r["label"]) for r in eb_test)
    nf_b = Counter((f["capture"], f["label"]) for f in nf_test)
    both = sum(min(eb_b[k], nf_b[k]) for k in eb_b)
    eb_only = sum(max(0, eb_b[k] - nf_b[k]) for k in eb_b)
    nf_only = sum(max(0, nf_b[k] - eb_b[k]) for k in nf_b)
    # Uncapped NFStream counts say whether the cap or the flow definition differs.
    nf_all = Counter((f["capture"], f["label"]) for f in flows if f["capture"] in test_caps)
    differ = [(c, l, eb_b[(c, l)], nf_b[(c, l)], nf_all[(c, l)])
              for c, l in sorted(set(eb_b) | set(nf_b)) if eb_b[(c, l)] != nf_b[(c, l)]]
    # Truth rows of the held-out captures found by NFStream once, more, never.
    rows = [(c, key) for c in sorted(test_caps) for key in truth.get(c, {})]
    found = Counter(min(seen[r], 2) for r in rows)

    y_eb_train = [r["label"] for r in eb_train]
    y_eb_test = [r["label"] for r in eb_test]
    y_nf_train = [f["label"] for f in nf_train]
    y_nf_test = [f["label"] for f in nf_test]
    ndpi = accuracy([f["ndpi"] for f in nf_test], y_nf_test)
    majority = {side: max(Counter(y).values()) / len(y)
                for side, y in (("earlybird", y_eb_test), ("nfstream", y_nf_test))}
    ndpi_unknown = sum(f["ndpi"] == "Unknown" for f in nf_test) / len(nf_test)

    summary = {
        "level": a.level, "packets": a.packets, "use_ports": a.use_ports, "seed": a.seed,
        "nfstream": nfstream.__version__,
        "captures_train": len(train_caps), "captures_test": len(test_caps),
        "captures_outside_split": outside, "split_captures_not_given": absent, "captures_failed": len(failed),
        "nfstream_flows": nstats["flows"], "nfstream_labelled": len(flows),
        "nfstream_seconds": round(nstats["seconds"], 3),
        "nfstream_flows_per_s": round(nstats["flows"] / nstats["seconds"], 1)
        if nstats["seconds"] > 0 else None,
        "train_flows": {"earlybird": len(eb_train), "nfstream": len(nf_train)},
        "test_flows": {"earlybird": len(eb_test), "nfstream": len(nf_test)},
        "test_majority_class": majority,
        "test_buckets_both": both, "test_earlybird_only": eb_only,
        "test_nfstream_only": nf_only,
        "test_truth_rows": len(rows), "test_truth_rows_found_once": found[1],
        "test_truth_rows_split": found[2], "test_truth_rows_not_found": found[0],
        "idle_timeout_s": a.idle_timeout, "active_timeout_s": a.active_timeout,
        "ndpi_agreement": ndpi, "ndpi_unknown": ndpi_unknown,
        "truth_rows": dict(tstats),
    }
    models = {
        "tree": lambda: DecisionTreeClassifier(criterion="entropy", min_samples_leaf=2,
                                               random_state=a.seed),
        "forest": lambda: RandomForestClassifier(n_estimators=20, max_features="sqrt",
                                                 random_state=a.seed),
    }
    if a.json:
        print(json.dumps({"summary": summary}))
        if a.differences:
            for c, l, e, f, u in differ:
                print(json.dumps({"capture": c, "label": l, "earlybird": e, "nfstream": f,
                                  "nfstream_uncapped": u}))
    else:
        print(f"labels at level {a.level}, N = {a.packets}"
              f"{' + ports' if a.use_ports else ''}, seed {a.seed}, NFStream {nfstream.__version__} "
              f"(idle timeout {a.idle_timeout} s, active {a.active_timeout} s)")
        print(f"captures: {len(train_caps)} training, {len(test_caps)} held out "
              f"(earlybird's split); {outside} given but outside it; {absent} of it not given; "
              f"{len(failed)} failed")
        print(f"NFStream: {nstats['flows']} flows in {nstats['seconds']:.2f} s "
              f"({summary['nfstream_flows_per_s']} flows/s), {len(flows)} labelled")
        print(f"flows (training / held out): earlybird {len(eb_train)} / {len(eb_test)}, "
              f"NFStream {len(nf_train)} / {len(nf_test)}")
        print(f"held-out majority class: earlybird {100 * majority['earlybird']:.1f}%, "
              f"NFStream {100 * majority['nfstream']:.1f}%")
        print(f"held out per (capture, class): {both} on both sides, {eb_only} earlybird only, "
              f"{nf_only} NFStream only")
        print(f"held-out truth rows: {len(rows)}; NFStream found {found[1]} as one flow, "
              f"{found[2]} as several flows, {found[0]} not at all")
        if a.differences:
            for c, l, e, f, u in differ:
                print(f"  {c} {l}: earlybird {e}, NFStream {f} ({u} before the cap)")
        print(f"nDPI (NFStream's application_name) agrees with the truth on "
              f"{100 * ndpi:.2f}% of NFStream's held-out flows ({100 * ndpi_unknown:.1f}% Unknown)")
        print()
        heads = ["earlybird rows: tree", "earlybird rows: forest",
                 "NFStream SPLT: tree", "NFStream SPLT: forest"]
        print("k  " + "".join(f"{h:>24}" for h in heads))
    for k in range(1, a.packets + 1):
        row = []
        for side, (xtr, ytr, xte, yte) in {
            "earlybird": (sklearn_compare.matrix(eb_train, k, a.use_ports), y_eb_train,
                          sklearn_compare.matrix(eb_test, k, a.use_ports), y_eb_test),
            "nfstream": (nfs_matrix(nf_train, k, a.use_ports), y_nf_train,
                         nfs_matrix(nf_test, k, a.use_ports), y_nf_test),
        }.items():
            for name, make in models.items():
                acc = accuracy(list(make().fit(xtr, ytr).predict(xte)), yte)
                row.append(acc)
                if a.json:
                    print(json.dumps({"features": side, "model": f"sklearn {name}", "k": k,
                                      "accuracy": acc, "flows": len(yte)}))
        if a.json:
            print(json.dumps({"features": "nfstream", "model": "ndpi", "k": k,
                              "agreement": ndpi, "flows": len(y_nf_test)}))
        else:
            print(f"{k:<3}" + "".join(f"{100 * x:>23.2f}%" for x in row))


if __name__ == "__main__":
    main()
