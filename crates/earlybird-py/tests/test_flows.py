"""earlybird.flows against `earlybird flows`: the same records as the
CLI's CSV, the documented column types, errors naming the file, batches
of the asked size."""

import csv
import math
import subprocess

import pyarrow as pa
import pytest

import earlybird

from conftest import REPO

SAMPLES = [
    "testdata/pcap/arkime__v6-http.pcap",
    "testdata/pcap/ndpi__iphone.pcap",
    "testdata/pcap/ndpi__vxlan.pcap",
    "testdata/pcap/zeek__pcapng-multi-interface.pcapng",
]
CORPUS_SAMPLES = [
    "classify/dev/ndpi",
    "tunnels",
]


def cli_csv(cli, paths, tmp_path, *args):
    out = tmp_path / "cli.csv"
    subprocess.run(
        [cli, "flows", *map(str, paths), "-o", str(out), "--quiet", "--no-progress", *args],
        check=True,
    )
    with open(out, newline="") as f:
        return list(csv.DictReader(f))


def same(csv_text, value, column):
    """Whether the CSV cell `csv_text` writes the Arrow value `value`."""
    if value is None:
        return csv_text == ""
    if isinstance(value, float):
        # CSV rounds floats to three decimals.
        return csv_text != "" and math.isclose(float(csv_text), value, abs_tol=0.0011)
    return csv_text == str(value), column


def key(r):
    return tuple(str(r[k]) for k in ("first_ts", "src", "dst", "sport", "dport", "proto", "vlan", "tunnel", "tunnel_id", "last_ts"))


def compare(cli_rows, table):
    py_rows = table.to_pylist()
    assert len(py_rows) == len(cli_rows) > 0
    assert list(cli_rows[0].keys()) == table.column_names
    for c, p in zip(sorted(cli_rows, key=key), sorted(py_rows, key=key)):
        for name in table.column_names:
            ok = same(c[name], p[name], name)
            assert ok is True or ok == (True, name), (name, c[name], p[name], c)


@pytest.mark.parametrize("sample", SAMPLES)
def test_records_equal_the_cli_csv(cli, tmp_path, sample):
    path = REPO / sample
    compare(cli_csv(cli, [path], tmp_path), earlybird.flows(path).to_arrow())


@pytest.mark.parametrize("folder", CORPUS_SAMPLES)
def test_corpus_folders_equal_the_cli_csv_with_options(cli, corpus, tmp_path, folder):
    # A directory (searched recursively) with non-default options, as CLI
    # flags and as keyword arguments.
    path = corpus / folder
    args = ["--idle-timeout", "5", "-n", "8", "--shards", "2", "--stats", "basic", "--no-model"]
    rows = cli_csv(cli, [path], tmp_path, *args)
    flows = earlybird.flows(path, idle_timeout=5, early_packets=8, shards=2, stats="basic", model=None)
    compare(rows, flows.to_arrow())
    assert flows.report["records"] == len(rows)


def test_community_id_seed_keyword_equals_the_cli_option(cli, tmp_path):
    # community_id_seed= is the option --community-id-seed (configuration
    # key community-id-seed): the same IDs, and not those of seed 0.
    path = REPO / SAMPLES[1]
    rows = cli_csv(cli, [path], tmp_path, "--community-id-seed", "9")
    flows = earlybird.flows(path, community_id_seed=9).to_arrow()
    compare(rows, flows)
    seeded = flows.column("community_id").to_pylist()
    default = earlybird.flows(path).to_arrow().column("community_id").to_pylist()
    assert sum(1 for i in seeded if i and i.startswith("1:")) > 10
    assert seeded != default


def test_no_community_id_keyword_equals_the_cli_option(cli, tmp_path):
    # no_community_id=True is the option --no-community-id (configuration
    # key no-community-id): the column is null in every record.
    path = REPO / SAMPLES[1]
    rows = cli_csv(cli, [path], tmp_path, "--no-community-id")
    flows = earlybird.flows(path, no_community_id=True).to_arrow()
    compare(rows, flows)
    assert len(rows) > 10
    assert all(r["community_id"] == "" for r in rows)
    assert flows.column("community_id").null_count == flows.num_rows


def test_globs_and_lists_of_inputs(tmp_path):
    one = earlybird.flows(REPO / "testdata/pcap/ndpi__*.pcap").to_arrow()
    two = earlybird.flows([REPO / "testdata/pcap/ndpi__iphone.pcap", REPO / "testdata/pcap/ndpi__vxlan.pcap"]).to_arrow()
    assert one.num_rows == two.num_rows > 0
    with pytest.raises(earlybird.CaptureError, match="no file matches"):
        earlybird.flows(str(tmp_path / "*.pcap"))


def test_batches_have_the_asked_size_and_iteration_gives_dicts():
    path = REPO / "testdata/pcap/ndpi__iphone.pcap"
    total = earlybird.flows(path).to_arrow().num_rows
    sizes = [b.num_rows for b in earlybird.flows(path, batch_size=7).batches()]
    assert sum(sizes) == total and total > 7
    assert all(s == 7 for s in sizes[:-1]) and 0 < sizes[-1] <= 7
    records = list(earlybird.flows(path))
    assert len(records) == total and isinstance(records[0], dict)
    assert {"src", "dst", "app", "pkt1_size"} <= records[0].keys()


# The documented column types (docs/PYTHON.md, "Columns and dtypes").
ARROW_TYPES = {
    "src": pa.string(), "dst": pa.string(), "sport": pa.uint16(), "dport": pa.uint16(),
    "proto": pa.uint8(), "icmp_type": pa.uint8(), "icmp_code": pa.uint8(),
    "ip_version": pa.uint8(), "vlan": pa.uint16(), "tunnel": pa.string(),
    "tunnel_id": pa.uint32(), "first_ts": pa.uint64(), "last_ts": pa.uint64(),
    "duration_ns": pa.uint64(), "fwd_packets": pa.uint64(), "bwd_bytes": pa.uint64(),
    "fwd_size_min": pa.uint16(), "fwd_size_mean": pa.float64(), "fwd_iat_min": pa.uint64(),
    "fwd_syn": pa.uint32(), "end_reason": pa.string(), "app": pa.string(),
    "app_confidence": pa.float64(), "decided_at_packet": pa.uint8(), "early_len": pa.uint8(),
    "pkt1_size": pa.uint16(), "pkt1_dir": pa.int8(), "pkt1_iat_us": pa.uint32(),
}


def test_arrow_types_are_the_documented_ones():
    schema = earlybird.flows(REPO / SAMPLES[0]).schema
    for name, ty in ARROW_TYPES.items():
        assert schema.field(name).type == ty, name
    assert all(f.nullable for f in schema)
    assert schema.field("duration_ns").metadata[b"unit"] == b"ns"


def test_pandas_dtypes_do_not_depend_on_the_data():
    # One flow per table: ICMP flows (icmp_type set) and others (null),
    # flows with and without 4 early packets: the same dtype per column,
    # the nullable one of the Arrow type.
    path = REPO / "testdata/pcap/arkime__v6-http.pcap"
    frames = [
        pa.Table.from_batches([b]).to_pandas(types_mapper=earlybird._pandas_types())
        for b in earlybird.flows(path, batch_size=1).batches()
    ]
    assert any(f["icmp_type"].isna().all() for f in frames)
    assert any(f["icmp_type"].notna().all() for f in frames)
    whole = earlybird.flows(path).to_pandas()
    assert all(list(f.dtypes) == list(whole.dtypes) for f in frames)
    dt = dict(whole.dtypes.astype(str))
    assert dt["sport"] == "UInt16" and dt["icmp_type"] == "UInt8"
    assert dt["first_ts"] == "UInt64" and dt["pkt1_dir"] == "Int8"
    assert dt["tunnel_id"] == "UInt32" and dt["fwd_size_mean"] == "float64"
    assert dt["src"] in ("str", "string", "object")


def test_polars_frame_has_the_arrow_types():
    pl = pytest.importorskip("polars")
    df = earlybird.flows(REPO / SAMPLES[0]).to_polars()
    assert df.schema["sport"] == pl.UInt16 and df.schema["fwd_size_mean"] == pl.Float64
    assert df.height == 16


def test_errors_name_the_file(tmp_path, corpus):
    missing = tmp_path / "missing.pcap"
    with pytest.raises(earlybird.CaptureError, match="missing.pcap"):
        earlybird.flows(missing)
    text = tmp_path / "notes.pcap"
    text.write_text("not a capture\n")
    with pytest.raises(earlybird.CaptureError, match="notes.pcap"):
        earlybird.flows(text).to_arrow()
    with pytest.raises(ValueError, match="early packets"):
        earlybird.flows(REPO / SAMPLES[0], early_packets=0)
    with pytest.raises(ValueError, match="idle-timeout"):
        earlybird.flows(REPO / SAMPLES[0], idle_timeout=-1)
    with pytest.raises(earlybird.ModelError, match="nomodel.ebm"):
        earlybird.flows(REPO / SAMPLES[0], model=tmp_path / "nomodel.ebm")


def test_early_packets_as_list_columns():
    path = REPO / "testdata/pcap/ndpi__iphone.pcap"
    flat = earlybird.flows(path, early_packets=6).to_arrow()
    lists = earlybird.flows(path, early_packets=6, early_lists=True, batch_size=50)
    table = lists.to_arrow()
    assert table.schema == lists.schema
    assert "pkt1_size" not in table.column_names
    names = table.column_names
    at = names.index("early_size")
    assert names[at - 1] == "early_len" and names[at:at + 3] == ["early_size", "early_dir", "early_iat_us"]
    assert table.schema.field("early_size").type == pa.list_(pa.uint16())
    assert table.schema.field("early_dir").type == pa.list_(pa.int8())
    f, t = flat.to_pylist(), table.to_pylist()
    assert len(f) == len(t)
    for a, b in zip(f, t):
        n = a["early_len"]
        for x in ("size", "dir", "iat_us"):
            assert b[f"early_{x}"] == [a[f"pkt{i}_{x}"] for i in range(1, n + 1)]
        assert all(a[f"pkt{i}_size"] is None for i in range(n + 1, 7))
    assert any(r["early_len"] < 6 for r in f) and any(r["early_len"] == 6 for r in f)
