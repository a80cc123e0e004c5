"""Large captures stream with bounded memory; KeyboardInterrupt stops a
run and flushes its flows."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import earlybird

from conftest import REPO

# Packets of the generated capture: about 0.5 M flows, whose whole table
# would take several hundred MB in memory.
PACKETS = 3_000_000


@pytest.fixture(scope="module")
def big(cli, tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "worst.pcap"
    subprocess.run(
        [cli, "gen", "worst", "-n", str(PACKETS), "--packets-per-flow", "6", "--window", "1000", "-o", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return path


CHILD = textwrap.dedent(
    """
    import resource, sys, earlybird

    def anon_mib():
        # Anonymous memory: the capture itself is memory-mapped, and its
        # pages, counted in RSS, are the page cache's, not the run's.
        with open("/proc/self/status") as f:
            line = next(l for l in f if l.startswith("RssAnon:"))
        return int(line.split()[1]) // 1024

    flows = earlybird.flows(sys.argv[1], batch_size=8192, model=None, idle_timeout=0.01)
    rows, anon = 0, anon_mib()
    for b in flows.batches():
        rows += b.num_rows
        anon = max(anon, anon_mib())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(rows, peak, anon, flows.report["packets_read"])
    """
)


def test_a_large_capture_streams_with_bounded_memory(big):
    out = subprocess.run([sys.executable, "-c", CHILD, str(big)], check=True, capture_output=True, text=True)
    rows, peak_mib, anon_mib, packets = map(int, out.stdout.split())
    size_mib = big.stat().st_size // 2**20
    print(f"\n{PACKETS} packets ({size_mib} MiB capture), {rows} flows streamed in 8192-row batches: "
          f"peak RSS {peak_mib} MiB (the mapped capture included), peak anonymous {anon_mib} MiB")
    assert packets == PACKETS
    assert rows >= PACKETS // 6
    # Generous: the interpreter with pyarrow (~55 MiB), the engine's flow
    # table and a few batches; every record at once is far more (below).
    assert anon_mib < 250, f"peak anonymous memory {anon_mib} MiB"
    # For scale (printed, not asserted): the same run into one table.
    whole = CHILD.replace(
        "for b in flows.batches():\n    rows += b.num_rows\n    anon = max(anon, anon_mib())",
        "rows = flows.to_arrow().num_rows\nanon = anon_mib()",
    )
    assert whole != CHILD
    out = subprocess.run([sys.executable, "-c", whole, str(big)], check=True, capture_output=True, text=True)
    _, peak_all, anon_all, _ = map(int, out.stdout.split())
    print(f"the same into one pyarrow.Table: peak RSS {peak_all} MiB, anonymous {anon_all} MiB")


INTERRUPTED = textwrap.dedent(
    """
    import sys, earlybird
    # The capture 20 times over (each a new time domain): a run of many
    # seconds, with flows ending as it reads (short idle timeout).
    flows = earlybird.flows([sys.argv[1]] * 20, batch_size=1024, model=None, idle_timeout=0.01)
    first = next(flows.batches()).num_rows
    print("started", flush=True)
    try:
        flows.to_arrow()
        print("not interrupted")
    except KeyboardInterrupt:
        table = flows.to_arrow()
        r = flows.report
        print(r["interrupted"], r["packets_read"], first + table.num_rows, r["records"])
    """
)


def test_keyboard_interrupt_stops_and_flushes(big):
    p = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(big)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    finally:
        p.kill()
    interrupted, packets, rows, records = out.split()
    assert interrupted == "True"
    assert 0 < int(packets) < 20 * PACKETS
    # Every record of the run, the flows flushed at the stop included,
    # reached the table.
    assert int(rows) == int(records) > 0


def test_an_interrupt_after_a_batch_was_taken_loses_none(big):
    # A KeyboardInterrupt can land in Python code right after the engine
    # handed a batch over (here: shaping the batches raises once, as a
    # signal handler would there). to_arrow() called again still returns
    # every record of the run.
    flows = earlybird.flows(str(big), batch_size=1024, model=None, idle_timeout=0.01)
    shape = flows._shape
    raised = []

    def interrupted_once(b):
        if not raised:
            raised.append(True)
            raise KeyboardInterrupt
        return shape(b)

    flows._shape = interrupted_once
    with pytest.raises(KeyboardInterrupt):
        flows.to_arrow()
    table = flows.to_arrow()
    assert raised
    assert table.num_rows == flows.report["records"] > 0
