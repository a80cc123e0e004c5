#!/usr/bin/env python3
"""game_udp: a games-like periodic small-UDP exchange (client and server).

Contract
--------
``game_udp.py server --host H --port P`` answers every client it hears
with world-state snapshots at 20 Hz (seeded sizes, 80–300 bytes, larger
when "players" act) until SIGTERM. ``game_udp.py client --host H --port P
--seconds S [--seed N]`` sends input updates of 40–70 bytes at 30 Hz (a
tick loop, as action games send player input) for S seconds, counts the
snapshots received, prints ``sent N received M`` and exits 0 when it
received any. Not media: what a game sends looks periodic and small, which
is what a media detector must not call audio.
"""

import argparse
import random
import select
import socket
import sys
import time


def server(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((args.host, args.port))
    rng = random.Random(7)
    clients = {}
    next_tick = time.monotonic()
    while True:
        timeout = max(0.0, next_tick - time.monotonic())
        r, _, _ = select.select([s], [], [], timeout)
        if r:
            _, addr = s.recvfrom(2048)
            clients[addr] = time.monotonic()
        now = time.monotonic()
        if now >= next_tick:
            next_tick += 0.05
            for addr, seen in list(clients.items()):
                if now - seen > 2:
                    del clients[addr]
                    continue
                n = rng.randint(80, 140) if rng.random() < 0.8 else rng.randint(200, 300)
                s.sendto(rng.randbytes(n), addr)


def client(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((args.host, args.port))
    rng = random.Random(args.seed)
    sent = got = 0
    t_end = time.monotonic() + args.seconds
    next_tick = time.monotonic()
    while time.monotonic() < t_end:
        timeout = max(0.0, next_tick - time.monotonic())
        r, _, _ = select.select([s], [], [], timeout)
        if r:
            try:
                s.recv(2048)
                got += 1
            except ConnectionRefusedError:
                pass
        if time.monotonic() >= next_tick:
            next_tick += 1 / 30
            s.send(rng.randbytes(rng.randint(40, 70)))
            sent += 1
    print(f"sent {sent} received {got}")
    sys.exit(0 if got else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("role", choices=["server", "client"])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    server(args) if args.role == "server" else client(args)


if __name__ == "__main__":
    main()
