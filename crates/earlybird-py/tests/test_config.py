"""earlybird.flows over the engine's one configuration: every long option
of `earlybird flows` is a keyword argument, a probe TOML file is read as
the CLI reads it, and each option group gives the CLI's records."""

import re
import subprocess

import pytest

import earlybird

from conftest import REPO
from test_flows import cli_csv, compare

PCAP = REPO / "testdata/pcap/ndpi__iphone.pcap"


def long_options(cli):
    """The long options `earlybird flows --help` lists."""
    text = subprocess.run([cli, "flows", "--help"], check=True, capture_output=True, text=True).stdout
    return sorted(set(re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", text, re.M)))


def test_every_long_option_is_a_keyword_argument(cli):
    front_only = {"help", "version", "config", "print-config", "check-config"}
    options = [o for o in long_options(cli) if o not in front_only]
    assert len(options) > 60
    for option in options:
        # A list of a list of a fraction is no option's type: a known option
        # fails on its value, an unknown one as unknown.
        with pytest.raises(ValueError) as e:
            # (--no-labellers sets the key `labellers` false.)
            key = "labellers" if option == "no-labellers" else option
            earlybird.print_config(**{key.replace("-", "_"): [[1.5]]})
            pytest.fail(f"--{option} took [[1.5]]")
        assert "unknown field" not in str(e.value), option
    with pytest.raises(ValueError, match="unknown field `colour`"):
        earlybird.print_config(colour="blue")


def test_print_config_is_the_clis(cli, tmp_path):
    conf = REPO / "docs/probe.example.toml"
    ours = earlybird.print_config(config=conf, idle_timeout=42, output=["x.csv"])
    theirs = subprocess.run(
        [cli, "flows", "--config", str(conf), "--idle-timeout", "42", "-o", "x.csv", "--print-config"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert ours == theirs


def test_the_example_probe_file_runs(tmp_path):
    text = (REPO / "docs/probe.example.toml").read_text()
    text = text.replace("/var/lib/earlybird", str(tmp_path)).replace("127.0.0.1:9464", "127.0.0.1:0")
    (tmp_path / "dump").mkdir()
    conf = tmp_path / "probe.toml"
    conf.write_text(text)
    flows = earlybird.flows(PCAP, config=conf)
    table = flows.to_arrow()
    assert table.num_rows > 0
    report = flows.report
    assert report["records"] == table.num_rows
    # The file's outputs were written beside the records Python got.
    assert (tmp_path / "flows.jsonl").read_text().count("\n") == table.num_rows
    assert (tmp_path / "stats.csv").exists()


@pytest.mark.parametrize(
    "kwargs,args",
    [
        ({"idle_timeout": 1, "early_packets": 6, "unidirectional": True}, ["--idle-timeout", "1", "-n", "6", "--unidirectional"]),
        ({"stats": "basic", "max_flows": 1000, "hash": "toeplitz"}, ["--stats", "basic", "--max-flows", "1000", "--hash", "toeplitz"]),
        ({"model": None}, ["--no-model"]),
        ({"threshold": 0.9}, ["--threshold", "0.9"]),
        ({"analyzers": ["payload"]}, ["--analyzer", "payload"]),
        ({"sample": "systematic:3"}, ["--sample", "systematic:3"]),
        ({"timestamps": "udts"}, ["--timestamps", "udts"]),
    ],
    ids=["flows", "table", "no-model", "threshold", "analyzer", "sample", "timestamps"],
)
def test_each_option_group_gives_the_clis_records(cli, tmp_path, kwargs, args):
    table = earlybird.flows(PCAP, **kwargs).to_arrow()
    compare(cli_csv(cli, [PCAP], tmp_path, *args), table)


def test_the_filter_keyword_gives_the_clis_filtered_records(cli, tmp_path):
    # A capture filter in tcpdump's syntax (`--filter`): the same records
    # as the CLI's, only UDP ones, and the packets left out counted.
    rows = cli_csv(cli, [PCAP], tmp_path, "--filter", "udp", "--no-model")
    flows = earlybird.flows(PCAP, filter="udp", no_model=True)
    table = flows.to_arrow()
    compare(rows, table)
    assert set(table.column("proto").to_pylist()) == {17}
    assert flows.report["filtered"] > 0
    with pytest.raises(ValueError, match="libpcap"):
        earlybird.flows(PCAP, filter="udp porrt 53")
