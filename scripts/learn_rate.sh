#!/usr/bin/env bash
# learn_rate.sh: the shards' rate of a file run while self-training trains
# models, against the same run without training (issue 39, "training never
# stalls a shard").
#
# Usage: scripts/learn_rate.sh CAPTURE [ROUNDS]
#   EARLYBIRD  the binary (default target/release/earlybird); several, as
#              "TAG=PATH TAG=PATH", compare builds: each round runs every
#              configuration with each, and configurations are named TAG:NAME
#   SHARDS     shard counts to run (default "1 2")
#   WORK       directory for the models and runs.jsonl (default a temporary one)
#   LEARN      the training options of the learning runs (default: a forest
#              on a reservoir of 20,000 flows a class, a model every 2,000
#              payload labels, so that a model takes a core for a good part
#              of a second and the training thread is busy most of the run)
#   CHRT       a prefix for the measured process (e.g. "chrt -f 39"); the
#              watcher then runs at chrt -f 40, so keep the process below 40:
#              at the same priority the watcher waits while the process's
#              threads hold both cores, and its samples miss the shards'
#              first and last milliseconds
#
# Alternating rounds: each round runs every configuration once per shard
# count, in turn, `-f null`, the payload labellers on in all:
#
#   labellers    --labellers --learn-level proto (nothing trains)
#   labellers2   the same again (A/A: the noise between two equal runs)
#   learn        --learn DIR $LEARN --learn-cpu 1 --learn-swap-packets 0: the
#                training thread may take a whole core, no swap points (the
#                shards never wait for it)
#   learn-half   the same with --learn-cpu 0.5 (the default share)
#   learn-swap   --learn-cpu 1 with swap points every 100,000 packets: a
#                model due at a point trains while the shards run on and is
#                swapped in at the next point, where the shards wait for
#                what is left of its training
#   learn-default  --learn DIR alone: every learning option at its default
#                (C4.5, 2,000 flows a class, a model every 10,000 payload
#                labels or 300 s of packet time, --learn-cpu 0.5, swap
#                points every 1,000,000 packets)
#
# Each run goes through scripts/learn_watch.py, which samples the threads'
# CPU time every 5 ms of wall time (/proc/PID/task/TID/schedstat) and
# splits the run into training intervals (the training thread ran at
# least half of the interval) and the others. Per run, runs.jsonl gets the
# summary's rate (packets over the run's wall time), the shards' rate (over
# the wall time while shard threads ran: without the end-of-run model) and,
# for both parts,
# the share of the wall time each thread ran and waited runnable. Printed
# at the end, per shard count and configuration: best and median Mpps, and
# the medians of the shards' and the exporter's CPU share in training
# intervals and outside them. Rates are wall-clock figures: compare them
# only within one invocation.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
read -r -a binaries <<<"${EARLYBIRD:-$here/../target/release/earlybird}"
cap="$1"
rounds="${2:-5}"
work="${WORK:-$(mktemp -d)}"
shards="${SHARDS:-1 2}"
learn_opts="${LEARN:---learn-algo forest --learn-reservoir 20000 --learn-every-labels 2000 --learn-every-seconds 0}"
read -r -a prefix <<<"${CHRT:-}"
watch=(python3 "$here/learn_watch.py")
[ -n "${CHRT:-}" ] && watch=(chrt -f 40 "${watch[@]}")
mkdir -p "$work"
: >"$work/runs.jsonl"
read -r -a learn <<<"$learn_opts"
run() { # shards name args...
  local s="$1" name="$2"
  shift 2
  [ "${#binaries[@]}" -gt 1 ] && name="$tag:$name"
  local out
  out="$("${watch[@]}" -- "${prefix[@]}" "$eb" flows "$cap" -f null --no-progress -s "$s" \
    --learn-level proto --labellers "$@")"
  local models=""
  local dir="$work/${name/:/-}-$s"
  if [ -f "$dir/models.jsonl" ]; then
    models="$(wc -l <"$dir/models.jsonl")"
  fi
  python3 -c '
import json, sys
r = json.loads(sys.argv[1])
r.update(shards=int(sys.argv[2]), config=sys.argv[3], round=int(sys.argv[4]),
         models=int(sys.argv[5]) if sys.argv[5] else 0)
print(json.dumps(r))' "$out" "$s" "$name" "$r" "$models" >>"$work/runs.jsonl"
  tail -n 1 "$work/runs.jsonl" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
def share(part, t):
    return sum(v for k, v in r[part]["ran"].items() if k.startswith(t))
tr, ot = r["training"], r["other"]
line = "%d shard(s) %-13s %.3f Mpps (shards %.3f)" % (r["shards"], r["config"], r["mpps"], r["shards_mpps"])
if tr["wall_s"] > 0:
    line += "  training %.2f s: shards ran %.2f, exporter %.2f;" % (
        tr["wall_s"], share("training", "eb-shard"), share("training", "eb-export"))
line += " otherwise shards ran %.2f, exporter %.2f" % (share("other", "eb-shard"), share("other", "eb-export"))
if r["models"]:
    line += "; %d models" % r["models"]
print(line)'
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  for s in $shards; do
    for b in "${binaries[@]}"; do
      eb="${b#*=}"
      tag="${b%%=*}"
      [ "$tag" = "$b" ] && tag="$eb"
      d="$work/"
      [ "${#binaries[@]}" -gt 1 ] && d="$work/$tag-"
      rm -rf "$d"learn*-"$s"
      run "$s" labellers
      run "$s" learn --learn "${d}learn-$s" "${learn[@]}" --learn-cpu 1 --learn-swap-packets 0
      run "$s" labellers2
      run "$s" learn-half --learn "${d}learn-half-$s" "${learn[@]}" --learn-cpu 0.5 --learn-swap-packets 0
      run "$s" learn-swap --learn "${d}learn-swap-$s" "${learn[@]}" --learn-cpu 1 --learn-swap-packets 100000
      run "$s" learn-default --learn "${d}learn-default-$s"
    done
  done
done
echo "== best (median) over $rounds rounds; medians of the CPU shares (of the wall time; a share of 1 is a whole core)"
python3 - "$work/runs.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def share(r, part, t):
    return sum(v for k, v in r[part]["ran"].items() if k.startswith(t))
def cpu(r, t):
    # CPU seconds of the threads named t... while shard threads ran.
    return sum(r[p]["wall_s"] * share(r, p, t) for p in ("training", "other"))
print("| shards | configuration | Mpps best (median) | shards Mpps best (median) | training s a run | shards ran, training | exporter ran, training | shards ran, otherwise | exporter ran, otherwise | exporter CPU s | models |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
keys = []
for r in runs:
    if (r["shards"], r["config"]) not in keys:
        keys.append((r["shards"], r["config"]))
for s, c in keys:
    rs = [r for r in runs if r["shards"] == s and r["config"] == c]
    v = [r["mpps"] for r in rs]
    w = [r["shards_mpps"] for r in rs]
    med = lambda f: statistics.median(f(r) for r in rs)
    tr = [r for r in rs if r["training"]["wall_s"] > 0]
    medt = lambda f: f"{statistics.median(f(r) for r in tr):.2f}" if tr else "—"
    print(f"| {s} | {c} | {max(v):.3f} ({statistics.median(v):.3f}) | {max(w):.3f} ({statistics.median(w):.3f}) | {med(lambda r: r['training']['wall_s']):.2f} "
          f"| {medt(lambda r: share(r, 'training', 'eb-shard'))} | {medt(lambda r: share(r, 'training', 'eb-export'))} "
          f"| {med(lambda r: share(r, 'other', 'eb-shard')):.2f} | {med(lambda r: share(r, 'other', 'eb-export')):.2f} "
          f"| {med(lambda r: cpu(r, 'eb-export')):.3f} | {med(lambda r: r['models']):.0f} |")
EOF
