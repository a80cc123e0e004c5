"""earlybird.train / earlybird.evaluate: the CLI's learn workflow, with the
same model file and the same figures as `earlybird train` and `earlybird
evaluate --model`."""

import json
import subprocess

import pytest

import earlybird


@pytest.fixture(scope="module")
def dev(corpus):
    return corpus / "classify" / "dev" / "ndpi", corpus / "classify" / "dev" / "ndpi_truth.csv"


def test_train_then_evaluate_as_the_cli(dev, cli, tmp_path):
    captures, truth = dev
    ours = tmp_path / "py.ebm"
    got = earlybird.train(captures, truth, ours, algo="c45", split=0.3, seed=7)
    held = got["held_out"]
    assert held["flows"] > 100 and 0.0 < held["accuracy"] <= 1.0
    theirs = tmp_path / "cli.ebm"
    subprocess.run(
        [cli, "train", str(captures), "-l", str(truth), "-a", "c45", "--split", "0.3", "--seed", "7", "-o", str(theirs)],
        check=True,
        capture_output=True,
    )
    # The same model, byte for byte.
    assert ours.read_bytes() == theirs.read_bytes()
    ev = earlybird.evaluate(ours, captures, truth, split=0.3, seed=7)
    assert ev["accuracy"] == held["accuracy"] and ev["flows"] == held["flows"]
    out = subprocess.run(
        [cli, "evaluate", str(captures), "-l", str(truth), "--model", str(ours), "--split", "0.3", "--seed", "7"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert ev["text"] in out
    # Scoring on the training captures is refused, as by the CLI.
    with pytest.raises(ValueError, match="used to train this model"):
        earlybird.evaluate(ours, captures, truth)
    with pytest.raises(ValueError, match="level"):
        earlybird.train(captures, truth, tmp_path / "x.ebm", level="nope")


def test_gaussian_nb_trained_by_the_cli_and_the_package(dev, cli, tmp_path):
    """`earlybird train --algo gnb` and `earlybird.train(algo="gnb")` write
    the same Gaussian naive Bayes model, which the engine runs inline and
    `earlybird model info` describes."""
    captures, truth = dev
    ours, theirs = tmp_path / "py.ebm", tmp_path / "cli.ebm"
    got = earlybird.train(captures, truth, ours, algo="gnb", split=0.3, seed=7)
    assert got["held_out"]["accuracy"] > 0.0
    subprocess.run(
        [cli, "train", str(captures), "-l", str(truth), "-a", "gnb", "--split", "0.3", "--seed", "7", "-o", str(theirs)],
        check=True,
        capture_output=True,
    )
    assert ours.read_bytes() == theirs.read_bytes()
    info = subprocess.run([cli, "model", "info", str(ours)], check=True, capture_output=True, text=True).stdout
    assert "gnb model (8 features)" in info, info
    apps = earlybird.flows(captures, model=ours).to_arrow().column("app").to_pylist()
    assert len(set(apps)) > 1


def test_flows_learn_writes_the_clis_model(corpus, cli, tmp_path):
    """`earlybird.flows(..., learn=DIR)` is `earlybird flows --learn DIR`:
    the run leaves the same self-trained model in DIR."""
    pcaps = corpus / "classify" / "dev" / "ndpi" / "pcap"
    ours, theirs = tmp_path / "py", tmp_path / "cli"
    # The run happens when its records are read.
    earlybird.flows(str(pcaps), learn=str(ours), learn_every_labels=0, learn_every_seconds=0).to_arrow()
    subprocess.run(
        [cli, "flows", str(pcaps), "-f", "null", "--no-progress", "--learn", str(theirs)]
        + ["--learn-every-labels", "0", "--learn-every-seconds", "0"],
        check=True,
        capture_output=True,
    )
    assert (ours / "model-0001.ebm").read_bytes() == (theirs / "model-0001.ebm").read_bytes()
    assert len((ours / "models.jsonl").read_text().splitlines()) == 1


def test_flows_learn_says_what_it_learnt(corpus, tmp_path):
    """`Flows.learning` is the run's self-training status: before the
    records are read nothing was offered; after, every model written is
    there as `models.jsonl` lists it, and the first learnt model the shards
    took in (a file run swapping at points) is named."""
    pcaps = corpus / "classify" / "dev" / "ndpi" / "pcap"
    d = tmp_path / "learn"
    run = earlybird.flows(
        str(pcaps),
        learn=str(d),
        learn_every_labels=200,
        learn_every_seconds=0,
        learn_swap_packets=5000,
        learn_level="proto",
    )
    assert run.learning["models"] == []
    run.to_arrow()
    status = run.learning
    lines = [json.loads(line) for line in (d / "models.jsonl").read_text().splitlines()]
    assert len(lines) >= 2
    assert [m["id"] for m in status["models"]] == [m["id"] for m in lines]
    assert [m["accuracy"] for m in status["models"]] == [m["accuracy"] for m in lines]
    assert status["offered"] >= status["kept"] > 0
    assert status["kept_bytes"] > 0
    assert status["errors"] == []
    first = status["first_in_use"]
    assert first is not None and first["id"] >= 1, status
    assert status["installs"] >= 1
    assert earlybird.flows(str(pcaps / "443-curl.pcap")).learning is None
