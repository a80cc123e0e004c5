#!/usr/bin/env bash
# The test command of the README: every unit, integration and doc test.
# Tests that need the shared corpus (../shared/corpus) say SKIPPED when it
# is absent.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --workspace "$@"
# The `ndpi` feature (DPI labelling through libndpi, Debian's libndpi-dev;
# ndpiReader from libndpi-bin checks it): its library and CLI tests. Without
# libndpi they say SKIPPED, and fail under CI (CI=true).
if pkg-config --exists libndpi 2>/dev/null; then
  cargo test -p earlybird --features ndpi --lib analyze "$@"
  cargo test -p earlybird-cli --features ndpi --test label_cli "$@"
elif [ "${CI:-}" = true ]; then
  echo "libndpi (Debian: libndpi-dev) is required under CI for the ndpi tests" >&2
  exit 1
else
  echo "SKIPPED: the ndpi feature's tests (libndpi-dev is not installed)"
fi
