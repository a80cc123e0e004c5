"""earlybird.dask.flows on a LocalCluster: one Parquet partition per
capture, equal to running the captures one by one; a corrupt file among
them is reported and the rest done."""

import shutil

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import earlybird

from conftest import need


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
    assert seen[-1] == (13, 13)
    assert list(got["errors"]) == [str(src / "zz-corrupt.pcap")]
    assert "zz-corrupt.pcap" in got["errors"][str(src / "zz-corrupt.pcap")]
    assert len(got["done"]) == 12
    for r in got["done"]:
        part = pq.read_table(tmp_path / "out" / r["partition"] / "part.parquet")
        alone = earlybird.flows(r["path"], model=None).to_arrow()
        assert part.equals(alone), r["path"]
        assert r["rows"] == alone.num_rows
    whole = ds.dataset(tmp_path / "out", format="parquet", partitioning="hive").to_table()
    assert whole.num_rows == sum(r["rows"] for r in got["done"]) > 0
