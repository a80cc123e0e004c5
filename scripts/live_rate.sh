#!/usr/bin/env bash
# The live rate on this machine: how many packets a second `earlybird flows
# -i` takes without a drop, with AF_PACKET and with AF_XDP, one and two
# shards, beside tcpdump, softflowd and ndpiReader on the same interface at
# the same rates.
#
# One veth pair, each end in a network namespace of its own (the traffic
# never enters the machine's namespace), with one queue each way for one
# shard and the peers, two for two shards; MTU 1500 (veth runs XDP in its
# driver), GRO off on both ends. `earlybird replay --capture af-xdp
# --queues N --spread hosts` (both directions of a session on one queue)
# sends a generated capture at
# each offered rate of the sweep (`--pps`, looped to last about -S
# seconds), pinned to one core (taskset), while the capture runs pinned to
# the other. On veth the kernel's receive work (the copy into the ring or
# the XDP program) runs on the sender's core, in its softirq work.
#
# For each run it prints: the rate the sender reached, the packets sent,
# the packets the capture read, the drops (sent - read; earlybird's own
# count of the kernel's drops beside it), and the CPU time per packet:
# the capture process's (user + system, all its threads, /proc/PID/stat),
# the sender's (its children times), and the machine's softirq time
# (/proc/stat, all CPUs). The kernel here does not account interrupt time
# apart (no CONFIG_IRQ_TIME_ACCOUNTING): a tick that lands in softirq work
# counts as softirq, not as the process's. `total` = capture + sender +
# softirq, the CPU the run took system-wide; `busy` is every core's busy
# time over the run, other work on the machine included. Clock ticks are
# 1/CLK_TCK s.
#
# At the highest drop-free rate of each capture and shard count the
# records of one more run (CSV) are compared with those of the same
# packets read from the file: `same` (every column that does not depend on
# when packets were sent), `same flows and packets` (the flow keys in
# their orientation and the packet count of each), or `DIFFER`.
#
# `-c xdp-drop` measures the sender alone: the receiving end runs an XDP
# program that drops every frame (built with llc from four lines of LLVM
# IR), and "read" is the frames it dropped (veth's rx xdp_drops). `-F`
# runs the sender and the capture under SCHED_FIFO (chrt -f PRIO, `-p`,
# 20 unless told), for a loaded machine: other work then waits on those
# two cores.
#
# The sender runs on core 0 and the capture on core 1 unless `-C CPUS`
# (taskset's list) places the capture elsewhere: on a 2-core machine two
# shards on cores 0,1 share one with the sender. Within each rate and
# repeat the captures of -c take turns (af-packet, af-xdp, af-packet...),
# so a change in the machine's other load falls on both.
#
# (Debian 12's xdp-tools 1.3.1, whose xdp-trafficgen would send from the
# kernel, loads nothing on kernel 6.18: its objects carry a tracepoint
# program for xdp_redirect_map_err, which the kernel no longer has, and
# libbpf refuses the whole object. The sender is `earlybird replay`.)
#
# `-X xdp-live` sends with `replay --capture xdp-live` instead: the kernel
# runs an XDP program in live-frame mode that writes each frame of the
# file and redirects it out of the sending end (no socket, several Mpps
# from one core). veth hands a redirected frame to its peer only when the
# peer runs XDP: the AF_XDP capture and -c xdp-drop bring their own
# program, and for af-packet and the peers the capture's end gets one that
# passes every frame to the stack (XDP_PASS, built like the drop program).
# `sent` is then what the sending end's veth took (its
# tx_queue_*_xdp_xmit), and the frames it refused because its peer's ring
# was full (xdp_xmit_errors) are printed as `refused`: they never reached
# the capture. One sending core feeds one receive queue (veth picks the
# peer's queue by the sending CPU): with two shards, AF_XDP's second
# socket gets no frame of its own, only those the first hands over. Its
# `--pps` is an average over bursts of a tenth of a second's worth sent
# at the kernel's speed; a rate of 0 sends as fast as it goes (no
# --pps; its laps are counted for 5 Mpps).
#
# Every figure is of veth on this VM. Run every setting -A times (A/A) to
# see the noise. Needs root; installs ethtool and softflowd (Debian) when
# absent.
#
# `-Q CPUS` steers the capture end's receive work for the stack (RPS:
# each frame's delivery and AF_PACKET's copy into its ring) to CPUS,
# usually the capture's own core, which then does what the core a NIC
# queue's interrupt is bound to does. veth's own receive work (its ring of
# 256 frames drained, the XDP program, an skb built) stays on the sender's
# core, and so does AF_XDP's copy into the UMEM, which happens in XDP
# before any steering: -Q changes AF_PACKET's runs and the peers', not
# AF_XDP's. With -F the steered CPUs' ksoftirqd threads run one priority
# above the capture for the run. Each steered CPU queues frames in a
# backlog of net.core.netdev_max_backlog frames (1,000 by default, too few
# for the sender's bursts): set it first, e.g. `sysctl -w
# net.core.netdev_max_backlog=100000`. Frames dropped there count in
# /proc/net/softnet_stat and in `lost`, not in the capture's own count.
# (veth's threaded NAPI, which would move all of it, hands the sender's
# bursts a ring of 256 frames on another core: most are refused.)
#
# `-R BIN` sends with another build's `replay` (default: the -b binary).
# `-L DIR` keeps each earlybird run's end-of-run summary (its standard
# error) as DIR/CAPTURE-sSHARDS-RATE-REPEAT.err, and the records compared
# with the file's as DIR/records-CAPTURE-sSHARDS-RATE.csv (the file's as
# DIR/records-file.csv). `-O "OPTIONS"` adds
# options to every earlybird capture (e.g. "--ring-mib 256").
#
# Usage:
#   scripts/live_rate.sh [-b BIN] [-R BIN] [-t worst|realistic] [-n PACKETS]
#       [-r "RATES"] [-S SECONDS] [-c "af-packet af-xdp xdp-drop"] [-s "1 2"]
#       [-P "tcpdump tcpdump64 softflowd ndpiReader"] [-A REPEATS] [-d DIR] [-F]
#       [-X af-xdp|xdp-live] [-p PRIO] [-C CPUS] [-Q CPUS] [-L DIR] [-O OPTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${CARGO_TARGET_DIR:-target}/release/earlybird traffic=worst packets=100000
rates="50000 100000 200000 300000 400000" secs=4
captures="af-packet af-xdp" shard_list="1 2" peers="tcpdump softflowd ndpiReader"
repeats=2 dir=bench-data fifo=()
sender_bin= sender=af-xdp prio=20 fifo_on= cap_cpus=1 logs= extra= rps=
while getopts "b:R:t:n:r:S:c:s:P:A:d:FX:p:C:Q:L:O:" o; do
  case $o in
    b) bin=$OPTARG ;; R) sender_bin=$OPTARG ;; t) traffic=$OPTARG ;; n) packets=$OPTARG ;;
    r) rates=$OPTARG ;; S) secs=$OPTARG ;; c) captures=$OPTARG ;;
    s) shard_list=$OPTARG ;; P) peers=$OPTARG ;; A) repeats=$OPTARG ;;
    d) dir=$OPTARG ;; F) fifo_on=1 ;; X) sender=$OPTARG ;;
    p) prio=$OPTARG ;; C) cap_cpus=$OPTARG ;; Q) rps=$OPTARG ;; L) logs=$OPTARG ;; O) extra=$OPTARG ;;
    *) sed -n 2,98p "$0"; exit 2 ;;
  esac
done
[ -z "$fifo_on" ] || fifo=(chrt -f "$prio")
[ "$(id -u)" = 0 ] || { echo "live_rate.sh needs root (namespaces, veth, XDP)" >&2; exit 1; }
[ -x "$bin" ] || cargo build --release -q -p earlybird-cli
bin=$(realpath "$bin")
sender_bin=$(realpath "${sender_bin:-$bin}")
need=()
command -v ethtool >/dev/null || need+=(ethtool)
case " $peers " in *" softflowd "*) command -v softflowd >/dev/null || need+=(softflowd) ;; esac
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
for p in $peers; do command -v "${p%64}" >/dev/null || { echo "live_rate.sh: ${p%64} not found" >&2; exit 1; }; done
mkdir -p "$dir"
file=$(realpath "$dir")/rate_${traffic}_${packets}.pcap
[ -f "$file" ] || "$bin" gen "$traffic" -n "$packets" -o "$file" >/dev/null
work=$(mktemp -d)

a=ebratea b=ebrateb nsa=ebratem ns=ebraten
# With -Q and -F the receive work of the steered CPUs runs in their
# ksoftirqd threads once it is heavy; under a real-time capture they would
# never run, so they get one priority above it for the run and their own
# policy back at the end.
ksoft=()
cleanup() {
  local k
  for k in "${ksoft[@]}"; do chrt -o -p 0 "$k" 2>/dev/null || true; done
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cleanup
if [ -n "$rps" ] && [ -n "$fifo_on" ]; then
  for c in ${rps//,/ }; do
    k=$(pgrep -x "ksoftirqd/$c") && chrt -f -p $(( prio + 1 )) "$k" && ksoft+=("$k")
  done
fi
work=$(mktemp -d)
# The XDP programs that drop (XDP_DROP = 1, for -c xdp-drop) and pass
# (XDP_PASS = 2, for -X xdp-live) every frame.
case "$sender $captures " in *" xdp-drop "*|xdp-live*)
  command -v llc >/dev/null || { echo "live_rate.sh: -c xdp-drop and -X xdp-live need llc (llvm)" >&2; exit 1; }
  for prog in "drop 1" "pass 2"; do
    set -- $prog
    for ptr in ptr 'i8*'; do
      printf '%s\n' 'target triple = "bpf"' "define i32 @xdp_$1($ptr %ctx) section \"xdp\" {" \
        "  ret i32 $2" '}' '@_license = global [4 x i8] c"GPL\00", section "license"' >"$work/$1.ll"
      llc -march=bpf -filetype=obj -o "$work/$1.o" "$work/$1.ll" 2>/dev/null && break
    done
    [ -s "$work/$1.o" ] || { echo "live_rate.sh: llc could not build the XDP $1 program" >&2; exit 1; }
  done ;;
esac
case $sender in af-xdp|xdp-live) ;; *) echo "live_rate.sh: -X af-xdp or xdp-live" >&2; exit 2 ;; esac
# Frames the XDP programs of the capture's end dropped (veth's counters).
xdp_drops() { ip netns exec "$nsa" ethtool -S "$a" | awk '/rx_queue_[0-9]+_xdp_drops:/ { n += $2 } END { print n + 0 }'; }
# Frames the sending end handed to its peer's ring, and those it refused
# (ring full), for -X xdp-live.
xmit() { ip netns exec "$ns" ethtool -S "$b" | awk '/tx_queue_[0-9]+_xdp_xmit:/ { n += $2 } /xdp_xmit_errors:/ { e += $2 } END { print n + 0, e + 0 }'; }
# The pair with QUEUES queues each way (AF_XDP reads each receive queue
# with a shard of its own: as many queues as shards).
pair() {
  queues=$1
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  ip netns add "$nsa"
  ip netns add "$ns"
  ip -n "$nsa" link add "$a" numtxqueues "$queues" numrxqueues "$queues" type veth \
    peer name "$b" netns "$ns" numtxqueues "$queues" numrxqueues "$queues"
  for end in "$nsa $a" "$ns $b"; do
    set -- $end
    ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
    ip -n "$1" link set "$2" mtu 1500 up
    ip netns exec "$1" ethtool -K "$2" gro off 2>/dev/null || true
    ip -n "$1" link set lo up
  done
  # Receive packet steering: the stack's work for each frame the capture's
  # end passes (its delivery, AF_PACKET's copy into the ring) runs on
  # these CPUs instead of the sender's.
  if [ -n "$rps" ]; then
    local mask q
    mask=$(python3 -c 'import sys; print("%x" % sum(1 << int(c) for c in sys.argv[1].split(",")))' "$rps")
    for q in $(seq 0 $(( queues - 1 ))); do
      ip netns exec "$nsa" sh -c "echo $mask >/sys/class/net/$a/queues/rx-$q/rps_cpus"
    done
  fi
}

tick=$(getconf CLK_TCK)
# /proc/stat's first line: "busy softirq" in ticks, every CPU.
cpu_now() { awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $8 }' /proc/stat; }
proc_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
per_pkt() { awk -v t="$1" -v k="$tick" -v p="$2" 'BEGIN { if (p > 0) printf "%.0f", t / k * 1e9 / p; else print "-" }'; }

# One run: capture with "$@" (a command line, CAP in it stands for the
# interface) while the sender sends the file LOOPS times at RATE; runs
# "$before_stop" (if set) before stopping the capture; sets the globals
# below.
before_stop= stop_sig=INT
run() {
  local rate=$1 loops=$2 out=$3; shift 3
  local cmd=("${@/#CAP/$a}")
  # The kernel sender into a capture that brings no XDP program: the
  # capture's end passes every frame to the stack.
  local pass=
  if [ "$sender" = xdp-live ] && [ "${cmd[0]}" != sleep ]; then
    case " ${cmd[*]} " in *" --capture af-xdp "*) ;; *)
      ip -n "$nsa" link set dev "$a" xdp obj "$work/pass.o" sec xdp
      pass=1 ;;
    esac
  fi
  local x0 e0 x1 e1
  read -r x0 e0 < <(xmit)
  ip netns exec "$nsa" taskset -c "$cap_cpus" "${fifo[@]}" "${cmd[@]}" >"$out.out" 2>"$out.err" &
  local cap=$!
  sleep 1.5
  local c0 s0 sq0 c1 s1 sq1
  c0=$(proc_ticks "$cap")
  read -r s0 sq0 < <(cpu_now)
  local t0=$SECONDS
  # Children times of the subshell (the second line of `times`, which
  # must not run in a pipeline's subshell): the sender's user and system
  # time.
  local how=(--capture af-xdp --queues "$queues" --spread hosts)
  [ "$sender" = af-xdp ] || how=(--capture xdp-live)
  [ "$rate" = 0 ] || how+=(--pps "$rate")
  ( ip netns exec "$ns" taskset -c 0 "${fifo[@]}" "$sender_bin" replay -i "$b" "${how[@]}" \
      --loops "$loops" "$file" 2>"$out.sent"
    rc=$?
    times >"$out.times"
    exit $rc ) || { echo "live_rate.sh: the sender failed: $(cat "$out.sent")" >&2; exit 1; }
  sleep 1
  c1=$(proc_ticks "$cap" 2>/dev/null || echo "$c0")
  read -r s1 sq1 < <(cpu_now)
  [ -z "$before_stop" ] || eval "$before_stop"
  kill -"$stop_sig" "$cap" 2>/dev/null || true
  wait "$cap" 2>/dev/null || true
  [ -z "$pass" ] || ip -n "$nsa" link set dev "$a" xdp off
  sent=$(grep -oE '[0-9]+ packets' "$out.sent" | head -1 | grep -oE '[0-9]+' || echo 0)
  refused=-
  if [ "$sender" = xdp-live ]; then
    read -r x1 e1 < <(xmit)
    sent=$(( x1 - x0 )) refused=$(( e1 - e0 ))
  fi
  mpps=$(grep -oE '[0-9.]+ Mpps' "$out.sent" | head -1 | grep -oE '[0-9.]+' || echo 0)
  # "0m1.234s 0m0.567s": seconds to ticks.
  snd_t=$(awk -v k="$tick" 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, m, /[ms]/); t += m[1] * 60 + m[2] } printf "%.0f", t * k }' "$out.times")
  cap_t=$(( c1 - c0 ))
  busy=$(( s1 - s0 )) softirq=$(( sq1 - sq0 ))
}

printf "# veth on this VM; %s, %s packets; -S %s s a run; sender %s on core 0, capture on %s%s%s\n" "$traffic" \
  "$packets" "$secs" "$sender" "$cap_cpus" "${fifo_on:+, both under SCHED_FIFO $prio}" "${extra:+; earlybird $extra}"
printf "%-12s %6s %2s %8s %10s %10s %10s %10s %7s %7s %7s %7s %7s %7s  %s\n" \
  tool shards rep offered sent_Mpps sent read lost kdrop refused cap_ns snd_ns sirq_ns total_ns busy_ns
line() {
  printf "%-12s %6s %2s %8s %10s %10s %10s %10s %7s %7s %7s %7s %7s %7s  %s\n" "$1" "$2" "$3" "$4" "$mpps" \
    "$sent" "$read" "$(( sent - read ))" "$5" "$refused" "$(per_pkt "$cap_t" "$sent")" "$(per_pkt "$snd_t" "$sent")" \
    "$(per_pkt "$softirq" "$sent")" "$(per_pkt $(( cap_t + snd_t + softirq )) "$sent")" "$(per_pkt "$busy" "$sent")"
}

declare -A top bad
loops_of() { local r=$1; [ "$r" != 0 ] || r=5000000; echo $(( (r * secs + packets - 1) / packets )); }
declare -A lost_at
for s in $shard_list; do
  pair "$s"
  for rate in $rates; do
    for rep in $(seq 1 "$repeats"); do
      for capture in $captures; do
        o=$work/eb
        if [ "$capture" = xdp-drop ]; then
          # The sender alone: its frames dropped by XDP at the other end.
          ip -n "$nsa" link set dev "$a" xdp obj "$work/drop.o" sec xdp
          d0=$(xdp_drops)
          # (A background job ignores SIGINT: sleep stops on TERM.)
          stop_sig=TERM
          run "$rate" "$(loops_of "$rate")" "$o" sleep 3600
          stop_sig=INT
          read=$(( $(xdp_drops) - d0 ))
          ip -n "$nsa" link set dev "$a" xdp off
          line "$capture" "$s" "$rep" "$rate" -
          continue
        fi
        run "$rate" "$(loops_of "$rate")" "$o" "$bin" flows -i CAP --capture "$capture" -s "$s" -o /dev/null -f null \
          --no-model --stats basic --max-flows 1000000 $extra
        read=$(grep -oE '^packets: [0-9]+' "$o.err" | grep -oE '[0-9]+' || echo 0)
        kdrop=$(grep -oE 'offered by the kernel, [0-9]+ dropped' "$o.err" | grep -oE '[0-9]+ dropped' | grep -oE '[0-9]+' || echo "?")
        line "$capture" "$s" "$rep" "$rate" "$kdrop"
        [ -z "$logs" ] || { mkdir -p "$logs"; cp "$o.err" "$logs/$capture-s$s-$rate-$rep.err"; }
        if [ "$(( sent - read ))" -ne 0 ] || [ "$sent" -eq 0 ]; then
          lost_at["$capture $s $rate"]=1
        fi
      done
    done
  done
  # Highest rate at which every repeat (of it and the rates below, in the
  # order of -r) lost nothing.
  for capture in $captures; do
    [ "$capture" != xdp-drop ] || continue
    key="$capture $s"
    for rate in $rates; do
      [ -z "${lost_at["$capture $s $rate"]:-}" ] || bad[$key]=1
      [ "${bad[$key]:-}" = 1 ] || top[$key]=$rate
    done
  done
done

pair 1
for p in $peers; do
  for rate in $rates; do
    for rep in $(seq 1 "$repeats"); do
      o=$work/$p
      case $p in
        tcpdump|tcpdump64)
          # tcpdump64: with a ring of 64 MiB (-B), earlybird's default,
          # where tcpdump's own is 2 MiB.
          buf=(); [ "$p" = tcpdump ] || buf=(-B 65536)
          run "$rate" "$(loops_of "$rate")" "$o" tcpdump -i CAP "${buf[@]}" -w /dev/null
          read=$(grep -oE '^[0-9]+ packets captured' "$o.err" | grep -oE '^[0-9]+' || echo 0)
          kdrop=$(grep -oE '^[0-9]+ packets dropped by kernel' "$o.err" | grep -oE '^[0-9]+' || echo "?") ;;
        softflowd)
          # Its statistics, asked through its control socket before it
          # stops (SIGTERM: on SIGINT it went on).
          before_stop="ip netns exec $nsa softflowctl -c $work/sf.ctl statistics >$o.stats" stop_sig=TERM
          run "$rate" "$(loops_of "$rate")" "$o" softflowd -i CAP -d -n 127.0.0.1:9995 -p "$work/sf.pid" -c "$work/sf.ctl"
          before_stop= stop_sig=INT
          got=$(grep -oE 'Packets received by libpcap: [0-9]+' "$o.stats" | grep -oE '[0-9]+$' || echo 0)
          kdrop=$(grep -oE 'Packets dropped by libpcap: [0-9]+' "$o.stats" | grep -oE '[0-9]+$' || echo 0)
          read=$(( got - kdrop )) ;;
        ndpiReader)
          # (ndpiReader 4.2 prints no drop count: what it read is
          # "N packets total".)
          run "$rate" "$(loops_of "$rate")" "$o" ndpiReader -i CAP
          read=$(grep -oE 'of [0-9]+ packets total' "$o.out" | grep -oE '[0-9]+' || echo 0)
          kdrop="-" ;;
      esac
      line "$p" 1 "$rep" "$rate" "$kdrop"
    done
  done
done

# The records at the top drop-free rate against the file's.
timeless() {
  python3 - "$1" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, rows = rows[0], rows[1:]
last = head.index("bwd_size_std")
keep = [i for i in range(last + 1) if head[i] not in ("first_ts", "last_ts", "duration_ns")]
for r in sorted(",".join(r[i] for i in keep) for r in rows):
    print(r)
EOF
}
keyed() { python3 -c '
import collections, csv, sys
c = collections.Counter()
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]
f, b = h.index("fwd_packets"), h.index("bwd_packets")
for r in rows[1:]:
    c[",".join(r[:14])] += int(r[f]) + int(r[b])
for k in sorted(c): print(k, c[k])' "$1"; }
"$bin" flows --no-model -q --max-flows 1000000 -o "$work/file.csv" "$file"
[ -z "$logs" ] || { mkdir -p "$logs"; cp "$work/file.csv" "$logs/records-file.csv"; }
for key in "${!top[@]}"; do
  set -- $key
  pair "$2"
  set -- $key
  rate=${top[$key]}
  o=$work/same
  # One pass of the file at that rate.
  run "$rate" 1 "$o" "$bin" flows -i CAP --capture "$1" -s "$2" --no-model -q --max-flows 1000000 -o "$o.csv" $extra
  if cmp -s <(timeless "$o.csv" 2>/dev/null) <(timeless "$work/file.csv" 2>/dev/null); then
    verdict=same
  elif cmp -s <(keyed "$o.csv" 2>/dev/null) <(keyed "$work/file.csv" 2>/dev/null); then
    verdict="same flows and packets"
  else
    verdict=DIFFER
  fi
  [ -z "$logs" ] || { cp "$o.csv" "$logs/records-$1-s$2-$rate.csv"; cp "$o.err" "$logs/records-$1-s$2-$rate.err"; }
  printf "records at %s pps, %s, %s shard(s): %s (%s of %s packets sent)\n" "$rate" "$1" "$2" "$verdict" "$sent" "$packets"
done
