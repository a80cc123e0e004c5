//! NetFlow v9 and v5 to real collectors, on loopback: nfdump's nfcapd
//! reads back, for every sample capture, the one-way records each flow of
//! the CSV of the same run gives (addresses, ports, protocol, packets,
//! bytes, first and last times; v5: the IPv4 flows, the others counted as
//! left out); tshark's NetFlow dissector decodes the v9 datagrams
//! (captured by the test) to the same records, with the verdict, its
//! confidence, the Community ID, the model id and the direction as
//! docs/NETFLOW.md documents them (the model ids of learnt models too,
//! from a `--learn` run); with packet sampling the options record
//! carries N.
//!
//! nfdump and tshark must be installed (`.ci/run` does); without them a
//! test says SKIPPED, and fails under CI.

use crate::common;
use crate::ipfix_cli::{
    csv_rows, eventually, free_udp_port, have, proto_number, samples, to_pcap, udp_listening,
    Catcher, Kill,
};
use crate::lib_common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::eb;

/// One one-way record: addresses, ports (ICMP: type × 256 + code as the
/// destination port), protocol, packets, bytes, first and last second.
type OneWay = (IpAddr, IpAddr, u16, u16, u8, u64, u64, u64, u64);

/// The one-way records the CSV's flows give (both directions when the
/// server sent packets); `v4_only` keeps the IPv4 flows.
fn csv_one_way(rows: &[HashMap<String, String>], v4_only: bool) -> Vec<OneWay> {
    let mut v = Vec::new();
    for r in rows {
        if v4_only && r["ip_version"] != "4" {
            continue;
        }
        let n = |k: &str| r[k].parse::<u64>().unwrap();
        let proto = n("proto") as u8;
        let icmp = r["icmp_type"]
            .parse::<u64>()
            .ok()
            .map(|t| (t * 256 + n("icmp_code")) as u16);
        let (src, dst): (IpAddr, IpAddr) = (r["src"].parse().unwrap(), r["dst"].parse().unwrap());
        // nfdump's CSV has whole seconds.
        let (first, last) = (n("first_ts") / 1_000_000_000, n("last_ts") / 1_000_000_000);
        let (sp, dp) = (n("sport") as u16, n("dport") as u16);
        // nfdump puts the ICMP type and code of IPv4 flows (NetFlow's
        // ICMP_TYPE, v5's destination port) in the destination port; it
        // keeps no ICMPv6 type from v9 (icmpTypeCodeIPv6).
        let dport = |d: u16| match proto {
            1 => icmp.unwrap_or(0),
            58 => 0,
            _ => d,
        };
        v.push((
            src,
            dst,
            sp,
            dport(dp),
            proto,
            n("fwd_packets"),
            n("fwd_bytes"),
            first,
            last,
        ));
        if n("bwd_packets") > 0 {
            v.push((
                dst,
                src,
                dp,
                dport(sp),
                proto,
                n("bwd_packets"),
                n("bwd_bytes"),
                first,
                last,
            ));
        }
    }
    v.sort();
    v
}

/// Seconds since 1970 of nfdump's "YYYY-MM-DD hh:mm:ss" (UTC; a fraction
/// is dropped).
fn nfdump_secs(s: &str) -> u64 {
    let (date, time) = s.trim().split_once(' ').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let hms = time.split('.').next().unwrap();
    let t: Vec<u64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    // Days from civil (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe - 719_468) as u64;
    days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2]
}

/// The records `nfdump -o csv` shows of the files under `dir`.
fn nfdump_records(dir: &Path) -> Vec<OneWay> {
    let out = lib_common::output_ok(Command::new("nfdump").env("TZ", "UTC").args([
        "-R",
        dir.to_str().unwrap(),
        "-o",
        "csv",
        "-q",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut v: Vec<OneWay> = text
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
                nfdump_secs(c[0]),
                nfdump_secs(c[1]),
            )
        })
        .collect();
    v.sort();
    v
}

/// Runs `flows INPUT -o netflowV+udp://… -o CSV` into a fresh nfcapd;
/// returns (what nfdump reads back, the CSV's rows, the run's stderr).
fn through_nfcapd(
    version: u8,
    input: &Path,
    dir: &Path,
    extra: &[&str],
) -> (Vec<OneWay>, Vec<HashMap<String, String>>, String) {
    let flows = dir.join("nf");
    std::fs::create_dir(&flows).unwrap();
    let port = free_udp_port();
    let log = std::fs::File::create(dir.join("nfcapd.log")).unwrap();
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
    let csv = dir.join("out.csv");
    let out = format!("netflow{version}+udp://127.0.0.1:{port}");
    let mut args = vec![
        "flows",
        input.to_str().unwrap(),
        "-o",
        &out,
        "-o",
        csv.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = eb(&args);
    assert_eq!(code, 0, "{}: {err}", input.display());
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: plain libc call on our child.
    unsafe { libc::kill(nfcapd.0.id() as i32, libc::SIGTERM) };
    assert!(
        eventually(10, || nfcapd.0.try_wait().unwrap().is_some()),
        "nfcapd did not stop"
    );
    (nfdump_records(&flows), csv_rows(&csv), err)
}

#[test]
fn nfcapd_reads_back_the_v9_records_of_every_flow_of_the_csv() {
    if !have("nfcapd", "-V") || !have("nfdump", "-V") {
        return;
    }
    for (i, input) in samples().iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let (got, rows, _) = through_nfcapd(9, input, tmp.path(), &[]);
        let want = csv_one_way(&rows, false);
        assert!(!want.is_empty(), "{}", input.display());
        assert_eq!(
            got.len(),
            want.len(),
            "{i} {}: record count",
            input.display()
        );
        assert_eq!(got, want, "{}", input.display());
    }
}

#[test]
fn nfcapd_reads_back_the_v5_records_of_the_ipv4_flows_and_the_rest_is_counted() {
    if !have("nfcapd", "-V") || !have("nfdump", "-V") {
        return;
    }
    let mut left_out = 0;
    for input in samples() {
        let tmp = tempfile::tempdir().unwrap();
        let (got, rows, err) = through_nfcapd(5, &input, tmp.path(), &[]);
        let want = csv_one_way(&rows, true);
        assert_eq!(got, want, "{}", input.display());
        let v6 = rows.iter().filter(|r| r["ip_version"] != "4").count();
        if v6 > 0 {
            let line = format!(
                "{v6} flow record{} left out: not IPv4",
                if v6 == 1 { "" } else { "s" }
            );
            assert!(err.contains(&line), "{}: {err}", input.display());
            left_out += v6;
        } else {
            assert!(!err.contains("left out"), "{err}");
        }
    }
    assert!(left_out > 0, "no sample capture has IPv6 flows");
}

/// A number tshark shows in decimal or as 0x hex.
fn num(v: &serde_json::Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

/// Milliseconds of tshark's "seconds.fraction" text.
fn secs_ms(v: &serde_json::Value) -> u64 {
    let s = v.as_str().unwrap();
    let (a, b) = s.split_once('.').unwrap_or((s, "0"));
    a.parse::<u64>().unwrap() * 1000 + format!("{b:0<3}")[..3].parse::<u64>().unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    s.split(':')
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

/// The data records of v9 datagrams as tshark decodes them, each with
/// the uptime origin (ms since 1970) of its packet.
fn tshark_flows(datagrams: &[Vec<u8>], dir: &Path) -> Vec<(u64, serde_json::Value)> {
    let pcap = dir.join("nf9.pcap");
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
        assert_eq!(c["cflow.version"], "9");
        let origin = num(&c["cflow.timestamp_tree"]["cflow.unix_secs"]) * 1000
            - secs_ms(&c["cflow.sysuptime"]);
        // serde_json's map sorts its keys as text ("Flow 10" before
        // "Flow 2"): put sets and flows back in their numeric order.
        let index = |k: &str, prefix: &str| -> Option<u64> {
            k.strip_prefix(prefix)?.split(' ').next()?.parse().ok()
        };
        let mut in_packet = Vec::new();
        for (k, set) in c.as_object().unwrap() {
            if k.contains("Template") {
                continue;
            }
            let Some(si) = index(k, "FlowSet ") else {
                continue;
            };
            for (fk, f) in set.as_object().unwrap() {
                if let Some(fi) = index(fk, "Flow ") {
                    in_packet.push((si, fi, f.clone()));
                }
            }
        }
        in_packet.sort_by_key(|x| (x.0, x.1));
        flows.extend(in_packet.into_iter().map(|x| (origin, x.2)));
    }
    flows
}

#[test]
fn tshark_decodes_every_v9_field_as_the_csv_of_the_same_run_says() {
    if !have("tshark", "-v") {
        return;
    }
    let mut checked = 0;
    for input in samples() {
        let tmp = tempfile::tempdir().unwrap();
        let catcher = Catcher::start();
        let csv = tmp.path().join("out.csv");
        let (code, _, err) = eb(&[
            "flows",
            input.to_str().unwrap(),
            "-o",
            &format!("netflow9+udp://127.0.0.1:{}", catcher.port),
            "-o",
            csv.to_str().unwrap(),
            "--community-id-seed",
            "11",
            "-q",
        ]);
        assert_eq!(code, 0, "{err}");
        std::thread::sleep(Duration::from_millis(300));
        let flows = tshark_flows(&catcher.finish(), tmp.path());
        let rows = csv_rows(&csv);
        let mut it = flows.iter();
        for (i, r) in rows.iter().enumerate() {
            let n = |k: &str| r[k].parse::<u64>().unwrap();
            let dirs = if n("bwd_packets") > 0 { 2 } else { 1 };
            for d in 0..dirs {
                let c = format!("{} row {i} direction {d}", input.display());
                let (origin, f) = it.next().unwrap_or_else(|| panic!("{c}: missing"));
                let v6 = r["ip_version"] != "4";
                let (src, dst) = match v6 {
                    true => (&f["cflow.srcaddrv6"], &f["cflow.dstaddrv6"]),
                    false => (&f["cflow.srcaddr"], &f["cflow.dstaddr"]),
                };
                let (a, b) = if d == 0 {
                    ("src", "dst")
                } else {
                    ("dst", "src")
                };
                let ip = |v: &serde_json::Value| v.as_str().unwrap().parse::<IpAddr>().unwrap();
                assert_eq!(ip(src), r[a].parse::<IpAddr>().unwrap(), "{c}: src");
                assert_eq!(ip(dst), r[b].parse::<IpAddr>().unwrap(), "{c}: dst");
                let (sp, dp) = if d == 0 {
                    ("sport", "dport")
                } else {
                    ("dport", "sport")
                };
                assert_eq!(num(&f["cflow.srcport"]), n(sp), "{c}: sport");
                assert_eq!(num(&f["cflow.dstport"]), n(dp), "{c}: dport");
                assert_eq!(num(&f["cflow.protocol"]), n("proto"), "{c}: proto");
                let dir = if d == 0 { "fwd" } else { "bwd" };
                assert_eq!(
                    num(&f["cflow.octets"]),
                    n(&format!("{dir}_bytes")),
                    "{c}: bytes"
                );
                assert_eq!(
                    num(&f["cflow.packets"]),
                    n(&format!("{dir}_packets")),
                    "{c}: packets"
                );
                let flags: u64 = ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr"]
                    .iter()
                    .enumerate()
                    .filter(|(_, fl)| n(&format!("{dir}_{fl}")) > 0)
                    .map(|(b, _)| 1 << b)
                    .sum();
                assert_eq!(num(&f["cflow.tcpflags"]), flags, "{c}: flags");
                let t = &f["cflow.timedelta_tree"];
                assert_eq!(
                    origin + secs_ms(&t["cflow.timestart"]),
                    n("first_ts") / 1_000_000,
                    "{c}: start"
                );
                assert_eq!(
                    origin + secs_ms(&t["cflow.timeend"]),
                    n("last_ts") / 1_000_000,
                    "{c}: end"
                );
                assert_eq!(num(&f["cflow.vlanid"]), n("vlan"), "{c}: vlan");
                let icmp = r["icmp_type"].parse::<u64>().ok();
                match (v6, icmp) {
                    (true, Some(t)) => {
                        assert_eq!(num(&f["cflow.icmp_ipv6_type"]), t, "{c}");
                        assert_eq!(num(&f["cflow.icmp_ipv6_code"]), n("icmp_code"), "{c}");
                    }
                    (false, Some(t)) => assert_eq!(
                        num(&f["cflow.icmp_type_code_ipv4"]),
                        t * 256 + n("icmp_code"),
                        "{c}"
                    ),
                    _ => {}
                }
                let (sm, dm) = if d == 0 {
                    ("src_mac", "dst_mac")
                } else {
                    ("dst_mac", "src_mac")
                };
                assert_eq!(f["cflow.srcmac"].as_str().unwrap(), r[sm], "{c}: src mac");
                assert_eq!(f["cflow.dstmac"].as_str().unwrap(), r[dm], "{c}: dst mac");
                assert_eq!(
                    num(&f["cflow.biflow_direction"]),
                    d as u64 + 1,
                    "{c}: direction"
                );
                assert_eq!(f["cflow.appl_name"].as_str().unwrap(), r["app"], "{c}: app");
                // The vendor types, in template order: confidence,
                // decided-at packet, Community ID, model id.
                let vendor: Vec<Vec<u8>> = f["cflow.unknown_field_type"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| unhex(v.as_str().unwrap()))
                    .collect();
                let conf = f32::from_be_bytes(vendor[0].clone().try_into().unwrap());
                let want: f64 = r["app_confidence"].parse().unwrap();
                assert!(
                    (f64::from(conf) - want).abs() <= 0.0005,
                    "{c}: confidence {conf} {want}"
                );
                assert_eq!(u64::from(vendor[1][0]), n("decided_at_packet"), "{c}: at");
                let cid = if r["community_id"].is_empty() {
                    vec![0; 30]
                } else {
                    r["community_id"].as_bytes().to_vec()
                };
                assert_eq!(vendor[2], cid, "{c}: community id");
                let model = r["model_id"].parse::<u16>().unwrap_or(u16::MAX);
                assert_eq!(vendor[3], model.to_be_bytes(), "{c}: model id");
                checked += 1;
            }
        }
        assert!(
            it.next().is_none(),
            "{}: more records than the CSV gives",
            input.display()
        );
    }
    assert!(checked > 100, "{checked} records");
}

#[test]
fn v9_with_sampling_sends_the_rate_in_its_options_record() {
    if !have("tshark", "-v") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let catcher = Catcher::start();
    let input = &samples()[1];
    let (code, _, err) = eb(&[
        "flows",
        input.to_str().unwrap(),
        "-o",
        &format!("netflow9+udp://127.0.0.1:{}", catcher.port),
        "--sample",
        "systematic:4",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(300));
    let pcap = tmp.path().join("s.pcap");
    to_pcap(&catcher.finish(), &pcap);
    let out = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-d", "udp.port==4739,cflow"])
        .args([
            "-T",
            "fields",
            "-e",
            "cflow.sampling_interval",
            "-e",
            "cflow.sampling_algorithm",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("");
    assert_eq!(
        first.split_whitespace().collect::<Vec<_>>(),
        ["4", "1"],
        "{text}"
    );
}

/// The vendor field of a tshark-decoded v9 data record at `i` in
/// template order (confidence, decided-at packet, Community ID, model id).
fn vendor_field(f: &serde_json::Value, i: usize) -> Vec<u8> {
    unhex(f["cflow.unknown_field_type"][i].as_str().unwrap())
}

#[test]
fn v9_names_the_learnt_model_that_decided_each_flow() {
    if !have("tshark", "-v") {
        return;
    }
    let dev =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/classify/dev/ndpi/pcap");
    if !dev.is_dir() {
        eprintln!("SKIPPED: corpus not found at {}", dev.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let catcher = Catcher::start();
    let csv = tmp.path().join("out.csv");
    let models = tmp.path().join("models");
    // Models trained every 100 payload labels and swapped in every 5,000
    // packets: the run's own model decides the first flows, learnt ones
    // the later (as in selftrain_cli's swap test).
    let (code, _, err) = eb(&[
        "flows",
        dev.to_str().unwrap(),
        "-o",
        &format!("netflow9+udp://127.0.0.1:{}", catcher.port),
        "-o",
        csv.to_str().unwrap(),
        "--learn",
        models.to_str().unwrap(),
        "--learn-every-labels",
        "100",
        "--learn-every-seconds",
        "0",
        "--learn-swap-packets",
        "5000",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(300));
    let flows = tshark_flows(&catcher.finish(), tmp.path());
    let rows = csv_rows(&csv);
    let mut it = flows.iter();
    let mut ids = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        let dirs = if r["bwd_packets"] != "0" { 2 } else { 1 };
        for d in 0..dirs {
            let (_, f) = it.next().unwrap_or_else(|| panic!("row {i}: missing"));
            assert_eq!(
                num(&f["cflow.srcport"]).to_string(),
                r[if d == 0 { "sport" } else { "dport" }]
            );
            let want = r["model_id"].parse::<u16>().unwrap_or(u16::MAX);
            assert_eq!(
                vendor_field(f, 3),
                want.to_be_bytes(),
                "row {i} direction {d}"
            );
            *ids.entry(want).or_insert(0) += 1;
        }
    }
    assert!(it.next().is_none(), "more records than the CSV gives");
    // The run's own model and learnt ones (1 and up) decided flows.
    assert!(ids.contains_key(&0), "{ids:?}");
    assert!(ids.keys().any(|&k| (1..u16::MAX).contains(&k)), "{ids:?}");
}
