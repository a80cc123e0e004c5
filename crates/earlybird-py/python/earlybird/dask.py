"""Many captures on a Dask cluster: one partition of a Parquet dataset per
capture.

``earlybird.dask.flows(paths, client, out_dir, **options)`` runs
``earlybird.flows`` on each capture file as one Dask task (globs expanded
as ``earlybird.flows`` does, directories into their files, recursively and
sorted, as ``earlybird train`` finds them) and
writes its records to ``out_dir/capture=<index>/part.parquet`` (pyarrow;
the columns of ``earlybird.flows``); ``pyarrow.dataset.dataset(out_dir,
partitioning="hive")`` reads them back. Why Dask rather than Spark: the
package is Python and pyarrow already; Dask's ``Client.map`` runs plain
Python functions on a ``LocalCluster`` with nothing else installed, and on
a real cluster (``Client("scheduler:8786")``) as long as every worker has
the package and sees the paths (shared storage).

Flows that span files are not joined: each capture is its own run (as
``earlybird flows FILE`` for each file), so a session cut by a file
boundary is two records, one per file, each ending with reason ``eof``.

Failures: a task that raises is run again up to ``retries`` times
(Dask's task retries); a task whose worker dies under it (killed, out of
memory) is run again on another worker by Dask's scheduler (up to its
``distributed.scheduler.allowed-failures``, 3 by default, then
``KilledWorker``). A task writes its partition under a hidden temporary
name and renames it into place at the end, so an attempt cut short leaves
no partial ``part.parquet`` (readers skip names starting with ``.``; the
next attempt removes them). A capture that still fails is reported in
the result's ``errors`` (path -> the error's text, naming the file and
offset as ``earlybird.flows`` does) and the others are done; no file is
dropped without a line in ``done`` or ``errors``. Progress: ``progress``
(a callable) is called with (finished, total) as tasks end.
"""

import os
import uuid

from . import _expand, _native
from . import flows as _flows


def _one(path, index, out_dir, options):
    import pyarrow.parquet as pq

    part = os.path.join(out_dir, f"capture={index}")
    os.makedirs(part, exist_ok=True)
    # What an attempt cut short (its worker killed) left behind.
    for name in os.listdir(part):
        if name.startswith(".part.parquet."):
            os.remove(os.path.join(part, name))
    run = _flows(path, **options)
    table = run.to_arrow()
    tmp = os.path.join(part, f".part.parquet.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, os.path.join(part, "part.parquet"))
    return {"path": path, "rows": table.num_rows, "packets": run.report["packets_read"]}


def flows(paths, client, out_dir, *, retries=1, progress=None, **options):
    """Runs each capture as a Dask task; returns ``{"done": [{"path",
    "partition", "rows", "packets"}, ...], "errors": {path: text}}`` in the
    order of the expanded paths (see the module docs)."""
    from distributed import as_completed

    files = [os.fspath(p) for p in _native.capture_files(_expand(paths))]
    os.makedirs(out_dir, exist_ok=True)
    futures = {}
    for i, path in enumerate(files):
        # The key names the partition (the scheduler's logs and dashboard).
        key = f"earlybird-flows-{i}-{uuid.uuid4().hex}"
        fut = client.submit(_one, path, i, os.fspath(out_dir), options, retries=retries, key=key)
        futures[fut] = (i, path)
    done, errors = [], {}
    for n, fut in enumerate(as_completed(list(futures)), 1):
        i, path = futures[fut]
        try:
            r = fut.result()
            r["partition"] = f"capture={i}"
            done.append(r)
        except Exception as e:  # noqa: BLE001 - every task error is reported
            errors[path] = f"{type(e).__name__}: {e}"
        if progress is not None:
            progress(n, len(files))
    done.sort(key=lambda r: r["partition"])
    return {"done": done, "errors": errors}
