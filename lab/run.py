#!/usr/bin/env python3
"""run.py: one labelled lab capture from a seed.

Contract
--------
``run.py --seed N --duration S --conditions lan|wan|lossy -o OUT`` (as root)
builds two network namespaces (client, server) joined by ``linkem.py`` (a
userspace link emulator between two TAP devices), starts real servers
(Debian's nginx, dnsmasq, OpenSSH, Redis, Mosquitto, iperf3, OpenSMTPD,
PostgreSQL) in the server namespace on seed-chosen ports, runs a seeded
random schedule of client sessions (curl, dig, ssh/scp, redis-cli,
mosquitto_pub/sub, iperf3, swaks, psql) from the client namespace for S
seconds, captures the client-side interface with tcpdump, and writes

* ``OUT/lab-N.pcap``: the capture (Ethernet, full frames);
* ``OUT/lab-N.truth.csv``: one row per flow (5-tuple, client first) in the
  truth format ``earlybird train --labels`` reads; the label comes from the
  server endpoint (address, transport, port) the flow talks to, which the
  lab chose, so labels are exact by construction;
* ``OUT/lab-N.meta.json``: seed, conditions, link parameters, the
  service -> port table, sessions run and failed per service.

With ``--learn DIR`` a self-training probe runs beside tcpdump on the
same interface: ``earlybird flows -i IF --learn DIR`` (``--earlybird BIN``,
the class level ``--learn-level``), stopped with SIGTERM after tcpdump, so
that its last model, trained from everything it kept, is in DIR; its flow
records go to ``DIR/flows.csv`` and its stderr to ``DIR/probe.log``
(``lab/selftrain.py`` scores the model on another run).

Everything it started (processes, namespaces, the TAP devices) is stopped
and removed on exit, also on error or Ctrl-C. A service whose program is
missing is an error (``--services`` picks a subset). Exit status 0 only if
the capture and the truth CSV were written; failed client sessions are
counted in the meta file, never hidden.
"""

import argparse
import atexit
import csv
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_IP = "10.18.0.1"
SERVER_IP = "10.18.0.2"

# Link conditions per profile: one-way delay and jitter (ms), loss
# probability per frame and direction, rate (Mbit/s) and queue (frames).
CONDITIONS = {
    "lan": dict(delay=0.2, jitter=0.05, loss=0.0, rate=1000.0, queue=1000),
    "wan": dict(delay=20.0, jitter=3.0, loss=0.001, rate=50.0, queue=200),
    "lossy": dict(delay=40.0, jitter=10.0, loss=0.02, rate=10.0, queue=100),
}

# Services: label columns (app_label, master_proto, app_proto, category),
# transport(s), standard port, the programs they need, relative weight of
# their sessions in the schedule.
SERVICES = {
    "http1": ("HTTP.h1", "HTTP", "h1", "Web", ["tcp"], 80, ["nginx", "curl"], 10),
    "h2c": ("HTTP.h2c", "HTTP", "h2c", "Web", ["tcp"], 8080, ["nginx", "curl"], 6),
    "tls12_h1": ("TLS.h1_tls12", "TLS", "h1_tls12", "Web", ["tcp"], 443,
                 ["nginx", "curl"], 6),
    "tls12_h2": ("TLS.h2_tls12", "TLS", "h2_tls12", "Web", ["tcp"], 8443,
                 ["nginx", "curl"], 6),
    "tls13_h1": ("TLS.h1_tls13", "TLS", "h1_tls13", "Web", ["tcp"], 4443,
                 ["nginx", "curl"], 6),
    "tls13_h2": ("TLS.h2_tls13", "TLS", "h2_tls13", "Web", ["tcp"], 9443,
                 ["nginx", "curl"], 6),
    "dns": ("DNS.dnsmasq", "DNS", "dnsmasq", "Network", ["udp", "tcp"], 53,
            ["dnsmasq", "dig"], 14),
    "ssh": ("SSH.openssh", "SSH", "openssh", "RemoteAccess", ["tcp"], 22,
            ["sshd", "ssh", "scp", "ssh-keygen"], 3),
    "smtp": ("SMTP.opensmtpd", "SMTP", "opensmtpd", "Email", ["tcp"], 25,
             ["smtpd", "swaks"], 4),
    "postgres": ("PostgreSQL.postgres", "PostgreSQL", "postgres", "Database",
                 ["tcp"], 5432, ["psql", "pg_ctl"], 4),
    "redis": ("Redis.redis", "Redis", "redis", "Database", ["tcp"], 6379,
              ["redis-server", "redis-cli"], 6),
    "mqtt": ("MQTT.mosquitto", "MQTT", "mosquitto", "RPC", ["tcp"], 1883,
             ["mosquitto", "mosquitto_pub", "mosquitto_sub"], 6),
    "iperf": ("iPerf.iperf3", "iPerf", "iperf3", "Network", ["tcp", "udp"], 5201,
              ["iperf3"], 2),
    "ftp": ("FTP_CONTROL.vsftpd", "FTP_CONTROL", "vsftpd", "Download", ["tcp"], 21,
            ["vsftpd", "curl"], 4),
    # Passive-mode data connections of "ftp": a range of FTP_DATA_PORTS ports
    # starting at the seed-chosen port; never scheduled on their own.
    "ftp_data": ("FTP_DATA.vsftpd", "FTP_DATA", "vsftpd", "Download", ["tcp"], 30000,
                 [], 0),
    "vpn": ("OpenVPN.udp", "OpenVPN", "udp", "VPN", ["udp"], 1194,
            ["openvpn", "curl"], 2),
}
FTP_DATA_PORTS = 50
VPN_SERVER_TUN = "10.19.0.1"

TRUTH_COLUMNS = [
    "pcap", "proto", "src", "sport", "dst", "dport", "app_label",
    "master_proto", "app_proto", "category", "confidence", "c2s_pkts",
    "c2s_bytes", "s2c_pkts", "s2c_bytes",
]


def log(msg):
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def find_prog(name):
    p = shutil.which(name)
    if p:
        return p
    for d in ("/usr/sbin", "/sbin"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    if name in ("pg_ctl", "initdb", "postgres"):
        base = "/usr/lib/postgresql"
        if os.path.isdir(base):
            for v in sorted(os.listdir(base), reverse=True):
                c = os.path.join(base, v, "bin", name)
                if os.path.exists(c):
                    return c
    return None


class Lab:
    """Namespaces, link, servers; everything it starts it also stops."""

    def __init__(self, args):
        self.args = args
        self.tag = f"ebl{os.getpid() % 100000}"
        self.ns_c = f"{self.tag}c"
        self.ns_s = f"{self.tag}s"
        self.tap_c = f"{self.tag}tc"
        self.tap_s = f"{self.tag}ts"
        self.procs = []  # (name, Popen) stopped in reverse order
        self.namespaces = []
        self.cleanups = []
        self.work = tempfile.mkdtemp(prefix=f"lab-{args.seed}-")
        os.chmod(self.work, 0o755)

    # -- process helpers -------------------------------------------------
    def ns(self, which, cmd):
        return ["ip", "netns", "exec", self.ns_c if which == "c" else self.ns_s] + cmd

    def spawn(self, name, cmd, **kw):
        log_path = os.path.join(self.work, f"{name}.log")
        out = open(log_path, "wb")
        p = subprocess.Popen(cmd, stdout=kw.pop("stdout", out), stderr=out,
                             stdin=subprocess.DEVNULL, start_new_session=True, **kw)
        self.procs.append((name, p))
        return p

    def stop_all(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
        self.procs = []
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # cleanup goes on; say what failed
                log(f"cleanup: {e}")
        self.cleanups = []
        for n in self.namespaces:
            subprocess.run(["ip", "netns", "pids", n], capture_output=True)
            pids = subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        self.namespaces = []
        if not self.args.keep_work:
            shutil.rmtree(self.work, ignore_errors=True)

    def sh(self, cmd, check=True, **kw):
        r = subprocess.run(cmd, capture_output=True, text=True, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
        return r

    # -- network ---------------------------------------------------------
    def build_network(self, cond, seed):
        for n in (self.ns_c, self.ns_s):
            self.sh(["ip", "netns", "add", n])
            self.namespaces.append(n)
        link = [sys.executable, os.path.join(HERE, "linkem.py"), "--a", self.tap_c,
                "--b", self.tap_s, "--seed", str(seed)]
        for k in ("delay", "jitter", "loss", "rate", "queue"):
            link += [f"--{k}", str(cond[k])]
        p = self.spawn("linkem", link, stdout=subprocess.PIPE)
        line = p.stdout.readline().decode().strip()
        if line != "ready":
            raise RuntimeError(f"linkem did not start (see {self.work}/linkem.log)")
        for tap, n, ip in ((self.tap_c, self.ns_c, CLIENT_IP),
                           (self.tap_s, self.ns_s, SERVER_IP)):
            self.sh(["ip", "link", "set", tap, "netns", n])
            self.sh(["ip", "-n", n, "addr", "add", f"{ip}/24", "dev", tap])
            self.sh(["ip", "-n", n, "link", "set", tap, "up"])
            self.sh(["ip", "-n", n, "link", "set", "lo", "up"])
        # Static neighbours: no ARP in the capture, no ARP delay per flow.
        mac = {}
        for tap, n in ((self.tap_c, self.ns_c), (self.tap_s, self.ns_s)):
            out = self.sh(["ip", "-n", n, "-o", "link", "show", tap]).stdout
            mac[tap] = out.split("link/ether")[1].split()[0]
        self.sh(["ip", "-n", self.ns_c, "neigh", "replace", SERVER_IP, "lladdr",
                 mac[self.tap_s], "dev", self.tap_c, "nud", "permanent"])
        self.sh(["ip", "-n", self.ns_s, "neigh", "replace", CLIENT_IP, "lladdr",
                 mac[self.tap_c], "dev", self.tap_s, "nud", "permanent"])
        # nginx may listen on the VPN tunnel's address before the tunnel is up.
        self.sh(self.ns("s", ["sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=1"]))
        # No IPv6 (router solicitations etc. would add unlabelled noise).
        for n, tap in ((self.ns_c, self.tap_c), (self.ns_s, self.tap_s)):
            self.sh(["ip", "netns", "exec", n, "sysctl", "-qw",
                     f"net.ipv6.conf.{tap}.disable_ipv6=1"], check=False)

    # -- servers ---------------------------------------------------------
    def start_servers(self, services, ports, rng):
        w = self.work
        if any(s in services for s in ("http1", "h2c", "tls12_h1", "tls12_h2",
                                       "tls13_h1", "tls13_h2", "ftp", "vpn")):
            self.start_nginx(services, ports, rng)
        if "dns" in services:
            self.start_dnsmasq(ports["dns"], rng)
        if "ssh" in services:
            self.start_sshd(ports["ssh"])
        if "smtp" in services:
            self.start_smtpd(ports["smtp"])
        if "postgres" in services:
            self.start_postgres(ports["postgres"])
        if "redis" in services:
            self.spawn("redis", self.ns("s", [
                find_prog("redis-server"), "--port", str(ports["redis"]), "--bind",
                SERVER_IP, "--save", "", "--appendonly", "no", "--protected-mode",
                "no", "--daemonize", "no", "--dir", w]))
        if "mqtt" in services:
            conf = os.path.join(w, "mosquitto.conf")
            with open(conf, "w") as f:
                f.write(f"listener {ports['mqtt']} {SERVER_IP}\nallow_anonymous true\n"
                        "persistence false\nuser root\n")
            self.spawn("mosquitto", self.ns("s", [find_prog("mosquitto"), "-c", conf]))
        if "ftp" in services:
            self.start_vsftpd(ports["ftp"], ports["ftp_data"])
        if "vpn" in services:
            self.start_openvpn(ports["vpn"])
        if "iperf" in services:
            self.spawn("iperf3", self.ns("s", [find_prog("iperf3"), "-s", "-p",
                                               str(ports["iperf"]), "-B", SERVER_IP]))

    def start_nginx(self, services, ports, rng):
        w = self.work
        root = os.path.join(w, "www")
        os.makedirs(root)
        # Objects of log-uniform sizes, 63 B .. 500 kB, seeded content.
        self.objects = []
        for i in range(48):
            size = int(10 ** rng.uniform(1.8, 5.7))
            with open(os.path.join(root, f"o{i}.bin"), "wb") as f:
                f.write(rng.randbytes(size))
            self.objects.append(f"o{i}.bin")
        self.sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
                 "/CN=lab.example", "-keyout", f"{w}/key.pem", "-out", f"{w}/cert.pem"])
        blocks = []
        tls = {"tls12_h1": ("TLSv1.2", ""), "tls12_h2": ("TLSv1.2", " http2"),
               "tls13_h1": ("TLSv1.3", ""), "tls13_h2": ("TLSv1.3", " http2")}
        if "http1" in services:
            blocks.append(f"server {{ listen {SERVER_IP}:{ports['http1']}; root {root}; }}")
        if "vpn" in services:
            blocks.append(f"server {{ listen {VPN_SERVER_TUN}:80; root {root}; }}")
        if "h2c" in services:
            blocks.append(f"server {{ listen {SERVER_IP}:{ports['h2c']} http2; root {root}; }}")
        for s, (ver, h2) in tls.items():
            if s in services:
                blocks.append(
                    f"server {{ listen {SERVER_IP}:{ports[s]} ssl{h2}; root {root};"
                    f" ssl_certificate {w}/cert.pem; ssl_certificate_key {w}/key.pem;"
                    f" ssl_protocols {ver}; }}")
        conf = os.path.join(w, "nginx.conf")
        with open(conf, "w") as f:
            f.write(
                "daemon off; master_process on; worker_processes 2; user root;\n"
                f"pid {w}/nginx.pid; error_log {w}/nginx.err;\n"
                "events { worker_connections 4096; }\n"
                f"http {{ access_log off; client_body_temp_path {w}/cbt;"
                f" proxy_temp_path {w}/pt; fastcgi_temp_path {w}/ft;"
                f" uwsgi_temp_path {w}/ut; scgi_temp_path {w}/st;"
                " keepalive_timeout 10; default_type application/octet-stream;\n"
                + "\n".join(blocks) + "\n}\n")
        self.spawn("nginx", self.ns("s", [find_prog("nginx"), "-c", conf, "-p", w]))

    def start_vsftpd(self, port, data_port):
        w = self.work
        root = os.path.join(w, "www")  # the web objects, read-only, anonymous
        os.makedirs("/var/run/vsftpd/empty", exist_ok=True)
        conf = os.path.join(w, "vsftpd.conf")
        with open(conf, "w") as f:
            f.write(f"listen=YES\nlisten_address={SERVER_IP}\nlisten_port={port}\n"
                    f"anonymous_enable=YES\nno_anon_password=YES\nanon_root={root}\n"
                    "local_enable=NO\nwrite_enable=NO\npasv_enable=YES\n"
                    f"pasv_min_port={data_port}\n"
                    f"pasv_max_port={data_port + FTP_DATA_PORTS - 1}\n"
                    f"pasv_address={SERVER_IP}\nseccomp_sandbox=NO\nbackground=NO\n"
                    "max_clients=500\nmax_per_ip=500\nuse_localtime=NO\n"
                    "secure_chroot_dir=/var/run/vsftpd/empty\nxferlog_enable=NO\n")
        self.spawn("vsftpd", self.ns("s", [find_prog("vsftpd"), conf]))

    def start_openvpn(self, port):
        """OpenVPN in TLS server mode over UDP, a throwaway CA made here."""
        w = self.work
        pki = os.path.join(w, "pki")
        os.makedirs(pki)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        self.sh(["openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=lab-ca",
                 "-keyout", f"{pki}/ca.key", "-out", f"{pki}/ca.crt"])
        for name, ext in (("server", "serverAuth"), ("client", "clientAuth")):
            self.sh(["openssl", "req", *ec, "-subj", f"/CN={name}", "-keyout",
                     f"{pki}/{name}.key", "-out", f"{pki}/{name}.csr"])
            with open(f"{pki}/{name}.ext", "w") as f:
                f.write(f"extendedKeyUsage={ext}\nkeyUsage=digitalSignature\n")
            self.sh(["openssl", "x509", "-req", "-in", f"{pki}/{name}.csr", "-CA",
                     f"{pki}/ca.crt", "-CAkey", f"{pki}/ca.key", "-CAcreateserial",
                     "-days", "2", "-extfile", f"{pki}/{name}.ext", "-out",
                     f"{pki}/{name}.crt"])
        common = f"ca {pki}/ca.crt\ndev tun\nproto udp\nverb 1\n"
        with open(f"{w}/vpn-server.conf", "w") as f:
            f.write(common + f"cert {pki}/server.crt\nkey {pki}/server.key\ndh none\n"
                    f"local {SERVER_IP}\nport {port}\ntopology subnet\n"
                    "server 10.19.0.0 255.255.255.0\nduplicate-cn\nkeepalive 5 20\n"
                    "max-clients 200\n")
        with open(f"{w}/vpn-client.conf", "w") as f:
            f.write(common + f"client\ncert {pki}/client.crt\nkey {pki}/client.key\n"
                    f"remote {SERVER_IP} {port}\nnobind\nremote-cert-tls server\n"
                    "connect-retry-max 1\nroute-nopull\n")
        self.spawn("openvpn", self.ns("s", [find_prog("openvpn"), "--config",
                                            f"{w}/vpn-server.conf"]))

    def start_dnsmasq(self, port, rng):
        w = self.work
        conf = os.path.join(w, "dnsmasq.conf")
        with open(conf, "w") as f:
            f.write(f"port={port}\nlisten-address={SERVER_IP}\nbind-interfaces\n"
                    "no-resolv\nno-hosts\naddress=/lab/10.18.0.77\n"
                    "address=/lab/fd18::77\nuser=root\ngroup=root\n")
            # TXT records of varied sizes (answers of varied sizes).
            for i in range(16):
                txt = ",".join(rng.randbytes(rng.randint(8, 60)).hex()[:rng.randint(8, 120)]
                               for _ in range(rng.randint(1, 4)))
                f.write(f"txt-record=t{i}.lab,{txt}\n")
            f.write("mx-host=lab,mail.lab,10\n")
        self.spawn("dnsmasq", self.ns("s", [find_prog("dnsmasq"), "-k", "-C", conf,
                                            f"--pid-file={w}/dnsmasq.pid"]))

    def start_sshd(self, port):
        w = self.work
        os.makedirs("/run/sshd", exist_ok=True)
        self.sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{w}/host_ed25519"])
        self.sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{w}/client_key"])
        shutil.copy(f"{w}/client_key.pub", f"{w}/authorized_keys")
        os.makedirs(f"{w}/sshfiles")
        conf = os.path.join(w, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"Port {port}\nListenAddress {SERVER_IP}\nHostKey {w}/host_ed25519\n"
                    f"PidFile {w}/sshd.pid\nPermitRootLogin yes\nStrictModes no\n"
                    f"AuthorizedKeysFile {w}/authorized_keys\nUsePAM no\n"
                    "PasswordAuthentication no\nSubsystem sftp internal-sftp\n"
                    "MaxStartups 100:30:200\n")
        self.spawn("sshd", self.ns("s", [find_prog("sshd"), "-D", "-e", "-f", conf]))

    def start_smtpd(self, port):
        w = self.work
        conf = os.path.join(w, "smtpd.conf")
        with open(conf, "w") as f:
            f.write(f"listen on {SERVER_IP} port {port}\n"
                    'action "sink" mda "/bin/cat > /dev/null"\n'
                    'match from any for any action "sink"\n')
        os.chmod(conf, 0o600)
        self.spawn("smtpd", self.ns("s", [find_prog("smtpd"), "-d", "-f", conf]))

    def start_postgres(self, port):
        w = self.work
        data = os.path.join(w, "pg")
        os.makedirs(data)
        shutil.chown(data, "postgres", "postgres")
        self.sh(["runuser", "-u", "postgres", "--", find_prog("initdb"), "-D", data,
                 "-A", "trust", "-U", "postgres", "--no-sync"])
        with open(os.path.join(data, "pg_hba.conf"), "a") as f:
            f.write("host all all 10.18.0.0/24 trust\n")
        self.spawn("postgres", self.ns("s", [
            "runuser", "-u", "postgres", "--", find_prog("postgres"), "-D", data,
            "-c", f"listen_addresses={SERVER_IP}", "-c", f"port={port}",
            "-c", f"unix_socket_directories={data}", "-c", "fsync=off",
            "-c", "max_connections=200", "-c", "ssl=off"]))

    def wait_ready(self, services, ports, timeout=15.0):
        """Wait until every TCP service accepts a connection (from the client)."""
        deadline = time.time() + timeout
        for s in services:
            if "tcp" not in SERVICES[s][4] or s == "ftp_data":
                continue
            while True:
                r = subprocess.run(self.ns("s", ["bash", "-c",
                                   f"exec 3<>/dev/tcp/{SERVER_IP}/{ports[s]}"]),
                                   capture_output=True)
                if r.returncode == 0:
                    break
                for name, p in self.procs:
                    if p.poll() is not None:
                        raise RuntimeError(f"{name} exited (log: {self.work}/{name}.log)")
                if time.time() > deadline:
                    raise RuntimeError(f"{s} does not listen on port {ports[s]}")
                time.sleep(0.1)


def choose_ports(rng, services):
    """Standard port with probability 1/2, else a seeded port in 1024..49151."""
    ports, used = {}, set()
    for s in sorted(services):
        std = SERVICES[s][5]
        width = FTP_DATA_PORTS if s == "ftp_data" else 1
        p = std if rng.random() < 0.5 else None
        while p is None or used & set(range(p, p + width)):
            p = rng.randint(1024, 49151 - width)
        used |= set(range(p, p + width))
        ports[s] = p
    return ports


class Workload:
    """Seeded random client sessions, `workers` at a time, until a deadline."""

    def __init__(self, lab, services, ports, seed, workers):
        self.lab = lab
        self.services = services
        self.ports = ports
        self.seed = seed
        self.workers = workers
        self.stats = {s: {"ok": 0, "failed": 0} for s in services if SERVICES[s][7]}
        self.first_error = {}
        self.lock = threading.Lock()
        self.iperf_lock = threading.Lock()  # iperf3 serves one test at a time
        self.vpn_lock = threading.Lock()  # one tunnel at a time (one route)
        self.mqtt_topics = [f"lab/{i}" for i in range(8)]

    def session(self, s, rng):
        """Return the client command for one session of service `s`."""
        ip, port = SERVER_IP, str(self.ports[s])
        w = self.lab.work
        objs = getattr(self.lab, "objects", [])
        if s in ("http1", "h2c", "tls12_h1", "tls12_h2", "tls13_h1", "tls13_h2"):
            n = 1 if s == "h2c" else rng.choice([1, 1, 1, 2, 3, 5])
            scheme = "http" if s in ("http1", "h2c") else "https"
            urls = [f"{scheme}://{ip}:{port}/{rng.choice(objs)}" for _ in range(n)]
            cmd = ["curl", "-s", "-k", "-o", "/dev/null", "--max-time", "20"]
            cmd += {"http1": ["--http1.1"], "h2c": ["--http2-prior-knowledge"],
                    "tls12_h1": ["--http1.1", "--tlsv1.2", "--tls-max", "1.2"],
                    "tls12_h2": ["--http2", "--tlsv1.2", "--tls-max", "1.2"],
                    "tls13_h1": ["--http1.1", "--tlsv1.3"],
                    "tls13_h2": ["--http2", "--tlsv1.3"]}[s]
            if rng.random() < 0.2:
                cmd += ["-H", "Cookie: s=" + rng.randbytes(rng.randint(8, 200)).hex()]
            if rng.random() < 0.15 and s != "h2c":
                cmd += ["-X", "POST", "--data-binary", "x" * rng.randint(10, 20000)]
            return cmd + urls
        if s == "dns":
            names = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                kind = rng.random()
                if kind < 0.5:
                    names += [f"h{rng.randint(0, 99999)}.lab", "A"]
                elif kind < 0.7:
                    names += [f"h{rng.randint(0, 99999)}.lab", "AAAA"]
                elif kind < 0.9:
                    names += [f"t{rng.randint(0, 15)}.lab", "TXT"]
                else:
                    names += ["lab", "MX"]
            cmd = ["dig", f"@{ip}", "-p", port, "+tries=1", "+time=3"]
            if rng.random() < 0.15:
                cmd.append("+tcp")
            return cmd + names
        if s == "ssh":
            base = ["-i", f"{w}/client_key", "-o", "StrictHostKeyChecking=no",
                    "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                    "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"]
            if rng.random() < 0.5:
                cmd = ["ssh", "-p", port] + base + [f"root@{ip}",
                       rng.choice(["true", "uname -a", "ls -la /etc", "cat /etc/services",
                                   "head -c 20000 /dev/urandom | base64"])]
            else:
                f = os.path.join(w, "sshfiles", f"up{rng.randint(0, 1 << 30)}")
                with open(f, "wb") as fh:
                    fh.write(rng.randbytes(int(10 ** rng.uniform(2, 5.5))))
                cmd = ["scp", "-q", "-P", port] + base + [f, f"root@{ip}:/dev/null"]
            return cmd
        if s == "smtp":
            body = "".join(rng.choice("abcdefghij \n") for _ in range(rng.randint(20, 4000)))
            return ["swaks", "-s", ip, "-p", port, "--to", "root@lab",
                    "--from", f"s{rng.randint(0, 99)}@lab", "--body", body,
                    "--timeout", "15", "--silent", "2"]
        if s == "postgres":
            q = rng.choice([
                "select 1",
                "select generate_series(1, %d)" % rng.randint(1, 3000),
                "select md5(x::text) from generate_series(1, %d) x" % rng.randint(1, 500),
                "select * from pg_class limit %d" % rng.randint(1, 300),
                "create temp table t(a int, b text); insert into t select x, "
                "repeat('y', %d) from generate_series(1, 50) x; select count(*) from t"
                % rng.randint(1, 200),
            ])
            return ["psql", "-h", ip, "-p", port, "-U", "postgres", "-d", "postgres",
                    "-qAt", "-c", q]
        if s == "redis":
            lines = []
            for _ in range(rng.choice([1, 1, 2, 4, 10])):
                k = f"k{rng.randint(0, 500)}"
                op = rng.random()
                if op < 0.4:
                    lines.append(f"SET {k} {rng.randbytes(rng.randint(1, 3000)).hex()}")
                elif op < 0.8:
                    lines.append(f"GET {k}")
                elif op < 0.9:
                    lines.append(f"INCR c{rng.randint(0, 9)}")
                else:
                    lines.append(f"LPUSH l{rng.randint(0, 9)} {rng.randint(0, 1 << 20)}")
            return (["redis-cli", "-h", ip, "-p", port], "\n".join(lines) + "\n")
        if s == "mqtt":
            t = rng.choice(self.mqtt_topics)
            if rng.random() < 0.75:
                return ["mosquitto_pub", "-h", ip, "-p", port, "-t", t, "-q",
                        str(rng.choice([0, 0, 1, 2])), "-m",
                        rng.randbytes(rng.randint(1, 2000)).hex()]
            return ["mosquitto_sub", "-h", ip, "-p", port, "-t", t, "-W",
                    str(rng.randint(1, 3)), "-C", "1"]
        if s == "ftp":
            if rng.random() < 0.15:
                return ["curl", "-s", "-o", "/dev/null", "--max-time", "20",
                        f"ftp://{ip}:{port}/"]
            return ["curl", "-s", "-o", "/dev/null", "--max-time", "20"] + [
                f"ftp://{ip}:{port}/{rng.choice(objs)}"
                for _ in range(rng.choice([1, 1, 2, 3]))]
        if s == "vpn":
            return ("vpn", [f"http://{VPN_SERVER_TUN}/{rng.choice(objs)}"
                            for _ in range(rng.choice([1, 2, 4, 8]))])
        if s == "iperf":
            if rng.random() < 0.7:
                return ["iperf3", "-c", ip, "-p", port, "-n",
                        str(int(10 ** rng.uniform(4.0, 6.0))), "--connect-timeout", "5000"]
            return ["iperf3", "-c", ip, "-p", port, "-u", "-b",
                    f"{rng.randint(1, 4)}M", "-t", "1", "-l", str(rng.randint(200, 1400))]
        raise ValueError(s)

    def vpn_session(self, urls):
        """One OpenVPN client session: connect, fetch `urls` through it, stop."""
        w = self.lab.work
        p = subprocess.Popen(self.lab.ns("c", [find_prog("openvpn"), "--config",
                                               f"{w}/vpn-client.conf"]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True, text=True,
                             errors="replace")
        try:
            up = threading.Event()
            lines = []

            def watch():
                for line in p.stdout:
                    lines.append(line.strip())
                    if "Initialization Sequence Completed" in line:
                        up.set()
            threading.Thread(target=watch, daemon=True).start()
            if not up.wait(20):
                return False, "openvpn: no tunnel in 20 s: " + " | ".join(lines[-3:])
            r = subprocess.run(self.lab.ns("c", ["curl", "-s", "-o", "/dev/null",
                                                 "--max-time", "20"] + urls),
                               capture_output=True, text=True, errors="replace",
                               timeout=30)
            return r.returncode == 0, f"curl over the tunnel: exit {r.returncode}"
        except subprocess.TimeoutExpired:
            return False, "curl over the tunnel: timeout"
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def worker(self, idx, deadline):
        rng = random.Random(self.seed * 1000 + idx)
        names = sorted(self.services)
        weights = [SERVICES[s][7] for s in names]
        while time.time() < deadline:
            s = rng.choices(names, weights)[0]
            cmd = self.session(s, rng)
            stdin = None
            if s == "vpn":
                if not self.vpn_lock.acquire(blocking=False):
                    continue
                try:
                    ok, err = self.vpn_session(cmd[1])
                finally:
                    self.vpn_lock.release()
                with self.lock:
                    self.stats[s]["ok" if ok else "failed"] += 1
                    if not ok and s not in self.first_error:
                        self.first_error[s] = err
                continue
            if isinstance(cmd, tuple):
                cmd, stdin = cmd
            if s == "iperf" and not self.iperf_lock.acquire(blocking=False):
                continue
            try:
                r = subprocess.run(self.lab.ns("c", cmd), input=stdin, text=True,
                                   errors="replace",
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   timeout=30)
                ok = r.returncode == 0
                err = f"exit {r.returncode}: {r.stderr.strip()[:300]}"
                if s == "mqtt" and cmd[0] == "mosquitto_sub" and r.returncode == 27:
                    ok = True  # -W timeout with no message: a normal session
            except subprocess.TimeoutExpired:
                ok = False
                err = "timeout (30 s)"
            finally:
                if s == "iperf":
                    self.iperf_lock.release()
            with self.lock:
                self.stats[s]["ok" if ok else "failed"] += 1
                if not ok and s not in self.first_error:
                    self.first_error[s] = f"{' '.join(cmd)[:200]} -> {err}"
            # Think time: exponential, mean 50 ms.
            time.sleep(min(1.0, rng.expovariate(20.0)))

    def run(self, duration):
        deadline = time.time() + duration
        # Daemon threads: on Ctrl-C the main thread exits at once and the
        # exit handler stops the servers and removes the namespaces.
        threads = [threading.Thread(target=self.worker, args=(i, deadline), daemon=True)
                   for i in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def read_pcap_flows(path):
    """5-tuple flows of an Ethernet pcap: {(proto, a, ap, b, bp): [pkts, bytes] per dir}."""
    flows = {}
    with open(path, "rb") as f:
        gh = f.read(24)
        if len(gh) < 24:
            raise RuntimeError(f"{path}: not a pcap file")
        magic = struct.unpack("<I", gh[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            e = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            e = ">"
        else:
            raise RuntimeError(f"{path}: not a classic pcap file")
        linktype = struct.unpack(e + "I", gh[20:24])[0]
        if linktype != 1:
            raise RuntimeError(f"{path}: link type {linktype}, expected Ethernet")
        while True:
            h = f.read(16)
            if len(h) < 16:
                break
            _, _, incl, orig = struct.unpack(e + "IIII", h)
            d = f.read(incl)
            if len(d) < 34 or d[12:14] != b"\x08\x00":
                continue
            ip = d[14:]
            ihl = (ip[0] & 15) * 4
            proto = ip[9]
            if proto not in (6, 17) or len(ip) < ihl + 4:
                continue
            frag = struct.unpack("!H", ip[6:8])[0] & 0x1FFF
            if frag:
                continue
            iplen = struct.unpack("!H", ip[2:4])[0]
            src = ".".join(map(str, ip[12:16]))
            dst = ".".join(map(str, ip[16:20]))
            sp, dp = struct.unpack("!HH", ip[ihl:ihl + 4])
            key = (proto, src, sp, dst, dp)
            flows.setdefault(key, [0, 0])
            flows[key][0] += 1
            flows[key][1] += iplen
    return flows


def write_truth(pcap, truth, services, ports):
    """Label every flow by its server endpoint; return rows per label."""
    by_endpoint = {}
    for s in services:
        width = FTP_DATA_PORTS if s == "ftp_data" else 1
        for t in SERVICES[s][4]:
            for port in range(ports[s], ports[s] + width):
                by_endpoint[(6 if t == "tcp" else 17, SERVER_IP, port)] = s
    flows = read_pcap_flows(pcap)
    rows, unlabelled, counts = [], 0, {}
    seen = set()
    for (proto, a, ap, b, bp), (pk, by) in sorted(flows.items()):
        if (proto, b, bp) in by_endpoint:
            cli, cp, srv, sp = a, ap, b, bp
        elif (proto, a, ap) in by_endpoint:
            cli, cp, srv, sp = b, bp, a, ap
        else:
            unlabelled += 1
            continue
        k = (proto, cli, cp, srv, sp)
        if k in seen:
            continue
        seen.add(k)
        c2s = flows.get((proto, cli, cp, srv, sp), [0, 0])
        s2c = flows.get((proto, srv, sp, cli, cp), [0, 0])
        s = by_endpoint[(proto, srv, sp)]
        app, master, appp, cat = SERVICES[s][:4]
        rows.append([os.path.basename(pcap), "TCP" if proto == 6 else "UDP", cli, cp,
                     srv, sp, app, master, appp, cat, "lab", c2s[0], c2s[1], s2c[0],
                     s2c[1]])
        counts[app] = counts.get(app, 0) + 1
    with open(truth, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(TRUTH_COLUMNS)
        w.writerows(rows)
    return counts, unlabelled


def start_probe(lab, args):
    """`earlybird flows --learn` on the client interface, beside tcpdump.

    Started before the sessions; returns once it captures (its start-up
    line) so that it sees the same flows as tcpdump.
    """
    os.makedirs(args.learn, exist_ok=True)
    log_path = os.path.join(args.learn, "probe.log")
    out = open(log_path, "wb")
    cmd = lab.ns("c", [shutil.which(args.earlybird), "flows", "-i", lab.tap_c,
                       "-f", "csv", "-o", os.path.join(args.learn, "flows.csv"),
                       "--learn", args.learn, "--learn-level", args.learn_level, "--no-progress",
                       "--filter", f"host {SERVER_IP}"])
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=out,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    lab.procs.append(("probe", p))
    t0 = time.time()
    while time.time() - t0 < 20:
        with open(log_path, "rb") as f:
            if b"capturing" in f.read():
                return p
        if p.poll() is not None:
            raise RuntimeError(f"the probe exited ({p.returncode}, see {log_path})")
        time.sleep(0.05)
    raise RuntimeError(f"the probe did not start in 20 s (see {log_path})")


def stop_probe(p, args):
    """SIGTERM: the probe flushes its flows and trains its last model."""
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        raise RuntimeError("the probe did not stop within 120 s of SIGTERM")
    with open(os.path.join(args.learn, "probe.log"), "rb") as f:
        tail = f.read().decode(errors="replace").splitlines()[-12:]
    if p.returncode not in (0, 130):  # 130: stopped by the signal, every flow flushed
        raise RuntimeError(f"the probe exited {p.returncode}: {tail}")
    models = os.path.join(args.learn, "models.jsonl")
    if not os.path.exists(models):
        raise RuntimeError(f"the probe wrote no model to {args.learn}: {tail}")
    return dict(exit=p.returncode, learn=args.learn, level=args.learn_level, log=tail)


def main():
    p = argparse.ArgumentParser(description="Make one labelled lab capture.")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of sessions")
    p.add_argument("--conditions", choices=sorted(CONDITIONS), default="wan")
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--workers", type=int, default=12, help="concurrent client sessions")
    p.add_argument("--services", default="all",
                   help="comma-separated subset of: " + ",".join(SERVICES))
    p.add_argument("--keep-work", action="store_true",
                   help="keep the configuration/log directory (printed)")
    p.add_argument("--learn", metavar="DIR",
                   help="also run a self-training probe (earlybird flows --learn DIR)")
    p.add_argument("--learn-level", default="proto", choices=["category", "app", "proto"],
                   help="the probe's --learn-level (default proto)")
    p.add_argument("--earlybird", default=os.environ.get("EARLYBIRD", "earlybird"),
                   help="the earlybird binary of --learn (default $EARLYBIRD or PATH)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("lab: needs root (network namespaces, TAP devices)")
    services = list(SERVICES) if args.services == "all" else args.services.split(",")
    for s in services:
        if s not in SERVICES:
            sys.exit(f"lab: unknown service {s!r} (known: {', '.join(SERVICES)})")
    if "ftp" in services and "ftp_data" not in services:
        services.append("ftp_data")
    missing = sorted({prog for s in services for prog in SERVICES[s][6]
                      if not find_prog(prog)} | {t for t in ("ip", "tcpdump", "openssl")
                                                  if not find_prog(t)})
    if args.learn and not shutil.which(args.earlybird):
        missing.append(args.earlybird)
    if missing:
        sys.exit(f"lab: missing programs: {', '.join(missing)} (see docs/LAB.md)")
    os.makedirs(args.out, exist_ok=True)
    pcap = os.path.join(args.out, f"lab-{args.seed}.pcap")
    truth = os.path.join(args.out, f"lab-{args.seed}.truth.csv")
    meta_path = os.path.join(args.out, f"lab-{args.seed}.meta.json")

    rng = random.Random(args.seed)
    ports = choose_ports(rng, services)
    cond = CONDITIONS[args.conditions]
    lab = Lab(args)
    atexit.register(lab.stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.keep_work:
        log(f"work directory {lab.work}")
    lab.build_network(cond, args.seed)
    lab.start_servers(services, ports, rng)
    lab.wait_ready(services, ports)
    tcpdump = lab.spawn("tcpdump", lab.ns("c", [
        find_prog("tcpdump"), "-i", lab.tap_c, "-w", pcap, "-n", "-Z", "root",
        "-s", "0", "-B", "65536", f"host {SERVER_IP}"]))
    # tcpdump says "listening on" once it captures.
    t0 = time.time()
    while time.time() - t0 < 10:
        with open(os.path.join(lab.work, "tcpdump.log"), "rb") as f:
            if b"listening on" in f.read():
                break
        if tcpdump.poll() is not None:
            raise RuntimeError("tcpdump exited (see its log)")
        time.sleep(0.05)
    probe = start_probe(lab, args) if args.learn else None
    log(f"seed {args.seed}, {args.conditions} {cond}, ports {ports}")
    wl = Workload(lab, services, ports, args.seed, args.workers)
    wl.run(args.duration)
    time.sleep(1.0 + 4 * cond["delay"] / 1000.0)  # last packets through the link
    os.killpg(tcpdump.pid, signal.SIGINT)
    tcpdump.wait(timeout=10)
    probe_meta = stop_probe(probe, args) if probe else None
    with open(os.path.join(lab.work, "tcpdump.log"), "rb") as f:
        tlog = f.read().decode(errors="replace")
    counts, unlabelled = write_truth(pcap, truth, services, ports)
    meta = dict(seed=args.seed, conditions=args.conditions, link=cond, ports=ports,
                duration=args.duration, workers=args.workers, sessions=wl.stats,
                first_error=wl.first_error,
                flows_per_label=counts, unlabelled_flows=unlabelled,
                tcpdump=[l for l in tlog.splitlines() if "packets" in l],
                probe=probe_meta)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    lab.stop_all()
    total = sum(counts.values())
    log(f"wrote {pcap} and {truth}: {total} flows, {len(counts)} labels; "
        f"sessions {json.dumps(wl.stats, sort_keys=True)}")


if __name__ == "__main__":
    main()
