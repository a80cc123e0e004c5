"""scikit-learn models in the engine: a DecisionTreeClassifier, a
RandomForestClassifier and a GaussianNB fitted on the engine's features
give, run inline by the engine (earlybird.flows(model=FILE) and `earlybird
flows --model FILE`), exactly the verdicts of scikit-learn's predict on the
same flows; the model file reads back; what cannot be imported exactly is
refused with the reason."""

import csv
import subprocess

import numpy as np
import pytest

import earlybird
from earlybird import sklearn as ebsk

from conftest import need

N = 4


def labels(table):
    """A label per flow that trees can learn from the early packets: the
    service by server port (the test is about identical verdicts, not
    about accuracy)."""
    port = table.column("dport").to_numpy(zero_copy_only=False)
    return np.where(port == 53, "dns", np.where((port == 80) | (port == 443), "web", "other"))


@pytest.fixture(scope="module")
def flows_dir(corpus):
    return corpus / "classify" / "dev" / "ndpi"


@pytest.fixture(scope="module")
def train(flows_dir):
    t = earlybird.flows(flows_dir, early_packets=N, model=None).to_arrow()
    assert t.num_rows > 500
    return ebsk.features(t, N), labels(t)


def engine_vs_sklearn(est, flows_dir, path, cli, tmp_path):
    ebsk.to_model(est, path, packets=N)
    t = earlybird.flows(flows_dir, early_packets=N, model=path, labellers=False).to_arrow()
    x = ebsk.features(t, N)
    want = est.predict(x).astype(str)
    got = np.array(t.column("app").to_pylist())
    # Every flow has at least one packet, so every flow gets a verdict.
    assert (t.column("decided_at_packet").to_numpy(zero_copy_only=False) > 0).all()
    diff = np.nonzero(want != got)[0]
    assert len(diff) == 0, f"{len(diff)} of {len(got)} verdicts differ, e.g. row {diff[:5]}: sklearn {want[diff[:5]]}, engine {got[diff[:5]]}"
    assert len(set(got)) > 1
    # The CLI runs the same file with the same verdicts.
    out = tmp_path / "cli.csv"
    subprocess.run(
        [cli, "flows", str(flows_dir), "-n", str(N), "--model", str(path), "--no-labellers", "-o", str(out), "--quiet", "--no-progress"],
        check=True,
    )
    with open(out, newline="") as f:
        cli_apps = sorted(r["app"] for r in csv.DictReader(f))
    assert cli_apps == sorted(got)


def test_decision_tree_verdicts_identical(train, flows_dir, cli, tmp_path):
    tree = pytest.importorskip("sklearn.tree")
    x, y = train
    est = tree.DecisionTreeClassifier(random_state=0).fit(x, y)
    path = tmp_path / "tree.ebm"
    engine_vs_sklearn(est, flows_dir, path, cli, tmp_path)
    m = ebsk.from_model(path)
    assert m["algo"] == "c45" and m["classes"] == [str(c) for c in est.classes_]
    assert m["packets"] == N and len(m["body"]["nodes"]) == est.tree_.node_count


def by_first_packet(x):
    """Labels that are a function of the features (the first packet's
    signed size), so that trees grown to the end have pure leaves, which a
    forest needs to import exactly (sklearn.py)."""
    size = x[:, 0]
    return np.where(size < 0, "server-first", np.where(size < 100, "small", np.where(size < 500, "mid", "large")))


def test_random_forest_verdicts_identical(train, flows_dir, cli, tmp_path):
    ensemble = pytest.importorskip("sklearn.ensemble")
    x, _ = train
    y = by_first_packet(x)
    est = ensemble.RandomForestClassifier(n_estimators=15, random_state=0).fit(x, y)
    path = tmp_path / "forest.ebm"
    engine_vs_sklearn(est, flows_dir, path, cli, tmp_path)
    m = ebsk.from_model(path)
    assert m["algo"] == "forest" and len(m["body"]["trees"]) == 15


def test_gaussian_nb_verdicts_identical(train, flows_dir, cli, tmp_path):
    naive_bayes = pytest.importorskip("sklearn.naive_bayes")
    x, y = train
    est = naive_bayes.GaussianNB().fit(x, y)
    path = tmp_path / "gnb.ebm"
    engine_vs_sklearn(est, flows_dir, path, cli, tmp_path)
    m = ebsk.from_model(path)
    assert m["algo"] == "gnb" and m["classes"] == [str(c) for c in est.classes_]
    # The fitted parameters come back bit for bit.
    assert np.array_equal(np.array(m["body"]["theta"]), est.theta_)
    assert np.array_equal(np.array(m["body"]["var"]), est.var_)
    assert np.array_equal(np.array(m["body"]["class_prior"]), est.class_prior_)
    # The engine's confidence is scikit-learn's posterior of the verdict
    # (stored in steps of 1/65535).
    t = earlybird.flows(flows_dir, early_packets=N, model=path, labellers=False).to_arrow()
    proba = est.predict_proba(ebsk.features(t, N)).max(axis=1)
    conf = t.column("app_confidence").to_numpy(zero_copy_only=False)
    assert np.allclose(conf, proba, atol=1e-4)


def test_what_cannot_be_imported_is_refused(train, tmp_path):
    sk = pytest.importorskip("sklearn")
    from sklearn.naive_bayes import GaussianNB
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    x, y = train
    with pytest.raises(ValueError, match="features"):
        ebsk.to_model(GaussianNB().fit(x[:, :4], y), tmp_path / "nb.ebm", packets=N)
    with pytest.raises(TypeError, match="cannot import"):
        ebsk.to_model(SVC().fit(x[:50], y[:50]), tmp_path / "svc.ebm", packets=N)
    with pytest.raises(ValueError, match="features"):
        ebsk.to_model(DecisionTreeClassifier().fit(x[:, :4], y), tmp_path / "t.ebm", packets=N)
    # A forest with impure leaves (the same features under several
    # labels, or a depth limit) is refused, not written.
    from sklearn.ensemble import RandomForestClassifier

    shallow = RandomForestClassifier(n_estimators=3, max_depth=1, random_state=0).fit(x, y)
    with pytest.raises(ValueError, match="several classes"):
        ebsk.to_model(shallow, tmp_path / "f.ebm", packets=N)
    assert not (tmp_path / "f.ebm").exists()
    assert sk is not None
