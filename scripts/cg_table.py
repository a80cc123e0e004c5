#!/usr/bin/env python3
"""cg_table.py: the markdown table of a `scripts/cg_pairs.sh` run.

    scripts/cg_table.py OUT.tsv OLD NEW [COPY] [--ratio NUM/DEN ...]

OLD, NEW and COPY are tags given to cg_pairs.sh (COPY: a byte-identical
copy of OLD's binary, the A/A pair). One line per (input, configuration)
in the order first met: the least instruction count of each tag's rounds,
NEW/OLD (and COPY/OLD), the range of the rounds, and the files the runs
wrote (OUT.tsv.files) compared over every run of these tags: identical
bytes, the same lines in another order (a CSV), or DIFFERENT (naming the
files, and a file some runs did not write). `--ratio d/a` adds a table of configuration d's least
count over configuration a's, per input and tag. A run that failed
(no count) is shown and left out of the least.
"""
import sys
from collections import OrderedDict


def main(argv):
    ratios = []
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--ratio":
            ratios.append(argv[i + 1].split("/"))
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 3:
        sys.exit(__doc__)
    path, old, new = args[:3]
    copy = args[3] if len(args) > 3 else None
    tags = list(dict.fromkeys(t for t in (old, copy, new) if t))

    runs = OrderedDict()  # (input, name, opts) -> tag -> [(count, digest)]
    failed = []
    with open(path) as f:
        for line in f:
            rnd, tag, name, inp, n, digest, opts = line.rstrip("\n").split("\t")
            key = (inp, name, opts)
            runs.setdefault(key, {}).setdefault(tag, [])
            if n == "FAILED" or not n:
                failed.append((rnd, tag, name, inp))
                continue
            runs[key][tag].append((int(n.replace(",", "")), digest))

    files = {}  # (input, name) -> file -> (set of sha256, set of sorted sha256)
    try:
        with open(path + ".files") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 8:
                    continue
                _rnd, tag, name, inp, fname, _size, raw, srt = parts[:8]
                if tag not in tags:
                    continue
                e = files.setdefault((inp, name), {}).setdefault(fname, (set(), set(), []))
                e[0].add(raw)
                e[1].add(srt)
                e[2].append(tag)
    except FileNotFoundError:
        pass

    def compare(inp, name, by_tag):
        """What the runs wrote, compared over every run of every tag."""
        fl = files.get((inp, name), {})
        if not fl:
            return ""
        nruns = sum(len(by_tag.get(t, [])) for t in tags)
        diff, lines = [], []
        for fname, (raw, srt, seen) in sorted(fl.items()):
            if len(seen) != nruns:
                diff.append(fname.lstrip("./") + f" (in {len(seen)} of {nruns} runs)")
            elif len(raw) == 1:
                continue
            elif len(srt) == 1 and "-" not in srt:
                lines.append(fname.lstrip("./"))
            else:
                diff.append(fname.lstrip("./"))
        words = f"{len(fl)} files: identical"
        if lines:
            words = f"{len(fl)} files: identical but {', '.join(lines)} (same lines, other order)"
        if diff:
            words = f"{len(fl)} files: DIFFERENT {', '.join(diff)}"
        return words

    head = ["input", "configuration", old]
    if copy:
        head += [f"{copy} (A/A)", f"{copy}/{old}"]
    head += [new, f"{new}/{old}", "rounds", f"{old}, runs", f"{new}, runs", "outputs"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 6) + ["---"] * 4) + "|")
    least = {}
    for (inp, name, opts), by_tag in runs.items():
        lo = {t: min((c for c, _ in by_tag.get(t, [])), default=None) for t in tags}
        for t in tags:
            least[(inp, name, t)] = lo[t]
        same = compare(inp, name, by_tag)

        def rng(t):
            cs = [c for c, _ in by_tag.get(t, [])]
            return f"{min(cs) / 1e6:.1f}–{max(cs) / 1e6:.1f} M" if cs else "–"

        def num(v):
            return f"{v:,}" if v is not None else "–"

        def ratio(a, b):
            return f"{a / b:.4f}" if a and b else "–"

        row = [inp, f"({name}) `{opts}`", num(lo[old])]
        if copy:
            row += [num(lo[copy]), ratio(lo[copy], lo[old])]
        row += [num(lo[new]), ratio(lo[new], lo[old])]
        row += ["/".join(str(len(by_tag.get(t, []))) for t in tags), rng(old), rng(new), same]
        print("| " + " | ".join(row) + " |")

    if ratios:
        print()
        print("| input | ratio | " + " | ".join(tags) + " |")
        print("|---|---|" + "---:|" * len(tags))
        inputs = list(OrderedDict.fromkeys(k[0] for k in runs))
        for num_, den in ratios:
            for inp in inputs:
                vals = []
                for t in tags:
                    a, b = least.get((inp, num_, t)), least.get((inp, den, t))
                    vals.append(f"{a / b:.3f}" if a and b else None)
                if any(vals):
                    print(f"| {inp} | ({num_}) / ({den}) | " + " | ".join(v or "–" for v in vals) + " |")
    for rnd, tag, name, inp in failed:
        print(f"\nround {rnd}: {tag} {inp} ({name}) gave no count", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
