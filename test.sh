#!/usr/bin/env bash
# The test command of the README: every unit, integration and doc test.
# Tests that need the shared corpus (../shared/corpus) say SKIPPED when it
# is absent.
set -euo pipefail
cd "$(dirname "$0")"
# With libndpi (Debian's libndpi-dev) the workspace is built and tested
# once with the `ndpi` feature on (DPI labelling; ndpiReader from
# libndpi-bin checks it), so its library and CLI tests run in the same
# build as every other test. Without libndpi the feature's tests say
# SKIPPED, and fail under CI (CI=true).
if pkg-config --exists libndpi 2>/dev/null; then
  cargo test --workspace --features earlybird-cli/ndpi "$@"
elif [ "${CI:-}" = true ]; then
  echo "libndpi (Debian: libndpi-dev) is required under CI for the ndpi tests" >&2
  exit 1
else
  echo "SKIPPED: the ndpi feature's tests (libndpi-dev is not installed)"
  cargo test --workspace "$@"
fi
# The fuzz targets (fuzz/, docs/FUZZING.md) sit outside the workspace and
# run only under cargo-fuzz; checked here (about a minute) so that they
# keep compiling against the library they feed.
cargo check --manifest-path fuzz/Cargo.toml --bins --quiet
# The Python package (crates/earlybird-py, docs/PYTHON.md; outside the
# workspace): built with the dev profile into the workspace's target
# directory (reusing every dependency the build above compiled but pyo3's
# own: the two manifests ask for the same features, docs/PYTHON.md),
# installed with pip, then
# its pytest suite, which compares with the CLI. Without maturin, pytest,
# pyarrow or pandas it says SKIPPED, and fails under CI.
if python3 -c "import maturin, pytest, pyarrow, pandas" >/dev/null 2>&1; then
  PY_INSTALL="python3 -m pip install -q --no-build-isolation --no-deps --force-reinstall ./crates/earlybird-py"
  export CARGO_TARGET_DIR="$PWD/target" MATURIN_PEP517_ARGS="--profile dev"
  $PY_INSTALL 2>/dev/null || $PY_INSTALL --break-system-packages
  unset CARGO_TARGET_DIR MATURIN_PEP517_ARGS
  # The CLI they compare with is target/debug/earlybird, which `cargo test
  # --workspace` above built (a `cargo build` would rebuild it with other
  # features).
  python3 -m pytest -q crates/earlybird-py/tests
elif [ "${CI:-}" = true ]; then
  echo "maturin, pytest, pyarrow and pandas are required under CI for the Python package's tests" >&2
  exit 1
else
  echo "SKIPPED: the Python package's tests (pip install maturin pytest pyarrow pandas)"
fi
