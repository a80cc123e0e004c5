#!/usr/bin/env python3
"""aiortc_peer: one end of a WebRTC session made with aiortc (PyPI).

Contract
--------
``aiortc_peer.py --role offer|answer --signal DIR --media KIND
[--audio WAV] [--video FILE] [--vcodec vp8|h264] [--turn HOST:PORT]
[--turn-transport udp|tcp] [--relay] [--bind-ip IP] [--seconds S]
[--sockets-out FILE]``

Two processes, one per role, make one session. Signalling is by files in
DIR, which both namespaces see (no signalling packets on the lab's link):
the offerer writes ``offer.json`` once its candidates are gathered, the
answerer answers with ``answer.json`` (aiortc puts every candidate in the
description, no trickle). KIND is ``audio`` (Opus from the WAV file),
``video`` (the video file encoded as ``--vcodec``), ``av`` (both, bundled
on one 5-tuple as browsers do) or ``data`` (a data channel only, on which
the offerer sends a seeded mix of small messages and bursts). Both ends
send media of KIND; the receiver consumes it. ``--turn`` gives a TURN
server (user ``lab``, password ``lab``); ``--relay`` restricts this end
to relayed candidates (iceTransportPolicy relay), so its media goes
through the TURN server over ``--turn-transport``. ``--bind-ip`` makes
IP this end's only host address (aioice otherwise offers every interface's,
and a lab with a VPN tunnel up must choose which path a call takes).

After S seconds of media (counted from the connection) the peer closes
the session. Once connected, and again before closing, it writes to
``--sockets-out`` one line ``proto ip port`` per UDP/TCP socket the process
owns (from /proc: the kernel's view, whatever library opened it), so a
lab labels a capture's flows by the endpoints of the programs that made
them. Exit 0 only when the session connected and lasted S seconds;
otherwise exit 1 naming what failed.
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time

from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.contrib.media import MediaBlackhole, MediaPlayer
from aiortc.rtcconfiguration import RTCBundlePolicy, RTCIceTransportPolicy
from aiortc.rtcrtpsender import RTCRtpSender

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from own_sockets import own_sockets, write_sockets  # noqa: E402


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


async def wait_file(path, timeout):
    t0 = time.monotonic()
    while not os.path.exists(path):
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"no {os.path.basename(path)} in {timeout} s")
        await asyncio.sleep(0.05)
    with open(path) as f:
        return json.load(f)


def prefer(transceiver, kind, mime):
    codecs = RTCRtpSender.getCapabilities(kind).codecs
    chosen = [c for c in codecs if c.mimeType.lower() == mime.lower()]
    if not chosen:
        raise RuntimeError(f"aiortc has no {mime}")
    # Keep retransmission payload types of the chosen codec too.
    rtx = [c for c in codecs if c.mimeType.lower() == f"{kind}/rtx"]
    transceiver.setCodecPreferences(chosen + rtx)


async def run(args):
    servers = []
    if args.turn:
        servers.append(RTCIceServer(
            urls=f"turn:{args.turn}?transport={args.turn_transport}",
            username="lab", credential="lab"))
    cfg = RTCConfiguration(
        iceServers=servers,
        iceTransportPolicy=(RTCIceTransportPolicy.RELAY if args.relay
                            else RTCIceTransportPolicy.ALL),
        bundlePolicy=RTCBundlePolicy.MAX_BUNDLE)
    pc = RTCPeerConnection(cfg)
    sink = MediaBlackhole()
    connected = asyncio.Event()
    failed = []
    rng = random.Random(args.seed)
    got = {"messages": 0, "bytes": 0}

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected":
            connected.set()
        elif pc.connectionState == "failed":
            failed.append("connection failed")
            connected.set()

    @pc.on("track")
    def on_track(track):
        sink.addTrack(track)

    def count(channel):
        @channel.on("message")
        def on_message(m):
            got["messages"] += 1
            got["bytes"] += len(m)

    @pc.on("datachannel")
    def on_dc(channel):
        count(channel)

    players = []
    kinds = {"audio": ["audio"], "video": ["video"], "av": ["audio", "video"],
             "data": []}[args.media]
    if "audio" in kinds:
        players.append(MediaPlayer(args.audio, loop=True))
    if "video" in kinds:
        players.append(MediaPlayer(args.video, loop=True))
    channel = None

    def add_tracks():
        for kind in kinds:
            p = players[0] if kind == "audio" else players[-1]
            track = p.audio if kind == "audio" else p.video
            if track is None:
                raise RuntimeError(f"no {kind} in {p}")
            return_t = pc.addTransceiver(track, direction="sendrecv")
            prefer(return_t, kind, "audio/opus" if kind == "audio"
                   else f"video/{args.vcodec.upper()}")

    if args.role == "offer":
        add_tracks()
        if args.media == "data":
            channel = pc.createDataChannel("lab")
            count(channel)
        await pc.setLocalDescription(await pc.createOffer())
        write_json(os.path.join(args.signal, "offer.json"),
                   {"sdp": pc.localDescription.sdp, "type": pc.localDescription.type})
        ans = await wait_file(os.path.join(args.signal, "answer.json"), 60)
        await pc.setRemoteDescription(RTCSessionDescription(**ans))
    else:
        off = await wait_file(os.path.join(args.signal, "offer.json"), 60)
        await pc.setRemoteDescription(RTCSessionDescription(**off))
        # The offer's transceivers are answered with this end's tracks.
        for t in pc.getTransceivers():
            p = players[0] if t.kind == "audio" else players[-1]
            t.sender.replaceTrack(p.audio if t.kind == "audio" else p.video)
            t.direction = "sendrecv"
            prefer(t, t.kind, "audio/opus" if t.kind == "audio"
                   else f"video/{args.vcodec.upper()}")
        await pc.setLocalDescription(await pc.createAnswer())
        write_json(os.path.join(args.signal, "answer.json"),
                   {"sdp": pc.localDescription.sdp, "type": pc.localDescription.type})
    await sink.start()
    try:
        await asyncio.wait_for(connected.wait(), 30)
    except asyncio.TimeoutError:
        failed.append("not connected in 30 s")
    if failed:
        raise RuntimeError(failed[0])
    write_sockets(args.sockets_out, own_sockets())
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < args.seconds:
        if channel is not None and channel.readyState == "open":
            # A chat-like pattern: a few small messages, now and then a
            # burst of larger ones (a file or an image).
            if rng.random() < 0.1:
                for _ in range(rng.randint(5, 40)):
                    channel.send(rng.randbytes(rng.randint(800, 1200)))
                    sent += 1
            else:
                channel.send(rng.randbytes(rng.randint(10, 200)))
                sent += 1
            await asyncio.sleep(rng.expovariate(5.0))
        else:
            await asyncio.sleep(0.2)
        if pc.connectionState in ("failed", "closed"):
            # The other end closing at the end of its own S seconds (its
            # clock started when it saw the connection) is the normal end.
            if time.monotonic() - t0 < 0.8 * args.seconds:
                raise RuntimeError(f"connection {pc.connectionState} after "
                                   f"{time.monotonic() - t0:.1f} s")
            break
    write_sockets(args.sockets_out, own_sockets())
    await sink.stop()
    await pc.close()
    print(json.dumps({"sent_messages": sent, **got}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["offer", "answer"], required=True)
    p.add_argument("--signal", required=True)
    p.add_argument("--media", choices=["audio", "video", "av", "data"], required=True)
    p.add_argument("--audio")
    p.add_argument("--video")
    p.add_argument("--vcodec", choices=["vp8", "h264"], default="vp8")
    p.add_argument("--turn")
    p.add_argument("--turn-transport", choices=["udp", "tcp"], default="udp")
    p.add_argument("--relay", action="store_true")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sockets-out")
    p.add_argument("--bind-ip")
    args = p.parse_args()
    if args.bind_ip:
        import aioice.ice

        aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: [args.bind_ip]
    try:
        asyncio.run(run(args))
    except Exception as e:  # one line naming what failed, exit 1
        print(f"aiortc_peer {args.role}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
