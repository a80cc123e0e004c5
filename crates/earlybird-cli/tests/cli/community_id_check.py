"""Checks the community_id of every flow of an earlybird CSV against the
independent implementation of PyPI's `communityid` (Corelight's reference).

Usage: community_id_check.py FLOWS.csv SEED

Recomputes each row's ID from its src, dst, proto, ports (ICMP: type and
code) with communityid and compares; a row whose ICMP type is empty must
have an empty ID. Prints the rows checked per protocol; exits 1 naming the
first row that differs.
"""

import collections
import csv
import sys

import communityid


def expected(cid, row):
    proto = int(row["proto"])
    src, dst = row["src"], row["dst"]
    if proto in (1, 58):
        if row["icmp_type"] == "":
            return ""
        make = communityid.FlowTuple.make_icmp if proto == 1 else communityid.FlowTuple.make_icmp6
        tup = make(src, dst, int(row["icmp_type"]), int(row["icmp_code"]))
    elif proto in (6, 17, 132):
        tup = communityid.FlowTuple(proto, src, dst, int(row["sport"]), int(row["dport"]))
    else:
        tup = communityid.FlowTuple(proto, src, dst)
    return cid.calc(tup)


def main():
    path, seed = sys.argv[1], int(sys.argv[2])
    cid = communityid.CommunityID(seed=seed)
    per_proto = collections.Counter()
    v6 = 0
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            want = expected(cid, row)
            got = row["community_id"]
            if got != want:
                print(f"row {i + 1}: {row['proto']} {row['src']}:{row['sport']} -> "
                      f"{row['dst']}:{row['dport']} icmp {row['icmp_type']}/{row['icmp_code']}: "
                      f"earlybird {got!r}, communityid {want!r}")
                return 1
            per_proto[int(row["proto"])] += 1
            v6 += row["ip_version"] == "6"
    total = sum(per_proto.values())
    print(f"{total} flows equal ({v6} IPv6); by protocol: "
          + ", ".join(f"{p}: {n}" for p, n in sorted(per_proto.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
