#!/usr/bin/env python3
"""calls.py: one labelled capture of today's calls and of other periodic UDP.

Contract
--------
``calls.py --seed N -o OUT [--seconds S] [--loss P] [--jitter MS]
[--stacks aiortc,gst] [--negatives LIST] [--calls LIST]`` (as root)
builds a client and a server network namespace joined by ``linkem.py``
(seeded loss and jitter, the lab's link emulator, docs/LAB.md), and runs
in phases of S seconds:

* WebRTC sessions made by two independent stacks, each stack talking to
  itself (``aiortc_peer.py``: aiortc from PyPI; ``gst_peer.py``:
  GStreamer's webrtcbin with libnice from Debian): audio (Opus, from
  speech that espeak-ng spoke), video (VP8, H.264; 320x240), audio and
  video bundled on one 5-tuple, and data-channel-only sessions; directly,
  relayed through coturn (Debian) over UDP and over TCP, and (GStreamer
  only: aiortc has no TCP candidates) directly over ICE-TCP. The offerer
  runs in the client namespace, the answerer in the server namespace.
* negatives from real programs, through the whole run: QUIC downloads
  and segment fetches (aioquic, ``quic_pair.py``), collectd's network
  plugin every 0.5 s, syslog over UDP (logger to a client rsyslogd that
  forwards to the server's), SNMP polling (snmpget to snmpd), a games-like
  periodic UDP exchange (``game_udp.py``), DNS (dig to dnsmasq from one
  port), NTP (chronyd polling chronyd every 0.25 s from one port), iperf3
  over UDP; and in a phase of
  its own WireGuard (the kernel's, or Debian's wireguard-go) carrying an iperf3
  download, and a second WireGuard tunnel carrying an aiortc audio call.

tcpdump captures the client namespace's side of the link. Labels are by
construction: a call's flows are those whose client-side endpoint is a
socket of the call's offerer (each peer lists its own sockets from
/proc); every other program talks to a server port the lab chose. Writes

* ``OUT/calls-N.pcap``: the capture (Ethernet, nanosecond stamps);
* ``OUT/calls-N.server.pcap``: the server side of the link (headers only,
  96 bytes a frame): what was sent toward the client before the link's
  loss;
* ``OUT/calls-N.labels.csv``: one row per flow (client-side endpoint
  first): ``run,proto,src,sport,dst,dport,class,stack,relay,session,
  c2s_pkts,s2c_pkts,s2c_sent`` (packets each way in the client-side
  capture, and server-to-client packets in the server-side one: their
  difference is the link's loss on that flow); class is ``audio``, ``video`` (a flow that carries
  video, bundled audio or not) or ``not-media``; stack ``aiortc``, ``gst``
  or the program; relay ``direct``, ``turn-udp``, ``turn-tcp``, ``ice-tcp``, ``vpn``;
* ``OUT/calls-N.meta.json``: seed, link, sessions run and failed (with
  the first error of each), the link emulator's per-direction counters.

Everything it started is stopped and the namespaces removed on exit.
A session that fails is counted in the meta file, never hidden; exit 0
only when the capture and the labels were written.
"""

import argparse
import atexit
import csv
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as lablib  # noqa: E402  (the lab's namespaces, link and process helpers)

C_IP = lablib.CLIENT_IP
S_IP = lablib.SERVER_IP
SYSTEM_PY = "/usr/bin/python3"  # Debian's, with GStreamer's introspection

# Server ports of the negatives (label by server endpoint).
PORTS = {
    "quic-download": ("udp", 4433, "aioquic"),
    "quic-segments": ("udp", 4434, "aioquic"),
    "collectd": ("udp", 25826, "collectd"),
    "syslog": ("udp", 514, "rsyslog"),
    "snmp": ("udp", 161, "snmpd"),
    "game": ("udp", 27015, "game-like"),
    "dns": ("udp", 53, "dnsmasq"),
    "ntp": ("udp", 123, "chrony"),
    "iperf-udp": ("udp", 5201, "iperf3"),
    "iperf-control": ("tcp", 5201, "iperf3"),
    "wg-download": ("udp", 51820, "wireguard"),
    "turn": ("udp", 3478, "coturn"),
    "turn-tcp": ("tcp", 3478, "coturn"),
}
WG_CALL_PORT = 51821

# Calls of one stack: (name, media, video codec, relay).
CALLS = [
    ("audio-direct", "audio", None, "direct"),
    ("vp8-direct", "video", "vp8", "direct"),
    ("h264-direct", "video", "h264", "direct"),
    ("av-direct", "av", "vp8", "direct"),
    ("data-direct", "data", None, "direct"),
    ("audio-turn-udp", "audio", None, "turn-udp"),
    ("av-turn-udp", "av", "h264", "turn-udp"),
    ("video-turn-tcp", "video", "vp8", "turn-tcp"),
    ("audio-turn-tcp", "audio", None, "turn-tcp"),
    ("data-turn-udp", "data", None, "turn-udp"),
    ("audio-ice-tcp", "audio", None, "ice-tcp"),
    ("video-ice-tcp", "video", "vp8", "ice-tcp"),
]
# Relays a stack cannot make: aiortc's ICE (aioice) has no TCP candidates.
CANNOT = {("aiortc", "ice-tcp")}
NEGATIVES = ["quic-download", "quic-segments", "collectd", "syslog", "snmp", "game",
             "dns", "ntp", "iperf-udp"]


def log(msg):
    print(f"calls: {msg}", file=sys.stderr, flush=True)


def media_class(media):
    return {"audio": "audio", "video": "video", "av": "video"}.get(media, "not-media")


class CallLab:
    def __init__(self, args):
        self.args = args
        largs = argparse.Namespace(seed=args.seed, keep_work=args.keep_work)
        self.lab = lablib.Lab(largs)
        self.w = self.lab.work
        self.sessions = []  # dicts: name, stack, media, relay, sockets file, ok, error
        self.neg_stats = {}
        self.lock = threading.Lock()

    # -- media files ------------------------------------------------------
    def make_media(self):
        text = ("The quick brown fox jumps over the lazy dog. We are testing a call "
                "between two rooms; can you hear me now? The weather today is "
                "cloudy with rain later, and the meeting starts at ten.")
        raw = os.path.join(self.w, "speech-raw.wav")
        subprocess.run(["espeak-ng", "-s", "150", "-w", raw, text], check=True)
        self.audio = os.path.join(self.w, "speech.wav")
        # Repeated (with a pause) to outlast a call: GStreamer's file source
        # does not loop.
        subprocess.run(["sox", raw, "-r", "48000", "-c", "1", self.audio, "pad", "0",
                        "0.7", "repeat", "6"], check=True)
        # Raw YUV4MPEG2, which both stacks read without a decoder plugin.
        self.video = os.path.join(self.w, "video.y4m")
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi",
                        "-i", "testsrc2=size=320x240:rate=15", "-t",
                        str(int(self.args.seconds) + 15), "-pix_fmt", "yuv420p",
                        self.video], check=True)

    # -- servers ------------------------------------------------------------
    def start_servers(self):
        lab, w = self.lab, self.w
        with open(f"{w}/turn.conf", "w") as f:
            f.write(f"listening-ip={S_IP}\nrelay-ip={S_IP}\nlistening-port=3478\n"
                    "lt-cred-mech\nuser=lab:lab\nrealm=lab\nno-tls\nno-dtls\nno-cli\n"
                    "fingerprint\nmin-port=49152\nmax-port=49999\n"
                    f"pidfile={w}/turn.pid\nlog-file=stdout\nsimple-log\n")
        lab.spawn("coturn", lab.ns("s", ["turnserver", "-c", f"{w}/turn.conf"]))
        quic = os.path.join(HERE, "quic_pair.py")
        subprocess.run([sys.executable, quic, "cert", f"{w}/qcert"], check=True)
        for n in ("quic-download", "quic-segments"):
            lab.spawn(n + "-server", lab.ns("s", [
                sys.executable, quic, "server", "--host", S_IP, "--port",
                str(PORTS[n][1]), "--cert", f"{w}/qcert/cert.pem", "--key",
                f"{w}/qcert/key.pem"]))
        with open(f"{w}/collectd-s.conf", "w") as f:
            f.write(f'Interval 1\nLoadPlugin network\n<Plugin network>\n Listen "{S_IP}" '
                    f'"25826"\n</Plugin>\n')
        lab.spawn("collectd-s", lab.ns("s", ["collectd", "-f", "-C", f"{w}/collectd-s.conf",
                                             "-P", f"{w}/collectd-s.pid"]))
        with open(f"{w}/rsyslog.conf", "w") as f:
            f.write(f'module(load="imudp")\ninput(type="imudp" address="{S_IP}" port="514")\n'
                    f'*.* {w}/syslog.out\n')
        lab.spawn("rsyslogd", lab.ns("s", ["rsyslogd", "-n", "-f", f"{w}/rsyslog.conf",
                                           "-i", f"{w}/rsyslog.pid"]))
        with open(f"{w}/snmpd.conf", "w") as f:
            f.write("rocommunity public\n")
        lab.spawn("snmpd", lab.ns("s", ["snmpd", "-f", "-Lo", "-C", "-c", f"{w}/snmpd.conf",
                                        "-p", f"{w}/snmpd.pid", f"udp:{S_IP}:161"]))
        with open(f"{w}/dnsmasq.conf", "w") as f:
            f.write(f"port=53\nlisten-address={S_IP}\nbind-interfaces\nno-resolv\n"
                    "no-hosts\naddress=/lab/10.77.0.7\nuser=root\ngroup=root\n"
                    "txt-record=t.lab,hello-from-the-lab\n")
        lab.spawn("dnsmasq", lab.ns("s", ["dnsmasq", "-k", "-C", f"{w}/dnsmasq.conf",
                                          f"--pid-file={w}/dnsmasq.pid"]))
        with open(f"{w}/chrony-s.conf", "w") as f:
            f.write(f"local stratum 8\nallow all\nbindaddress {S_IP}\ncmdport 0\n"
                    f"pidfile {w}/chrony-s.pid\ndriftfile {w}/chrony-s.drift\n")
        lab.spawn("chronyd-s", lab.ns("s", ["chronyd", "-d", "-x", "-f",
                                            f"{w}/chrony-s.conf"]))
        lab.spawn("iperf3-s", lab.ns("s", ["iperf3", "-s", "-B", S_IP, "-p", "5201"]))
        lab.spawn("game-s", lab.ns("s", [sys.executable, os.path.join(HERE, "game_udp.py"),
                                         "server", "--host", S_IP, "--port", "27015"]))
        time.sleep(1.0)

    # -- negatives ------------------------------------------------------------
    def negatives(self, names, seconds):
        lab, w, rng = self.lab, self.w, random.Random(self.args.seed)
        quic = os.path.join(HERE, "quic_pair.py")
        procs = []
        if "quic-download" in names:
            procs.append(("quic-download", lab.ns("c", [
                sys.executable, quic, "client", "--host", S_IP, "--port", "4433",
                "--sizes", "3000000,1500000", "--connections", "1", "--seed",
                str(self.args.seed)])))
        if "quic-segments" in names:
            n = max(3, int(seconds))
            procs.append(("quic-segments", lab.ns("c", [
                sys.executable, quic, "client", "--host", S_IP, "--port", "4434",
                "--sizes", ",".join(str(rng.randint(60000, 160000)) for _ in range(n)),
                "--connections", "1", "--pause", "2", "--seed", str(self.args.seed)])))
        if "collectd" in names:
            with open(f"{w}/collectd-c.conf", "w") as f:
                f.write("Interval 0.5\nLoadPlugin cpu\nLoadPlugin load\nLoadPlugin memory\n"
                        "LoadPlugin interface\nLoadPlugin network\n<Plugin network>\n"
                        f' Server "{S_IP}" "25826"\n</Plugin>\n')
            lab.spawn("collectd-c", lab.ns("c", ["collectd", "-f", "-C",
                                                 f"{w}/collectd-c.conf", "-P",
                                                 f"{w}/collectd-c.pid"]))
        if "ntp" in names:
            with open(f"{w}/chrony-c.conf", "w") as f:
                f.write(f"server {S_IP} iburst minpoll -2 maxpoll -2\nacquisitionport 1123\n"
                        "cmdport 0\n"
                        f"pidfile {w}/chrony-c.pid\ndriftfile {w}/chrony-c.drift\n")
            lab.spawn("chronyd-c", lab.ns("c", ["chronyd", "-d", "-x", "-f",
                                                f"{w}/chrony-c.conf"]))
        if "game" in names:
            procs.append(("game", lab.ns("c", [
                sys.executable, os.path.join(HERE, "game_udp.py"), "client", "--host",
                S_IP, "--port", "27015", "--seconds", str(seconds), "--seed",
                str(self.args.seed)])))
        if "iperf-udp" in names:
            procs.append(("iperf-udp", lab.ns("c", [
                "iperf3", "-c", S_IP, "-p", "5201", "-u", "-b", "1M", "-t",
                str(max(2, int(seconds / 3))), "-l", str(rng.choice([400, 800, 1200]))])))
        if "syslog" in names:
            # A client rsyslogd forwarding what logger gives it to the server
            # over UDP (one socket, as a host's syslog forwarder sends).
            with open(f"{w}/rsyslog-c.conf", "w") as f:
                f.write('module(load="imuxsock" SysSock.Use="off")\n'
                        f'input(type="imuxsock" Socket="{w}/log.sock")\n'
                        f'*.* action(type="omfwd" target="{S_IP}" port="514" '
                        'protocol="udp")\n')
            lab.spawn("rsyslogd-c", lab.ns("c", ["rsyslogd", "-n", "-f",
                                                 f"{w}/rsyslog-c.conf", "-i",
                                                 f"{w}/rsyslog-c.pid"]))
            t0 = time.time()
            while not os.path.exists(f"{w}/log.sock") and time.time() - t0 < 10:
                time.sleep(0.1)
        running = [(n, lab.spawn(n, cmd)) for n, cmd in procs]
        loops = [n for n in ("syslog", "snmp", "dns") if n in names]
        t_end = time.time() + seconds

        def loop(name):
            r = random.Random(f"{self.args.seed}-{name}")
            i = 0
            while time.time() < t_end:
                if name == "syslog":
                    cmd = ["logger", "-u", f"{w}/log.sock", "-t", "lab",
                           f"metric seq={i} value={r.randint(0, 999)}"]
                    pause = 0.25
                elif name == "snmp":
                    cmd = ["snmpget", "-v2c", "-c", "public", "-t", "1", "-r", "0", S_IP,
                           "1.3.6.1.2.1.1.3.0", "1.3.6.1.2.1.2.2.1.10.1",
                           "1.3.6.1.2.1.2.2.1.16.1"]
                    pause = 0.5
                else:
                    cmd = ["dig", "+tries=1", "+time=1", "+short", "-b", f"{C_IP}#35353",
                           f"@{S_IP}", r.choice(["lab", "www.lab", "t.lab"]),
                           r.choice(["A", "TXT", "AAAA"])]
                    pause = r.expovariate(4.0)
                ok = subprocess.run(lab.ns("c", cmd), capture_output=True,
                                    timeout=10).returncode == 0
                self.count(name, ok, "" if ok else " ".join(cmd))
                i += 1
                time.sleep(pause)

        threads = [threading.Thread(target=loop, args=(n,), daemon=True) for n in loops]
        for t in threads:
            t.start()
        return running, threads

    def count(self, name, ok, err=""):
        with self.lock:
            s = self.neg_stats.setdefault(name, {"ok": 0, "failed": 0, "first_error": ""})
            s["ok" if ok else "failed"] += 1
            if not ok and not s["first_error"]:
                s["first_error"] = err[:300]

    # -- calls --------------------------------------------------------------
    def call(self, stack, name, media, vcodec, relay, seconds, c_ip=C_IP, s_ip=S_IP,
             turn_ip=S_IP):
        lab, w = self.lab, self.w
        tag = f"{stack}-{name}"
        d = os.path.join(w, tag)
        os.makedirs(d)
        common = ["--signal", d, "--media", media, "--seconds", str(seconds),
                  "--seed", str(self.args.seed)]
        if vcodec:
            common += ["--vcodec", vcodec]
        if stack == "aiortc":
            prog = [sys.executable, os.path.join(HERE, "aiortc_peer.py")]
            common += ["--audio", self.audio, "--video", self.video]
        else:
            prog = [SYSTEM_PY, os.path.join(HERE, "gst_peer.py")]
            common += ["--audio", self.audio, "--video", self.video]
        relay_args = []
        if relay == "ice-tcp":
            common += ["--ice-transport", "tcp"]
        if relay.startswith("turn"):
            relay_args = ["--turn", f"{turn_ip}:3478", "--turn-transport",
                          relay.split("-")[1], "--relay"]
        off = lab.spawn(f"{tag}-offer", lab.ns("c", prog + [
            "--role", "offer", "--bind-ip", c_ip, "--sockets-out", f"{d}/offer.sockets"]
            + common + relay_args))
        ans = lab.spawn(f"{tag}-answer", lab.ns("s", prog + [
            "--role", "answer", "--bind-ip", s_ip, "--sockets-out", f"{d}/answer.sockets"]
            + common))
        s = dict(name=tag, stack=stack, media=media, vcodec=vcodec, relay=relay,
                 sockets=f"{d}/offer.sockets", procs=(off, ans), ok=None, error="")
        self.sessions.append(s)
        return s

    def finish(self, s, timeout):
        t_end = time.time() + timeout
        errs = []
        for role, p in zip(("offer", "answer"), s["procs"]):
            try:
                rc = p.wait(timeout=max(1, t_end - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
            if rc != 0:
                with open(os.path.join(self.w, f"{s['name']}-{role}.log"), "rb") as f:
                    tail = f.read().decode(errors="replace").strip().splitlines()[-1:]
                errs.append(f"{role}: exit {rc}: {' '.join(tail)[:300]}")
        s["ok"] = not errs and os.path.exists(s["sockets"])
        s["error"] = "; ".join(errs)
        del s["procs"]

    # -- WireGuard ------------------------------------------------------------
    def wireguard(self, ifname, port, inner):
        lab, w = self.lab, self.w
        keys = {}
        for side in ("c", "s"):
            priv = subprocess.run(["wg", "genkey"], capture_output=True, text=True,
                                  check=True).stdout.strip()
            pub = subprocess.run(["wg", "pubkey"], input=priv, capture_output=True,
                                 text=True, check=True).stdout.strip()
            with open(f"{w}/{ifname}-{side}.key", "w") as f:
                f.write(priv + "\n")
            keys[side] = pub
        for side, me, peer_ip, other in (("c", 1, S_IP, "s"), ("s", 2, C_IP, "c")):
            ns = lab.ns_c if side == "c" else lab.ns_s
            # One name per side: wireguard-go's control sockets share
            # /var/run/wireguard across namespaces.
            dev = f"{ifname}{side}"
            # The kernel's module when it has one, else Debian's userspace
            # implementation (wireguard-go, a TUN device the same `wg` sets up).
            r = lab.sh(["ip", "-n", ns, "link", "add", dev, "type", "wireguard"],
                       check=False)
            if r.returncode != 0:
                lab.spawn(f"wireguard-go-{dev}", lab.ns(side, ["wireguard-go", "-f", dev]))
                t0 = time.time()
                while not os.path.exists(f"/var/run/wireguard/{dev}.sock"):
                    if time.time() - t0 > 10:
                        raise RuntimeError(f"wireguard-go made no {dev} in 10 s")
                    time.sleep(0.1)
            lab.sh(lab.ns(side, ["wg", "set", dev, "listen-port", str(port),
                                 "private-key", f"{w}/{ifname}-{side}.key", "peer",
                                 keys[other], "endpoint", f"{peer_ip}:{port}",
                                 "allowed-ips", f"{inner}.0/24"]))
            lab.sh(["ip", "-n", ns, "addr", "add", f"{inner}.{me}/24", "dev", dev])
            lab.sh(["ip", "-n", ns, "link", "set", dev, "up"])
        return f"{inner}.1", f"{inner}.2"


def read_pcap_flows(path):
    """{(proto, a, ap, b, bp): packets} per direction of an Ethernet pcap."""
    return {k: v[0] for k, v in lablib.read_pcap_flows(path).items()}


def label_flows(pcap, sessions, run_id, wg_call_label):
    flows = read_pcap_flows(pcap)
    by_sock = {}
    for s in sessions:
        if not s["ok"] or not os.path.exists(s["sockets"]):
            continue
        with open(s["sockets"]) as f:
            for line in f:
                proto, ip, port = line.split()
                by_sock[(6 if proto == "tcp" else 17, ip, int(port))] = s
    by_port = {(6 if t == "tcp" else 17, p): (n, prog) for n, (t, p, prog) in PORTS.items()}
    rows, unlabelled, seen = [], [], set()
    for (proto, a, ap, b, bp) in sorted(flows):
        if a == C_IP:
            key = (proto, a, ap, b, bp)
        else:
            key = (proto, b, bp, a, ap)
        if key in seen:
            continue
        seen.add(key)
        _, c, cp, sv, sp = key
        c2s = flows.get(key, 0)
        s2c = flows.get((proto, sv, sp, c, cp), 0)
        s = by_sock.get((proto, c, cp))
        if s is not None:
            row = (media_class(s["media"]), s["stack"], s["relay"], s["name"])
        elif proto == 17 and sp == WG_CALL_PORT:
            row = wg_call_label
        elif (proto, sp) in by_port:
            n, prog = by_port[(proto, sp)]
            if n.startswith("turn"):
                # A TURN allocation whose call failed, or an unused candidate.
                row = ("not-media", prog, "turn", "turn-unlabelled")
            else:
                row = ("not-media", prog, "vpn" if n.startswith("wg") else "direct", n)
        else:
            unlabelled.append(key)
            continue
        rows.append([run_id, "TCP" if proto == 6 else "UDP", c, cp, sv, sp, *row, c2s, s2c])
    return rows, unlabelled


def main():
    p = argparse.ArgumentParser(description="Make one labelled capture of calls.")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--seconds", type=float, default=15.0, help="seconds of each call")
    p.add_argument("--loss", type=float, default=0.01)
    p.add_argument("--delay", type=float, default=15.0)
    p.add_argument("--jitter", type=float, default=5.0)
    p.add_argument("--stacks", default="aiortc,gst")
    p.add_argument("--calls", default=",".join(c[0] for c in CALLS))
    p.add_argument("--negatives", default=",".join(NEGATIVES))
    p.add_argument("--parallel", type=int, default=4, help="calls at once")
    p.add_argument("--no-vpn", action="store_true", help="skip the WireGuard phase")
    p.add_argument("--keep-work", action="store_true")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("calls: needs root (network namespaces, TAP devices)")
    stacks = [s for s in args.stacks.split(",") if s]
    calls = [c for c in CALLS if c[0] in args.calls.split(",")]
    negs = [n for n in args.negatives.split(",") if n]
    need = ["ip", "tcpdump", "turnserver", "espeak-ng", "sox", "ffmpeg"]
    for n in negs:
        need += {"collectd": ["collectd"], "syslog": ["rsyslogd", "logger"],
                 "snmp": ["snmpd", "snmpget"], "dns": ["dnsmasq", "dig"],
                 "ntp": ["chronyd"], "iperf-udp": ["iperf3"]}.get(n, [])
    if not args.no_vpn:
        need += ["wg", "iperf3", "wireguard-go"]
    missing = sorted({t for t in need if not lablib.find_prog(t)})
    if missing:
        sys.exit(f"calls: missing programs: {', '.join(missing)} (see docs/MEDIA.md)")
    os.makedirs(args.out, exist_ok=True)
    pcap = os.path.join(args.out, f"calls-{args.seed}.pcap")
    cl = CallLab(args)
    lab = cl.lab
    atexit.register(lab.stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    cond = dict(delay=args.delay, jitter=args.jitter, loss=args.loss, rate=50.0, queue=300)
    lab.build_network(cond, args.seed)
    cl.make_media()
    cl.start_servers()
    dump = lab.spawn("tcpdump", lab.ns("c", [
        "tcpdump", "-i", lab.tap_c, "-w", pcap, "-n", "-s", "0", "-B", "65536",
        "--time-stamp-precision", "nano", "-Z", "root",
        f"host {C_IP} and host {S_IP}"]))
    # The server side too: what crossed the link each way, the truth that
    # loss measured on the client side is checked against.
    spcap = os.path.join(args.out, f"calls-{args.seed}.server.pcap")
    sdump = lab.spawn("tcpdump-s", lab.ns("s", [
        "tcpdump", "-i", lab.tap_s, "-w", spcap, "-n", "-s", "96", "-B", "65536",
        "--time-stamp-precision", "nano", "-Z", "root",
        f"host {C_IP} and host {S_IP}"]))
    for name in ("tcpdump", "tcpdump-s"):
        t0 = time.time()
        while time.time() - t0 < 10:
            with open(os.path.join(lab.work, f"{name}.log"), "rb") as f:
                if b"listening on" in f.read():
                    break
            time.sleep(0.05)
    started = time.time()
    batches = [(st, c) for st in stacks for c in calls if (st, c[3]) not in CANNOT]
    phase_s = args.seconds + 10
    n_phases = (len(batches) + args.parallel - 1) // args.parallel
    neg_procs, neg_threads = cl.negatives(negs, n_phases * phase_s)
    for i in range(0, len(batches), args.parallel):
        group = [cl.call(st, *c, args.seconds) for st, c in batches[i:i + args.parallel]]
        for s in group:
            cl.finish(s, args.seconds + 60)
        log(f"phase {i // args.parallel + 1}/{n_phases}: " + ", ".join(
            f"{s['name']} {'ok' if s['ok'] else 'FAILED ' + s['error']}" for s in group))
    for n, pr in neg_procs:
        try:
            rc = pr.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(pr.pid, signal.SIGKILL)
            rc = "timeout"
        cl.count(n, rc == 0, f"exit {rc}")
    for t in neg_threads:
        t.join()
    wg_call_label = None
    if not args.no_vpn:
        wc, ws = cl.wireguard("ebwg0", 51820, "10.20.0")
        wc2, ws2 = cl.wireguard("ebwg1", WG_CALL_PORT, "10.21.0")
        ip3 = lab.spawn("iperf3-wg", lab.ns("s", ["iperf3", "-s", "-1", "-B", ws, "-p",
                                                   "5301"]))
        time.sleep(0.5)
        dl = lab.spawn("wg-download", lab.ns("c", ["iperf3", "-c", ws, "-p", "5301", "-R",
                                                    "-t", str(int(args.seconds)), "-b",
                                                    "8M"]))
        stack = stacks[0]
        s = cl.call(stack, "audio-over-wireguard", "audio", None, "vpn", args.seconds,
                    c_ip=wc2, s_ip=ws2)
        cl.finish(s, args.seconds + 60)
        cl.count("wg-download", dl.wait(timeout=60) == 0, "iperf3 over WireGuard")
        ip3.wait(timeout=10)
        # The call's label row: the tunnel's one outer flow carries a call.
        wg_call_label = ("audio", f"wireguard+{stack}", "vpn", s["name"]) if s["ok"] else \
            ("not-media", "wireguard", "vpn", "wg-call-failed")
        s["sockets"] = "(outer: the WireGuard tunnel)"
        log(f"WireGuard: download + {s['name']} {'ok' if s['ok'] else s['error']}")
    time.sleep(1.0)
    for d in (dump, sdump):
        os.killpg(d.pid, signal.SIGINT)
        d.wait(timeout=10)
    elapsed = time.time() - started
    # Stop the link emulator before the rest, to read its counters.
    linkem = next(pr for n, pr in lab.procs if n == "linkem")
    os.killpg(linkem.pid, signal.SIGTERM)
    linkem.wait(timeout=10)
    with open(os.path.join(lab.work, "linkem.log")) as f:
        link_counts = [l.strip() for l in f if l.startswith("linkem ")]
    rows, unlabelled = label_flows(pcap, [s for s in cl.sessions
                                          if s["relay"] != "vpn"], args.seed, wg_call_label)
    sent = read_pcap_flows(spcap)
    for r in rows:
        proto = 6 if r[1] == "TCP" else 17
        # Packets the server side sent toward the client on this flow.
        r.append(sent.get((proto, r[4], r[5], r[2], r[3]), 0))
    labels = os.path.join(args.out, f"calls-{args.seed}.labels.csv")
    with open(labels, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["run", "proto", "src", "sport", "dst", "dport", "class", "stack",
                     "relay", "session", "c2s_pkts", "s2c_pkts", "s2c_sent"])
        wr.writerows(rows)
    meta = dict(seed=args.seed, link=cond, seconds=args.seconds, elapsed_s=round(elapsed, 1),
                sessions=[{k: v for k, v in s.items()} for s in cl.sessions],
                negatives=cl.neg_stats, linkem=link_counts,
                unlabelled_flows=[list(k) for k in unlabelled])
    with open(os.path.join(args.out, f"calls-{args.seed}.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    ok = sum(1 for s in cl.sessions if s["ok"])
    log(f"wrote {pcap}, {labels}: {len(rows)} flows labelled, {len(unlabelled)} "
        f"unlabelled; calls {ok} of {len(cl.sessions)} ok; {elapsed:.0f} s")


if __name__ == "__main__":
    main()
