"""From capture to trained model to probe, with the earlybird Python package.

Run from the repository root after `pip install ./crates/earlybird-py`
(and scikit-learn):

    python3 docs/python_example.py [CAPTURES]

CAPTURES defaults to the shared corpus's nDPI captures
(../shared/corpus/classify/dev/ndpi). The labels here are the server port's
service, a stand-in for your ground truth; the point is the path, not the
accuracy.
"""

import pathlib
import sys
import tempfile

import numpy as np

import earlybird
from earlybird import sklearn as ebsk
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

N = 4
captures = sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus/classify/dev/ndpi"

# 1. Capture -> flows (Arrow), with N early packets and no model.
flows = earlybird.flows(captures, early_packets=N, model=None)
table = flows.to_arrow()
print(f"{table.num_rows} flows from {flows.report['inputs_read']} captures")

# 2. Labels (yours would come from ground truth) and the engine's features.
port = table.column("dport").to_numpy(zero_copy_only=False)
y = np.where(port == 53, "dns", np.where((port == 80) | (port == 443), "web", "other"))
x = ebsk.features(table, N)
x_train, x_test, y_train, y_test = train_test_split(x, y, random_state=0)

# 3. Train in scikit-learn.
clf = DecisionTreeClassifier(random_state=0).fit(x_train, y_train)
print(f"held-out accuracy in scikit-learn: {clf.score(x_test, y_test):.3f}")

# 4. Into an earlybird model file, run by the engine on the same flows.
model = pathlib.Path(tempfile.mkdtemp()) / "ports-by-size.ebm"
ebsk.to_model(clf, model, packets=N)
judged = earlybird.flows(captures, early_packets=N, model=model).to_arrow()
engine = np.array(judged.column("app").to_pylist())
agree = (engine == clf.predict(ebsk.features(judged, N))).mean()
print(f"engine and scikit-learn agree on {agree:.1%} of the flows")
df = judged.to_pandas()
print(df["app"].value_counts())

# 5. On a probe: the CLI runs the same file inline, live or on files.
print(f"earlybird flows -i eth0 --model {model} -o flows.csv")
