# churn_net.sh: what scripts/soak.sh and scripts/heap_churn.sh share, sourced
# by both (bash). Root: network namespaces.
#
# churn_net TAG: two network namespaces made here, ${TAG}c (the capture's,
#   loopback up) and ${TAG}s (the sender's), joined by a veth pair ${TAG}a
#   (capture side) and ${TAG}b (sender side), both up; no traffic leaves
#   them. Sets a, b, nsa and ns to those names.
# churn_net_del: deletes the two namespaces (and the pair with them).
# churn_alarm FILE: the alarm of the churn, on the packet rate (EWMA, 30 s
#   of warm-up), written to FILE for --alarms.
# churn_loop BIN SEED MIX CALLS DIR: one loop's fresh captures, DIR/loop.pcap
#   (`gen realistic`, MIX packets) and DIR/voip.pcap (`gen voip`, CALLS
#   packets), seeded SEED so addresses and ports change every loop.

churn_net() {
  a="${1}a" b="${1}b" nsa="${1}c" ns="${1}s"
  ip netns add "$nsa"
  ip netns add "$ns"
  ip -n "$nsa" link add "$a" type veth peer name "$b" netns "$ns"
  ip -n "$nsa" link set lo up
  ip -n "$nsa" link set "$a" up
  ip -n "$ns" link set "$b" up
}

churn_net_del() {
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}

churn_alarm() {
  printf '[[alarm]]\nseries = "packets"\nmethod = "ewma"\nwarmup = 30\n' >"$1"
}

churn_loop() {
  "$1" gen realistic --seed "$2" -n "$3" -o "$5/loop.pcap" >/dev/null
  "$1" gen voip --seed "$2" -n "$4" -o "$5/voip.pcap" >/dev/null
}
