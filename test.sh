#!/usr/bin/env bash
# The test command of the README: every unit, integration and doc test.
# Tests that need the shared corpus (../shared/corpus) say SKIPPED when it
# is absent.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --workspace "$@"
