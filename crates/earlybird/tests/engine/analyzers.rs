//! The `payload` analyzer on real captures, checked against an independent
//! decoder (etherparse): every TCP/UDP flow's payload packets, bytes and
//! first payload bytes per direction, whatever the shard count; and its
//! fields in CSV and JSON lines after the record's own.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use earlybird::testing::{fields, map_v4};
use earlybird::{
    to_writer, CaptureFile, CollectedFlow, ExportOptions, Format, LinkType, ModelRef, OwnedValue,
    PacketRef, RecordBatch, RunOptions,
};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};

/// One endpoint: address (IPv4-mapped) and port.
type End = ([u8; 16], u16);

/// What the oracle saw of one sender → receiver direction of a 5-tuple.
#[derive(Default, Debug)]
struct Seen {
    packets: u64,
    bytes: u64,
    first: Option<Vec<u8>>,
}

/// Per (proto, sender, receiver): payload packets, bytes and first bytes of
/// every TCP/UDP packet of Ethernet captures read whole (caplen = wire).
fn oracle(path: &Path) -> HashMap<(u8, End, End), Seen> {
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let data = r.data();
    let mut refs: Vec<PacketRef> = Vec::new();
    let mut out: HashMap<(u8, End, End), Seen> = HashMap::new();
    while r.next_batch(&mut refs, 256) > 0 {
        for p in &refs {
            assert_eq!(p.link, LinkType::Ethernet, "{}", path.display());
            assert_eq!(p.caplen, p.orig_len, "{}: cut packets", path.display());
            let bytes = &data[p.offset..p.offset + p.caplen as usize];
            let Ok(s) = SlicedPacket::from_ethernet(bytes) else {
                continue;
            };
            let (src, dst) = match &s.net {
                Some(NetSlice::Ipv4(v4)) => {
                    if v4.header().is_fragmenting_payload() {
                        continue;
                    }
                    (
                        map_v4(v4.header().source()),
                        map_v4(v4.header().destination()),
                    )
                }
                Some(NetSlice::Ipv6(v6)) => (v6.header().source(), v6.header().destination()),
                _ => continue,
            };
            let (proto, sport, dport, payload) = match &s.transport {
                Some(TransportSlice::Tcp(t)) => {
                    (6, t.source_port(), t.destination_port(), t.payload())
                }
                Some(TransportSlice::Udp(u)) => {
                    (17, u.source_port(), u.destination_port(), u.payload())
                }
                _ => continue,
            };
            let e = out.entry((proto, (src, sport), (dst, dport))).or_default();
            if !payload.is_empty() {
                e.packets += 1;
                e.bytes += payload.len() as u64;
                if e.first.is_none() {
                    e.first = Some(payload[..payload.len().min(16)].to_vec());
                }
            }
        }
    }
    out
}

fn run(path: &Path, shards: usize) -> Vec<CollectedFlow> {
    let files = vec![CaptureFile::open(path).unwrap()];
    let mut opts = RunOptions {
        shards,
        batch: 7,
        ..RunOptions::default()
    };
    opts.flow.analyzers = vec!["payload".into()];
    earlybird::collect(&files, &opts, &ModelRef::default())
        .unwrap()
        .0
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn ethernet_captures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["arkime__v6-http.pcap", "ndpi__iphone.pcap"]
        .iter()
        .map(|n| common::testdata().join("pcap").join(n))
        .collect();
    if let Some(c) = common::corpus() {
        let cls = c.join("classify/dev/ndpi/pcap");
        v.extend(
            common::captures(&cls)
                .into_iter()
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(".pcap"))
                })
                .take(16),
        );
    }
    v
}

#[test]
fn payload_fields_match_an_independent_decoder_on_real_captures() {
    let mut compared = 0;
    for path in ethernet_captures() {
        let Ok(f) = CaptureFile::open(&path) else {
            continue;
        };
        // The oracle reads whole Ethernet captures only.
        let mut r = f.reader();
        let mut refs = Vec::new();
        r.next_batch(&mut refs, 1 << 20);
        if refs
            .iter()
            .any(|p| p.link != LinkType::Ethernet || p.caplen != p.orig_len)
        {
            continue;
        }
        let want = oracle(&path);
        let one = run(&path, 1);
        assert_eq!(one, run(&path, 2), "{}: 1 vs 2 shards", path.display());
        // Flows whose 5-tuple has one record (not split by a timeout).
        let mut per_tuple: HashMap<(u8, End, End), usize> = HashMap::new();
        for f in &one {
            let k = &f.record.key;
            *per_tuple
                .entry((k.proto, (k.src, k.sport), (k.dst, k.dport)))
                .or_default() += 1;
        }
        for f in &one {
            let k = &f.record.key;
            if !matches!(k.proto, 6 | 17) || k.tunnel as u8 != 0 {
                continue;
            }
            let c2s = (k.proto, (k.src, k.sport), (k.dst, k.dport));
            let s2c = (k.proto, (k.dst, k.dport), (k.src, k.sport));
            if per_tuple[&c2s] != 1 || per_tuple.contains_key(&s2c) {
                continue;
            }
            let none = Seen::default();
            let (fwd, bwd) = (
                want.get(&c2s).unwrap_or(&none),
                want.get(&s2c).unwrap_or(&none),
            );
            let text = |s: &Seen| match &s.first {
                Some(b) => OwnedValue::Text(hex(b)),
                None => OwnedValue::Null,
            };
            let expect = vec![
                OwnedValue::U64(fwd.packets),
                OwnedValue::U64(bwd.packets),
                OwnedValue::U64(fwd.bytes),
                OwnedValue::U64(bwd.bytes),
                text(fwd),
                text(bwd),
            ];
            assert_eq!(f.analyzed, expect, "{}: {:?}", path.display(), f.record.key);
            compared += 1;
        }
    }
    assert!(compared > 50, "only {compared} flows compared");
}

#[test]
fn analyzer_fields_follow_the_record_in_csv_and_json_lines() {
    let path = common::testdata().join("pcap/arkime__v6-http.pcap");
    let flows = run(&path, 1);
    let n = 4;
    let analyzed = earlybird::analyze::fields_of(&["payload".to_string()]);
    let opts = ExportOptions {
        early_packets: n,
        analyzed: analyzed.clone().into(),
        ..Default::default()
    };
    let mut batch = RecordBatch::with_capacity(flows.len(), n);
    let mut rows = earlybird::Rows::default();
    for f in &flows {
        batch.push(f.record, &f.early);
        rows.push_row(analyzed.len(), |c| {
            for v in &f.analyzed {
                match v {
                    OwnedValue::U64(x) => c.u64(*x),
                    OwnedValue::Text(t) => c.text(t),
                    _ => c.null(),
                }
            }
        });
    }
    batch.analyzed = rows;
    let csv_out = common::Shared::default();
    let json_out = common::Shared::default();
    for (fmt, w) in [(Format::Csv, &csv_out), (Format::JsonLines, &json_out)] {
        let mut ex = to_writer(fmt, Box::new(w.clone()), "test", &opts);
        ex.write_batch(&batch).unwrap();
        ex.finish().unwrap();
    }
    let csv_text = String::from_utf8(csv_out.0.lock().unwrap().clone()).unwrap();
    let mut rd = csv::Reader::from_reader(csv_text.as_bytes());
    let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    let own = fields::column_count(n);
    assert_eq!(header[..own], fields::csv_columns(n)[..]);
    let names: Vec<&str> = analyzed.iter().map(|f| f.name).collect();
    assert_eq!(header[own..], names[..]);
    let json_text = String::from_utf8(json_out.0.lock().unwrap().clone()).unwrap();
    let mut with_payload = 0;
    for ((row, line), f) in rd.records().zip(json_text.lines()).zip(&flows) {
        let row = row.unwrap();
        let obj: serde_json::Value = serde_json::from_str(line).unwrap();
        for (j, name) in names.iter().enumerate() {
            let (cell, js) = (&row[own + j], &obj[*name]);
            match &f.analyzed[j] {
                OwnedValue::U64(x) => {
                    assert_eq!(cell, x.to_string());
                    assert_eq!(js.as_u64(), Some(*x));
                }
                OwnedValue::Text(t) => {
                    assert_eq!(cell, t);
                    assert_eq!(js.as_str(), Some(t.as_str()));
                    with_payload += 1;
                }
                _ => {
                    assert_eq!(cell, "");
                    assert!(js.is_null());
                }
            }
        }
        // The record's own keys are all there beside them.
        let keys: Vec<&String> = obj.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), fields::FIELDS.len() + 3 + names.len());
    }
    assert!(with_payload > 0);
}
