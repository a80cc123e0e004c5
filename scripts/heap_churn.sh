#!/bin/bash
# heap_churn.sh: where a live probe's heap goes under churn (issue 38, the
# soak's memory steps). Not in CI; root (network namespaces).
#
# Runs the churn of scripts/soak.sh (a small flow table, the SQLite call
# store, an alarm; a new realistic mix and new calls every loop) for SECS
# seconds with the probe under heaptrack, and writes the peak heap of each
# allocation site (heaptrack_print's peak "flame graph" lines) to
# DIR/peak.txt. Two runs of different lengths compared with
# `scripts/heap_churn.sh -c SHORT/peak.txt LONG/peak.txt` show which sites
# grow with the run: a map that is never emptied grows with every loop,
# a bounded cache or buffer stops at its bound.
#
#   scripts/heap_churn.sh -t 240 -d /tmp/h4 -b target/debug/earlybird
#   scripts/heap_churn.sh -t 720 -d /tmp/h12 -b target/debug/earlybird
#   scripts/heap_churn.sh -c /tmp/h4/peak.txt /tmp/h12/peak.txt
#
# Needs heaptrack (Debian: heaptrack). Results: BENCHMARKS.md, "Hours of
# churn".
set -eu

secs=240 pps=8000 max_flows=1024 dir=heap-churn bin=target/debug/earlybird
if [ "${1:-}" = -c ]; then
  exec python3 - "$2" "$3" <<'EOF'
import collections, sys
# Frames of the standard library and allocator plumbing are skipped: a
# site is named by the four innermost frames of the program's own code
# (or the SQLite call it is under).
STD = {"alloc.rs", "boxed.rs", "mod.rs", "node.rs", "entry.rs", "map.rs", "option.rs",
       "mem.rs", "function.rs", "spec_from_elem.rs", "spec_from_iter.rs",
       "spec_from_iter_nested.rs", "spec_extend.rs", "lib.rs", "clone.rs", "iterator.rs",
       "set.rs", "string.rs", "cell.rs", "rc.rs", "sync.rs", "arc.rs", "slice.rs",
       "borrow.rs", "panicking.rs", "backtrace.rs", "lifecycle.rs", "unwind_safe.rs",
       "panic.rs", "unix.rs", "result.rs", "range.rs", "into_iter.rs", "cmp.rs",
       "macros.rs", "traits.rs", "accum.rs", "native.rs", "scope.rs", "str.rs", "num.rs",
       "rt.rs", "scoped.rs", "raw.rs"}

def site(stack):
    own = []
    for f in stack.split(";"):
        if f.endswith(")") and " (" in f:
            fn, file = f[:-1].rsplit(" (", 1)
            if file not in STD:
                own.append(f"{fn}@{file}")
        elif f.startswith("sqlite3") or "rusqlite" in f:
            own.append(f.split("::h")[0])
            break
    return " < ".join(reversed(own[-4:]))

def load(path):
    c = collections.Counter()
    for line in open(path):
        stack, cost = line.rstrip().rsplit(" ", 1)
        c[site(stack)] += int(cost)
    return c

a, b = load(sys.argv[1]), load(sys.argv[2])
print(f"{'short':>10} {'long':>10} {'growth':>10}  site (bytes at the peak)")
for k in sorted(set(a) | set(b), key=lambda k: a[k] - b[k])[:20]:
    print(f"{a[k]:>10} {b[k]:>10} {b[k] - a[k]:>10}  {k[:160]}")
print(f"{sum(a.values()):>10} {sum(b.values()):>10}  total")
EOF
fi
while getopts t:p:f:d:b: o; do
  case $o in
    t) secs=$OPTARG ;; p) pps=$OPTARG ;; f) max_flows=$OPTARG ;;
    d) dir=$OPTARG ;; b) bin=$OPTARG ;;
    *) echo "usage: $0 [-t SECS] [-p PPS] [-f MAX_FLOWS] [-d DIR] [-b BINARY] | -c SHORT LONG" >&2; exit 2 ;;
  esac
done
command -v heaptrack >/dev/null || { echo "heaptrack is missing (apt-get install heaptrack)" >&2; exit 1; }
bin=$(realpath "$bin")
mkdir -p "$dir"
dir=$(realpath "$dir")
rm -f "$dir"/calls.sqlite* "$dir"/heap.* "$dir"/peak.txt

. "$(dirname "$0")/churn_net.sh"
trap churn_net_del EXIT
churn_net "ebheap$$"

churn_alarm "$dir/alarms.toml"
ip netns exec "$nsa" heaptrack -o "$dir/heap" "$bin" flows -i "$a" --no-progress \
  --max-flows "$max_flows" -o /dev/null -f csv --voip-db "$dir/calls.sqlite" \
  --alarms "$dir/alarms.toml" --alarms-out "$dir/alarms.csv" --duration "$secs" \
  2>"$dir/summary.txt" >"$dir/heaptrack.log" &
cap=$!
sleep 5
end=$((SECONDS + secs - 8))
loop=0
while [ $SECONDS -lt $end ]; do
  loop=$((loop + 1))
  churn_loop "$bin" "$loop" $((pps * 4)) "$pps" "$dir"
  ip netns exec "$ns" timeout $((end - SECONDS + 1)) "$bin" replay -i "$b" --pps "$pps" \
    "$dir/loop.pcap" "$dir/voip.pcap" >>"$dir/replay.log" 2>&1 || true
done
wait "$cap" || true
rm -f "$dir/loop.pcap" "$dir/voip.pcap"
heaptrack_print -f "$dir"/heap.zst --flamegraph-cost-type peak -F "$dir/peak.txt" >/dev/null
echo "$loop loops; $(heaptrack_print -f "$dir"/heap.zst 2>/dev/null | grep -E 'peak heap')"
echo "sites: $dir/peak.txt (compare two runs with $0 -c SHORT LONG)"
