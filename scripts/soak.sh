#!/usr/bin/env bash
# Churn soak of a live capture (not in CI: it runs for hours). Needs root.
#
# A veth pair joins two network namespaces made here (no traffic leaves
# them). `earlybird flows` captures on one end with a small flow table
# (--max-flows, so evictions run the whole time), the SIP/RTP call store
# (--voip-db, SQLite), an alarm on the packet rate, the Prometheus
# endpoint and CSV records written to /dev/null (formatted, not kept).
# `earlybird replay` sends on the other end, loop after loop until the
# time is up; every loop is a capture generated for it (`earlybird gen
# realistic` and `gen voip`, seed = loop number), so the addresses and
# ports change every loop and the table never sees the same flows twice;
# every fifth loop goes at twice the rate, which raises the alarm.
#
# Every 10 s the capture process's resident memory (VmRSS), open file
# descriptors and threads are sampled from /proc, with the kernel's
# offered and dropped packets, the records dropped for slow outputs, the
# flows open and the flows evicted from its metrics; samples go to
# DIR/samples.tsv. At the end: each figure's least-squares slope over the
# second half of the run (per hour), its first and last value, the run's
# summary (DIR/summary.txt) and, when gnuplot is installed (Debian's
# gnuplot-nox), a plot of the samples (DIR/soak.png).
#
# Usage: scripts/soak.sh [-t SECONDS] [-p PPS] [-f MAX_FLOWS] [-d DIR] [-b BIN] [-r PRIO]
#   -t  how long (default 7200: two hours)
#   -p  packets per second offered (default 5000)
#   -f  flow table size (default 1024: below the peak of open flows at
#       5,000 packets/s, about 2,000, so evictions run)
#   -d  where samples, summary and the call store go (default soak-data)
#   -b  the earlybird binary (default target/release/earlybird, built if
#       missing)
#   -r  run the capture and the sender under the real-time policy
#       SCHED_FIFO at this priority (chrt -f PRIO), as a probe on a shared
#       host would be set up (systemd's CPUSchedulingPolicy=fifo); the
#       captures of each loop are still generated at the normal policy.
#       Default: the normal policy.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=7200 pps=5000 max_flows=1024 dir=soak-data bin=target/release/earlybird prio=""
while getopts "t:p:f:d:b:r:" o; do
  case $o in
    t) secs=$OPTARG ;; p) pps=$OPTARG ;; f) max_flows=$OPTARG ;;
    d) dir=$OPTARG ;; b) bin=$OPTARG ;; r) prio=$OPTARG ;;
    *) sed -n 2,34p "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "soak.sh needs root (veth pairs, packet sockets)" >&2; exit 1; }
[ -x "$bin" ] || cargo build --release -q -p earlybird-cli
bin=$(realpath "$bin")
mkdir -p "$dir"
dir=$(realpath "$dir")
rm -f "$dir"/calls.sqlite* "$dir"/samples.tsv "$dir"/summary.txt

. scripts/churn_net.sh
port=19877
cap=""
cleanup() {
  [ -n "$cap" ] && kill -INT "$cap" 2>/dev/null || true
  churn_net_del
}
trap cleanup EXIT
churn_net "ebsoak$$"

rt=()
[ -n "$prio" ] && rt=(chrt -f "$prio")

churn_alarm "$dir/alarms.toml"
ip netns exec "$nsa" "${rt[@]}" "$bin" flows -i "$a" --no-progress --max-flows "$max_flows" \
  -o /dev/null -f csv --voip-db "$dir/calls.sqlite" \
  --alarms "$dir/alarms.toml" --alarms-out "$dir/alarms.csv" \
  --metrics-listen "$port" 2>"$dir/summary.txt" &
cap=$!
for _ in $(seq 100); do
  grep -q "capturing on" "$dir/summary.txt" && break
  kill -0 "$cap" 2>/dev/null || { cat "$dir/summary.txt" >&2; exit 1; }
  sleep 0.1
done

# One metric from the probe's endpoint (0 if it does not answer).
metrics() {
  ip netns exec "$nsa" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && \
    printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3" 2>/dev/null || true
}
metric() { awk -v n="$1" '$1 == n { v = $2 } END { printf "%d", v + 0 }' <<<"$2"; }

# The sender: a fresh capture per loop, until the time is up.
end=$((SECONDS + secs))
(
  loop=0
  while [ $SECONDS -lt $end ]; do
    loop=$((loop + 1))
    churn_loop "$bin" "$loop" $((pps * 20)) $((pps * 4)) "$dir"
    rate=$pps
    [ $((loop % 5)) = 0 ] && rate=$((pps * 2))
    ip netns exec "$ns" "${rt[@]}" "$bin" replay -i "$b" --pps "$rate" "$dir/loop.pcap" "$dir/voip.pcap" \
      >>"$dir/replay.log" 2>&1
  done
  echo "$loop" >"$dir/loops"
) &
sender=$!

printf 't_s\trss_kib\tfds\tthreads\tkernel_offered\tkernel_dropped\texport_dropped\tflows_active\tflows_evicted\n' >"$dir/samples.tsv"
start=$SECONDS
while kill -0 "$sender" 2>/dev/null; do
  m=$(metrics)
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$cap/status")
  threads=$(awk '/^Threads:/ { print $2 }' "/proc/$cap/status")
  fds=$(find "/proc/$cap/fd" -mindepth 1 -maxdepth 1 | wc -l)
  printf '%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n' $((SECONDS - start)) "$rss" "$fds" "$threads" \
    "$(metric earlybird_kernel_packets_total "$m")" \
    "$(metric earlybird_kernel_dropped_packets_total "$m")" \
    "$(metric earlybird_export_dropped_records_total "$m")" \
    "$(metric earlybird_flows_active "$m")" \
    "$(metric 'earlybird_flows_ended_total{reason="evicted"}' "$m")" >>"$dir/samples.tsv"
  sleep 10
done
wait "$sender" || true
kill -INT "$cap"
wait "$cap" || true
cap=""

# Slopes over the second half (least squares, per hour).
awk -F'\t' -v loops="$(cat "$dir/loops" 2>/dev/null || echo '?')" '
  NR == 1 { for (i = 2; i <= 4; i++) name[i] = $i; next }
  { t[NR] = $1; for (i = 2; i <= 9; i++) v[NR, i] = $i; n = NR
    if ($8 > peak) peak = $8 }
  END {
    half = t[n] / 2
    printf "soak: %d s, %d samples, %s loops\n", t[n], n - 1, loops
    for (i = 2; i <= 4; i++) {
      k = sx = sy = sxx = sxy = 0
      for (r = 2; r <= n; r++) if (t[r] >= half) {
        k++; sx += t[r]; sy += v[r, i]; sxx += t[r] * t[r]; sxy += t[r] * v[r, i]
      }
      d = k * sxx - sx * sx
      slope = d > 0 ? (k * sxy - sx * sy) / d * 3600 : 0
      printf "%-8s first %d, last %d, second-half slope %.1f per hour\n", name[i], v[2, i], v[n, i], slope
    }
    printf "kernel: %d packets offered, %d dropped; records dropped for slow outputs: %d\n", v[n, 5], v[n, 6], v[n, 7]
    printf "flows: at most %d open at a sample, %d evicted\n", peak, v[n, 9]
  }' "$dir/samples.tsv" | tee "$dir/report.txt"

if command -v gnuplot >/dev/null; then
  gnuplot <<EOF
set terminal pngcairo size 1000,800 font ",10"
set output "$dir/soak.png"
set datafile separator "\t"
set key top left
set multiplot layout 3,1 title "earlybird soak: $(head -1 "$dir/report.txt")"
set xlabel "seconds"
set ylabel "MiB"
plot "$dir/samples.tsv" using 1:(\$2/1024) with lines title "resident memory"
set ylabel "count"
set yrange [0:*]
set offsets 0, 0, 2, 0
plot "$dir/samples.tsv" using 1:3 with lines title "file descriptors", \
     "" using 1:4 with lines title "threads"
set autoscale y
set offsets 0, 0, 0, 0
set ylabel "open flows"
set y2label "evicted"
set y2tics
plot "$dir/samples.tsv" using 1:8 with lines title "open flows", \
     "" using 1:9 axes x1y2 with lines title "flows evicted (total, right axis)"
unset multiplot
EOF
  echo "plot: $dir/soak.png"
fi
echo "samples: $dir/samples.tsv; the run's summary: $dir/summary.txt"
