#!/usr/bin/env python3
"""scikit-learn on exactly the engine's features, beside earlybird's models.

Reads DIR/train.csv and DIR/test.csv written by
`earlybird evaluate --algos ... --features-out DIR` (the same flows, the same
split by capture file, the same feature vectors as earlybird's trees:
signed size and gap in microseconds per packet, then protocol and server
port) and prints, for each k, the held-out accuracy of scikit-learn's
DecisionTreeClassifier (entropy, as C4.5), RandomForestClassifier and
GaussianNB (on the k packets' sizes and gaps). With --gbt also
HistGradientBoostingClassifier (gradient-boosted trees); with
--per-transport also the tree and the forest trained separately on the TCP
and the UDP flows (a flow is scored by its transport's model; other
protocols by a model of all flows), to measure whether per-transport
models help before the engine ships them.

Usage: scripts/sklearn_compare.py DIR [--packets N] [--use-ports] [--seed S]
       [--gbt] [--per-transport] [--json]
Needs scikit-learn (pip install scikit-learn); the standard library reads
the CSV files.
"""

import argparse
import csv
import json
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{path}: no flows")
    return rows


def matrix(rows, k, use_ports):
    cols = []
    for i in range(1, k + 1):
        cols += [f"size_{i}", f"gap_us_{i}"]
    if use_ports:
        cols += ["proto", "server_port"]
    missing = [c for c in cols if c not in rows[0]]
    if missing:
        sys.exit(f"no column {missing[0]}: write the features with a larger N")
    return [[float(r[c]) for c in cols] for r in rows]


class PerTransport:
    """One model per transport (TCP = 6, UDP = 17), one for the rest."""

    def __init__(self, make):
        self.make = make

    def rows(self, train, test):
        self.ptr = [r["proto"] for r in train]
        self.pte = [r["proto"] for r in test]
        return self

    def __call__(self):
        return self

    def fit(self, x, y):
        self.rest = self.make().fit(x, y)
        self.by = {}
        for p in ("6", "17"):
            idx = [i for i, q in enumerate(self.ptr) if q == p]
            if idx:
                self.by[p] = self.make().fit([x[i] for i in idx], [y[i] for i in idx])
        return self

    def predict(self, x):
        out = [None] * len(x)
        for p in set(self.pte):
            idx = [i for i, q in enumerate(self.pte) if q == p]
            pred = (self.by.get(p) or self.rest).predict([x[i] for i in idx])
            for i, y in zip(idx, pred):
                out[i] = y
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--packets", type=int, default=None, help="largest k (default: all in the files)")
    ap.add_argument("--use-ports", action="store_true", help="also the protocol and the server port")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="one JSON object per (model, k)")
    ap.add_argument("--gbt", action="store_true", help="also gradient-boosted trees (HistGradientBoostingClassifier)")
    ap.add_argument(
        "--per-transport", action="store_true", help="also tree and forest per transport (TCP, UDP)"
    )
    a = ap.parse_args()
    try:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.naive_bayes import GaussianNB
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        sys.exit("scikit-learn is not installed: pip install scikit-learn")
    train, test = load(f"{a.dir}/train.csv"), load(f"{a.dir}/test.csv")
    n = sum(1 for c in train[0] if c.startswith("size_"))
    kmax = min(a.packets or n, n)
    y_train = [r["label"] for r in train]
    y_test = [r["label"] for r in test]
    majority = max(set(y_test), key=y_test.count)
    base = sum(y == majority for y in y_test) / len(y_test)
    models = {
        "sklearn tree": lambda: DecisionTreeClassifier(
            criterion="entropy", min_samples_leaf=2, random_state=a.seed
        ),
        "sklearn forest": lambda: RandomForestClassifier(
            n_estimators=20, max_features="sqrt", random_state=a.seed
        ),
        "sklearn gaussian nb": lambda: GaussianNB(),
    }
    if a.gbt:
        from sklearn.ensemble import HistGradientBoostingClassifier

        models["sklearn hist gbt"] = lambda: HistGradientBoostingClassifier(random_state=a.seed)
    if a.per_transport:
        for name in ["sklearn tree", "sklearn forest"]:
            models[name + " per transport"] = PerTransport(models[name])
    if not a.json:
        print(
            f"{len(train)} training flows, {len(test)} held-out flows, "
            f"majority class {100 * base:.1f} %"
        )
        print("k  " + "".join(f"{m:>22}" for m in models))
    for k in range(1, kmax + 1):
        xtr, xte = matrix(train, k, a.use_ports), matrix(test, k, a.use_ports)
        for m in models.values():
            if isinstance(m, PerTransport):
                m.rows(train, test)
        accs = []
        for name, make in models.items():
            m = make().fit(xtr, y_train)
            pred = m.predict(xte)
            acc = sum(p == y for p, y in zip(pred, y_test)) / len(y_test)
            accs.append(acc)
            if a.json:
                print(json.dumps({"model": name, "k": k, "accuracy": acc, "flows": len(y_test)}))
        if not a.json:
            print(f"{k:<3}" + "".join(f"{100 * x:>21.2f}%" for x in accs))


if __name__ == "__main__":
    main()
