#!/usr/bin/python3
"""gst_peer: one end of a WebRTC session made with GStreamer's webrtcbin.

Contract
--------
The same command line and the same outcome as ``aiortc_peer.py`` (read
its contract): ``--role offer|answer --signal DIR --media
audio|video|av|data [--audio WAV] [--video Y4M] [--vcodec vp8|h264] [--turn HOST:PORT]
[--turn-transport udp|tcp] [--relay] [--bind-ip IP] [--seconds S]
[--sockets-out FILE]``, a second, independent WebRTC stack (Debian's
GStreamer: webrtcbin, libnice for ICE, its own DTLS-SRTP and SCTP).
One option of its own, ``--ice-transport udp|tcp``: the transport of
the ICE candidates a peer signals (UDP by default, as aiortc's; TCP
makes a direct session ICE-TCP, RFC 6544, RTP framed by RFC 4571).
libnice gathers both; a candidate of the other transport is never
signalled, so no pair of it is ever checked and the session's
transport does not depend on which check wins first.
Runs under Debian's python3 (GStreamer's introspection, python3-gi).

Media: Opus from the WAV file, VP8 (vp8enc) or H.264 (x264enc, zero
latency, ~400 kbit/s) from the YUV4MPEG2 video file, both paced in real
time. Received media goes to a fakesink undecoded.
Signalling is by files in DIR: ``offer.json``/``answer.json`` with the
session descriptions and ``offer.cands``/``answer.cands``, one trickled
ICE candidate a line, read by the other end as they come. ``--bind-ip``
is accepted for the same command line but libnice gathers on every
interface: the lab runs these sessions before any tunnel is up. libnice
also asks for UPnP mappings (SSDP multicast); reading webrtcbin's ICE
agent from Python to turn that off crashes GStreamer 1.22, so the lab's
capture filter keeps only packets between its two hosts.
"""

import argparse
import json
import os
import random
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from own_sockets import own_sockets, write_sockets  # noqa: E402


def audio_branch(wav):
    return (f"filesrc location={wav} ! wavparse ! audioconvert ! audioresample ! "
            "audio/x-raw,rate=48000,channels=1 ! identity sync=true ! "
            "opusenc bitrate=32000 frame-size=20 ! rtpopuspay pt=111 ! "
            "application/x-rtp,media=audio,encoding-name=OPUS,payload=111 ! w. ")


def video_branch(y4m, codec):
    src = (f"filesrc location={y4m} ! y4mdec ! videoconvert ! video/x-raw,format=I420 ! "
           "identity sync=true ! ")
    if codec == "vp8":
        enc = ("vp8enc deadline=1 target-bitrate=400000 keyframe-max-dist=60 "
               "cpu-used=8 ! rtpvp8pay pt=96 ! "
               "application/x-rtp,media=video,encoding-name=VP8,payload=96 ! w. ")
    else:
        enc = ("x264enc tune=zerolatency speed-preset=ultrafast bitrate=400 "
               "key-int-max=60 ! video/x-h264,profile=constrained-baseline ! "
               "rtph264pay pt=102 config-interval=-1 aggregate-mode=zero-latency ! "
               "application/x-rtp,media=video,encoding-name=H264,payload=102 ! w. ")
    return src + enc


class Peer:
    def __init__(self, args):
        self.args = args
        self.loop = GLib.MainLoop()
        self.error = None
        self.connected_at = None
        self.cands_read = 0
        self.remote_set = False
        self.pending = []
        self.channel = None
        self.rng = random.Random(args.seed)
        self.sent = 0
        kinds = {"audio": "a", "video": "v", "av": "av", "data": ""}[args.media]
        desc = "webrtcbin name=w bundle-policy=max-bundle "
        if args.turn:
            desc += f"turn-server=turn://lab:lab@{args.turn}?transport={args.turn_transport} "
        if "a" in kinds:
            desc += audio_branch(args.audio)
        if "v" in kinds:
            desc += video_branch(args.video, args.vcodec)
        self.pipe = Gst.parse_launch(desc)
        if not isinstance(self.pipe, Gst.Pipeline):
            # One element alone (a data-only session): parse_launch returns it.
            w = self.pipe
            self.pipe = Gst.Pipeline.new()
            self.pipe.add(w)
        self.w = self.pipe.get_by_name("w")
        if args.relay:
            self.w.set_property("ice-transport-policy",
                                GstWebRTC.WebRTCICETransportPolicy.RELAY)
        self.w.connect("on-ice-candidate", self.on_candidate)
        self.w.connect("pad-added", self.on_pad)
        self.w.connect("notify::connection-state", self.on_state)
        self.w.connect("on-data-channel", lambda _w, ch: self.watch_channel(ch))
        if args.role == "offer":
            self.w.connect("on-negotiation-needed", self.on_negotiation)
        bus = self.pipe.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self.on_error)

    def path(self, name):
        return os.path.join(self.args.signal, name)

    def fail(self, msg):
        if self.error is None:
            self.error = msg
        self.loop.quit()

    def on_error(self, _bus, msg):
        err, dbg = msg.parse_error()
        self.fail(f"{err.message} ({dbg})")

    def on_state(self, *_):
        st = self.w.get_property("connection-state")
        if st == GstWebRTC.WebRTCPeerConnectionState.CONNECTED and self.connected_at is None:
            self.connected_at = time.monotonic()
            write_sockets(self.args.sockets_out, own_sockets())
            GLib.timeout_add(int(self.args.seconds * 1000), self.done)
        elif st == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            self.fail("connection failed")

    def done(self):
        write_sockets(self.args.sockets_out, own_sockets())
        self.loop.quit()
        return False

    def on_pad(self, _w, pad):
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        q = Gst.ElementFactory.make("queue")
        sink = Gst.ElementFactory.make("fakesink")
        sink.set_property("sync", False)
        self.pipe.add(q)
        self.pipe.add(sink)
        q.link(sink)
        q.sync_state_with_parent()
        sink.sync_state_with_parent()
        pad.link(q.get_static_pad("sink"))

    def on_candidate(self, _w, mline, cand):
        # "candidate:FOUNDATION COMPONENT TRANSPORT PRIORITY ADDR PORT typ ..."
        # A relayed candidate's transport is UDP whatever reaches the TURN
        # server.
        fields = cand.split()
        if len(fields) > 2 and fields[2].lower() != self.args.ice_transport:
            return
        with open(self.path(f"{self.args.role}.cands"), "a") as f:
            f.write(json.dumps({"m": mline, "c": cand}) + "\n")

    def poll_remote(self):
        other = "answer" if self.args.role == "offer" else "offer"
        p = self.path(f"{other}.cands")
        if self.remote_set and os.path.exists(p):
            with open(p) as f:
                lines = f.read().splitlines()
            # Only whole lines: the writer appends one line at a time.
            for line in lines[self.cands_read:]:
                try:
                    c = json.loads(line)
                except ValueError:
                    break
                self.w.emit("add-ice-candidate", c["m"], c["c"])
                self.cands_read += 1
        if not self.remote_set:
            d = self.path(f"{other}.json")
            if os.path.exists(d):
                with open(d) as f:
                    desc = json.load(f)
                self.set_remote(desc)
        if self.connected_at is None and time.monotonic() - self.t0 > 40:
            self.fail("not connected in 40 s")
        self.send_data()
        return True

    def set_remote(self, desc):
        _, sdp = GstSdp.SDPMessage.new_from_text(desc["sdp"])
        kind = (GstWebRTC.WebRTCSDPType.OFFER if desc["type"] == "offer"
                else GstWebRTC.WebRTCSDPType.ANSWER)
        d = GstWebRTC.WebRTCSessionDescription.new(kind, sdp)
        self.remote_set = True
        if kind == GstWebRTC.WebRTCSDPType.OFFER:
            pr = Gst.Promise.new_with_change_func(self.on_remote_offer_set)
        else:
            pr = Gst.Promise.new()
        self.w.emit("set-remote-description", d, pr)

    def on_remote_offer_set(self, _p):
        pr = Gst.Promise.new_with_change_func(self.on_created, "answer")
        self.w.emit("create-answer", None, pr)

    def on_negotiation(self, _w):
        if self.args.media == "data" and self.channel is None:
            self.watch_channel(self.w.emit("create-data-channel", "lab", None))
        pr = Gst.Promise.new_with_change_func(self.on_created, "offer")
        self.w.emit("create-offer", None, pr)

    def on_created(self, promise, kind):
        promise.wait()
        reply = promise.get_reply()
        desc = reply.get_value(kind)
        self.w.emit("set-local-description", desc, Gst.Promise.new())
        tmp = self.path(f"{kind}.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"type": kind, "sdp": desc.sdp.as_text()}, f)
        os.replace(tmp, self.path(f"{kind}.json"))

    def watch_channel(self, ch):
        if ch is None:
            return
        self.channel = ch

    def send_data(self):
        ch = self.channel
        if ch is None or self.args.role != "offer" or self.connected_at is None:
            return
        if ch.get_property("ready-state") != GstWebRTC.WebRTCDataChannelState.OPEN:
            return
        # Called every 100 ms: the chat-like pattern of aiortc_peer.py.
        if self.rng.random() < 0.5:
            return
        if self.rng.random() < 0.1:
            for _ in range(self.rng.randint(5, 40)):
                ch.emit("send-data", GLib.Bytes.new(self.rng.randbytes(
                    self.rng.randint(800, 1200))))
                self.sent += 1
        else:
            ch.emit("send-string", "m" * self.rng.randint(10, 200))
            self.sent += 1

    def run(self):
        self.t0 = time.monotonic()
        if self.args.media == "data":
            # With no media there is no negotiation-needed until a channel
            # exists: the offerer makes one before starting.
            if self.args.role == "offer":
                self.pipe.set_state(Gst.State.READY)
                self.watch_channel(self.w.emit("create-data-channel", "lab", None))
        self.pipe.set_state(Gst.State.PLAYING)
        GLib.timeout_add(100, self.poll_remote)
        self.loop.run()
        self.pipe.set_state(Gst.State.NULL)
        if self.error:
            raise RuntimeError(self.error)
        if self.connected_at is None:
            raise RuntimeError("never connected")
        print(json.dumps({"sent_messages": self.sent}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["offer", "answer"], required=True)
    p.add_argument("--signal", required=True)
    p.add_argument("--media", choices=["audio", "video", "av", "data"], required=True)
    p.add_argument("--audio")
    p.add_argument("--video", help="a YUV4MPEG2 file, paced in real time")
    p.add_argument("--vcodec", choices=["vp8", "h264"], default="vp8")
    p.add_argument("--turn")
    p.add_argument("--turn-transport", choices=["udp", "tcp"], default="udp")
    p.add_argument("--relay", action="store_true")
    p.add_argument("--ice-transport", choices=["udp", "tcp"], default="udp")
    p.add_argument("--bind-ip")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sockets-out")
    args = p.parse_args()
    Gst.init(None)
    try:
        Peer(args).run()
    except Exception as e:  # one line naming what failed, exit 1
        print(f"gst_peer {args.role}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
