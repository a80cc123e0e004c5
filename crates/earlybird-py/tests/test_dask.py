"""earlybird.dask.flows on a LocalCluster: one Parquet partition per
capture, equal to running the captures one by one; a corrupt file among
them is retried, then reported, and the rest done; a worker killed in the
middle of a task does not lose its capture: the task runs again and the
dataset is complete."""

import os
import shutil
import signal

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import earlybird

from conftest import need


def attempts(cluster, prefix):
    """How many times the scheduler gave the task whose key starts with
    `prefix` to a worker."""
    log = cluster.scheduler.transition_log
    return sum(1 for t in log if str(t[0]).startswith(prefix) and t[2] == "processing")


def same_as_alone(out, done):
    for r in done:
        part_dir = out / r["partition"]
        assert os.listdir(part_dir) == ["part.parquet"], r
        alone = earlybird.flows(r["path"], model=None).to_arrow()
        assert pq.read_table(part_dir / "part.parquet").equals(alone), r["path"]
        assert r["rows"] == alone.num_rows


def test_dask_partitions_equal_one_by_one_runs_and_report_a_corrupt_file(corpus, tmp_path):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        need(False, "dask distributed (pip install 'dask[distributed]')")
    import earlybird.dask as ebd

    src = tmp_path / "captures"
    src.mkdir()
    picked = sorted((corpus / "classify" / "dev" / "ndpi").rglob("*.pcap"))[:12]
    for p in picked:
        shutil.copy(p, src / p.name)
    (src / "zz-corrupt.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + b"\x00" * 10)
    seen = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        got = ebd.flows(src, client, tmp_path / "out", model=None, progress=lambda n, total: seen.append((n, total)))
        # The corrupt file (partition 12) was tried twice (retries=1).
        assert attempts(cluster, "earlybird-flows-12-") == 2
        assert attempts(cluster, "earlybird-flows-0-") == 1
    assert seen[-1] == (13, 13)
    assert list(got["errors"]) == [str(src / "zz-corrupt.pcap")]
    assert "zz-corrupt.pcap" in got["errors"][str(src / "zz-corrupt.pcap")]
    assert len(got["done"]) == 12
    same_as_alone(tmp_path / "out", got["done"])
    whole = ds.dataset(tmp_path / "out", format="parquet", partitioning="hive").to_table()
    assert whole.num_rows == sum(r["rows"] for r in got["done"]) > 0


def test_a_worker_killed_mid_task_loses_no_capture(cli, tmp_path):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        need(False, "dask distributed (pip install 'dask[distributed]')")
    import subprocess

    import earlybird.dask as ebd

    src = tmp_path / "captures"
    src.mkdir()
    # Three captures of about a second each, so that a task is still
    # running when the first one ends.
    for seed in (1, 2, 3):
        subprocess.run(
            [cli, "gen", "realistic", "-n", "600000", "--seed", str(seed), "-o", str(src / f"g{seed}.pcap")],
            check=True,
            capture_output=True,
        )
    killed = []

    def kill_a_busy_worker(n, total):
        # When the first task ends the two others are running (or just
        # given to a worker): kill the process of one of their workers.
        if n != 1:
            return
        busy = [(w, keys) for w, keys in client.processing().items() if keys]
        assert busy, "no task running after the first one ended"
        worker, keys = busy[0]
        pid = client.run(os.getpid, workers=[worker])[worker]
        os.kill(pid, signal.SIGKILL)
        killed.append(str(keys[0]))

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        got = ebd.flows(src, client, tmp_path / "out", model=None, progress=kill_a_busy_worker)
        assert len(killed) == 1
        # The scheduler gave the killed task to a worker again.
        assert attempts(cluster, killed[0]) == 2, killed
    assert got["errors"] == {}
    assert [r["partition"] for r in got["done"]] == ["capture=0", "capture=1", "capture=2"]
    same_as_alone(tmp_path / "out", got["done"])
