#!/usr/bin/env python3
"""call_eval: score earlybird's media verdicts on the captures of calls.py.

Contract
--------
``call_eval.py --earlybird BIN DIR [--media-config TOML] [--train-on STACK
[--learned-out TOML]]
[--min-packets N] [--tshark] [--json OUT]`` reads every
``DIR/calls-N.pcap`` with its ``calls-N.labels.csv`` (calls.py), runs
``BIN flows PCAP --analyzer media --no-model --format jsonl`` on it and
matches each labelled flow (either direction of its 5-tuple) to the
record(s) of that 5-tuple (the one with the most packets, when a flow
timed out and started again). Over the labelled flows of at least N
packets (default 30), both directions counted, it prints:

* per row (class, stack, relay; negatives per program): flows, and how
  many were called audio, video or neither;
* the scores: call flows found (class audio or video, verdict audio or
  video), negatives flagged (class not-media, verdict audio or video),
  audio and video told apart (found call flows whose verdict is their
  class), each over all, UDP only (the windows examine UDP only), TCP
  only (RTP in clear over TURN-TCP and ICE-TCP), ICE-TCP only and per
  stack;
* with ``--train-on STACK``: ``BIN train-media`` learns intervals from
  that stack's labelled call flows and the other stack's flows are
  scored with them (and with the default), runs held out: the captures
  with an odd run id train, the even ones test; ``--learned-out TOML``
  keeps the learned intervals (for ``--media-config`` elsewhere, e.g.
  scripts/media_eval.py on the corpus);
* with ``--tshark``: tshark's RTP stream analysis (heuristic RTP on, as
  SRTP leaves the RTP header in clear) per server-to-client stream of
  the UDP calls (inside TURN channel data too): its lost-packet count against the link's loss on that
  flow (the server-side capture's packets minus the client side's, both
  counted by calls.py), and its jitter; where the records have the media
  analyzer's RTP fields (``media_rtp_packets``, ``media_rtp_lost``,
  ``media_rtp_reordered``, ``media_jitter_ms``), those beside tshark's
  largest stream of the flow; tshark has no clock for a dynamic payload
  type without SDP (its jitter is 0), so the harness also computes RFC
  3550 jitter itself from tshark's per-packet decode of that stream
  (capture time, RTP timestamp) at the clock the record states, and the
  clock that stream's timestamps show over capture time.

Where the records have them, it also prints the packet at which call
flows were decided (``media_packet``), what decided them
(``media_layer``) and whether each call session's flows share one call id
of their own (``media_call``).

``--json OUT`` writes the scores for a test to read. Exit 0 unless a
capture cannot be read or earlybird fails.
"""

import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

MEDIA = ("audio", "video")


def key(proto, a, ap, b, bp):
    x, y = (a, int(ap)), (b, int(bp))
    return (proto, min(x, y), max(x, y))


def read_labels(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def verdicts(bin_, pcap, config):
    cmd = [bin_, "flows", pcap, "--analyzer", "media", "--no-model", "-q", "-o", "-",
           "--format", "jsonl"]
    if config:
        cmd += ["--media-config", config]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"call_eval: {' '.join(cmd)}: {r.stderr.strip()}")
    best = {}
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        proto = {6: "TCP", 17: "UDP"}.get(rec.get("proto"))
        if proto is None:
            continue
        k = key(proto, rec["src"], rec["sport"], rec["dst"], rec["dport"])
        n = rec["fwd_packets"] + rec["bwd_packets"]
        if k not in best or n > best[k][0]:
            best[k] = (n, rec)
    return {k: v[1] for k, v in best.items()}


def score(flows):
    """flows: [(label row, verdict)] -> dict of counts."""
    s = dict(calls=0, found=0, kind_right=0, negatives=0, flagged=0)
    for row, v in flows:
        if row["class"] in MEDIA:
            s["calls"] += 1
            if v in MEDIA:
                s["found"] += 1
                s["kind_right"] += v == row["class"]
        else:
            s["negatives"] += 1
            s["flagged"] += v in MEDIA
    s["found_share"] = s["found"] / s["calls"] if s["calls"] else None
    s["flagged_share"] = s["flagged"] / s["negatives"] if s["negatives"] else None
    s["kind_share"] = s["kind_right"] / s["found"] if s["found"] else None
    return s


def fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def evaluate(bin_, captures, config, min_packets):
    out = []
    for pcap, labels in captures:
        v = verdicts(bin_, pcap, config)
        for row in labels:
            if int(row["c2s_pkts"]) + int(row["s2c_pkts"]) < min_packets:
                continue
            rec = v.get(key(row["proto"], row["src"], row["sport"], row["dst"],
                            row["dport"]))
            row = dict(row, record=rec or {})
            out.append((row, (rec or {}).get("media") or ""))
    return out


def detector_extras(flows):
    """What the record says beyond the verdict, where it has the fields
    (the media analyzer's RTP, call and timing fields): printed, and
    returned for the JSON."""
    res = {}
    lines = []
    found = [r for r, v in flows if r["class"] in MEDIA and v in MEDIA]
    at = sorted(r["record"]["media_packet"] for r in found
                if r["record"].get("media_packet") is not None)
    if at:
        res["verdict_packet_median"] = at[len(at) // 2]
        res["verdict_packet_max"] = at[-1]
        lines.append(f"verdict at packet (found call flows): median {at[len(at) // 2]}, "
                     f"largest {at[-1]}")
    layers = defaultdict(int)
    for r in found:
        layers[r["record"].get("media_layer") or "-"] += 1
    if any(k != "-" for k in layers):
        res["layers"] = dict(layers)
        lines.append("decided by: " + ", ".join(f"{k} {n}" for k, n in sorted(layers.items())))
    if any("media_call" in r["record"] for r, _ in flows):
        # One call id per session over its found flows, and no id shared by
        # two sessions.
        ids = defaultdict(set)
        for r, _ in flows:
            c = r["record"].get("media_call")
            if r["class"] in MEDIA and c:
                ids[(r["run"], r["session"])].add(c)
        owners = defaultdict(set)
        for k, cs in ids.items():
            for c in cs:
                owners[c].add(k)
        sessions = {(r["run"], r["session"]) for r, _ in flows if r["class"] in MEDIA}
        one = sum(1 for k in sessions if len(ids.get(k, ())) == 1 and
                  all(len(owners[c]) == 1 for c in ids[k]))
        res["calls_one_id"] = one
        res["calls"] = len(sessions)
        lines.append(f"call ids: {one} of {len(sessions)} call sessions have one id of "
                     "their own")
    if lines:
        print("\n" + "\n".join(lines))
    return res


def table(flows):
    rows = defaultdict(lambda: [0, 0, 0, 0])
    for row, v in flows:
        if row["class"] in MEDIA:
            name = f"{row['class']} | {row['stack']} | {row['relay']} | {row['proto']}"
        else:
            name = f"not-media | {row['session']} ({row['stack']}) | {row['relay']} | " \
                   f"{row['proto']}"
        r = rows[name]
        r[0] += 1
        r[1 + (0 if v == "audio" else 1 if v == "video" else 2)] += 1
    lines = ["| class | source | relay | transport | flows | audio | video | neither |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for name in sorted(rows):
        r = rows[name]
        lines.append(f"| {name} | {r[0]} | {r[1]} | {r[2]} | {r[3]} |")
    return "\n".join(lines)


def summary(title, flows):
    lines = [f"\n{title}", "| subset | call flows found | negatives flagged | "
             "audio/video right |", "|---|---:|---:|---:|"]
    result = {}
    subsets = [("all", lambda r: True), ("UDP", lambda r: r["proto"] == "UDP"),
               ("TCP", lambda r: r["proto"] == "TCP"),
               ("ICE-TCP", lambda r: r["relay"] == "ice-tcp")]
    for st in sorted({r["stack"] for r, _ in flows if r["class"] in MEDIA}):
        subsets.append((f"calls of {st} (UDP)",
                        lambda r, st=st: r["proto"] == "UDP" and
                        (r["stack"] == st or r["class"] not in MEDIA)))
    for name, f in subsets:
        s = score([x for x in flows if f(x[0])])
        result[name] = s
        lines.append(f"| {name} | {s['found']}/{s['calls']} ({fmt(s['found_share'])}) | "
                     f"{s['flagged']}/{s['negatives']} ({fmt(s['flagged_share'])}) | "
                     f"{s['kind_right']}/{s['found']} ({fmt(s['kind_share'])}) |")
    print("\n".join(lines))
    return result


def train(bin_, captures, stack, tmp):
    """train-media on `stack`'s call flows of `captures`: the TOML's path."""
    lab = os.path.join(tmp, f"train-{stack}.csv")
    with open(lab, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["pcap", "proto", "src", "sport", "dst", "dport", "media_kind"])
        for pcap, labels in captures:
            for r in labels:
                if r["class"] in MEDIA and r["stack"] == stack and r["proto"] == "UDP":
                    w.writerow([os.path.basename(pcap), "UDP", r["src"], r["sport"],
                                r["dst"], r["dport"], r["class"]])
    toml = os.path.join(tmp, f"learned-{stack}.toml")
    cmd = [bin_, "train-media", "--labels", lab, "-o", toml] + [p for p, _ in captures]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"call_eval: {' '.join(cmd)}: {r.stderr.strip()}")
    return toml


STANDARD_CLOCKS = (8000, 16000, 24000, 32000, 44100, 48000, 90000)


def tshark_packets(pcap):
    """Per RTP stream as tshark decodes it (heuristic RTP, inside TURN
    channel data too), keyed (ssrc, src, sport, dst, dport): its packets'
    capture times and RTP timestamps in arrival order."""
    r = subprocess.run(["tshark", "-n", "-r", pcap, "-o", "rtp.heuristic_rtp:TRUE", "-Y", "rtp",
                        "-T", "fields", "-e", "rtp.ssrc", "-e", "ip.src", "-e", "udp.srcport",
                        "-e", "ip.dst", "-e", "udp.dstport", "-e", "frame.time_epoch",
                        "-e", "rtp.timestamp"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"call_eval: tshark on {pcap}: {r.stderr.strip()}")
    out = defaultdict(list)
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) != 7 or "," in f[0] or not f[0]:
            continue
        out[(f[0].lower(), f[1], f[2], f[3], f[4])].append((float(f[5]), int(f[6])))
    return out


def rfc3550(pkts, clock):
    """RFC 3550 §6.4.1 interarrival jitter of one stream's (time, RTP
    timestamp) packets at `clock` Hz, computed here from tshark's decode:
    its mean over the packets after the first and its maximum, ms, and the
    same over the packets from the stream's second 1 on (the record's
    jitter starts where its clock was set, up to a second in: a sender's
    start, e.g. GStreamer's flushed backlog, is in the first figures
    only); and the clock the timestamps show over capture time (the
    nearest standard rate, and the raw ratio), to check the record's."""
    q = {"tshark_jitter_ms": None, "tshark_jitter_max_ms": None, "tshark_clock": None,
         "tshark_rate": None, "tshark_jitter_1s_ms": None, "tshark_jitter_1s_max_ms": None}
    if len(pkts) < 2:
        return q
    span_s = pkts[-1][0] - pkts[0][0]
    span_ts = (pkts[-1][1] - pkts[0][1]) % (1 << 32)
    if span_s > 0:
        rate = span_ts / span_s
        q["tshark_rate"] = round(rate)
        q["tshark_clock"] = min(STANDARD_CLOCKS, key=lambda c: abs(c - rate) / c)
    if not clock:
        return q
    j, j_sum, j_max = 0.0, 0.0, 0.0
    late_sum, late_n, late_max = 0.0, 0, 0.0
    for (t0, s0), (t1, s1) in zip(pkts, pkts[1:]):
        step = (s1 - s0) % (1 << 32)
        if step >= 1 << 31:
            step -= 1 << 32
        d = abs((t1 - t0) * 1e3 - step * 1e3 / clock)
        j += (d - j) / 16
        j_sum += j
        j_max = max(j_max, j)
        if t1 - pkts[0][0] >= 1.0:
            late_sum += j
            late_n += 1
            late_max = max(late_max, j)
    q["tshark_jitter_ms"] = round(j_sum / (len(pkts) - 1), 3)
    q["tshark_jitter_max_ms"] = round(j_max, 3)
    if late_n:
        q["tshark_jitter_1s_ms"] = round(late_sum / late_n, 3)
        q["tshark_jitter_1s_max_ms"] = round(late_max, 3)
    return q


def tshark_rtp(captures, flows):
    """tshark's RTP streams (heuristic RTP) per call flow, server to
    client, against the link's loss on that flow; and the record's RTP
    quality fields, where it has them, against tshark's."""
    records = {(r["run"], r["session"], r["sport"]): r["record"] for r, _ in flows}
    quality = []
    lines = ["\ntshark RTP streams, server to client, UDP calls "
             "(loss: the link's, from the two captures):",
             "| session | SSRC | packets | tshark lost | link lost | max jitter ms | "
             "mean jitter ms | problems |", "|---|---|---:|---:|---:|---:|---:|---|"]
    res = []
    for pcap, labels in captures:
        r = subprocess.run(["tshark", "-n", "-r", pcap, "-o", "rtp.heuristic_rtp:TRUE",
                            "-q", "-z", "rtp,streams"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"call_eval: tshark on {pcap}: {r.stderr.strip()}")
        streams = []
        for line in r.stdout.splitlines():
            p = line.split()
            # Start, end, src IP, port, dst IP, port, SSRC, payload..., packets,
            # lost (pct), min/mean/max delta, min/mean/max jitter, problem flag.
            if len(p) < 14 or p[2].count(".") != 3 or not p[3].isdigit():
                continue
            try:
                i = next(j for j in range(8, len(p)) if p[j].startswith("("))
                streams.append(dict(src=p[2], sport=p[3], dst=p[4], dport=p[5],
                                    ssrc=p[6], pkts=int(p[i - 2]), lost=int(p[i - 1]),
                                    mean_jitter=float(p[i + 5]),
                                    max_jitter=float(p[i + 6]),
                                    problem=" ".join(p[i + 7:])))
            except (StopIteration, ValueError, IndexError):
                continue
        rtp_rows = tshark_packets(pcap)
        for row in labels:
            if row["class"] not in MEDIA or row["proto"] != "UDP":
                continue
            mine = [s for s in streams if s["src"] == row["dst"] and s["sport"] ==
                    row["dport"] and s["dst"] == row["src"] and s["dport"] == row["sport"]]
            link_lost = int(row["s2c_sent"]) - int(row["s2c_pkts"])
            for s in mine:
                res.append(dict(session=row["session"], run=row["run"], link_lost=link_lost,
                                flow_pkts=int(row["s2c_pkts"]), **s))
                lines.append(f"| {row['session']} (run {row['run']}) | {s['ssrc']} | "
                             f"{s['pkts']} | {s['lost']} | {link_lost} | "
                             f"{s['max_jitter']:.2f} | {s['mean_jitter']:.2f} | "
                             f"{s['problem']} |")
            # The record's RTP quality (its flow's largest stream in clear),
            # beside tshark's largest stream of the flow, either direction.
            rec = records.get((row["run"], row["session"], row["sport"]), {})
            if rec.get("media_rtp_packets") is not None:
                both = [s for s in streams if {(s["src"], s["sport"]), (s["dst"], s["dport"])}
                        == {(row["src"], row["sport"]), (row["dst"], row["dport"])}]
                big = max(both, key=lambda s: s["pkts"], default=None)
                q = dict(session=row["session"], run=row["run"],
                         packets=rec["media_rtp_packets"], lost=rec.get("media_rtp_lost"),
                         reordered=rec.get("media_rtp_reordered"),
                         jitter_ms=rec.get("media_jitter_ms"),
                         clock=rec.get("media_clock"),
                         tshark_packets=big["pkts"] if big else None,
                         tshark_lost=big["lost"] if big else None)
                if big:
                    q.update(rfc3550(rtp_rows.get((big["ssrc"].lower(), big["src"], big["sport"],
                                                   big["dst"], big["dport"]), []),
                                     rec.get("media_clock")))
                    q["jitter_max_ms"] = rec.get("media_jitter_max_ms")
                quality.append(q)
    # Per flow: tshark's lost packets summed over the flow's streams
    # against the link's loss on the flow (which also counts RTCP, STUN
    # consent checks and retransmissions: an upper bound of RTP loss).
    per_flow = defaultdict(lambda: [0, 0])
    for x in res:
        f = per_flow[(x["run"], x["session"])]
        f[0] += x["lost"]
        f[1] = x["link_lost"]
    over = [k for k, (t, l) in per_flow.items() if t > l]
    t_sum = sum(t for t, _ in per_flow.values())
    l_sum = sum(lk for _, lk in per_flow.values())
    lines.append(f"\n{len(per_flow)} flows: tshark counts {t_sum} RTP packets lost, the "
                 f"link lost {l_sum} packets of those flows; tshark above the link on "
                 f"{len(over)} flows: {', '.join(f'{s} (run {r})' for r, s in over) or '-'}")
    if quality:
        lines += ["\nthe record's RTP quality (its largest stream in clear) and tshark's "
                  "largest stream of the flow:",
                  "| session | packets | lost | reordered | jitter ms mean / max | "
                  "tshark packets | tshark lost | RFC 3550 on tshark's decode, mean / max | "
                  "the same from 1 s on | clock: record / tshark's timestamps |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for q in quality:
            lines.append(f"| {q['session']} (run {q['run']}) | {q['packets']} | {q['lost']} | "
                         f"{q['reordered']} | {q['jitter_ms']} / {q.get('jitter_max_ms')} | "
                         f"{q['tshark_packets']} | {q['tshark_lost']} | "
                         f"{q.get('tshark_jitter_ms')} / {q.get('tshark_jitter_max_ms')} | "
                         f"{q.get('tshark_jitter_1s_ms')} / {q.get('tshark_jitter_1s_max_ms')} | "
                         f"{q.get('clock')} / {q.get('tshark_clock')} ({q.get('tshark_rate')}) |")
    print("\n".join(lines))
    return {"streams": res, "record_quality": quality}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--earlybird", required=True)
    p.add_argument("--media-config")
    p.add_argument("--train-on", help="a stack: train-media on it, test on the other")
    p.add_argument("--learned-out", help="with --train-on: keep the learned TOML there")
    p.add_argument("--min-packets", type=int, default=30)
    p.add_argument("--tshark", action="store_true")
    p.add_argument("--json")
    args = p.parse_args()
    captures = []
    for lab in sorted(glob.glob(os.path.join(args.dir, "calls-*.labels.csv"))):
        pcap = lab.replace(".labels.csv", ".pcap")
        if not os.path.exists(pcap):
            sys.exit(f"call_eval: {pcap} is missing (labels without a capture)")
        captures.append((pcap, read_labels(lab)))
    if not captures:
        sys.exit(f"call_eval: no calls-N.labels.csv in {args.dir}")
    out = {}
    flows = evaluate(args.earlybird, captures, args.media_config, args.min_packets)
    print(f"flows of at least {args.min_packets} packets, "
          f"{args.media_config or 'the default configuration'}:\n")
    print(table(flows))
    out["default"] = summary("scores:", flows)
    out["extras"] = detector_extras(flows)
    if args.train_on:
        odd = [c for c in captures if int(c[1][0]["run"]) % 2 == 1] if captures else []
        even = [c for c in captures if c not in odd]
        if not odd or not even:
            sys.exit("call_eval: --train-on needs runs of odd and even ids")
        with tempfile.TemporaryDirectory() as tmp:
            toml = train(args.earlybird, odd, args.train_on, tmp)
            if args.learned_out:
                shutil.copyfile(toml, args.learned_out)
            other = [(p, [r for r in rows if args.train_on not in r["stack"]])
                     for p, rows in even]
            held = evaluate(args.earlybird, other, toml, args.min_packets)
            out["trained"] = summary(
                f"trained on {args.train_on} (odd runs), tested on the other stack and "
                "the negatives (even runs):", held)
            base = evaluate(args.earlybird, other, args.media_config, args.min_packets)
            out["trained_baseline"] = summary(
                "the same flows with the default configuration:", base)
    if args.tshark:
        out["tshark"] = tshark_rtp(captures, flows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
