#!/usr/bin/env python3
"""Media detection measured on the corpus's developer half (docs/MEDIA.md,
"Today's calls on the corpus").

Reads `corpus/classify/dev/` (nDPI's per-flow labels: ndpi_truth.csv,
nfstream_truth.csv with mapping_verified=1, and media_flows.csv), runs
`earlybird flows --analyzer media` on every capture that holds a labelled
UDP flow of at least 30 packets, once per configuration, and counts per
set how many flows have an `audio` or `video` verdict:

- "call flows": the media_flows.csv rows (UDP, >= 30 packets);
- "other UDP, call captures": every other labelled UDP flow (label not
  Unknown) of >= 30 packets in a capture that holds a call flow;
- "other UDP, all captures": the same over every dev capture.

Flows match labels by unordered 5-tuple; records of one 5-tuple count as
one flow, found when any of them has a media verdict. Packet counts are
the labels' (both directions).

Leave one app out: the coarse app of a flow is its capture's (the file
name's first word); the detector's RTP, STUN and TURN layers have no
fitted parameter, and the statistical layer's intervals are the built-in
ones (or --media-config's), so a held-out app sees the same detector as
the others. The per-app rows say what each app gets.

Usage: media_eval.py [--corpus DIR] [--bin EARLYBIRD] [--markdown]
       [--config NAME=ARGS ...] [--json FILE] [--explain N] [--by-bytes]
`--by-bytes` adds each set again over its flows that carry an RTP stream
by an independent reading (tshark's heuristic RTP decode: one SSRC in
one direction, at least 10 packets, at least 90 % of its sequence steps
1 to 10), so nDPI's labels and the bytes can be read side by side.
Each --config runs the binary with ARGS (split on spaces) added to
`flows FILE --analyzer media -o OUT.csv`; the default is one config
"default" with no added arguments. `--explain N` prints, for each call
flow the first config misses, its first N datagrams as tshark (an
independent decoder) reads them: gap from the flow's previous datagram,
direction, UDP payload length, what its first byte is by RFC 9443's
ranges (inside TURN ChannelData too) and its first 12 bytes; for a flow
inside a tunnel tshark decodes (GTP-U), the innermost UDP payload.
Standard library only (and tshark for --explain).
"""

import argparse
import collections
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

MIN_PACKETS = 30
# Packets of an RTP stream for a flow to carry media by its bytes.
RTP_MIN = 10


def load_truth(dev):
    """Labelled flows: {(pcap_path, key): row} and media keys."""
    flows = {}
    for name, sub in (("ndpi_truth.csv", "ndpi/pcap"), ("nfstream_truth.csv", "nfstream/pcap")):
        path = os.path.join(dev, name)
        if not os.path.exists(path):
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["proto"] != "UDP":
                    continue
                if name.startswith("nfstream") and r.get("mapping_verified") != "1":
                    continue
                if "c2s_pkts" in r:
                    pk = int(r["c2s_pkts"] or 0) + int(r["s2c_pkts"] or 0)
                else:
                    pk = int(r["bidirectional_packets"] or 0)
                key = flow_key(r["src"], r["sport"], r["dst"], r["dport"])
                pcap = os.path.join(dev, sub, r["pcap"])
                flows[(pcap, key)] = {
                    "label": r["app_label"],
                    "packets": pk,
                    "truth": name,
                    "pcap": r["pcap"],
                }
    media = set()
    with open(os.path.join(dev, "media_flows.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["proto"] != "UDP":
                continue
            sub = "ndpi/pcap" if r["truth_file"] == "ndpi_truth.csv" else "nfstream/pcap"
            pcap = os.path.join(dev, sub, r["pcap"])
            media.add((pcap, flow_key(r["src"], r["sport"], r["dst"], r["dport"])))
    return flows, media


def flow_key(a, ap, b, bp):
    return tuple(sorted([(a, int(ap)), (b, int(bp))]))


def app_of(pcap):
    base = os.path.basename(pcap)
    for sep in ("_", "-", "."):
        base = base.split(sep)[0]
    return base.lower()


def run(binary, pcap, extra, tmp):
    out = os.path.join(tmp, "out.csv")
    if os.path.exists(out):
        os.remove(out)
    cmd = [binary, "flows", pcap, "--analyzer", "media", "-o", out, "--quiet"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.strip()}")
    found = collections.defaultdict(set)
    with open(out, newline="") as f:
        for r in csv.DictReader(f):
            if r["proto"] != "17":
                continue
            key = flow_key(r["src"], r["sport"], r["dst"], r["dport"])
            if r.get("media") in ("audio", "video"):
                found[key].add(r["media"])
            else:
                found.setdefault(key, set())
    return found


def demux(b):
    """What a datagram carries by its first byte (RFC 9443 ranges; the
    detector's `analyze/media/demux.rs` follows the same table)."""
    if not b:
        return "empty"
    f = b[0]
    if f <= 3:
        # RFC 5389 and later: the magic cookie; without it, classic STUN
        # (RFC 3489) or another protocol in STUN's range.
        if b[4:8] == bytes.fromhex("2112a442"):
            return "STUN(0x%04x)" % int.from_bytes(b[0:2], "big")
        return "STUN-range, no cookie"
    if 16 <= f <= 19:
        return "ZRTP"
    if 20 <= f <= 63:
        if b[1:3] in (b"\xfe\xff", b"\xfe\xfd", b"\xfe\xfc"):
            return "DTLS(ct %d)" % f
        return "DTLS-range, no version"
    if 64 <= f <= 79 and len(b) >= 4 and 4 + int.from_bytes(b[2:4], "big") <= len(b):
        return "TURN-ch/" + demux(b[4 : 4 + int.from_bytes(b[2:4], "big")])
    if 128 <= f <= 191:
        if len(b) > 1 and 192 <= b[1] <= 223:
            return "RTCP(pt %d)" % b[1]
        return "RTP(v2 pt %d)" % (b[1] & 0x7F if len(b) > 1 else -1)
    if 64 <= f <= 127 or f >= 192:
        return "QUIC-range"
    return "other"


def rtp_flows(pcap):
    """Flows (keys) that carry an RTP stream by tshark's heuristic decode:
    one SSRC in one direction with at least RTP_MIN packets, at least 90 %
    of whose consecutive steps move the sequence number 1 to 10 ahead."""
    cmd = ["tshark", "-r", pcap, "-o", "rtp.heuristic_rtp:TRUE", "-Y", "rtp.version == 2",
           "-T", "fields", "-e", "ip.src", "-e", "ipv6.src", "-e", "udp.srcport",
           "-e", "ip.dst", "-e", "ipv6.dst", "-e", "udp.dstport", "-e", "rtp.ssrc", "-e", "rtp.seq"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.strip()}")
    last, steps = {}, collections.defaultdict(lambda: [0, 0])
    for row in p.stdout.splitlines():
        f = row.split("\t")
        if len(f) < 8 or not f[2] or not f[5] or not f[6] or not f[7]:
            continue
        # Inside a tunnel tshark lists every layer's value: the last is
        # the innermost (TURN and GTP-U keep the outer UDP 5-tuple's).
        src = (f[0] or f[1]).split(",")[-1]
        dst = (f[3] or f[4]).split(",")[-1]
        sport, dport = f[2].split(",")[-1], f[5].split(",")[-1]
        ssrc, seq = f[6].split(",")[-1], int(f[7].split(",")[-1])
        key = flow_key(src, sport, dst, dport)
        stream = (key, src, sport, ssrc)
        if stream in last:
            st = steps[stream]
            st[0] += 1
            st[1] += 1 <= (seq - last[stream]) % 65536 <= 10
        last[stream] = seq
    return {k for (k, *_), (n, ok) in steps.items() if n + 1 >= RTP_MIN and ok >= 0.9 * n}


def explain(pcap, key, n):
    """The first `n` datagrams of the flow `key` as tshark reads them."""
    (a, ap), (b, bp) = key
    fam = "ipv6" if ":" in a else "ip"
    filt = f"{fam}.addr=={a} && {fam}.addr=={b} && udp.port=={ap} && udp.port=={bp}"
    cmd = ["tshark", "-r", pcap, "-Y", filt, "-T", "fields", "-e", "frame.time_epoch",
           "-e", f"{fam}.src", "-e", "udp.srcport", "-e", "udp.payload"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return [f"    tshark failed: {p.stderr.strip()}"]
    lines, last = [], None
    for row in p.stdout.splitlines():
        if len(lines) == n:
            break
        f = row.split("\t")
        if len(f) < 4:
            continue
        # Inside a tunnel tshark lists every layer's value: the last is
        # the innermost.
        src, sport, pay = f[1].split(",")[-1], f[2].split(",")[-1], f[3].split(",")[-1]
        t = float(f[0])
        gap = "" if last is None else "%.1f ms" % ((t - last) * 1e3)
        last = t
        body = bytes.fromhex(pay)
        d = "->" if (src, int(sport)) == (a, ap) else "<-"
        lines.append(f"    {gap:>10} {d} {len(body):5} B {demux(body):24} {body[:12].hex()}")
    return lines


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(here, "..", "..", "shared", "corpus"))
    ap.add_argument("--bin", default=shutil.which("earlybird") or "earlybird")
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--explain", type=int, default=0)
    ap.add_argument("--by-bytes", action="store_true")
    a = ap.parse_args()
    dev = os.path.join(a.corpus, "classify", "dev")
    if not os.path.exists(os.path.join(dev, "media_flows.csv")):
        sys.exit(f"no corpus at {dev}")
    configs = []
    for c in a.config or ["default="]:
        name, _, args = c.partition("=")
        configs.append((name, args.split()))
    flows, media = load_truth(dev)
    big = {k: v for k, v in flows.items() if v["packets"] >= MIN_PACKETS}
    call_pcaps = {p for (p, _k) in big if (p, _k) in media}
    pcaps = sorted({p for (p, _k) in big})
    sets = {
        "call flows": [k for k in big if k in media],
        "other UDP, call captures": [
            k for k in big if k not in media and k[0] in call_pcaps and big[k]["label"] != "Unknown"
        ],
        "other UDP, all captures": [
            k for k in big if k not in media and big[k]["label"] != "Unknown"
        ],
    }
    if a.by_bytes:
        rtp = {(p, k) for p in pcaps for k in rtp_flows(p)}
        for s in list(sets):
            sets[s + ", RTP by tshark"] = [k for k in sets[s] if k in rtp]
    result = {"sets": {s: len(v) for s, v in sets.items()}, "configs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in configs:
            seen = {}
            for p in pcaps:
                seen[p] = run(a.bin, p, extra, tmp)
            per = {}
            for s, keys in sets.items():
                hit = [k for k in keys if seen[k[0]].get(k[1])]
                per[s] = {
                    "n": len(keys),
                    "flagged": len(hit),
                    "flows": [
                        {
                            "pcap": big[k]["pcap"],
                            "flow": "%s:%d-%s:%d" % (k[1][0][0], k[1][0][1], k[1][1][0], k[1][1][1]),
                            "label": big[k]["label"],
                            "packets": big[k]["packets"],
                            "app": app_of(k[0]),
                            "verdict": ",".join(sorted(seen[k[0]].get(k[1], set()))),
                            "seen": k[1] in seen[k[0]],
                        }
                        for k in keys
                    ],
                }
            result["configs"][name] = per
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    names = [n for n, _ in configs]
    if a.markdown:
        print("| set | flows | " + " | ".join(names) + " |")
        print("|---|---:|" + "---:|" * len(names))
        for s in sets:
            n = len(sets[s])
            cells = []
            for c in names:
                k = result["configs"][c][s]["flagged"]
                cells.append("%d (%.2f)" % (k, k / n if n else 0.0))
            print(f"| {s} | {n} | " + " | ".join(cells) + " |")
        print()
        print("Per app (the capture's first word), call flows found and other labelled UDP")
        print("flows flagged, of all dev captures (leave one app out: no fitted parameter,")
        print("see the script):")
        print()
        print("| app | call flows | other UDP | " + " | ".join(f"{c}: found / flagged" for c in names) + " |")
        print("|---|---:|---:|" + "---:|" * len(names))
        apps = collections.defaultdict(lambda: ([], []))
        for j, s in enumerate(("call flows", "other UDP, all captures")):
            for i, fl in enumerate(result["configs"][names[0]][s]["flows"]):
                apps[fl["app"]][j].append(i)
        for app in sorted(apps):
            calls, others = apps[app]
            cells = []
            for c in names:
                cf = result["configs"][c]["call flows"]["flows"]
                of = result["configs"][c]["other UDP, all captures"]["flows"]
                found = sum(1 for i in calls if cf[i]["verdict"])
                flagged = sum(1 for i in others if of[i]["verdict"])
                cells.append(f"{found} / {flagged}")
            print(f"| {app} | {len(calls)} | {len(others)} | " + " | ".join(cells) + " |")
    else:
        for c in names:
            for s in sets:
                r = result["configs"][c][s]
                print(f"{c}\t{s}\t{r['flagged']}/{r['n']}")
                for fl in r["flows"]:
                    mark = "FOUND" if fl["verdict"] else ("-" if fl["seen"] else "UNSEEN")
                    if s == "call flows" or fl["verdict"]:
                        print(f"  {mark:6} {fl['verdict']:11} {fl['label']:28} {fl['packets']:6} {fl['pcap']} {fl['flow']}")
    if a.explain:
        print()
        print(f"Call flows {names[0]} misses, first {a.explain} datagrams (a = the first address):")
        first = result["configs"][names[0]]["call flows"]["flows"]
        for k, fl in zip(sets["call flows"], first):
            if fl["verdict"]:
                continue
            print(f"  {fl['label']} {fl['packets']} packets, {fl['pcap']} a={fl['flow']}")
            for line in explain(k[0], k[1], a.explain):
                print(line)


if __name__ == "__main__":
    main()
