#!/usr/bin/env bash
# Alternating benchmark rounds: runs every (binary, configuration) pair once
# per round, ROUNDS rounds, and prints the best, median and worst Mpps of
# each. On a VM whose host load changes from minute to minute this is how
# BENCHMARKS.md compares binaries and configurations: each round sees every
# pair under about the same load.
#
# Usage:
#   scripts/bench_rounds.sh [-r ROUNDS] [-d DATA_DIR] [-n PACKETS] [-m MAX_FLOWS] BIN... -- CONFIG...
# where each CONFIG is one quoted string of `earlybird bench` options, e.g.
#   scripts/bench_rounds.sh -r 10 target/release/earlybird /tmp/old-earlybird -- \
#     "-t worst -s 1 -o null --stats full" "-t worst -s 1 -o null --stats basic --model c45.ebm"
# Every run is `BIN bench -n PACKETS -r 1 --no-memory --max-flows MAX_FLOWS
# --dir DATA_DIR CONFIG` (defaults: 10M packets, 2,100,000 flows, which the
# 10M-packet worst case needs; captures are generated once into DATA_DIR).
set -euo pipefail
rounds=10
dir=bench-data
packets=10000000
max_flows=2100000
while getopts "r:d:n:m:" o; do
  case $o in
    r) rounds=$OPTARG ;;
    d) dir=$OPTARG ;;
    n) packets=$OPTARG ;;
    m) max_flows=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-d DIR] [-n PACKETS] [-m MAX_FLOWS] BIN... -- CONFIG..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ $# -gt 0 ] && shift
configs=("$@")
if [ ${#bins[@]} -eq 0 ] || [ ${#configs[@]} -eq 0 ]; then
  echo "usage: $0 [-r ROUNDS] [-d DIR] [-n PACKETS] [-m MAX_FLOWS] BIN... -- CONFIG..." >&2
  exit 2
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; round++)); do
  for c in "${configs[@]}"; do
    for b in "${bins[@]}"; do
      # shellcheck disable=SC2086  # CONFIG is a list of options
      mpps=$("$b" bench -n "$packets" -r 1 --no-memory --max-flows "$max_flows" --dir "$dir" $c 2>&1 |
        tail -1 | awk '{print $7}')
      printf '%s\t%s\t%s\n' "$b" "$c" "$mpps" >> "$results"
    done
  done
done
for c in "${configs[@]}"; do
  for b in "${bins[@]}"; do
    awk -F'\t' -v b="$b" -v c="$c" '$1 == b && $2 == c {print $3}' "$results" | sort -g |
      awk -v b="$b" -v c="$c" '{a[NR] = $1} END {
        printf "%-40s %-60s best %6.2f  median %6.2f  worst %6.2f Mpps (%d rounds)\n",
          b, c, a[NR], a[int((NR + 1) / 2)], a[1], NR }'
  done
done
