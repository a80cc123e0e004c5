"""The ClickHouse output against a current ClickHouse engine.

The CLI test `clickhouse_cli` inserts into Debian 12's clickhouse-server
(18.16, from 2018). This test checks the same DDL and inserts against a
current engine: chDB (PyPI's `chdb`, ClickHouse compiled as a library)
behind a small HTTP front that does what ClickHouse's HTTP interface
does with `POST /?query=...&SETTING=...`: it runs the query with the URL's
other parameters as settings and the request body as the query's data.
The table is made from the shipped `docs/clickhouse_flows.sql`; the rows
read back must be the CSV's, column for column.
"""

import csv
import http.server
import subprocess
import threading
import urllib.parse

from conftest import REPO, need

def _chdb_session(path):
    try:
        from chdb import session
    except ImportError:
        need(False, "PyPI's chdb (a current ClickHouse engine)")
    return session.Session(str(path))


class _Front(http.server.BaseHTTPRequestHandler):
    """ClickHouse's HTTP interface, for INSERTs, over a chDB session."""

    sess = None
    lock = threading.Lock()
    errors = []

    def do_POST(self):  # noqa: N802 (the handler's name is the method's)
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query))
        query = params.pop("query", "")
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        head, sep, fmt = query.partition(" FORMAT ")
        settings = ", ".join(f"{k} = {v}" for k, v in params.items())
        if settings:
            head = f"{head} SETTINGS {settings}"
        sql = f"{head}{sep}{fmt}\n{body.decode()}"
        try:
            with self.lock:
                self.sess.query(sql)
            status, answer = 200, b""
        except Exception as e:  # the server's answer carries the message
            self.errors.append(str(e))
            status, answer = 500, str(e).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def test_the_shipped_ddl_and_the_inserts_work_on_a_current_clickhouse(cli, tmp_path):
    sess = _chdb_session(tmp_path / "ch")
    version = str(sess.query("SELECT version()", "CSV")).strip().strip('"')
    ddl = (REPO / "docs" / "clickhouse_flows.sql").read_text()
    sess.query(ddl)

    _Front.sess = sess
    _Front.errors = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Front)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pcap = REPO / "testdata" / "pcap" / "ndpi__iphone.pcap"
        out = tmp_path / "flows.csv"
        run = subprocess.run(
            [
                cli,
                "flows",
                str(pcap),
                "-o",
                f"clickhouse+http://127.0.0.1:{port}/flows",
                "-o",
                str(out),
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.shutdown()
    assert run.returncode == 0, run.stderr
    assert _Front.errors == [], f"ClickHouse {version} refused: {_Front.errors[:1]}"

    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) > 20
    cols = ["src", "dst", "sport", "dport", "proto", "fwd_packets", "bwd_packets",
            "fwd_bytes", "bwd_bytes", "first_ts", "community_id"]
    got = str(sess.query(f"SELECT {', '.join(cols)} FROM flows", "CSV")).strip()
    back = sorted(tuple("" if c == "\\N" else c for c in r) for r in csv.reader(got.splitlines()))
    want = sorted(tuple(r[c] for c in cols) for r in rows)
    assert len(back) == len(want), f"ClickHouse {version}: {len(back)} rows for {len(want)} records"
    assert back == want, f"ClickHouse {version}: rows differ from the CSV"
