//! IPFIX to real collectors, on loopback: nfdump's nfcapd over UDP reads
//! back the flows, packets and bytes (both directions) of the CSV of the
//! same run, for the sample captures and a generated one; tshark's IPFIX
//! dissector decodes the UDP datagrams (captured by the test) to the same
//! records, enterprise elements included, as docs/IPFIX.md documents them;
//! a TCP listener receives every record; a stalled or absent TCP collector
//! never holds up the run, which reports the drops.
//!
//! nfdump and tshark must be installed (`.ci/run` does); without them a
//! test says SKIPPED, and fails under CI.

use crate::common;
use crate::lib_common;

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::eb;

/// Whether `tool` runs; under CI a missing tool fails the test.
pub(crate) fn have(tool: &str, arg: &str) -> bool {
    let ok = Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{tool} is not installed (.ci/run installs it)");
        }
        eprintln!("SKIPPED: {tool} is not installed");
    }
    ok
}

/// A child process killed when dropped.
pub(crate) struct Kill(pub(crate) Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn samples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    v.sort();
    v
}

/// testdata's `ndpi__iphone.pcap`, the sample the tshark tests decode.
fn iphone() -> PathBuf {
    samples()
        .into_iter()
        .find(|p| p.ends_with("ndpi__iphone.pcap"))
        .unwrap()
}

/// A generated capture with both directions (realistic mix).
fn generated(dir: &Path) -> PathBuf {
    let p = dir.join("gen.pcap");
    let (code, _, err) = eb(&["gen", "realistic", "-n", "20000", "-o", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    p
}

/// Splits one CSV line (quoted fields may hold commas and quotes).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

/// The CSV's records as maps from column name to text.
pub(crate) fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = split_csv(lines.next().unwrap());
    lines
        .map(|l| header.iter().cloned().zip(split_csv(l)).collect())
        .collect()
}

/// What nfdump shows of a flow: addresses, ports (ICMP: type × 256 + code
/// as the destination port), protocol, packets and bytes each way.
type Flow = (IpAddr, IpAddr, u16, u16, u8, u64, u64, u64, u64);

fn csv_flows(rows: &[HashMap<String, String>]) -> Vec<Flow> {
    let mut v: Vec<Flow> = rows
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].parse::<u64>().unwrap();
            let proto = n("proto") as u8;
            let dport = if proto == 1 || proto == 58 {
                match r["icmp_type"].parse::<u64>() {
                    Ok(t) => t * 256 + n("icmp_code"),
                    Err(_) => 0,
                }
            } else {
                n("dport")
            };
            (
                r["src"].parse().unwrap(),
                r["dst"].parse().unwrap(),
                n("sport") as u16,
                dport as u16,
                proto,
                n("fwd_packets"),
                n("fwd_bytes"),
                n("bwd_packets"),
                n("bwd_bytes"),
            )
        })
        .collect();
    v.sort();
    v
}

pub(crate) fn proto_number(s: &str) -> u8 {
    match s.trim() {
        "TCP" => 6,
        "UDP" => 17,
        "ICMP" => 1,
        "ICMP6" => 58,
        "IGMP" => 2,
        "GRE" => 47,
        "ESP" => 50,
        "SCTP" => 132,
        other => other
            .parse()
            .unwrap_or_else(|_| panic!("nfdump protocol {other:?}")),
    }
}

/// The flows `nfdump -o csv` shows of the files under `dir`.
fn nfdump_flows(dir: &Path) -> Vec<Flow> {
    let out = lib_common::output_ok(Command::new("nfdump").args([
        "-R",
        dir.to_str().unwrap(),
        "-o",
        "csv",
        "-q",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut v: Vec<Flow> = text
        .lines()
        .filter(|l| !l.starts_with("ts,") && l.split(',').count() > 14)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let n = |i: usize| c[i].trim().parse::<u64>().unwrap();
            (
                c[3].parse().unwrap(),
                c[4].parse().unwrap(),
                n(5) as u16,
                n(6) as u16,
                proto_number(c[7]),
                n(11),
                n(12),
                n(13),
                n(14),
            )
        })
        .collect();
    v.sort();
    v
}

/// Waits until `f` holds, at most `secs` seconds.
pub(crate) fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Whether a UDP socket is bound to 127.0.0.1:`port`.
pub(crate) fn udp_listening(port: u16) -> bool {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/udp").is_ok_and(|t| t.contains(&want))
}

pub(crate) fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn nfcapd_reads_back_the_flows_packets_and_bytes_of_the_csv() {
    if !have("nfcapd", "-V") || !have("nfdump", "-V") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut inputs = samples();
    inputs.push(generated(tmp.path()));
    for (i, input) in inputs.iter().enumerate() {
        let flows = tmp.path().join(format!("nf{i}"));
        std::fs::create_dir(&flows).unwrap();
        let port = free_udp_port();
        let log = std::fs::File::create(tmp.path().join(format!("nfcapd{i}.log"))).unwrap();
        let mut nfcapd = Kill(
            Command::new("nfcapd")
                .args(["-b", "127.0.0.1", "-p", &port.to_string()])
                .args(["-w", flows.to_str().unwrap(), "-t", "3600"])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        assert!(
            eventually(10, || udp_listening(port)),
            "nfcapd never listened"
        );
        let csv = tmp.path().join(format!("out{i}.csv"));
        // Without the labellers: their elements make the run's datagrams
        // more, and nfcapd's receive buffer (net.core.rmem_max) loses
        // some on a busy machine. The label elements are the tshark
        // tests' subject (ipfix_labels_cli.rs).
        let (code, _, err) = eb(&[
            "flows",
            input.to_str().unwrap(),
            "--no-labellers",
            "-o",
            &format!("ipfix+udp://127.0.0.1:{port}"),
            "-o",
            csv.to_str().unwrap(),
            "-q",
        ]);
        assert_eq!(code, 0, "{}: {err}", input.display());
        // nfcapd writes its file when it ends (SIGTERM).
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: plain libc call on our child.
        unsafe { libc::kill(nfcapd.0.id() as i32, libc::SIGTERM) };
        let ended = eventually(10, || nfcapd.0.try_wait().unwrap().is_some());
        assert!(ended, "nfcapd did not stop");
        let want = csv_flows(&csv_rows(&csv));
        assert!(!want.is_empty(), "{}", input.display());
        let got = nfdump_flows(&flows);
        assert_eq!(got.len(), want.len(), "{}: flow count", input.display());
        assert_eq!(got, want, "{}", input.display());
    }
}

/// Datagrams arriving at a socket of the test until stopped.
pub(crate) struct Catcher {
    pub(crate) port: u16,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Vec<u8>>>,
}

impl Catcher {
    pub(crate) fn start() -> Catcher {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        // A run's last records leave in one burst; with the default
        // receive buffer (about 200 KiB) a busy machine that does not
        // schedule this thread in time loses datagrams. 32 MiB (forced
        // past net.core.rmem_max when the tests run as root).
        {
            use std::os::fd::AsRawFd;
            let size: libc::c_int = 32 << 20;
            for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
                // SAFETY: a valid socket and a c_int option value.
                let rc = unsafe {
                    libc::setsockopt(
                        sock.as_raw_fd(),
                        libc::SOL_SOCKET,
                        opt,
                        (&size as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                if rc == 0 {
                    break;
                }
            }
        }
        let port = sock.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) => got.push(buf[..n].to_vec()),
                    Err(_) if s.load(Ordering::Relaxed) => break,
                    Err(_) => {}
                }
            }
            got
        });
        Catcher { port, stop, thread }
    }

    pub(crate) fn finish(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The datagrams as a pcap of Ethernet/IPv4/UDP packets to port 4739.
pub(crate) fn to_pcap(datagrams: &[Vec<u8>], path: &Path) {
    let mut out = Vec::new();
    for v in [0xa1b2_c3d4u32.to_le_bytes().to_vec(), vec![2, 0, 4, 0]] {
        out.extend_from_slice(&v);
    }
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, d) in datagrams.iter().enumerate() {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[0x08, 0x00]);
        let ip_len = (20 + 8 + d.len()) as u16;
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&ip_len.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
        p.extend_from_slice(&40000u16.to_be_bytes());
        p.extend_from_slice(&4739u16.to_be_bytes());
        p.extend_from_slice(&((8 + d.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(d);
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&p);
    }
    std::fs::write(path, out).unwrap();
}

fn hex(s: &str) -> Vec<u8> {
    s.split(':')
        .filter(|x| !x.is_empty())
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect()
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

/// Values of one basicList as tshark shows it (hex of the list after its
/// length): semantic, enterprise element id, element length, PEN, values.
fn basic_list(b: &[u8]) -> (u8, u16, usize, u32, Vec<u64>) {
    let len = be(&b[3..5]) as usize;
    let values = b[9..].chunks(len).map(be).collect();
    (b[0], be(&b[1..3]) as u16, len, be(&b[5..9]) as u32, values)
}

/// Nanoseconds of the day of tshark's "Mon D, YYYY HH:MM:SS.fffffffff UTC".
fn ns_of_day(s: &str) -> u64 {
    let t = s.split(' ').nth(3).unwrap();
    let (hms, frac) = t.split_once('.').unwrap();
    let p: Vec<u64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    ((p[0] * 60 + p[1]) * 60 + p[2]) * 1_000_000_000 + frac.parse::<u64>().unwrap()
}

fn strs(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::Array(a) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        x => vec![x.as_str().unwrap().to_string()],
    }
}

#[test]
fn tshark_decodes_the_records_and_the_enterprise_elements_as_documented() {
    if !have("tshark", "-v") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = iphone();
    let catcher = Catcher::start();
    let csv = tmp.path().join("out.csv");
    let (code, _, err) = eb(&[
        "flows",
        "--no-labellers",
        input.to_str().unwrap(),
        "-o",
        &format!("ipfix+udp://127.0.0.1:{}", catcher.port),
        "-o",
        csv.to_str().unwrap(),
        "-q",
        "--ipfix-domain",
        "7",
    ]);
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(200));
    let datagrams = catcher.finish();
    assert!(datagrams.iter().all(|d| d.len() <= 1400), "MTU");
    let pcap = tmp.path().join("ipfix.pcap");
    to_pcap(&datagrams, &pcap);
    let out = lib_common::output_ok(
        Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-d", "udp.port==4739,cflow"])
            .args(["-T", "json", "--no-duplicate-keys"]),
    );
    let packets: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(packets.len(), datagrams.len());
    let mut flows = Vec::new();
    let mut seq_want = 0u64;
    for p in &packets {
        let c = &p["_source"]["layers"]["cflow"];
        assert_eq!(c["cflow.version"], "10");
        assert_eq!(c["cflow.od_id"], "7");
        assert_eq!(c["cflow.sequence"].as_str().unwrap(), seq_want.to_string());
        for (k, set) in c.as_object().unwrap() {
            if !k.starts_with("Set ") || k.contains("Template") {
                continue;
            }
            for (fk, f) in set.as_object().unwrap() {
                if fk.starts_with("Flow ") {
                    flows.push(f.clone());
                    seq_want += 1;
                }
            }
        }
    }
    let rows = csv_rows(&csv);
    assert_eq!(flows.len(), rows.len(), "record count");
    for (i, (f, r)) in flows.iter().zip(&rows).enumerate() {
        let ctx = format!("record {i}");
        let (src, dst) = if r["ip_version"] == "6" {
            (&f["cflow.srcaddrv6"], &f["cflow.dstaddrv6"])
        } else {
            (&f["cflow.srcaddr"], &f["cflow.dstaddr"])
        };
        let ip = |v: &serde_json::Value| v.as_str().unwrap().parse::<IpAddr>().unwrap();
        assert_eq!(ip(src), r["src"].parse::<IpAddr>().unwrap(), "{ctx}");
        assert_eq!(ip(dst), r["dst"].parse::<IpAddr>().unwrap(), "{ctx}");
        assert_eq!(f["cflow.protocol"], r["proto"].as_str(), "{ctx}");
        assert_eq!(f["cflow.srcport"], r["sport"].as_str(), "{ctx}");
        assert_eq!(f["cflow.dstport"], r["dport"].as_str(), "{ctx}");
        // Forward, then reverse (RFC 5103) counters.
        assert_eq!(
            strs(&f["cflow.octets"]),
            [r["fwd_bytes"].as_str(), r["bwd_bytes"].as_str()]
        );
        assert_eq!(
            strs(&f["cflow.packets"]),
            [r["fwd_packets"].as_str(), r["bwd_packets"].as_str()]
        );
        let times = &f["cflow.timedelta_tree"][0];
        let day = 86_400_000_000_000u64;
        let first: u64 = r["first_ts"].parse().unwrap();
        let last: u64 = r["last_ts"].parse().unwrap();
        assert_eq!(
            ns_of_day(times["cflow.abstimestart"].as_str().unwrap()),
            first % day
        );
        assert_eq!(
            ns_of_day(times["cflow.abstimeend"].as_str().unwrap()),
            last % day
        );
        // The enterprise elements, in template order (docs/IPFIX.md).
        let pie: Vec<Vec<u8>> = strs(&f["cflow.enterprise_private_entry"])
            .iter()
            .map(|h| hex(h))
            .collect();
        assert_eq!(pie.len(), 7, "{ctx}");
        assert_eq!(
            String::from_utf8(pie[0].clone()).unwrap(),
            r["app"],
            "{ctx}"
        );
        let conf = f32::from_be_bytes(pie[1].clone().try_into().unwrap());
        let want: f32 = r["app_confidence"].parse().unwrap();
        assert!((conf - want).abs() <= 0.0005, "{ctx}: {conf} {want}");
        assert_eq!(pie[2], [r["decided_at_packet"].parse::<u8>().unwrap()]);
        let n: usize = r["early_len"].parse().unwrap();
        let col = |k: &str| -> Vec<i64> {
            (1..=n)
                .map(|j| r[&format!("pkt{j}_{k}")].parse().unwrap())
                .collect()
        };
        assert_eq!(
            String::from_utf8(pie[3].clone()).unwrap(),
            r["community_id"],
            "{ctx}"
        );
        let sizes = basic_list(&pie[4]);
        let dirs = basic_list(&pie[5]);
        let gaps = basic_list(&pie[6]);
        assert_eq!((sizes.0, sizes.1, sizes.2, sizes.3), (4, 0x8004, 2, 32473));
        assert_eq!((dirs.0, dirs.1, dirs.2, dirs.3), (4, 0x8005, 1, 32473));
        assert_eq!((gaps.0, gaps.1, gaps.2, gaps.3), (4, 0x8006, 4, 32473));
        let signed = |v: &[u64]| -> Vec<i64> { v.iter().map(|&x| x as u8 as i8 as i64).collect() };
        let plain = |v: &[u64]| -> Vec<i64> { v.iter().map(|&x| x as i64).collect() };
        assert_eq!(plain(&sizes.4), col("size"), "{ctx}");
        assert_eq!(signed(&dirs.4), col("dir"), "{ctx}");
        assert_eq!(plain(&gaps.4), col("iat_us"), "{ctx}");
    }
}

/// Counts the data records of a stream of IPFIX messages (templates read
/// from the stream; variable-length fields honoured).
pub(crate) fn count_records(mut b: &[u8]) -> u64 {
    let mut templates: HashMap<u16, Vec<u16>> = HashMap::new();
    let mut n = 0;
    while b.len() >= 16 {
        let len = be(&b[2..4]) as usize;
        let mut sets = &b[16..len];
        while sets.len() >= 4 {
            let id = be(&sets[0..2]) as u16;
            let slen = be(&sets[2..4]) as usize;
            let mut body = &sets[4..slen];
            if id == 2 {
                while body.len() >= 4 {
                    let tid = be(&body[0..2]) as u16;
                    let count = be(&body[2..4]) as usize;
                    body = &body[4..];
                    let mut lens = Vec::new();
                    for _ in 0..count {
                        let e = body[0] & 0x80 != 0;
                        lens.push(be(&body[2..4]) as u16);
                        body = &body[if e { 8 } else { 4 }..];
                    }
                    templates.insert(tid, lens);
                }
            } else {
                let lens = &templates[&id];
                while !body.is_empty() {
                    for &l in lens {
                        let l = if l == 0xFFFF {
                            let s = body[0] as usize;
                            if s < 255 {
                                body = &body[1..];
                                s
                            } else {
                                let s = be(&body[1..3]) as usize;
                                body = &body[3..];
                                s
                            }
                        } else {
                            l as usize
                        };
                        body = &body[l..];
                    }
                    n += 1;
                }
            }
            sets = &sets[slen..];
        }
        b = &b[len..];
    }
    n
}

#[test]
fn a_tcp_collector_receives_every_record() {
    let tmp = tempfile::tempdir().unwrap();
    let input = generated(tmp.path());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all);
        all
    });
    let csv = tmp.path().join("out.csv");
    let (code, _, err) = eb(&[
        "flows",
        input.to_str().unwrap(),
        "-o",
        &format!("ipfix+tcp://127.0.0.1:{port}"),
        "-o",
        csv.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let bytes = reader.join().unwrap();
    let records = csv_rows(&csv).len() as u64;
    assert!(records > 100);
    assert_eq!(count_records(&bytes), records);
}

#[test]
fn an_absent_or_stalled_tcp_collector_never_blocks_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    // 60,000 flows: megabytes of IPFIX, more than the socket buffers of a
    // collector that does not read take.
    let input = tmp.path().join("worst.pcap");
    let (code, _, err) = eb(&[
        "gen",
        "worst",
        "-n",
        "300000",
        "-o",
        input.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // Absent: nothing listens on the port.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Stalled: accepts, never reads.
    let stalled = TcpListener::bind("127.0.0.1:0").unwrap();
    let stalled_port = stalled.local_addr().unwrap().port();
    for (what, port) in [("absent", port), ("stalled", stalled_port)] {
        let csv = tmp.path().join(format!("{what}.csv"));
        let start = Instant::now();
        let (code, _, err) = eb(&[
            "flows",
            input.to_str().unwrap(),
            "-o",
            &format!("ipfix+tcp://127.0.0.1:{port}"),
            "-o",
            csv.to_str().unwrap(),
            "-q",
            "--ipfix-queue",
            "2",
            "--ipfix-linger",
            "0.5",
        ]);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: took {:?}",
            start.elapsed()
        );
        assert_eq!(code, 3, "{what}: {err}");
        assert!(
            err.contains(&format!("ipfix+tcp://127.0.0.1:{port}"))
                && err.contains("records not delivered"),
            "{what}: {err}"
        );
        // The other output has every record.
        assert_eq!(csv_rows(&csv).len(), 60_000, "{what}");
    }
    drop(stalled);
}

#[test]
fn udp_to_a_closed_port_counts_the_refused_sends() {
    let tmp = tempfile::tempdir().unwrap();
    let input = generated(tmp.path());
    let port = free_udp_port();
    let csv = tmp.path().join("out.csv");
    let (code, _, err) = eb(&[
        "flows",
        input.to_str().unwrap(),
        "-o",
        &format!("ipfix+udp://127.0.0.1:{port}"),
        "-o",
        csv.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("ICMP port unreachable"), "{err}");
    assert!(csv_rows(&csv).len() > 100);
}

/// `--events FILE.ipfix`: one data record per verdict, as many as the
/// flow records say were decided, in templates 260/261 after the flows'
/// four (the events file holds only the event templates).
#[test]
fn early_verdict_events_go_to_ipfix_too() {
    let tmp = tempfile::tempdir().unwrap();
    let input = iphone();
    let (csv, events) = (tmp.path().join("out.csv"), tmp.path().join("ev.ipfix"));
    let (code, _, err) = eb(&[
        "flows",
        input.to_str().unwrap(),
        "-q",
        "-o",
        csv.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let decided = csv_rows(&csv)
        .iter()
        .filter(|r| r["decided_at_packet"] != "0")
        .count() as u64;
    assert!(decided > 40, "{decided}");
    let bytes = std::fs::read(&events).unwrap();
    assert_eq!(count_records(&bytes), decided);
    // The first message holds the templates: set 2, templates 260 and 261.
    assert_eq!(be(&bytes[16..18]), 2);
    assert_eq!(be(&bytes[20..22]), 260);
    // Per-second statistics are not IPFIX records: refused before any work.
    let (code, _, err) = eb(&[
        "flows",
        input.to_str().unwrap(),
        "-q",
        "-f",
        "null",
        "--stats-out",
        tmp.path().join("s.ipfix").to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("early-verdict events, not stats records"),
        "{err}"
    );
}

/// The data records of IPFIX datagrams as tshark decodes them (its JSON of
/// each record), in order.
fn tshark_records(datagrams: &[Vec<u8>], dir: &Path) -> Vec<serde_json::Value> {
    let pcap = dir.join("ipfix.pcap");
    to_pcap(datagrams, &pcap);
    let out = lib_common::output_ok(
        Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-d", "udp.port==4739,cflow"])
            .args(["-T", "json", "--no-duplicate-keys"]),
    );
    let packets: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut flows = Vec::new();
    for p in &packets {
        let c = &p["_source"]["layers"]["cflow"];
        for (k, set) in c.as_object().unwrap() {
            if !k.starts_with("Set ") || k.contains("Template") {
                continue;
            }
            for (fk, f) in set.as_object().unwrap() {
                if fk.starts_with("Flow ") {
                    flows.push(f.clone());
                }
            }
        }
    }
    flows
}

/// `--no-community-id` (TOML `no-community-id = true`): the CSV's
/// community_id is empty in every row, and tshark reads the IPFIX file of
/// the same run as the records of the run without it, less the
/// earlybirdCommunityId element (its templates go without it).
#[test]
fn without_the_community_id_ipfix_goes_without_its_element() {
    if !have("tshark", "-v") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = iphone();
    let toml = tmp.path().join("probe.toml");
    std::fs::write(&toml, "no-community-id = true\n").unwrap();
    let mut runs = Vec::new();
    for (name, extra) in [
        ("with", vec![]),
        ("without", vec!["--config", toml.to_str().unwrap()]),
    ] {
        let (ipfix, csv) = (
            tmp.path().join(format!("{name}.ipfix")),
            tmp.path().join(format!("{name}.csv")),
        );
        let mut args = vec![
            "flows",
            "--no-labellers",
            input.to_str().unwrap(),
            "-o",
            ipfix.to_str().unwrap(),
        ];
        args.extend(["-o", csv.to_str().unwrap(), "-q"]);
        args.extend(extra);
        let (code, _, err) = eb(&args);
        assert_eq!(code, 0, "{err}");
        // The file is IPFIX messages back to back: one datagram each.
        let bytes = std::fs::read(&ipfix).unwrap();
        let mut messages = Vec::new();
        let mut at = 0;
        while at + 4 <= bytes.len() {
            let len = be(&bytes[at + 2..at + 4]) as usize;
            messages.push(bytes[at..at + len].to_vec());
            at += len;
        }
        assert_eq!(at, bytes.len(), "{name}: whole messages");
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        runs.push((tshark_records(&messages, &dir), csv_rows(&csv)));
    }
    let ((with, rows_with), (without, rows_without)) = (&runs[0], &runs[1]);
    assert!(!with.is_empty());
    assert_eq!(with.len(), without.len(), "record count");
    assert_eq!(rows_with.len(), rows_without.len());
    assert!(rows_with
        .iter()
        .all(|r| r["community_id"].starts_with("1:")));
    assert!(rows_without.iter().all(|r| r["community_id"].is_empty()));
    // tshark's JSON objects come with their keys sorted ("Set 10" before
    // "Set 2"), so records are compared as multisets: each record's other
    // elements and enterprise elements, the Community ID taken out of the
    // run with it.
    let mut ids = Vec::new();
    let mut rest = |records: &[serde_json::Value], cid: bool| -> Vec<String> {
        let mut v: Vec<String> = records
            .iter()
            .map(|r| {
                let mut pie = strs(&r["cflow.enterprise_private_entry"]);
                assert_eq!(pie.len(), if cid { 7 } else { 6 }, "{r}");
                if cid {
                    ids.push(String::from_utf8(hex(&pie.remove(3))).unwrap());
                }
                let mut r = r.clone();
                // The enterprise elements and tshark's tree of their lengths.
                r.as_object_mut()
                    .unwrap()
                    .retain(|k, _| !k.starts_with("cflow.enterprise_private_entry"));
                format!("{r} {pie:?}")
            })
            .collect();
        v.sort();
        v
    };
    let (a, b) = (rest(with, true), rest(without, false));
    assert!(a == b, "the records less the Community ID differ");
    let mut want: Vec<String> = rows_with
        .iter()
        .map(|r| r["community_id"].clone())
        .collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want, "the Community IDs of the CSV");
}

/// With `--analyzer media` the templates carry the media verdict
/// (earlybirdMediaKind, earlybirdMediaShare, earlybirdMediaPacket,
/// docs/IPFIX.md) and tshark reads back, for every record, the verdict of
/// the CSV of the same run: the RTP of a heplify capture is audio.
#[test]
fn tshark_decodes_the_media_verdict() {
    if !have("tshark", "-v") {
        return;
    }
    let input = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/voip/heplify__rtp_rtcp_sip.pcap");
    if !input.is_file() {
        eprintln!("SKIPPED: corpus not found at {}", input.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let catcher = Catcher::start();
    let csv = tmp.path().join("out.csv");
    let (code, _, err) = eb(&[
        "flows",
        "--no-labellers",
        input.to_str().unwrap(),
        "--analyzer",
        "media",
        "-o",
        &format!("ipfix+udp://127.0.0.1:{}", catcher.port),
        "-o",
        csv.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(200));
    let datagrams = catcher.finish();
    let flows = tshark_records(&datagrams, tmp.path());
    let rows = csv_rows(&csv);
    assert_eq!(flows.len(), rows.len(), "record count");
    let mut audio = 0;
    for (i, (f, r)) in flows.iter().zip(&rows).enumerate() {
        let ctx = format!("record {i}");
        assert_eq!(f["cflow.srcport"], r["sport"].as_str(), "{ctx}");
        let pie: Vec<Vec<u8>> = strs(&f["cflow.enterprise_private_entry"])
            .iter()
            .map(|h| hex(h))
            .collect();
        // Application, confidence, packet, Community ID, three
        // basicLists, then media.
        assert_eq!(pie.len(), 10, "{ctx}");
        let kind = match r["media"].as_str() {
            "" => 0,
            "audio" => 1,
            "video" => 2,
            "file" => 3,
            "none" => 4,
            k => panic!("{ctx}: media {k:?}"),
        };
        assert_eq!(pie[7], [kind], "{ctx}");
        let share = f32::from_be_bytes(pie[8].clone().try_into().unwrap());
        let packet = be(&pie[9]);
        assert_eq!(pie[9].len(), 4, "{ctx}");
        if kind == 0 {
            assert_eq!((share, packet), (0.0, 0), "{ctx}");
            continue;
        }
        if kind == 4 {
            // Ruled out: no share, the packet it was ruled out at.
            assert_eq!((share, r["media_share"].as_str()), (0.0, ""), "{ctx}");
            assert_eq!(packet.to_string(), r["media_packet"], "{ctx}");
            continue;
        }
        let want: f32 = r["media_share"].parse().unwrap();
        // The CSV writes three decimals.
        assert!((share - want).abs() <= 0.0005, "{ctx}: {share} {want}");
        assert_eq!(packet.to_string(), r["media_packet"], "{ctx}");
        audio += usize::from(kind == 1);
    }
    assert!(audio >= 2, "the RTP streams are audio: {audio}");
}
