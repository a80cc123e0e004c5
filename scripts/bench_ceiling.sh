#!/usr/bin/env bash
# What two cores of this machine give for perfectly independent work, to
# judge the two-shard scaling against (BENCHMARKS.md "Two shards"). Runs, in
# alternating rounds (scripts/bench_rounds.sh), for each CONFIG:
#   earlybird        one process, free to use every core
#   earlybird@core0  the same confined to core 0 (taskset, all its threads)
#   earlybird@pair   two independent processes at once, pinned to core 0 and
#                    core 1; its Mpps is the sum of theirs
# Usage: scripts/bench_ceiling.sh [-r ROUNDS] [-d DIR] [-n PACKETS] [-m MAX_FLOWS] [-- CONFIG...]
# (default CONFIGs: the worst case with basic and with full statistics, one
# and two shards; the options before CONFIG go to bench_rounds.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/earlybird"
[ -x "$bin" ] || cargo build --release --manifest-path "$root/Cargo.toml" -p earlybird-cli >&2
opts=()
while getopts "r:d:n:m:" o; do
  case $o in
    r|d|n|m) opts+=("-$o" "$OPTARG") ;;
    *) echo "usage: $0 [-r ROUNDS] [-d DIR] [-n PACKETS] [-m MAX_FLOWS] [-- CONFIG...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
  configs=("-t worst -s 1 -o null --stats basic" "-t worst -s 2 -o null --stats basic"
           "-t worst -s 1 -o null --stats full" "-t worst -s 2 -o null --stats full")
fi
wrap=$(mktemp -d)
trap 'rm -rf "$wrap"' EXIT
cp "$bin" "$wrap/earlybird"
cat > "$wrap/earlybird@core0" <<EOS
#!/bin/sh
exec taskset -c 0 "$wrap/earlybird" "\$@"
EOS
cat > "$wrap/earlybird@pair" <<EOS
#!/bin/sh
a=\$(mktemp); b=\$(mktemp)
taskset -c 0 "$wrap/earlybird" "\$@" > "\$a" 2>&1 &
taskset -c 1 "$wrap/earlybird" "\$@" > "\$b" 2>&1
wait
x=\$(tail -1 "\$a" | awk '{print \$7}'); y=\$(tail -1 "\$b" | awk '{print \$7}')
rm -f "\$a" "\$b"
echo "pair - - - - - \$(awk -v x="\$x" -v y="\$y" 'BEGIN {print x + y}')"
EOS
chmod +x "$wrap/earlybird@core0" "$wrap/earlybird@pair"
cd "$root"
scripts/bench_rounds.sh "${opts[@]}" "$wrap/earlybird" "$wrap/earlybird@core0" "$wrap/earlybird@pair" -- "${configs[@]}" |
  sed "s#$wrap/##"
