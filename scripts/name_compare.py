#!/usr/bin/env python3
"""Payload names of earlybird against tshark, with ndpiReader as the third
opinion, counted both ways, on the developers' captures.

For every capture of CORPUS/ndpi/pcap whose flows nDPI's truth
(CORPUS/ndpi_truth.csv) labels TLS, QUIC or DNS, it runs

  earlybird flows CAP --labellers -f jsonl -o -
  tshark (ClientHellos over TCP and QUIC, the QUIC CRYPTO frames
          reassembled out of order; Google QUIC's SNI tag; DNS and mDNS
          questions)
  ndpiReader -i CAP -C FILE (its server_name_sni and ja3c columns)

and matches the flows by protocol and endpoints (either direction). For
each measure (SNI over TLS, SNI over QUIC, JA3, DNS query name) it counts
the flows where both tools have a value and they are equal or differ,
where only tshark has one, and where only earlybird has one; for the
last two it says how often ndpiReader has the same value as the tool
that has one. A flow tshark sees twice (two ClientHellos) counts its
first.

Usage: scripts/name_compare.py EARLYBIRD CORPUS/classify/dev [--markdown]
Needs tshark and ndpiReader on the PATH.
"""

import csv
import ipaddress
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

MEASURES = ["sni_tls", "sni_quic", "ja3", "dns_query"]
TITLES = {
    "sni_tls": "SNI, TLS over TCP",
    "sni_quic": "SNI, QUIC (and Google QUIC)",
    "ja3": "JA3 (TLS and QUIC)",
    "dns_query": "DNS query name",
}


def norm(a):
    try:
        return str(ipaddress.ip_address(a))
    except ValueError:
        return a


def key(proto, a, pa, b, pb):
    x, y = (norm(a), int(pa)), (norm(b), int(pb))
    return (int(proto),) + ((x, y) if x <= y else (y, x))


def last(s):
    return s.split(",")[-1] if s else ""


def captures(corpus):
    names = set()
    with open(os.path.join(corpus, "ndpi_truth.csv")) as f:
        for row in csv.reader(f):
            if not row or row[0] == "pcap":
                continue
            labels = " ".join(row[6:9])
            if any(p in labels for p in ("TLS", "QUIC", "DNS")):
                names.add(row[0])
    out = []
    for n in sorted(names):
        p = os.path.join(corpus, "ndpi", "pcap", n)
        if os.path.exists(p):
            out.append(p)
    return out


def earlybird(binary, cap):
    r = subprocess.run(
        [binary, "flows", cap, "--labellers", "-f", "jsonl", "-o", "-", "-q"],
        capture_output=True,
        text=True,
    )
    flows = {}
    for line in r.stdout.splitlines():
        v = json.loads(line)
        k = key(v["proto"], v["src"], v["sport"], v["dst"], v["dport"])
        vals = {
            "sni_tls": v.get("sni") if v["proto"] == 6 else None,
            "sni_quic": v.get("sni") if v["proto"] == 17 else None,
            "ja3": v.get("ja3"),
            "dns_query": v.get("dns_query"),
        }
        old = flows.get(k)
        if old is None:
            flows[k] = vals
        else:
            for m, x in vals.items():
                if old.get(m) is None and x:
                    old[m] = x
    return flows


def tshark_fields(cap, filt, fields):
    cmd = ["tshark", "-r", cap, "-o", "quic.reassemble_crypto_out_of_order:TRUE"]
    cmd += ["-Y", filt, "-T", "fields", "-E", "separator=|"]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return [l.split("|") for l in r.stdout.splitlines()]


def tshark(cap):
    """Per flow key: the first value of each measure tshark decodes, and
    the other key of each flow seen inside a tunnel (its outer and inner
    address pairs: earlybird keys it by one of them)."""
    flows = defaultdict(dict)
    alias = defaultdict(set)

    def put(keys, m, v):
        if not v:
            return
        for k in keys:
            if k is not None and m not in flows[k]:
                flows[k][m] = v

    def keys_of(c, proto, sp, dp, src4, src6, dst4, dst6):
        out = []
        for s, d in ((c[src6], c[dst6]), (c[src4], c[dst4])):
            if s and d:
                out.append(key(proto, last(s), sp, last(d), dp))
        for a in out:
            alias[a].update(b for b in out if b != a)
        return out

    f = ["ip.src", "ipv6.src", "tcp.srcport", "udp.srcport", "ip.dst", "ipv6.dst",
         "tcp.dstport", "udp.dstport", "tls.handshake.extensions_server_name",
         "tls.handshake.ja3"]
    for c in tshark_fields(cap, "tls.handshake.type == 1", f):
        if len(c) < 10:
            continue
        if c[2]:
            proto, sp, dp = 6, last(c[2]), last(c[6])
        else:
            proto, sp, dp = 17, last(c[3]), last(c[7])
        if not sp or not dp:
            continue
        ks = keys_of(c, proto, sp, dp, 0, 1, 4, 5)
        put(ks, "sni_tls" if proto == 6 else "sni_quic", c[8].split(",")[0])
        put(ks, "ja3", c[9].split(",")[0])
    f = ["ip.src", "ipv6.src", "udp.srcport", "ip.dst", "ipv6.dst", "udp.dstport",
         "gquic.tag.sni"]
    for c in tshark_fields(cap, "gquic.tag.sni", f):
        if len(c) < 7 or not c[2] or not c[5]:
            continue
        put(keys_of(c, 17, last(c[2]), last(c[5]), 0, 1, 3, 4), "sni_quic", c[6])
    f = ["ip.src", "ipv6.src", "tcp.srcport", "udp.srcport", "ip.dst", "ipv6.dst",
         "tcp.dstport", "udp.dstport", "dns.qry.name"]
    for c in tshark_fields(cap, "(dns || mdns) && dns.count.queries > 0", f):
        if len(c) < 9:
            continue
        if c[2]:
            proto, sp, dp = 6, last(c[2]), last(c[6])
        else:
            proto, sp, dp = 17, last(c[3]), last(c[7])
        if not sp or not dp:
            continue
        name = c[8].split(",")[0]
        put(keys_of(c, proto, sp, dp, 0, 1, 4, 5), "dns_query", name or ".")
    return flows, alias


def ndpi(cap):
    flows = {}
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "n.csv")
        subprocess.run(["ndpiReader", "-i", cap, "-C", out, "-q"],
                       capture_output=True)
        if not os.path.exists(out):
            return flows
        with open(out, newline="") as f:
            rows = list(csv.reader(f))
    if not rows:
        return flows
    head = [h.lstrip("#") for h in rows[0]]
    at = {h: i for i, h in enumerate(head)}
    for r in rows[1:]:
        try:
            k = key(r[at["protocol"]], r[at["src_ip"]], r[at["src_port"]],
                    r[at["dst_ip"]], r[at["dst_port"]])
        except (ValueError, IndexError):
            continue
        flows[k] = {"name": r[at["server_name_sni"]], "ja3": r[at["ja3c"]]}
    return flows


def ndpi_value(n, m):
    if n is None:
        return None
    return n["ja3"] if m == "ja3" else n["name"]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    binary, corpus = sys.argv[1], sys.argv[2]
    caps = captures(corpus)
    # measure -> counter name -> count
    count = {m: defaultdict(int) for m in MEASURES}
    examples = {m: defaultdict(list) for m in MEASURES}
    for cap in caps:
        eb, (ts, alias), nd = earlybird(binary, cap), tshark(cap), ndpi(cap)
        name = os.path.basename(cap)
        for k in set(eb) | set(ts):
            if k not in eb and any(a in eb for a in alias.get(k, ())):
                # A tunnelled flow earlybird keys by its other pair.
                continue
            e, t = eb.get(k, {}), ts.get(k, {})
            n = nd.get(k)
            for m in MEASURES:
                ev, tv = e.get(m) or None, t.get(m) or None
                if ev is None and tv is None:
                    continue
                nv = ndpi_value(n, m) or None
                if ev and tv:
                    c = "equal" if ev == tv else "differ"
                elif tv:
                    c = "tshark_only"
                    if nv == tv:
                        count[m]["tshark_only_ndpi_agrees"] += 1
                else:
                    c = "earlybird_only"
                    if nv == ev:
                        count[m]["earlybird_only_ndpi_agrees"] += 1
                count[m][c] += 1
                if c != "equal" and len(examples[m][c]) < 5:
                    examples[m][c].append((name, k[1][1], k[2][1], ev, tv, nv))
    print(f"captures: {len(caps)}")
    head = ("| measure | both, equal | both, differ | tshark only (ndpiReader agrees) "
            "| earlybird only (ndpiReader agrees) |")
    print(head)
    print("|---|---|---|---|---|")
    for m in MEASURES:
        c = count[m]
        print(f"| {TITLES[m]} | {c['equal']} | {c['differ']} | "
              f"{c['tshark_only']} ({c['tshark_only_ndpi_agrees']}) | "
              f"{c['earlybird_only']} ({c['earlybird_only_ndpi_agrees']}) |")
    if "--markdown" not in sys.argv:
        for m in MEASURES:
            for c, ex in examples[m].items():
                for e in ex:
                    print(f"{m} {c}: {e}")


if __name__ == "__main__":
    main()
