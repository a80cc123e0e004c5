#!/usr/bin/env bash
# learn_rate.sh: the shards' rate of a file run while self-training trains
# models, against the same run without training (issue 39, "training never
# stalls a shard").
#
# Usage: scripts/learn_rate.sh CAPTURE [ROUNDS] (EARLYBIRD=binary, default
# target/release/earlybird; WORK=directory for the models, default a
# temporary one). Alternating rounds (each round runs every configuration
# once, in turn), one shard, null output, the payload labellers on in all:
#
#   labellers   --labellers --learn-level proto            (nothing trains)
#   learn       --learn DIR, a C4.5 model every 50 payload labels, the
#               training thread allowed a whole core (--learn-cpu 1), no
#               swap points (--learn-swap-packets 0): training runs beside
#               the shards and they never wait for it
#   learn-swap  the same with swap points every 20,000 packets: the shards
#               wait at each point while a model due is trained
#
# Prints per round and configuration the summary's rate (packets over the
# run's wall time) and, for the learning runs, the models trained and the
# training thread's seconds (models.jsonl); then best and median rate per
# configuration. Rates are wall-clock figures: compare them only within
# one invocation.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
eb="${EARLYBIRD:-$here/../target/release/earlybird}"
cap="$1"
rounds="${2:-5}"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
common=(flows "$cap" -f null --no-progress -s 1 --learn-level proto)
learn=(--learn-every-labels 50 --learn-every-seconds 0 --learn-cpu 1)
declare -A rates
run() { # name args...
  local name="$1"
  shift
  local out
  out="$("$eb" "${common[@]}" "$@" 2>&1)"
  local rate
  # "packets: N read (…) in T s (…)": N / T, the summary's own figures.
  rate="$(sed -n 's/^packets: \([0-9]*\) read .* in \([0-9.]*\) s .*/\1 \2/p' <<<"$out" |
    awk '{ if ($2 > 0) printf "%.4f", $1 / $2 / 1e6 }')"
  [ -n "$rate" ] || { echo "no rate in the output of $name:" >&2; echo "$out" >&2; exit 1; }
  rates[$name]+="$rate "
  local extra=""
  if [ -f "$work/$name/models.jsonl" ]; then
    extra="$(python3 -c '
import json, sys
m = [json.loads(l) for l in open(sys.argv[1])]
t = sum(x["seconds"] for x in m)
print(f"{len(m)} models, {t:.3f} s training")' "$work/$name/models.jsonl")"
  fi
  printf '%-11s %s Mpps %s\n' "$name" "$rate" "$extra"
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  rm -rf "$work/learn" "$work/learn-swap"
  run labellers --labellers
  run learn --learn "$work/learn" "${learn[@]}" --learn-swap-packets 0
  run learn-swap --learn "$work/learn-swap" "${learn[@]}" --learn-swap-packets 20000
done
echo "== best (median) Mpps over $rounds rounds"
for name in labellers learn learn-swap; do
  python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.argv[2].split())
print(f"{sys.argv[1]:<11} {max(v):.3f} ({statistics.median(v):.3f})")' "$name" "${rates[$name]}"
done
