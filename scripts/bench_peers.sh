#!/usr/bin/env bash
# Runs the peer tools (nDPI, NFStream, softflowd, Argus, nfpcapd, pmacctd,
# tshark) and earlybird on the same generated captures, in one run, with
# ../shared/bench/run_peers.sh, so speeds can be reported as ratios.
#
# ../shared/bench is read-only: it is copied to $WORK (default
# /tmp/earlybird-peer-bench) first; generated captures are kept there.
# Usage: scripts/bench_peers.sh [extra env for run_peers.sh, e.g. REPS=5]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/earlybird-peer-bench}
if [ ! -x "$work/run_peers.sh" ]; then
  mkdir -p "$work"
  cp -r "$root/../shared/bench/." "$work/"
  chmod -R u+w "$work"
fi
cargo build --release --manifest-path "$root/Cargo.toml" -p earlybird-cli >&2
export EXTRA_NAME=earlybird_csv
# --max-flows 4000000: worst_10M holds 2M flows at once (softflowd gets -m 4000000 too).
export EXTRA_CMD="$root/target/release/earlybird flows {F} -o /dev/null --max-flows 4000000"
export EXTRA_FLOWS_RE='flows: '
cd "$work"
exec ./run_peers.sh
