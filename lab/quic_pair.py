#!/usr/bin/env python3
"""quic_pair: a real QUIC server and client (aioquic) for traffic tests.

Contract
--------
``quic_pair.py cert DIR`` writes a self-signed certificate and key
(``DIR/cert.pem``, ``DIR/key.pem``, EC P-256, CN ``quic.lab``).

``quic_pair.py server --host H --port P --cert C --key K`` serves QUIC
(RFC 9000, TLS 1.3, ALPN ``hq-interop``: HTTP/0.9 over QUIC, as the QUIC
interop runner uses) until SIGTERM/SIGINT. On every bidirectional stream
it reads a request ``GET N`` and answers N random bytes, then ends the
stream. It prints ``ready`` once listening.

``quic_pair.py client --host H --port P --sizes N,N,... [--connections K]
[--pause S] [--seed X]`` opens K connections one after another; on each it
fetches every size of ``--sizes`` on its own stream, one after another,
with a seeded pause of up to S seconds between fetches (as a page loads
objects, then idles). It checks every answer's length, prints one line
``fetched COUNT objects, BYTES bytes`` and exits 0, or exits 1 naming the
first failure. The certificate is not verified (self-signed).
"""

import argparse
import asyncio
import datetime
import os
import random
import signal
import ssl
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

ALPN = ["hq-interop"]


def make_cert(d):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "quic.lab")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cert.pem"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(d, "key.pem"), "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


class ServerProtocol(QuicConnectionProtocol):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.requests = {}

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        buf = self.requests.get(event.stream_id, b"") + event.data
        self.requests[event.stream_id] = buf
        if not event.end_stream:
            return
        del self.requests[event.stream_id]
        parts = buf.split()
        n = int(parts[1]) if len(parts) == 2 and parts[0] == b"GET" else 0
        self._quic.send_stream_data(event.stream_id, os.urandom(n), end_stream=True)
        self.transmit()


class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.waiting = {}
        self.received = {}

    async def fetch(self, n):
        sid = self._quic.get_next_available_stream_id()
        fut = asyncio.get_running_loop().create_future()
        self.waiting[sid] = fut
        self.received[sid] = 0
        self._quic.send_stream_data(sid, f"GET {n}\r\n".encode(), end_stream=True)
        self.transmit()
        return await fut

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.stream_id in self.waiting:
            self.received[event.stream_id] += len(event.data)
            if event.end_stream:
                got = self.received.pop(event.stream_id)
                self.waiting.pop(event.stream_id).set_result(got)


async def run_server(a):
    cfg = QuicConfiguration(is_client=False, alpn_protocols=ALPN)
    cfg.load_cert_chain(a.cert, a.key)
    server = await serve(a.host, a.port, configuration=cfg, create_protocol=ServerProtocol)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print("ready", flush=True)
    await stop.wait()
    server.close()


async def run_client(a):
    rng = random.Random(a.seed)
    sizes = [int(s) for s in a.sizes.split(",") if s]
    count = total = 0
    for _ in range(a.connections):
        cfg = QuicConfiguration(is_client=True, alpn_protocols=ALPN)
        cfg.verify_mode = ssl.CERT_NONE
        async with connect(a.host, a.port, configuration=cfg,
                           create_protocol=ClientProtocol) as c:
            for n in sizes:
                got = await asyncio.wait_for(c.fetch(n), timeout=30)
                if got != n:
                    print(f"asked {n} bytes, got {got}", file=sys.stderr)
                    sys.exit(1)
                count += 1
                total += got
                await asyncio.sleep(rng.uniform(0, a.pause))
    print(f"fetched {count} objects, {total} bytes")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cert")
    c.add_argument("dir")
    s = sub.add_parser("server")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    k = sub.add_parser("client")
    k.add_argument("--host", required=True)
    k.add_argument("--port", type=int, required=True)
    k.add_argument("--sizes", required=True)
    k.add_argument("--connections", type=int, default=1)
    k.add_argument("--pause", type=float, default=0.0)
    k.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.cmd == "cert":
        make_cert(a.dir)
    elif a.cmd == "server":
        asyncio.run(run_server(a))
    else:
        asyncio.run(run_client(a))


if __name__ == "__main__":
    main()
