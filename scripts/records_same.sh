#!/bin/sh
# Records of two earlybird binaries compared byte for byte (sorted), the
# analyzers on: scripts/records_same.sh OLD NEW [DIR...]
#
# Each DIR is one run (default: testdata/pcap and the shared corpus's
# classify/dev/ndpi, classify/dev/nfstream, voip and tunnels); each run
# with no analyzer (--no-labellers), the labellers (the default), the
# labellers with --names hash and --analyzer media alone, on 1 and 2
# shards, to CSV and to JSON lines (both binaries 6df25d2c or later: the
# labellers on by default). Prints one line per run that differs and the
# count of runs that were the same.
set -u
OLD=$1 NEW=$2
shift 2
CORPUS=${CORPUS:-../shared/corpus}
[ $# -gt 0 ] || set -- testdata/pcap "$CORPUS/classify/dev/ndpi" \
    "$CORPUS/classify/dev/nfstream" "$CORPUS/voip" "$CORPUS/tunnels"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
same=0 differ=0
for dir in "$@"; do
    for mode in "--no-labellers" "" "--names hash" "--no-labellers --analyzer media"; do
        for s in 1 2; do
            for ext in csv jsonl; do
                for b in old new; do
                    eval bin=\$$(echo "$b" | tr a-z A-Z)
                    # shellcheck disable=SC2086
                    "$bin" flows "$dir" -q --no-progress -s "$s" $mode \
                        -o "$TMP/$b.$ext" 2>"$TMP/$b.err"
                    echo "exit $?" >>"$TMP/$b.err"
                    sort "$TMP/$b.$ext" >"$TMP/$b.sorted"
                done
                if cmp -s "$TMP/old.sorted" "$TMP/new.sorted" && cmp -s "$TMP/old.err" "$TMP/new.err"; then
                    same=$((same + 1))
                else
                    differ=$((differ + 1))
                    echo "DIFFER: $dir $mode -s $s $ext"
                fi
            done
        done
    done
done
echo "same: $same, differ: $differ ($(wc -l <"$TMP/new.sorted") lines in the last run)"
[ "$differ" -eq 0 ]
