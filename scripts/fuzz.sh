#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (cargo-fuzz, libFuzzer) one after the
# other, each until it has run SECONDS seconds or RUNS executions,
# whichever comes first (default: 600 s or 10,000,000), and prints one
# Markdown row per target for the results table of docs/FUZZING.md.
#
# Corpora: fuzz/corpus/TARGET, kept in the repository. Each run starts
# from it (plus, read-only, the seeds below) and adds what it finds; the
# corpus is then minimized (cargo fuzz cmin) so that it stays small.
# Seeds: testdata/pcap and, when present, the shared corpus's malformed/
# and tunnels/ captures for the targets that read capture files (capture,
# stream).
#
# A crash, leak, timeout or out-of-memory stops that target's run;
# libFuzzer leaves the input in fuzz/artifacts/TARGET/ and the row names
# it; the script goes on with the next target and exits 1 at the end.
# Replay one: cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-…; once
# fixed, its input becomes a regression test.
#
# Needs cargo-fuzz (cargo install cargo-fuzz) and a nightly toolchain, or
# the stable one with RUSTC_BOOTSTRAP=1 (used when no nightly is
# installed). The instrumented build goes to its own target triple's
# folder of CARGO_TARGET_DIR (target/ by default).
#
# Usage: scripts/fuzz.sh [-t SECONDS] [-r RUNS] [-j JOBS] [TARGET...]
#   -t  seconds per target (default 600)
#   -r  executions per target (default 10000000)
#   -j  libFuzzer processes per target (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

secs=600 runs=10000000 jobs=1
while getopts "t:r:j:" o; do
  case $o in
    t) secs=$OPTARG ;; r) runs=$OPTARG ;; j) jobs=$OPTARG ;;
    *) sed -n 2,29p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

cargo fuzz --version >/dev/null 2>&1 || { echo "fuzz.sh: cargo-fuzz is missing (cargo install cargo-fuzz)" >&2; exit 1; }
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi
cd fuzz
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <("${fuzz[@]}" list)

shared=$ROOT/../shared/corpus
seeds_for() {
  case $1 in
    capture | stream)
      echo "$ROOT/testdata/pcap"
      for d in malformed tunnels; do [ -d "$shared/$d" ] && echo "$shared/$d"; done
      ;;
  esac
  return 0
}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "fuzz.sh: ${targets[*]}; ${secs} s or ${runs} runs each; commit $commit, $(date -u +%F)" >&2
echo "| target | seconds | executions | exec/s | coverage (edges) | corpus | result |"
echo "|---|---|---|---|---|---|---|"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log=$(mktemp)
  mapfile -t seeds < <(seeds_for "$t")
  "${fuzz[@]}" build -O "$t" >&2
  # -jobs runs libFuzzer's processes side by side (their logs go to
  # fuzz-N.log); one job runs in this process.
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  set +e
  t0=$SECONDS
  "${fuzz[@]}" run -O "$t" "corpus/$t" "${seeds[@]}" -- \
    -max_total_time="$secs" -runs="$runs" "${parallel[@]}" \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 >"$log" 2>&1
  rc=$?
  took=$((SECONDS - t0))
  set -e
  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: K/SIZE exec/s: E ...".
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  if [ $rc = 0 ]; then
    result="no crash"
  else
    art=$(grep -oE "artifacts/$t/[^ ]+" "$log" | tail -n 1)
    result="FAILED (exit $rc): ${art:-see the log}"
    failed=1
    cp "$log" "artifacts/$t/fuzz.log"
  fi
  # Minimized: only inputs that add coverage are kept.
  "${fuzz[@]}" cmin -O "$t" "corpus/$t" >/dev/null 2>&1 || true
  files=$(find "corpus/$t" -type f | wc -l)
  size=$(du -sk --apparent-size "corpus/$t" | cut -f1)
  echo "| \`$t\` | $took | ${n:-?} | ${eps:-?} | $cov | $files inputs / ${size} KB | $result |"
  rm -f "$log"
done
exit $failed
