#!/usr/bin/env bash
# Live capture on this machine, one run per shard count: `earlybird replay`
# sends a generated capture out of one end of a veth pair (each end in a
# network namespace of its own) while `earlybird flows -i` captures on the
# other end. For each run it prints the packets sent and the sender's rate,
# the packets captured and dropped by the kernel (ring full), and the
# capture process's CPU time per packet (user + system, all its threads,
# from /proc): on veth the kernel's receive work (copying frames into the
# rings, the fanout hash) runs in the sender's thread, so that CPU time is
# earlybird's own cost, and 1000 / (ns per packet) is the rate one core of
# it could take.
#
# Needs root. Usage:
#   scripts/bench_live.sh [-n PACKETS] [-l LOOPS] [-t worst|realistic]
#                         [-s "1 2"] [-p PPS] [-F hosts|flows] [-d DIR] [-b BIN]
set -euo pipefail
cd "$(dirname "$0")/.."

packets=200000 loops=10 traffic=worst shard_list="1 2" pps="" fanout=hosts dir=bench-data
bin=target/release/earlybird
while getopts "n:l:t:s:p:F:d:b:" o; do
  case $o in
    n) packets=$OPTARG ;; l) loops=$OPTARG ;; t) traffic=$OPTARG ;;
    s) shard_list=$OPTARG ;; p) pps=$OPTARG ;; F) fanout=$OPTARG ;;
    d) dir=$OPTARG ;; b) bin=$OPTARG ;;
    *) sed -n 2,17p "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "bench_live.sh needs root (veth pairs, packet sockets)" >&2; exit 1; }
[ -x "$bin" ] || cargo build --release -q -p earlybird-cli
bin=$(realpath "$bin")
mkdir -p "$dir"
file=$(realpath "$dir")/live_${traffic}_${packets}.pcap
[ -f "$file" ] || "$bin" gen "$traffic" -n "$packets" -o "$file" >/dev/null

a=ebbencha b=ebbenchb nsa=ebbencha ns=ebbench
cleanup() { ip netns del "$nsa" 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
# Both ends in namespaces of their own: the traffic never enters the
# machine's own network namespace.
ip netns add "$nsa"
ip netns add "$ns"
ip -n "$nsa" link add "$a" type veth peer name "$b" netns "$ns"
ip netns exec "$nsa" sysctl -qw "net.ipv6.conf.$a.disable_ipv6=1"
ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$b.disable_ipv6=1"
ip -n "$nsa" link set "$a" mtu 9000 up
ip -n "$ns" link set "$b" mtu 9000 up

tick=$(getconf CLK_TCK)
log=$(mktemp)
printf "%-9s %6s %6s %11s %9s %11s %9s %10s %12s  %s\n" traffic fanout shards sent sent_Mpps captured dropped ns/packet Mpps/core shares_%
for s in $shard_list; do
  ip netns exec "$nsa" "$bin" flows -i "$a" -s "$s" --fanout "$fanout" -f null -o - --no-model --stats basic --max-flows 1000000 2>"$log" &
  cap=$!
  sleep 1
  rate=()
  [ -n "$pps" ] && rate=(--pps "$pps")
  # CPU time from here on: the traffic's, not the start-up's (tables).
  read -r -a st < "/proc/$cap/stat"
  cpu0=$(( st[13] + st[14] ))
  out=$(ip netns exec "$ns" "$bin" replay "$file" -i "$b" --loops "$loops" "${rate[@]}" 2>&1)
  sleep 1
  read -r -a st < "/proc/$cap/stat"
  cpu=$(( st[13] + st[14] - cpu0 ))
  kill -INT "$cap"
  wait "$cap" || true
  sent=$(grep -oE '[0-9]+ packets' <<<"$out" | head -1 | grep -oE '[0-9]+' || echo 0)
  smpps=$(grep -oE '[0-9.]+ Mpps' <<<"$out" | head -1 | grep -oE '[0-9.]+' || echo 0)
  got=$(grep -oE '^packets: [0-9]+' "$log" | grep -oE '[0-9]+' || echo 0)
  drop=$(grep -oE 'offered by the kernel, [0-9]+ dropped' "$log" | grep -oE '[0-9]+' || echo 0)
  ns_pkt=$(awk -v c="$cpu" -v t="$tick" -v p="$got" 'BEGIN { if (p > 0) printf "%.1f", c / t * 1e9 / p; else print "-" }')
  per_core=$(awk -v n="$ns_pkt" 'BEGIN { if (n + 0 > 0) printf "%.2f", 1000 / n; else print "-" }')
  shares=$(grep '^packets in flows per shard' "$log" | grep -oE '\([0-9]+ %\)' | grep -oE '[0-9]+' | paste -sd/ - || true)
  printf "%-9s %6s %6s %11s %9s %11s %9s %10s %12s  %s\n" "$traffic" "$fanout" "$s" "$sent" "$smpps" "$got" "$drop" "$ns_pkt" "$per_core" "${shares:-100}"
done
rm -f "$log"
