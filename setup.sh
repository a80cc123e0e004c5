#!/usr/bin/env bash
# Builds the earlybird command-line tool (release profile) into ./target and
# prints where the binary is. Needs a Rust toolchain (cargo, Rust ≥ 1.80) and
# a C linker; on Debian/Ubuntu the linker is installed with apt-get when it is
# missing. The build needs no other system library.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup.sh: cargo was not found. Install the Rust toolchain first:" >&2
        echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
        echo "then open a new shell (or run: . \"\$HOME/.cargo/env\") and run ./setup.sh again." >&2
        exit 1
    fi
fi

if ! command -v cc >/dev/null 2>&1; then
    echo "setup.sh: no C linker (cc) found; installing build-essential with apt-get" >&2
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup.sh: apt-get is not available; install a C compiler/linker (gcc or clang) and retry" >&2
        exit 1
    fi
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo_cmd="sudo"
    fi
    $sudo_cmd apt-get update
    $sudo_cmd apt-get install -y build-essential
fi

cargo build --release --locked -p earlybird-cli --target-dir target
echo
echo "Built: $(pwd)/target/release/earlybird"
echo "Try:   target/release/earlybird flows testdata/pcap/ndpi__iphone.pcap -o flows.csv"
