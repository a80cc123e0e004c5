"""Live capture from Python: earlybird.flows(interface=...) on one end of a
veth pair between two network namespaces the test creates, while the CLI
replays a real capture (`earlybird replay`) into the other end. Stopped by
`duration` and by a KeyboardInterrupt (SIGINT), the run flushes its open
flows: the DataFrame holds the capture's flows and every one of its
packets, as `earlybird.flows` on the file gives them. Needs root and
iproute2's `ip` (skipped otherwise, and says so; under CI they are
required)."""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

import earlybird

from conftest import REPO, need

PCAP = REPO / "testdata" / "pcap" / "ndpi__iphone.pcap"

# Runs in the capture namespace: captures on argv[1] (for argv[2] seconds,
# or until SIGINT when it is "-"), writes the flows to argv[3] (Parquet)
# and prints the report as JSON.
CAPTURE = r"""
import json, sys
import pyarrow.parquet as pq
import earlybird

iface, duration, out = sys.argv[1], sys.argv[2], sys.argv[3]
flows = earlybird.flows(
    interface=iface, duration=None if duration == "-" else float(duration), model=None
)
print("capturing", flush=True)
try:
    table = flows.to_arrow()
except KeyboardInterrupt:
    print("caught KeyboardInterrupt", flush=True)
    table = flows.to_arrow()
pq.write_table(table, out)
report = flows.report
print(json.dumps({k: report[k] for k in ("interrupted", "records", "packets_read")}), flush=True)
"""


def ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True)


@pytest.fixture
def veth():
    """(capture namespace, capture end, sending namespace, sending end),
    removed afterwards."""
    need(os.geteuid() == 0 and shutil.which("ip") is not None, "root and iproute2's ip (live capture)")
    tag = os.getpid() % 100000
    ns_a, ns_b, a, b = f"ebpym{tag}", f"ebpyn{tag}", f"ebpya{tag}", f"ebpyb{tag}"
    for ns in (ns_a, ns_b):
        ip("netns", "del", ns)
    try:
        steps = [
            ("netns", "add", ns_a),
            ("netns", "add", ns_b),
            ("-n", ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b),
            # No IPv6 on the pair: its router solicitations would be flows too.
            ("netns", "exec", ns_a, "sysctl", "-qw", f"net.ipv6.conf.{a}.disable_ipv6=1"),
            ("netns", "exec", ns_b, "sysctl", "-qw", f"net.ipv6.conf.{b}.disable_ipv6=1"),
            ("-n", ns_a, "link", "set", a, "mtu", "9000", "up"),
            ("-n", ns_b, "link", "set", b, "mtu", "9000", "up"),
        ]
        for step in steps:
            r = ip(*step)
            assert r.returncode == 0, f"ip {' '.join(step)}: {r.stderr}"
        yield ns_a, a, ns_b, b
    finally:
        for ns in (ns_a, ns_b):
            ip("netns", "del", ns)


def keys(table):
    """The distinct 5-tuples (replayed at full speed, the capture's long
    pauses are gone: a flow the file's idle timeout cuts in two is one
    record live)."""
    cols = [table.column(c).to_pylist() for c in ("src", "dst", "sport", "dport", "proto")]
    return set(zip(*cols))


def packets(table):
    return sum(table.column("fwd_packets").to_pylist()) + sum(table.column("bwd_packets").to_pylist())


def capture(veth, cli, tmp_path, duration):
    """Starts the capture, replays the file into the pair, stops the
    capture (SIGINT when `duration` is None) and returns (flows, report,
    what the capture printed)."""
    ns_a, a, ns_b, b = veth
    out = tmp_path / "live.parquet"
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns_a, sys.executable, "-c", CAPTURE, a, str(duration or "-"), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        assert first.strip() == "capturing", first + proc.stderr.read()
        sent = subprocess.run(
            ["ip", "netns", "exec", ns_b, cli, "replay", "-i", b, str(PCAP)], capture_output=True, text=True
        )
        assert sent.returncode == 0, sent.stderr
        if duration is None:
            # Let the last frames through the ring (blocks are handed over
            # 10 ms after their first frame), then interrupt.
            subprocess.run(["sleep", "0.5"])
            proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    import pyarrow.parquet as pq

    return pq.read_table(out), json.loads(rest.strip().splitlines()[-1]), rest


def expected():
    return earlybird.flows(PCAP, model=None).to_arrow()


def test_live_capture_until_duration(veth, cli, tmp_path):
    got, report, printed = capture(veth, cli, tmp_path, duration=4)
    want = expected()
    assert packets(want) > 400
    assert packets(got) == packets(want), report
    assert keys(got) == keys(want)
    assert not report["interrupted"] and "caught KeyboardInterrupt" not in printed
    assert report["records"] == got.num_rows


def test_keyboard_interrupt_stops_a_live_capture_and_flushes(veth, cli, tmp_path):
    got, report, printed = capture(veth, cli, tmp_path, duration=None)
    want = expected()
    # The flows were still open (idle timeout 15 s) when SIGINT came: all of
    # them arrive, flushed, with every packet.
    assert "caught KeyboardInterrupt" in printed
    assert report["interrupted"]
    assert packets(got) == packets(want), report
    assert keys(got) == keys(want)
    assert report["records"] == got.num_rows


def test_live_options_are_checked():
    with pytest.raises(ValueError, match="not both"):
        earlybird.flows(PCAP, interface="lo")
    with pytest.raises(ValueError, match="give source"):
        earlybird.flows()
    with pytest.raises(ValueError, match="needs --interface"):
        earlybird.flows(PCAP, duration=3)
    with pytest.raises(ValueError, match="duration"):
        earlybird.flows(interface="lo", duration=-1)
    with pytest.raises(ValueError, match="fanout"):
        earlybird.flows(interface="lo", fanout="ports")
    with pytest.raises(earlybird.EarlybirdError, match="ebpy-no-such"):
        earlybird.flows(interface="ebpy-no-such-if0", model=None)
