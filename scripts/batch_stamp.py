#!/usr/bin/env python3
"""Batch-stamped copy of a classic pcap (BENCHMARKS.md, "Batch-timestamp
correction"): every batch of B packets gets the stamp of its batch's last
packet, as an engine that stamps a batch when it fetches it writes it.

    batch_stamp.py IN OUT [--batch B] [--copies K]

B defaults to 32. With K copies, each copy follows the one before: its
stamps are shifted by (copy number) x (the input's span + 1 tick).
Little-endian pcap, microsecond or nanosecond stamps."""
import argparse
import struct

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("dst")
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--copies", type=int, default=1)
a = ap.parse_args()
data = open(a.src, "rb").read()
magic = struct.unpack("<I", data[:4])[0]
if magic not in (0xA1B2C3D4, 0xA1B23C4D):
    raise SystemExit(f"{a.src}: not a little-endian classic pcap (magic {magic:#x})")
tick = 1_000_000 if magic == 0xA1B2C3D4 else 1_000_000_000
off, recs = 24, []
while off + 16 <= len(data):
    s, frac, incl, _ = struct.unpack_from("<IIII", data, off)
    if off + 16 + incl > len(data):
        raise SystemExit(f"{a.src}: record at offset {off} is cut short")
    recs.append((s * tick + frac, data[off + 8 : off + 16 + incl]))
    off += 16 + incl
ts = [t for t, _ in recs]
b = a.batch
stamped = [ts[min(i // b * b + b - 1, len(ts) - 1)] for i in range(len(ts))]
span = ts[-1] - ts[0] + 1 if ts else 0
with open(a.dst, "wb") as f:
    f.write(data[:24])
    for k in range(a.copies):
        for t, (_, rest) in zip(stamped, recs):
            t += k * span
            f.write(struct.pack("<II", t // tick, t % tick) + rest)
print(f"{a.dst}: {len(recs) * a.copies} packets")
