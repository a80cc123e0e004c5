"""scikit-learn models into earlybird model files, and model files back.

``to_model(estimator, path, packets=N)`` writes a fitted
``DecisionTreeClassifier`` (as the engine's ``c45`` tree),
``RandomForestClassifier`` (as its ``forest``) or ``GaussianNB`` (as its
``gnb``) to an earlybird model file
that ``earlybird flows --model FILE`` and ``earlybird.flows(model=FILE)``
run inline. The engine builds and checks the file (``Model::from_body``,
the checks a loaded model gets).

The estimator must have been fitted on the engine's feature vector
(``features``): for early packets i = 1..N, the signed size (+ client to
server, - server to client, 0 when the flow has fewer packets) and the gap
in microseconds (-1 when absent); with ``use_ports``, then the IP protocol
and the server port.

What is exact, and what is not:

- a tree's split ``x <= t`` becomes the engine's ``x <= t32`` with ``t32``
  the largest float32 not above ``t``; the features are float32 in both
  (scikit-learn casts them), so every flow takes the same path. A leaf's
  class is scikit-learn's ``argmax`` of the leaf's class weights (first
  class on ties, as ``predict``), its confidence that class's share.
- a forest: the engine takes the majority vote of the trees (ties to the
  lower class index), scikit-learn averages the trees' class
  probabilities. The two agree whenever the leaves are pure, which they are
  for trees grown to the end (scikit-learn's defaults: ``max_depth=None``,
  ``min_samples_leaf=1``) unless the same features carry several labels;
  ``to_model`` refuses a forest with impure leaves rather than write a
  model that may disagree. At most 64 trees.
- ``GaussianNB``: its fitted ``theta_``, ``var_`` (``var_smoothing``
  already added) and ``class_prior_`` are written as they are (Python's
  shortest round-trip form, read back bit for bit); the engine computes
  the joint log likelihoods in float64 in scikit-learn's order (numpy's
  pairwise sums included) and takes the first class of the greatest, as
  ``predict``'s ``argmax``. Its confidence is the class's posterior
  (``predict_proba``).

``from_model(path)`` reads a model file back into a dict (algorithm,
classes, N, threshold, and the body as the file holds it: for trees the
nodes with feature, threshold, children, class and purity).
"""

import json

import numpy as np

from . import _native

LEAF = 255
MAX_TREES = 64


def features(table, packets, use_ports=False):
    """The engine's feature matrix (float32, one row per record) from a
    ``pyarrow.Table`` (or anything ``pyarrow.table`` takes) of flow records
    with at least ``packets`` early packets (``early_packets=`` of
    ``flows``)."""
    import pyarrow as pa

    t = pa.table(table) if not isinstance(table, pa.Table) else table
    cols = []
    for i in range(1, packets + 1):
        size = t.column(f"pkt{i}_size").to_numpy(zero_copy_only=False)
        sign = t.column(f"pkt{i}_dir").to_numpy(zero_copy_only=False)
        gap = t.column(f"pkt{i}_iat_us").to_numpy(zero_copy_only=False)
        size = np.where(np.isnan(size.astype(float)), 0.0, size.astype(float) * sign.astype(float))
        size = np.nan_to_num(size, nan=0.0)
        gap = np.where(np.isnan(gap.astype(float)), -1.0, gap.astype(float))
        cols += [size, gap]
    if use_ports:
        cols += [
            t.column("proto").to_numpy(zero_copy_only=False).astype(float),
            t.column("dport").to_numpy(zero_copy_only=False).astype(float),
        ]
    return np.column_stack(cols).astype(np.float32) if cols else np.zeros((t.num_rows, 0), np.float32)


def _threshold32(t):
    """The largest float32 not above ``t``: for float32 x, x <= t iff
    x <= the result."""
    f = np.float32(t)
    if float(f) > t:
        f = np.nextafter(f, np.float32(-np.inf), dtype=np.float32)
    return float(f)


def _nodes(tree, class_index, pure_only):
    """The engine's nodes of a fitted ``sklearn.tree._tree.Tree`` (its node
    ids are already in pre-order: children after their parent)."""
    nodes = []
    left, right = tree.children_left, tree.children_right
    for i in range(tree.node_count):
        weights = tree.value[i][0]
        best = int(np.argmax(weights))
        total = float(weights.sum())
        purity = float(weights[best] / total) if total > 0 else 0.0
        node = {"class": class_index[best], "purity": purity}
        if left[i] == -1:
            if pure_only and np.count_nonzero(weights) > 1:
                raise ValueError(
                    "the forest has a leaf with several classes: the engine's majority vote "
                    "could disagree with scikit-learn's averaged probabilities (grow the trees "
                    "to pure leaves)"
                )
            node.update(feature=LEAF, threshold=0.0, left=0, right=0)
        else:
            if not (int(left[i]) > i and int(right[i]) > i):
                raise ValueError(f"tree node {i}: children are not after their parent")
            node.update(
                feature=int(tree.feature[i]),
                threshold=_threshold32(float(tree.threshold[i])),
                left=int(left[i]),
                right=int(right[i]),
            )
        nodes.append(node)
    return nodes


def _layout(estimator, packets, use_ports):
    n = int(estimator.n_features_in_)
    want = 2 * packets + (2 if use_ports else 0)
    if n != want:
        raise ValueError(
            f"the estimator has {n} features; the engine's vector for {packets} packets"
            f"{' with ports' if use_ports else ''} has {want}"
        )
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise ValueError("only single-output classifiers can be imported")


def to_model(estimator, path, *, packets, use_ports=False, threshold=0.0, trained_on="scikit-learn"):
    """Writes a fitted scikit-learn classifier as an earlybird model file
    at ``path`` (see the module docs for what is exact)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier

    classes = [str(c) for c in estimator.classes_]
    index = list(range(len(classes)))
    if isinstance(estimator, DecisionTreeClassifier):
        _layout(estimator, packets, use_ports)
        algo = "c45"
        body = {"packets": packets, "use_ports": use_ports, "nodes": _nodes(estimator.tree_, index, False)}
    elif isinstance(estimator, RandomForestClassifier):
        _layout(estimator, packets, use_ports)
        if len(estimator.estimators_) > MAX_TREES:
            raise ValueError(f"the engine's forests have at most {MAX_TREES} trees")
        algo = "forest"
        trees = []
        for est in estimator.estimators_:
            # Each tree's classes_ are the forest's, in the same order.
            trees.append({"packets": packets, "use_ports": use_ports, "nodes": _nodes(est.tree_, index, True)})
        body = {"packets": packets, "use_ports": use_ports, "trees": trees}
    elif isinstance(estimator, GaussianNB):
        _layout(estimator, packets, use_ports)
        algo = "gnb"
        body = {
            "packets": packets,
            "use_ports": use_ports,
            "theta": np.asarray(estimator.theta_, dtype=np.float64).tolist(),
            "var": np.asarray(estimator.var_, dtype=np.float64).tolist(),
            "class_prior": np.asarray(estimator.class_prior_, dtype=np.float64).tolist(),
        }
    else:
        raise TypeError(
            f"cannot import {type(estimator).__name__} "
            "(DecisionTreeClassifier, RandomForestClassifier or GaussianNB)"
        )
    _native.model_save(
        str(path), algo, json.dumps(body), classes, packets, float(threshold), trained_on
    )


def from_model(path):
    """An earlybird model file as a dict: ``algo``, ``classes``,
    ``packets``, ``threshold``, ``trained_on`` and ``body`` (the file's
    body, parsed)."""
    algo, body, classes, packets, threshold, trained_on = _native.model_load(str(path))
    return {
        "algo": algo,
        "classes": classes,
        "packets": packets,
        "threshold": threshold,
        "trained_on": trained_on,
        "body": json.loads(body),
    }
