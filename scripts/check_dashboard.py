#!/usr/bin/env python3
"""Checks the Grafana dashboard (packaging/grafana/earlybird.json).

Structure: the JSON is decoded with the models of Grafana's dashboard
schema that the grafana-foundation-sdk package generates (Dashboard,
RowPanel, Panel, the panel plugins' options and field configs, the
Prometheus query), encoded back, and every key and value of the file must
come back unchanged: the models drop what the schema does not know, so a
misspelt or misplaced key is an error. Then what Grafana needs and the
schema cannot say: every panel type is one of the SDK's panel plugins,
every query is a Prometheus query on the `$datasource` variable, the panels
fit the 24-column grid without overlapping, ids and refIds are unique, and
every panel sits under a row.

Queries (with --prometheus URL): every PromQL expression of the dashboard,
its variables substituted as Grafana would with "All" chosen
($__rate_interval, $__interval, and each template variable as `.*`), is
asked of Prometheus's HTTP API (/api/v1/query) until each returns a
non-empty result or --wait seconds have passed; each expression is printed
with its number of series. Exit status 1 names what failed.

Usage: check_dashboard.py DASHBOARD.json [--prometheus URL] [--wait SECS]
       [--rate-interval 15s] [--interval 5s]
"""

import argparse
import json
import re
import sys
import time
import urllib.parse
import urllib.request

from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog import runtime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dashboard_model
from grafana_foundation_sdk.models import prometheus as prometheus_model


def differences(given, back, path="$"):
    """Where `back` (the round trip) lost or changed part of `given`."""
    out = []
    if isinstance(given, dict):
        if not isinstance(back, dict):
            return [f"{path}: became {back!r}"]
        for k, v in given.items():
            if k not in back:
                out.append(f"{path}.{k}: not in Grafana's schema (dropped)")
            else:
                out.extend(differences(v, back[k], f"{path}.{k}"))
    elif isinstance(given, list):
        if not isinstance(back, list) or len(back) != len(given):
            return [f"{path}: became {back!r}"]
        for i, (a, b) in enumerate(zip(given, back)):
            out.extend(differences(a, b, f"{path}[{i}]"))
    elif given != back or type(given) is not type(back):
        out.append(f"{path}: {given!r} came back as {back!r}")
    return out


def structure(dash):
    """The errors of the dashboard's structure (empty: none)."""
    plugins.register_default_plugins()
    errors = []
    model = dashboard_model.Dashboard.from_json(dash)
    back = json.loads(json.dumps(model, cls=JSONEncoder))
    errors.extend(differences(dash, back))

    known_panels = set(runtime.Runtime().panelcfg_variants)
    variables = {v.get("name") for v in dash.get("templating", {}).get("list", [])}
    if "datasource" not in variables:
        errors.append("no datasource variable named `datasource`")
    ids, taken = set(), {}
    seen_row = False
    for i, p in enumerate(dash.get("panels", [])):
        where = f"panel {i} ({p.get('title')!r})"
        if p.get("id") in ids:
            errors.append(f"{where}: id {p.get('id')} used twice")
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        x, y, w, h = g.get("x", 0), g.get("y", 0), g.get("w", 0), g.get("h", 0)
        if w <= 0 or h <= 0 or x < 0 or x + w > 24:
            errors.append(f"{where}: gridPos {g} is outside the 24-column grid")
        for cx in range(x, x + w):
            for cy in range(y, y + h):
                if (cx, cy) in taken:
                    errors.append(f"{where}: overlaps {taken[(cx, cy)]!r} at ({cx},{cy})")
                    break
                taken[(cx, cy)] = p.get("title")
            else:
                continue
            break
        if p.get("type") == "row":
            seen_row = True
            if not isinstance(model.panels[i], dashboard_model.RowPanel):
                errors.append(f"{where}: not decoded as a row")
            continue
        if not seen_row:
            errors.append(f"{where}: above the first row")
        if p.get("type") not in known_panels:
            errors.append(f"{where}: panel type {p.get('type')!r} is not a Grafana panel plugin")
        if p.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
            errors.append(f"{where}: datasource is not the $datasource variable")
        refs = set()
        targets = p.get("targets", [])
        if not targets:
            errors.append(f"{where}: no query")
        for j, t in enumerate(model.panels[i].targets or []):
            if not isinstance(t, prometheus_model.Dataquery):
                errors.append(f"{where}: query {j} is not a Prometheus query")
            elif t.ref_id in refs:
                errors.append(f"{where}: refId {t.ref_id} used twice")
            refs.add(getattr(t, "ref_id", None))
    return errors


def expressions(dash):
    """((panel id, title, refId), expr) of every query of every panel."""
    out = []
    for p in dash.get("panels", []):
        for t in p.get("targets", []):
            out.append(((p.get("id"), p.get("title"), t.get("refId")), t["expr"]))
    return out


def substitute(expr, dash, rate_interval, interval):
    """`expr` with Grafana's variables replaced as with "All" chosen."""
    e = expr.replace("$__rate_interval", rate_interval).replace("$__interval", interval)
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            e = e.replace("${" + v["name"] + "}", ".*").replace("$" + v["name"], ".*")
    if "$" in e:
        raise ValueError(f"a variable is left in {e!r}")
    return e


def query(url, expr):
    """The result of the instant query `expr` (raises on an error)."""
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dashboard")
    ap.add_argument("--prometheus", help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--wait", type=float, default=120.0)
    ap.add_argument("--rate-interval", default="15s")
    ap.add_argument("--interval", default="5s")
    a = ap.parse_args()
    with open(a.dashboard, encoding="utf-8") as f:
        dash = json.load(f)

    errors = structure(dash)
    for e in errors:
        print(f"structure: {e}")
    exprs = expressions(dash)
    panels = sum(1 for p in dash.get("panels", []) if p.get("type") != "row")
    print(f"structure: {panels} panels, {len(exprs)} queries, {len(errors)} errors")
    if errors:
        sys.exit(1)
    if not a.prometheus:
        return

    pending = {k: substitute(e, dash, a.rate_interval, a.interval) for k, e in exprs}
    found = {}
    until = time.monotonic() + a.wait
    while pending:
        for k, e in list(pending.items()):
            result = query(a.prometheus, e)
            if result:
                found[k] = (e, result)
                del pending[k]
        if not pending or time.monotonic() > until:
            break
        time.sleep(1)
    for (pid, title, ref), (e, result) in found.items():
        print(f"data: panel {pid} {title} [{ref}]: {len(result)} series: {e}")
    for (pid, title, ref), e in pending.items():
        print(f"EMPTY: panel {pid} {title} [{ref}]: {e}")
    print(f"queries: {len(found)} of {len(exprs)} returned data")
    if pending:
        sys.exit(1)


if __name__ == "__main__":
    main()
