#!/usr/bin/env python3
"""Writes models/class_categories.txt: the category of each class of the
default model (nDPI's master protocols, `--level proto`), learned from the
labels the model was trained on (models/train_default.sh: the dev half of
the shared corpus, ndpi_truth.csv and nfstream_truth.csv).

A class's category is the most frequent category of the flows labelled by
payload (confidence DPI) whose application is the protocol itself (no
application on top of it: app_proto empty or equal to master_proto, so
TLS is the category of plain TLS, not of the services carried over it),
when at least MIN_FLOWS such flows agree on it and they are at least
MIN_SHARE of them. Other classes get no category (the records leave it
empty). Ties go to the category named first in alphabetical order, so the
output is the same for the same labels.

usage: scripts/class_categories.py [CORPUS] > models/class_categories.txt
"""

import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

MIN_FLOWS = 2
MIN_SHARE = 0.75


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "../shared/corpus")
    dev = root / "classify/dev"
    cats = defaultdict(Counter)
    sources = []
    for name in ["ndpi_truth.csv", "nfstream_truth.csv"]:
        path = dev / name
        sources.append(f"classify/dev/{name}")
        for r in csv.DictReader(open(path)):
            proto, app, cat = r["master_proto"], r["app_proto"], r["category"]
            if r["confidence"] != "DPI" or not proto or not cat:
                continue
            if app and app != proto:
                continue
            cats[proto][cat] += 1
    print("# The category of each class of the default model (nDPI's master")
    print("# protocols): the most frequent category of the flows labelled by")
    print("# payload whose application is the protocol itself, in the labels the")
    print("# model was trained on. Written by scripts/class_categories.py from")
    print(f"# {' and '.join(sources)} of the shared corpus;")
    print(f"# a class needs {MIN_FLOWS} such flows and {int(MIN_SHARE * 100)} % of them in one category.")
    print("# Format: CLASS CATEGORY, one a line (docs/SERVICES.md).")
    for proto in sorted(cats, key=str.lower):
        c = cats[proto]
        n = sum(c.values())
        best, k = sorted(c.items(), key=lambda x: (-x[1], x[0]))[0]
        if k >= MIN_FLOWS and k >= MIN_SHARE * n:
            print(f"{proto} {best}")


if __name__ == "__main__":
    main()
