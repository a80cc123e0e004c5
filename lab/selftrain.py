#!/usr/bin/env python3
"""selftrain.py: a model the probe learnt in the lab, against the lab's truth.

Contract
--------
``selftrain.py -o OUT --train 7:wan --test 8:lossy`` (as root) makes two
lab runs with ``lab/run.py`` (skipped when ``OUT/lab-SEED.pcap`` and its
truth CSV are there already):

* the training run with a self-training probe beside tcpdump
  (``run.py --learn OUT/learn-SEED``: ``earlybird flows -i IF --learn``,
  which labels flows only by their own payload: HTTP Host, DNS query, SSH
  banner, TLS/QUIC server name), and
* the test run, plain.

Then it scores on the test run's truth, with ``earlybird evaluate`` (sizes,
directions and gaps only: the learnt models use no ports, and the truth
model is trained without them):

* the probe's last model (the one trained at SIGTERM from everything it
  kept, the last line of ``models.jsonl``), and
* a model of the same algorithm and N trained on the training run's truth
  (``earlybird train --labels``),

each on the test flows of the classes the probe learnt (accuracy at
k = 4: the ``k = 4`` line of ``evaluate``; the share of all test flows
those classes cover), and the truth model also on all test flows. Prints
a Markdown table; models and the filtered truth go to OUT.

Needs what ``run.py`` needs and an earlybird binary (``--earlybird``,
default ``$EARLYBIRD`` or PATH). Exit status 0 only if every step ran.
"""

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"selftrain: failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-4000:]}")
    return p.stdout + p.stderr


def lab_run(out, seed, cond, duration, eb, learn, level):
    pcap = os.path.join(out, f"lab-{seed}.pcap")
    truth = os.path.join(out, f"lab-{seed}.truth.csv")
    models = os.path.join(learn, "models.jsonl") if learn else None
    if os.path.exists(pcap) and os.path.exists(truth) and (not learn or os.path.exists(models)):
        print(f"selftrain: reusing {pcap}", file=sys.stderr)
        return pcap, truth
    cmd = [sys.executable, os.path.join(HERE, "run.py"), "--seed", str(seed),
           "--duration", str(duration), "--conditions", cond, "-o", out]
    if learn:
        cmd += ["--learn", learn, "--learn-level", level, "--earlybird", eb]
    print(f"selftrain: {' '.join(cmd)}", file=sys.stderr)
    run(cmd)
    return pcap, truth


def last_model(learn):
    """The probe's last model: the last line of models.jsonl."""
    with open(os.path.join(learn, "models.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    if not lines:
        sys.exit(f"selftrain: no model in {learn}/models.jsonl")
    last = lines[-1]
    return os.path.join(learn, os.path.basename(last["path"])), last, len(lines)


def model_classes(eb, model):
    """Class names of a model (`earlybird model info`)."""
    text = run([eb, "model", "info", model])
    m = re.search(r"^classes?(?: \(\d+\))?:\s*(.+)$", text, re.M)
    if not m:
        sys.exit(f"selftrain: cannot read the classes of {model}:\n{text}")
    return [c.strip() for c in m.group(1).split(",") if c.strip()]


def subset(truth, column, classes, path):
    """The truth rows whose `column` is one of `classes`, written to `path`."""
    with open(truth, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        rows = list(r)
    col = header.index(column)
    kept = [row for row in rows if row[col] in classes]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(kept)
    return len(kept), len(rows)


def scores(text):
    """(flows, accuracy at k = 4, precision where it answers, coverage,
    {class: (recall, support)})."""
    m = re.search(r"(\d+) flows, accuracy ([\d.]+) %", text)
    k = re.search(r"k =\s+4:\s+([\d.]+) %", text)
    p = re.search(r"precision ([\d.]+) % where it answers, coverage ([\d.]+) %", text)
    if not (m and k and p):
        sys.exit(f"selftrain: cannot read the evaluation:\n{text}")
    recall = {}
    h = re.search(r"^class +precision +recall.*$", text, re.M)
    if not h:
        sys.exit(f"selftrain: no per-class table in the evaluation:\n{text}")
    for line in text[h.end():].split("\n\n", 1)[0].strip("\n").splitlines():
        w = line.split()
        recall[" ".join(w[:-5])] = (float(w[-4]), int(w[-2]))
    return int(m.group(1)), float(k.group(1)), float(p.group(1)), float(p.group(2)), recall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--train", default="7:wan", help="SEED:CONDITIONS of the probe's run")
    ap.add_argument("--test", default="8:lossy", help="SEED:CONDITIONS of the scored run")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--level", default="proto", choices=["proto", "category"],
                    help="class level (truth column master_proto or category)")
    ap.add_argument("--earlybird", default=os.environ.get("EARLYBIRD", "earlybird"))
    a = ap.parse_args()
    eb = shutil.which(a.earlybird)
    if not eb:
        sys.exit(f"selftrain: no earlybird binary {a.earlybird!r}")
    os.makedirs(a.out, exist_ok=True)
    (ts, tc), (xs, xc) = (x.split(":") for x in (a.train, a.test))
    learn = os.path.join(a.out, f"learn-{ts}")
    train_pcap, train_truth = lab_run(a.out, ts, tc, a.duration, eb, learn, a.level)
    test_pcap, test_truth = lab_run(a.out, xs, xc, a.duration, eb, None, a.level)
    column = {"proto": "master_proto", "category": "category"}[a.level]

    learnt, info, n_models = last_model(learn)
    classes = model_classes(eb, learnt)
    info_text = run([eb, "model", "info", learnt])
    m = re.search(r": (\S+) model \(.*?N = (\d+)", info_text)
    if not m:
        sys.exit(f"selftrain: cannot read the algorithm and N of {learnt}:\n{info_text}")
    algo, n = m.group(1), m.group(2)
    truth_model = os.path.join(a.out, f"truth-{ts}-{a.level}.ebm")
    run([eb, "train", "--algo", algo, "--level", a.level, "-n", n, "--labels", train_truth,
         train_pcap, "-o", truth_model])

    learnt_truth = os.path.join(a.out, f"lab-{xs}.learnt-classes.csv")
    covered, _ = subset(test_truth, column, set(classes), learnt_truth)
    if covered == 0:
        sys.exit(f"selftrain: no test flow is of the learnt classes {classes}")
    rows = []
    for name, model in (("learnt by the probe", learnt), ("trained on the lab's truth", truth_model)):
        s = scores(run([eb, "evaluate", "--model", model, "--level", a.level,
                        "--labels", learnt_truth, test_pcap]))
        rows.append((name, "of the learnt classes", *s))
    s = scores(run([eb, "evaluate", "--model", truth_model, "--level", a.level,
                    "--labels", test_truth, test_pcap]))
    rows.append(("trained on the lab's truth", "all", *s))

    print(f"probe's run: lab-{ts} ({tc}), {n_models} models, the last: {os.path.basename(learnt)} "
          f"({json.dumps(info, sort_keys=True)})")
    covered, total = rows[0][2], rows[2][2]
    print(f"learnt classes ({a.level}): {', '.join(classes)}; they cover {covered} of the "
          f"{total} flows of lab-{xs} ({xc}) that have a truth label: {100.0 * covered / total:.2f} %")
    print(f"{algo}, N = {n}, sizes, directions and gaps (no ports); scored on lab-{xs}'s truth")
    print()
    print("| model | test flows | flows | accuracy at k = 4 % | precision where it answers % "
          "| coverage % | recall per learnt class (flows) |")
    print("|---|---|---|---|---|---|---|")
    for name, which, flows, acc, prec, cov, recall in rows:
        per = ", ".join(f"{c} {recall[c][0]:.3f} ({recall[c][1]})" for c in classes if c in recall)
        print(f"| {name} | {which} | {flows} | {acc:.2f} | {prec:.2f} | {cov:.2f} | {per} |")


if __name__ == "__main__":
    main()
