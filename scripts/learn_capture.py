#!/usr/bin/env python3
"""learn_capture.py: one long capture for scripts/learn_rate.sh, made of
the dev corpus's captures joined and repeated, with fresh stamps.

Usage: learn_capture.py DIR OUT.pcapng [COPIES]

Every capture of DIR (*.pcap, *.pcapng; the dev corpus's
classify/dev/ndpi/pcap) whose stamps span at most 10^6 s (capinfos) is
shifted to start 1 s after the one before (editcap -t), they are joined
in name order (mergecap -a, pcapng: the link types differ), and the
result is written COPIES times (default 30) one after the other, each
packet's stamp rewritten here: the gap to the packet before it in its
capture is kept, but never below 0 nor above 16 s (one more than the
default idle timeout, so flows still end where they ended; shorter runs
of packet time keep the per-second figures small). Needs capinfos,
editcap and mergecap (Wireshark's tools).
"""
import csv
import io
import os
import struct
import subprocess
import sys
import tempfile


def join(src, dst):
    files = sorted(f for f in os.listdir(src) if f.endswith((".pcap", ".pcapng")))
    out = subprocess.run(
        ["capinfos", "-T", "-m", "-r", "-S", "-a", "-e"] + [os.path.join(src, f) for f in files],
        capture_output=True, text=True, check=True).stdout
    t = 1_700_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        parts = []
        for row in csv.reader(io.StringIO(out)):
            name, a, e = row[0], float(row[1]), float(row[2])
            if e - a > 1e6:
                print(f"left out {name}: its stamps span {e - a:.0f} s", file=sys.stderr)
                continue
            p = os.path.join(tmp, f"{len(parts):03d}.pcapng")
            subprocess.run(["editcap", "-F", "pcapng", "-t", f"{t - a:.6f}", name, p], check=True)
            parts.append(p)
            t += (e - a) + 1.0
        subprocess.run(["mergecap", "-a", "-F", "pcapng", "-w", dst] + parts, check=True)


def retime(src, dst, cap, copies):
    data = open(src, "rb").read()
    blocks = []
    off = 0
    while off < len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        blocks.append((btype, data[off:off + blen]))
        off += blen
    res = []  # per interface: seconds a stamp unit
    now = 1_700_000_000.0
    with open(dst, "wb") as out:
        for c in range(copies):
            prev = None
            for btype, b in blocks:
                if btype == 0x0A0D0D0A:  # section header (one section)
                    if c == 0:
                        out.write(b)
                    continue
                if btype == 1:  # interface description: if_tsresol (9)
                    if c == 0:
                        r, o = 1e-6, 16
                        while o + 4 <= len(b) - 4:
                            code, ln = struct.unpack_from("<HH", b, o)
                            if code == 0:
                                break
                            if code == 9:
                                v = b[o + 4]
                                r = 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -v
                            o += 4 + (ln + 3) // 4 * 4
                        res.append(r)
                        out.write(b)
                    continue
                if btype != 6:  # enhanced packet blocks only
                    continue
                iface, hi, lo = struct.unpack_from("<III", b, 8)
                r = res[iface]
                orig = ((hi << 32) | lo) * r
                now += 1.0 if prev is None else min(max(orig - prev, 0.0), cap)
                prev = orig
                ts = int(round(now / r))
                b = bytearray(b)
                struct.pack_into("<II", b, 12, ts >> 32, ts & 0xFFFFFFFF)
                out.write(b)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    copies = int(sys.argv[3]) if len(sys.argv) == 4 else 30
    with tempfile.TemporaryDirectory() as tmp:
        one = os.path.join(tmp, "one.pcapng")
        join(src, one)
        retime(one, dst, 16.0, copies)


if __name__ == "__main__":
    main()
