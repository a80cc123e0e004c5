#!/usr/bin/env python3
"""own_sockets: the IPv4 UDP/TCP endpoints the calling process owns.

Contract
--------
``own_sockets()`` returns {(proto, ip, port)} for every IPv4 UDP and TCP
socket among the process's open file descriptors (socket inodes from
/proc/self/fd matched against /proc/self/net/udp and tcp, which list the
process's network namespace), whatever library opened them.
``write_sockets(path, socks)`` writes them, one ``proto ip port`` a line,
atomically (a rename), adding those already in the file. The lab's peers
call these so the lab labels a capture's flows by who made them.
"""

import os


def own_sockets():
    """(proto, ip, port) of every IPv4 UDP/TCP socket this process owns."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    out = set()
    for proto in ("udp", "tcp"):
        with open(f"/proc/self/net/{proto}") as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[9] not in inodes:
                    continue
                hexip, hexport = cols[1].split(":")
                ip = ".".join(str(int(hexip[i:i + 2], 16)) for i in (6, 4, 2, 0))
                out.add((proto, ip, int(hexport, 16)))
    return out


def write_sockets(path, socks):
    if not path:
        return
    socks = set(socks) | read_sockets(path)
    with open(path + ".tmp", "w") as f:
        for proto, ip, port in sorted(socks):
            f.write(f"{proto} {ip} {port}\n")
    os.replace(path + ".tmp", path)


def read_sockets(path):
    out = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                proto, ip, port = line.split()
                out.add((proto, ip, int(port)))
    return out
