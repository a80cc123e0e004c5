#!/usr/bin/env python3
"""Instructions of a callgrind run on the lines that given commits last
changed: is the work of those commits on the measured path at all?

    scripts/cg_blame.py CALLGRIND_OUT COMMIT PREFIX SHORT_IDS...

CALLGRIND_OUT is a `valgrind --tool=callgrind --dump-line=yes` output of a
build with line tables (the release profile has them); COMMIT is the
commit that build was made from; PREFIX is the build's path of the
repository (as in the output's file names). Run it inside the
repository. The self instructions (Ir) are summed by source line,
inlined code on its own line (callgrind's fi=/fe= records), and each
line of the repository's files is given to the commit `git blame
COMMIT` names for it. Prints the total, the part on lines of the commits
given (by 7-character id) and by file, and the instructions of every
file under src/source/."""
import collections
import re
import subprocess
import sys


def costs(path):
    """(file, line) -> self Ir of a callgrind output."""
    names, cost = {}, collections.Counter()
    fl = fi = None
    pos = 0
    skip = False
    for raw in open(path, errors="replace"):
        line = raw.rstrip("\n")
        if not line:
            continue
        m = re.match(r"^(fl|fi|fe|cfi|cfl|fn|cfn|ob|cob)=(?:\((\d+)\))?\s*(.*)$", line)
        if m:
            kind, ident, name = m.groups()
            if kind in ("fl", "fi", "fe", "cfi", "cfl"):
                if ident is not None and name:
                    names[ident] = name
                f = names.get(ident, name) if ident is not None else name
                if kind == "fl":
                    fl, fi = f, None
                elif kind in ("fi", "fe"):
                    fi = f
            elif kind == "fn":
                fi = None
            continue
        if line.startswith("calls="):
            # The next cost line is the call's inclusive cost.
            skip = True
            continue
        if line[0].isdigit() or line[0] in "+-*":
            parts = line.split()
            p = parts[0]
            if p[0] in "+-":
                pos += int(p)
            elif p != "*":
                pos = int(p)
            if skip:
                skip = False
            elif len(parts) > 1:
                cost[(fi or fl, pos)] += int(parts[1])
    return cost


def owners(rel, commit):
    """Line number -> commit of the line, from `git blame`."""
    out = subprocess.run(["git", "blame", "--line-porcelain", commit, "--", rel],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    owner = {}
    for l in out.stdout.splitlines():
        m = re.match(r"^([0-9a-f]{40}) \d+ (\d+)", l)
        if m:
            owner[int(m.group(2))] = m.group(1)[:7]
    return owner


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    out, commit, prefix = sys.argv[1:4]
    mine = set(sys.argv[4:])
    cost = costs(out)
    total = sum(cost.values())
    by_file = collections.Counter()
    for (f, _), c in cost.items():
        by_file[f] += c
    theirs, per_commit, per_file = 0, collections.Counter(), collections.Counter()
    for f in by_file:
        if f is None or not f.startswith(prefix):
            continue
        owner = owners(f[len(prefix):], commit)
        if owner is None:
            continue
        for (ff, ln), c in cost.items():
            if ff == f and owner.get(ln) in mine:
                per_commit[owner[ln]] += c
                per_file[f[len(prefix):]] += c
                theirs += c
    print(f"total Ir {total:,}")
    print(f"on lines last changed by the {len(mine)} commits: {theirs:,} ({100 * theirs / max(total, 1):.4f} %)")
    for k, c in per_commit.most_common():
        print(f"  {k} {c:,}")
    for k, c in per_file.most_common():
        print(f"  {k} {c:,}")
    print("files under src/source/ with instructions:")
    for f, c in by_file.most_common():
        if f and "/src/source/" in f:
            print(f"  {f[len(prefix):] if f.startswith(prefix) else f} {c:,}")


if __name__ == "__main__":
    main()
