#!/bin/sh
# Trains the default model shipped in the earlybird binary (models/default.ebm).
#
# Data: the dev half of the real-traffic corpus, classify/dev: the nDPI test
# captures with nDPI's labels (ndpi_truth.csv) and the nfstream captures
# (nfstream_truth.csv), master-protocol level ("proto": TLS, DNS, HTTP, ...),
# at most 20 flows per (capture, class) so that long captures do not dominate.
# Algorithm: the port table. Why: on held-out capture files it is the most
# accurate model we measured (docs/CLASSIFIERS.md, "Accuracy on the dev
# captures"); the early-packet models do not generalise across these captures.
# It learns no ephemeral server port (>= 32768), and its threshold is chosen
# for 90 % precision on validation captures of the training side, so it
# answers "unknown" rather than guess. 30 % of the capture files are held
# out: `earlybird model info` prints the precision and coverage measured on
# them.
#
# Usage: models/train_default.sh [CORPUS_DIR]   (default ../shared/corpus)
# Reproducible: the same corpus and seed give a byte-identical model file.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-$root/../shared/corpus}
dev=$corpus/classify/dev
cd "$root"
# The dev profile of this workspace is optimised (see Cargo.toml).
cargo build -p earlybird-cli
"${CARGO_TARGET_DIR:-target}/debug/earlybird" train \
    --algo ports --level proto --max-per-capture 20 --seed 1 \
    --split 0.3 --target-precision 0.9 \
    --labels "$dev/ndpi_truth.csv" --labels "$dev/nfstream_truth.csv" \
    "$dev/ndpi/pcap" "$dev/nfstream/pcap" \
    -o models/default.ebm
