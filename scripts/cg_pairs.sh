#!/usr/bin/env bash
# cg_pairs.sh: instructions of the whole process (callgrind, every thread)
# of `earlybird flows` for two or more binaries over a list of
# configurations, in rounds that alternate the binaries' order, and a
# digest of every file each run wrote, so that the outputs can be compared.
#
#   scripts/cg_pairs.sh [-r ROUNDS] [-j JOBS] -i INDIR -w WORKDIR -o OUT.tsv \
#       TAG=BIN [TAG=BIN ...] -- 'NAME|INPUT|OPTIONS' ...
#
# INPUT is a capture INDIR/INPUT.pcap; OPTIONS are `flows` options (split
# on spaces), run as `earlybird flows INDIR/INPUT.pcap OPTIONS -q
# --no-progress` in a fresh directory under WORKDIR, so relative output
# names (c.csv, x.ipfix, D, x.pcap) land there. Round 1 runs the binaries
# in the order given, round 2 in the reverse order, and so on; JOBS runs
# at a time (default 2), each under `nice -n 10`.
#
# OUT.tsv gets one line a run:
#   round  tag  name  input  instructions  outputs  options
# where `outputs` is the SHA-256 (16 hex digits) of the list of every
# file the run wrote (dump files and all), or "-" if it wrote none, and
# `instructions` is FAILED for a run that exited non-zero (its last lines
# of output go to standard error); OUT.tsv.files keeps that
# list per run: round tag name input file size sha256, and for a CSV the
# SHA-256 of its lines sorted with the header kept first (two shards
# write their lines in an order that changes from run to run), else "-".
# `scripts/cg_table.py OUT.tsv OLD NEW [COPY]` makes the table (the least
# of each configuration's rounds, the ratios, the outputs compared); see
# BENCHMARKS.md "One engine against be9d311 (issue 32)".
set -euo pipefail

rounds=1 jobs=2 indir= work= out=
while getopts "r:j:i:w:o:" opt; do
    case $opt in
        r) rounds=$OPTARG ;;
        j) jobs=$OPTARG ;;
        i) indir=$(realpath "$OPTARG") ;;
        w) work=$OPTARG ;;
        o) out=$OPTARG ;;
        *) echo "usage: see the head of $0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$indir" ] && [ -n "$work" ] && [ -n "$out" ] || { echo "$0: -i, -w and -o are required" >&2; exit 2; }

tags=() bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    tags+=("${1%%=*}"); bins+=("$(realpath "${1#*=}")"); shift
done
[ "${1:-}" = "--" ] || { echo "$0: TAG=BIN ... -- CONFIG ..." >&2; exit 2; }
shift
configs=("$@")
[ ${#tags[@]} -ge 1 ] && [ ${#configs[@]} -ge 1 ] || { echo "$0: no binary or no configuration" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind not found" >&2; exit 2; }
for c in "${configs[@]}"; do
    input=$(cut -d'|' -f2 <<<"$c")
    [ -f "$indir/$input.pcap" ] || { echo "$0: no capture $indir/$input.pcap" >&2; exit 2; }
done

mkdir -p "$work"
work=$(realpath "$work")
: >"$out"
: >"$out.files"

# One run: prints its TSV line; its file list goes to a file beside it.
one() {
    local round=$1 tag=$2 bin=$3 name=$4 input=$5 opts=$6
    local dir
    dir=$(mktemp -d "$WORK/run.XXXXXX")
    cd "$dir"
    local n rc=0
    # shellcheck disable=SC2086  # OPTIONS split on spaces on purpose
    nice -n 10 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$bin" flows "$INDIR/$input.pcap" $opts -q --no-progress >vg.log 2>&1 || rc=$?
    n=$(sed -n 's/.*Collected : //p' vg.log | tr -d ' ')
    # A run that failed has no count: its exit code and log stay in the table.
    if [ "$rc" != 0 ]; then
        n=FAILED; grep -v '^==' vg.log | sed "s|^|FAILED $round $tag $name $input: |" | tail -n 5 >&2
    fi
    rm -f vg.log
    local list digest=-
    list=$(find . -type f | LC_ALL=C sort | while read -r f; do
        # A CSV also by its lines sorted (the header kept first): two
        # shards write their lines in an order that changes from run to run.
        local sorted=-
        if [ "${f%.csv}" != "$f" ]; then
            sorted=$( { head -n 1 "$f"; tail -n +2 "$f" | LC_ALL=C sort; } | sha256sum | cut -c1-64)
        fi
        echo "$f $(stat -c %s "$f") $(sha256sum <"$f" | cut -c1-64) $sorted"
    done)
    [ -n "$list" ] && digest=$(sha256sum <<<"$list" | cut -c1-16)
    {
        flock 9
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$tag" "$name" "$input" "${n:-FAILED}" "$digest" "$opts" >>"$OUT"
        sed "s|^|$round $tag $name $input |" <<<"$list" >>"$OUT.files"
    } 9>>"$OUT.lock"
    cd /
    rm -rf "$dir"
}
export -f one
export OUT=$(realpath "$out") INDIR=$indir WORK=$work

jobsfile=$(mktemp "$work/jobs.XXXXXX")
for ((r = 1; r <= rounds; r++)); do
    for c in "${configs[@]}"; do
        IFS='|' read -r name input opts <<<"$c"
        order=$(seq 0 $((${#tags[@]} - 1)))
        [ $((r % 2)) = 0 ] && order=$(seq $((${#tags[@]} - 1)) -1 0)
        for i in $order; do
            printf '%s\0%s\0%s\0%s\0%s\0%s\0' "$r" "${tags[$i]}" "${bins[$i]}" "$name" "$input" "$opts" >>"$jobsfile"
        done
    done
done
xargs -0 -n 6 -P "$jobs" bash -c 'one "$@"' _ <"$jobsfile"
rm -f "$jobsfile" "$OUT.lock"
echo "$out: $(wc -l <"$out") runs" >&2
