"""Shared fixtures of the Python package's tests: the repository, the CLI
binary to compare with, the shared corpus.

Under CI (env CI=true) a missing CLI binary, corpus or Python module is a
failure; elsewhere the tests that need it are skipped and say why.
"""

import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
CORPUS = REPO.parent / "shared" / "corpus"
UNDER_CI = os.environ.get("CI") == "true"


def need(ok, what):
    """Skip (fail under CI) when `ok` is false."""
    if ok:
        return
    if UNDER_CI:
        pytest.fail(f"{what} is required under CI")
    pytest.skip(f"{what} is missing")


@pytest.fixture(scope="session")
def cli():
    """The `earlybird` CLI: $EARLYBIRD_BIN, else the workspace's debug or
    release build."""
    for cand in [
        os.environ.get("EARLYBIRD_BIN"),
        REPO / "target" / "debug" / "earlybird",
        REPO / "target" / "release" / "earlybird",
        shutil.which("earlybird"),
    ]:
        if cand and pathlib.Path(cand).is_file():
            return str(cand)
    need(False, "the earlybird CLI (cargo build -p earlybird-cli)")


@pytest.fixture(scope="session")
def corpus():
    need(CORPUS.is_dir(), f"the shared corpus ({CORPUS})")
    return CORPUS
