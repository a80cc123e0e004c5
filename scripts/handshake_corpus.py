#!/usr/bin/env python3
"""handshake_corpus.py: a handshake-heavy input made of real captures.

    scripts/handshake_corpus.py [--earlybird BIN] CORPUS OUTDIR COPIES

Chooses the captures of CORPUS/classify/dev (the nDPI and nfstream
folders) in which at least half the flows carry a TLS or QUIC
ClientHello, as `BIN flows CAPTURE --labellers -f csv` reads them (a
non-empty `tls_version` or `sni`), and links each COPIES times into
OUTDIR (symbolic links: nothing is copied), named so that a directory
read takes them copy by copy. Read as one input (`earlybird flows
OUTDIR`), each file begins before the latest packet read, so it is a time
domain of its own: every copy's flows are new flows.

Writes OUTDIR.choice.tsv beside the folder (capture, flows, flows with a handshake, packets
as `capinfos` counts them, when it is installed) and prints the totals
for one copy and for all.
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile


def flows_of(binary, capture, work):
    out = os.path.join(work, "r.csv")
    r = subprocess.run(
        [binary, "flows", capture, "--labellers", "-f", "csv", "-o", out, "-q", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if r.returncode != 0:
        return None
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    hello = sum(1 for row in rows if row.get("tls_version") or row.get("sni"))
    return len(rows), hello


def packets_of(capture):
    if not shutil.which("capinfos"):
        return 0
    r = subprocess.run(["capinfos", "-M", "-c", capture], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("Number of packets"):
            return int(line.split()[-1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--earlybird", default="target/release/earlybird")
    ap.add_argument("corpus")
    ap.add_argument("outdir")
    ap.add_argument("copies", type=int)
    a = ap.parse_args()
    dev = os.path.join(a.corpus, "classify", "dev")
    captures = []
    for folder in ("ndpi", "nfstream"):
        d = os.path.join(dev, folder, "pcap")
        captures += sorted(os.path.join(d, n) for n in os.listdir(d))
    chosen = []
    with tempfile.TemporaryDirectory() as work:
        for c in captures:
            got = flows_of(a.earlybird, c, work)
            if got is None:
                print(f"{c}: earlybird failed; left out", file=sys.stderr)
                continue
            flows, hello = got
            if hello >= 1 and 2 * hello >= flows:
                chosen.append((os.path.abspath(c), flows, hello, packets_of(c)))
    if not chosen:
        sys.exit("no capture chosen")
    os.makedirs(a.outdir, exist_ok=True)
    width = len(str(a.copies - 1))
    for k in range(a.copies):
        for path, *_ in chosen:
            link = os.path.join(a.outdir, f"c{k:0{width}d}-{os.path.basename(path)}")
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(path, link)
    with open(a.outdir.rstrip("/") + ".choice.tsv", "w") as f:
        f.write("capture\tflows\thandshakes\tpackets\n")
        for path, flows, hello, packets in chosen:
            f.write(f"{os.path.relpath(path, a.corpus)}\t{flows}\t{hello}\t{packets}\n")
    flows = sum(c[1] for c in chosen)
    hello = sum(c[2] for c in chosen)
    packets = sum(c[3] for c in chosen)
    print(f"{len(chosen)} captures of {len(captures)}: {flows} flows, {hello} with a handshake, "
          f"{packets} packets a copy; {a.copies} copies: {len(chosen) * a.copies} files, "
          f"{flows * a.copies} flows, {packets * a.copies} packets")


if __name__ == "__main__":
    main()
