#!/usr/bin/env python3
"""linkem: a userspace link emulator between two TAP devices.

Contract
--------
``linkem.py --a TAPA --b TAPB [--delay MS] [--jitter MS] [--loss P]
[--rate MBIT] [--queue PKTS] [--seed N]`` creates the two TAP devices
(IFF_TAP | IFF_NO_PI), prints ``ready`` on stdout once both exist, and from
then on forwards every Ethernet frame read from one device to the other.
The caller moves the devices into network namespaces after ``ready`` (the
open file descriptors stay attached to the devices).

Each direction is emulated independently, as a one-way link:

* **loss**: a frame is dropped with probability ``--loss`` (Bernoulli,
  from a ``random.Random`` seeded by ``--seed`` and the direction);
* **rate**: frames are serialised at ``--rate`` Mbit/s (0 = unlimited)
  behind a drop-tail queue of ``--queue`` frames: a frame that finds the
  queue full is dropped (congestion loss);
* **delay / jitter**: after serialisation a frame is delivered
  ``--delay`` ms later plus a jitter drawn uniformly from
  [-jitter, +jitter] ms (seeded), never below zero.
* **order**: frames keep their order. A frame whose jittered delivery time
  falls before the previous frame's is delivered right after it (as a FIFO
  link would), so jitter shows in the gaps but never reorders.

Timing uses ``time.monotonic``; the loop sleeps in ``select`` until the next
frame is due or a frame arrives. On SIGTERM/SIGINT it prints per-direction
counters (frames forwarded, lost at random, dropped because the queue was
full or the device refused the write) to stderr, and the same losses
counted over IPv4 frames alone (``ip4-lost``, ``ip4-dropped``: a test that
counts IPv4 packets in captures compares against these, since ARP and IPv6
neighbour discovery cross the link too), and exits. It needs root (or CAP_NET_ADMIN) for /dev/net/tun.
"""

import argparse
import collections
import fcntl
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(name):
    """Create (or attach to) TAP device `name`; return its fd (non-blocking)."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    ifr = struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    return fd


class Direction:
    """One way of the link: loss, rate with a drop-tail queue, delay, jitter."""

    def __init__(self, name, out_fd, args, seed):
        self.name = name
        self.out_fd = out_fd
        self.delay = args.delay / 1000.0
        self.jitter = args.jitter / 1000.0
        self.loss = args.loss
        self.rate = args.rate * 1e6 / 8.0  # bytes per second, 0 = unlimited
        self.queue_limit = args.queue
        self.rng = random.Random(seed)
        # Frames waiting for the serialiser: (frame); the wire is busy until
        # `wire_free`. Frames on the wire: deque of (deliver_at, frame),
        # delivery times non-decreasing (FIFO).
        self.queue = collections.deque()
        self.wire_free = 0.0
        self.in_flight = collections.deque()
        self.last_delivery = 0.0
        self.forwarded = 0
        self.lost = 0
        self.dropped = 0
        self.lost4 = 0
        self.dropped4 = 0

    def _drop(self, frame, lost):
        ip4 = frame[12:14] == b"\x08\x00"
        if lost:
            self.lost += 1
            self.lost4 += ip4
        else:
            self.dropped += 1
            self.dropped4 += ip4

    def push(self, frame, now):
        if self.loss > 0 and self.rng.random() < self.loss:
            self._drop(frame, True)
            return
        if self.rate <= 0:
            self._launch(frame, now)
            return
        if not self.queue and self.wire_free <= now:
            self.wire_free = now + len(frame) / self.rate
            self._launch(frame, self.wire_free)
            return
        if len(self.queue) >= self.queue_limit:
            self._drop(frame, False)
            return
        self.queue.append(frame)

    def _launch(self, frame, sent_at):
        d = self.delay
        if self.jitter > 0:
            d += self.rng.uniform(-self.jitter, self.jitter)
        at = sent_at + max(0.0, d)
        if at < self.last_delivery:
            at = self.last_delivery
        self.last_delivery = at
        self.in_flight.append((at, frame))

    def pump(self, now):
        """Start queued frames, back to back, once the wire is free."""
        while self.queue and self.wire_free <= now:
            frame = self.queue.popleft()
            self.wire_free += len(frame) / self.rate
            self._launch(frame, self.wire_free)

    def deliver(self, now):
        while self.in_flight and self.in_flight[0][0] <= now:
            _, frame = self.in_flight.popleft()
            try:
                os.write(self.out_fd, frame)
                self.forwarded += 1
            except BlockingIOError:
                self._drop(frame, False)
            except OSError:
                # The device went away (namespace deleted): count, go on.
                self._drop(frame, False)

    def next_event(self):
        t = []
        if self.in_flight:
            t.append(self.in_flight[0][0])
        if self.queue:
            t.append(self.wire_free)
        return min(t) if t else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, help="first TAP device name")
    p.add_argument("--b", required=True, help="second TAP device name")
    p.add_argument("--delay", type=float, default=0.0, help="one-way delay, ms")
    p.add_argument("--jitter", type=float, default=0.0, help="+/- jitter, ms")
    p.add_argument("--loss", type=float, default=0.0, help="loss probability")
    p.add_argument("--rate", type=float, default=0.0, help="Mbit/s, 0 = unlimited")
    p.add_argument("--queue", type=int, default=100, help="queue limit, frames")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if not 0.0 <= args.loss < 1.0:
        p.error("--loss must be in [0, 1)")

    fa = open_tap(args.a)
    fb = open_tap(args.b)
    a_to_b = Direction(f"{args.a}->{args.b}", fb, args, args.seed * 2 + 1)
    b_to_a = Direction(f"{args.b}->{args.a}", fa, args, args.seed * 2 + 2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    print("ready", flush=True)

    src = {fa: a_to_b, fb: b_to_a}
    dirs = (a_to_b, b_to_a)
    while not stop:
        now = time.monotonic()
        nxt = [t for t in (d.next_event() for d in dirs) if t is not None]
        timeout = max(0.0, min(nxt) - now) if nxt else 0.2
        try:
            readable, _, _ = select.select([fa, fb], [], [], min(timeout, 0.2))
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd in readable:
            d = src[fd]
            for _ in range(64):
                try:
                    frame = os.read(fd, 65536)
                except (BlockingIOError, OSError):
                    break
                if not frame:
                    break
                d.push(frame, now)
        for d in dirs:
            d.pump(now)
            d.deliver(now)
    for d in dirs:
        print(
            f"linkem {d.name}: forwarded {d.forwarded} lost {d.lost} "
            f"dropped {d.dropped} ip4-lost {d.lost4} ip4-dropped {d.dropped4}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
