#!/bin/sh
# Memory per flow with and without the payload labellers: the peak
# resident memory (GNU time's %M) of `earlybird flows` on each capture
# given, with --no-labellers and with the labellers (the default), and
# the difference per flow of the
# run (the flows the summary counts) and per flow-table slot.
#
# Usage: scripts/label_memory.sh EARLYBIRD CAPTURE [CAPTURE...]
# Each run writes no record (-o /dev/null as CSV) and keeps one shard.
set -eu
eb=$1
shift
printf '| capture | flows | peak flows | RSS without (KiB) | RSS with (KiB) | bytes per flow | bytes per peak flow |\n'
printf '|---|---|---|---|---|---|---|\n'
for cap in "$@"; do
    out=$(mktemp)
    /usr/bin/time -f '%M' -o "$out.t0" "$eb" flows "$cap" -s 1 -o /dev/null -f csv --no-labellers 2>"$out.s0"
    /usr/bin/time -f '%M' -o "$out.t1" "$eb" flows "$cap" -s 1 -o /dev/null -f csv --labellers 2>"$out.s1"
    without=$(tail -1 "$out.t0")
    with=$(tail -1 "$out.t1")
    flows=$(sed -n 's/^flows: \([0-9]*\).*/\1/p' "$out.s1")
    peak=$(sed -n 's/^flow table: peak \([0-9]*\) flows.*/\1/p' "$out.s1")
    per=$(( (with - without) * 1024 / flows ))
    per_peak=$(( (with - without) * 1024 / peak ))
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$(basename "$cap")" "$flows" "$peak" \
        "$without" "$with" "$per" "$per_peak"
    rm -f "$out" "$out.t0" "$out.t1" "$out.s0" "$out.s1"
done
