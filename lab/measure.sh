#!/usr/bin/env bash
# measure.sh: the figures of docs/LAB.md from lab captures.
#
# Usage: lab/measure.sh DIR TRAIN_SEED TEST_SEED... (EARLYBIRD=path to the
# binary, default target/release/earlybird). Expects DIR/lab-SEED.pcap and
# DIR/lab-SEED.truth.csv made by lab/run.py. For each algorithm (c45,
# forest, nb) and N (4, 8) it trains on the training seed's capture at the
# app level without ports and prints, per test seed, the accuracy and the
# accuracy with the first k = 1..8 packets; then the nDPI comparison of
# every capture (lab/ndpi_check.py). Models go to DIR/models/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
eb="${EARLYBIRD:-$here/../target/release/earlybird}"
dir="$1"
train="$2"
shift 2
mkdir -p "$dir/models"
for n in 4 8; do
  for algo in c45 forest nb; do
    m="$dir/models/lab-$train-$algo-n$n.ebm"
    "$eb" train --algo "$algo" --level app -n "$n" --labels "$dir/lab-$train.truth.csv" \
      "$dir/lab-$train.pcap" -o "$m" 2>&1 | grep '^wrote'
    for t in "$@"; do
      echo "== $algo N=$n: train lab-$train, test lab-$t"
      "$eb" evaluate --model "$m" --labels "$dir/lab-$t.truth.csv" "$dir/lab-$t.pcap" 2>&1 |
        grep -E 'accuracy [0-9]|k = +[1-8]:' | tr -s ' ' | paste -sd ' '
    done
  done
done
for t in "$train" "$@"; do
  echo "== nDPI on lab-$t"
  python3 "$here/ndpi_check.py" "$dir/lab-$t.pcap" "$dir/lab-$t.truth.csv"
done
