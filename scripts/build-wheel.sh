#!/usr/bin/env bash
# Builds the portable Python wheel of earlybird (crates/earlybird-py): one
# wheel for every CPython from 3.8 on (the stable ABI, abi3) and every
# Linux with glibc 2.17 or later (manylinux2014), linked by zig (PyPI's
# ziglang) so that the build machine's newer glibc does not leak in.
# `pip install earlybird-*.whl` then needs no Rust toolchain.
#
#   scripts/build-wheel.sh              # the wheel into target/wheels (or
#                                       # $CARGO_TARGET_DIR/wheels)
#   scripts/build-wheel.sh --test       # and install it into a fresh
#                                       # virtual environment that runs
#                                       # the package's tests
#   scripts/build-wheel.sh --out DIR
#   scripts/build-wheel.sh --wheel FILE --test   # test a wheel built before
#
# A release build of the extension and the engine: many minutes on two
# cores, so CI does not run it on every change (./test.sh builds and tests
# the package in the dev profile); run it before a release.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

out="${CARGO_TARGET_DIR:-$ROOT/target}/wheels"
test_it=false
wheel=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --test) test_it=true; shift ;;
    --wheel) wheel=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "build-wheel.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# The versions .ci/run installs for the tests (maturin) and zig's.
TOOLS="maturin==1.16.0 ziglang==0.17.1"
if ! python3 -c "import maturin, ziglang" >/dev/null 2>&1; then
  python3 -m pip install -q $TOOLS 2>/dev/null || python3 -m pip install -q --break-system-packages $TOOLS
fi

if [ -z "$wheel" ]; then
  mkdir -p "$out"
  rm -f "$out"/earlybird-*manylinux*.whl
  start=$(date +%s)
  python3 -m maturin build --release --strip --zig --compatibility manylinux2014 \
    --manifest-path crates/earlybird-py/Cargo.toml --out "$out"
  wheel=$(ls "$out"/earlybird-*-abi3-manylinux*.whl)
  echo "build-wheel: $wheel in $(( $(date +%s) - start )) s"
fi

if $test_it; then
  venv=$(mktemp -d)
  trap 'rm -rf "$venv"' EXIT
  python3 -m venv "$venv"
  # The wheel with its extras, and what the tests use (.ci/run's versions).
  "$venv/bin/pip" install -q "$wheel[pandas,polars,sklearn]" \
    pytest==9.2.0 pandas==3.1.1 polars==2.1.0 scikit-learn==1.9.1 dask==2026.8.0 distributed==2026.8.0
  "$venv/bin/python" -c 'import earlybird, sys; print("build-wheel: testing", earlybird.__file__)' |
    tee /dev/stderr | grep -q "$venv" || { echo "build-wheel: not the wheel's package" >&2; exit 1; }
  # The tests compare with the CLI ($EARLYBIRD_BIN, else the debug build
  # of the target directory); run from elsewhere than the source so that
  # the installed package is the one imported.
  if [ -z "${EARLYBIRD_BIN:-}" ] && [ -x "${CARGO_TARGET_DIR:-$ROOT/target}/debug/earlybird" ]; then
    export EARLYBIRD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/earlybird"
  fi
  (cd "$venv" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/crates/earlybird-py/tests")
fi
