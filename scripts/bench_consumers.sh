#!/usr/bin/env bash
# The probe's consumers on the worst case (issue 17, BENCHMARKS.md "The
# probe's consumers on the worst case"): whole-process packets per second
# of `earlybird flows` at one shard with the null exporter, with IPFIX to a
# file and per-second statistics, and with the dumper of every packet on
# top, for each binary given, rounds alternating between binaries.
#
#   scripts/bench_consumers.sh ROUNDS PACKETS WORST.pcap [WORST_NS.pcap] BIN...
#
# PACKETS: the packets in the file; WORST.pcap: `earlybird gen worst -n
# 10000000` (microsecond stamps);
# WORST_NS.pcap (optional, a path ending in .pcap): the same file with
# nanosecond stamps (`editcap -F nsecpcap`), whose records the dumper
# copies file to file. Output goes to /dev/shm.
#
# Drop the page cache first (`sync; echo 3 > /proc/sys/vm/drop_caches`, as
# root) and read the captures once: with a full page cache every page the
# dump and the IPFIX file take is reclaimed first, which halves the dump
# rows (BENCHMARKS.md, 2026-11-26).
#
# DUMP_DIR (environment, optional): where the dump goes (default /dev/shm).
#
# DISK_DIR (environment, optional): a directory on a disk's file system
# that takes O_DIRECT (ext4, XFS); adds the row `ipfix+stats+dump-direct`,
# the dump written there past the page cache (`--dump-direct`), the IPFIX
# file still in /dev/shm.
set -euo pipefail
rounds=$1 packets=$2 worst=$3; shift 3
ns=""
if [[ "${1:-}" == *.pcap ]]; then ns=$1; shift; fi
dump=${DUMP_DIR:-/dev/shm}/eb-bench-dump
disk=${DISK_DIR:+$DISK_DIR/eb-bench-dump}
run() { # label bin file args...
  local label=$1 bin=$2 file=$3; shift 3
  # Each run starts without the files the one before wrote: overwriting
  # them would time the kernel freeing their pages at open (O_TRUNC of the
  # 334 MB IPFIX file: 0.05 s of CPU in a perf profile, 2026-11-26), which
  # is not the run's work.
  rm -rf "$dump" /dev/shm/eb-bench.ipfix; mkdir -p "$dump"
  if [ -n "$disk" ]; then rm -rf "$disk"; mkdir -p "$disk"; sync; fi
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" flows "$file" -q --no-model --max-flows 2100000 -s 1 "$@" >/dev/null
  t1=$(date +%s.%N)
  python3 -c "import sys; print('%-22s %-24s %6.2f Mpps' % (sys.argv[1], sys.argv[2], int(sys.argv[3]) / 1e6 / (float(sys.argv[5]) - float(sys.argv[4]))))" \
    "$label" "$bin" "$packets" "$t0" "$t1"
}
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    run null "$bin" "$worst" -f null
    run ipfix+stats "$bin" "$worst" -o /dev/shm/eb-bench.ipfix --stats-out /dev/null
    run ipfix+stats+dump "$bin" "$worst" -o /dev/shm/eb-bench.ipfix --stats-out /dev/null --dump-dir "$dump"
    if [ -n "$ns" ]; then
      run ipfix+stats+dump-ns "$bin" "$ns" -o /dev/shm/eb-bench.ipfix --stats-out /dev/null --dump-dir "$dump"
    fi
    if [ -n "$disk" ]; then
      run ipfix+stats+dump-direct "$bin" "$worst" -o /dev/shm/eb-bench.ipfix --stats-out /dev/null --dump-dir "$disk" --dump-direct
    fi
  done
done
rm -rf "$dump" /dev/shm/eb-bench.ipfix
if [ -n "$disk" ]; then rm -rf "$disk"; fi
