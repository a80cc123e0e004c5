"""`clickhouse_hold=N` (`--clickhouse-hold`, docs/OPERATIONS.md, "What
survives what") from Python: the keyword reaches the engine's
configuration, and a run whose ClickHouse server cannot be reached holds
at most N records of the batches waiting for it and counts the rest, as
the CLI's summary says."""

import re
import socket
import subprocess

import earlybird


def refused_port():
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hold_line(report, hold):
    """The summary's ClickHouse line: (inserted, records, held at most,
    dropped beyond the hold)."""
    m = re.search(
        r"^ClickHouse \S+: (\d+) of (\d+) records inserted; at most (\d+) held "
        rf"\(--clickhouse-hold {hold}\), (\d+) dropped beyond the hold$",
        report["text"],
        re.M,
    )
    assert m, report["text"]
    return tuple(int(g) for g in m.groups())


def test_clickhouse_hold_reaches_the_configuration():
    text = earlybird.print_config(clickhouse_hold=700)
    assert re.search(r"^clickhouse-hold = 700$", text, re.M), text
    assert re.search(r"^clickhouse-hold = 100000$", earlybird.print_config(), re.M)


def test_clickhouse_hold_bounds_what_waits_for_an_absent_server(cli, tmp_path):
    # More flows than one record batch (2,048) holds, so that at least two
    # batches wait for the server.
    pcap = tmp_path / "many.pcap"
    subprocess.run([cli, "gen", "realistic", "-n", "250000", "--seed", "4", "-o", pcap], check=True)
    out = f"clickhouse+http://127.0.0.1:{refused_port()}/flows"
    seen = {}
    for hold in (100000, 1000):
        flows = earlybird.flows(pcap, model=None, output=[out], clickhouse_hold=hold)
        rows = flows.to_arrow().num_rows
        report = flows.report
        inserted, records, held, beyond = hold_line(report, hold)
        assert (inserted, records) == (0, rows), report["text"]
        assert any("records not inserted" in e for e in report["output_errors"]), report
        seen[hold] = (held, beyond)
    # The default hold keeps every record waiting; a hold of 1,000 keeps
    # what fits (one batch always goes when nothing waits, so a batch
    # larger than the hold is held alone) and drops the rest, counted.
    assert seen[100000] == (rows, 0), seen
    held, beyond = seen[1000]
    assert rows > 2048, rows
    assert 0 < held < rows and beyond == rows - held, seen
