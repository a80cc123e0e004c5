//! Labelled training data: ground-truth labels per flow, and the samples
//! built from flow records with them.
//!
//! Contract:
//! - [`LabelSet::load`] reads a CSV in the format of the corpus
//!   `classify/*/ndpi_truth.csv` (header with at least `pcap,proto,src,sport,
//!   dst,dport` and the label column of the chosen [`LabelLevel`]). A missing
//!   file is [`Error::Io`], a missing column [`Error::Config`] naming the file; a row that cannot be parsed (bad address,
//!   port or protocol) is skipped and counted in [`LabelSet::skipped_rows`].
//!   Rows labelled `Unknown` (or empty) are skipped unless asked otherwise.
//! - [`LabelSet::lookup`] matches a flow in either direction and never
//!   allocates.
//! - [`Dataset::add`] and [`Dataset::add_batch`] turn finished flow records
//!   into [`Sample`]s (the [`Dataset`] type itself, with its split and
//!   filters, is in [`crate::classify::dataset`], beside the models fitted on
//!   it; these two methods live here because they read flow records, which
//!   sit above `classify`). Runs offline; allocates freely.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use crate::classify::dataset::{Dataset, LabelLevel, Sample};
use crate::decode::map_v4;
use crate::error::{Error, Result};
use crate::features::early::EarlyPkt;
use crate::flow::record::{FlowRecord, RecordBatch};

/// Which ground-truth rows to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LabelOptions {
    /// Keep rows labelled `Unknown` as a class of their own.
    pub keep_unknown: bool,
    /// Keep only rows whose `confidence` column starts with `DPI` (payload
    /// match), dropping nDPI's port and IP guesses. Ignored when the file has
    /// no `confidence` column.
    pub dpi_only: bool,
}

/// Endpoint pair in canonical order (smaller (addr, port) first).
type TupleKey = (u8, [u8; 16], u16, [u8; 16], u16);

fn canon(proto: u8, a: [u8; 16], ap: u16, b: [u8; 16], bp: u16) -> TupleKey {
    if (a, ap) <= (b, bp) {
        (proto, a, ap, b, bp)
    } else {
        (proto, b, bp, a, ap)
    }
}

/// Ground-truth labels of flows, by capture file and 5-tuple.
#[derive(Debug, Clone, Default)]
pub struct LabelSet {
    labels: Vec<String>,
    by_pcap: HashMap<String, HashMap<TupleKey, u32>>,
    /// Rows that could not be parsed (bad address, port or protocol).
    pub skipped_rows: usize,
    /// Rows skipped because their label was `Unknown` or empty.
    pub unknown_rows: usize,
    /// Rows dropped by [`LabelOptions::dpi_only`].
    pub guessed_rows: usize,
    /// Rows whose 5-tuple was already labelled in the same capture (first kept).
    pub duplicate_rows: usize,
    /// The files the labels were read from ([`LabelSet::load_with`]), in
    /// merge order.
    pub files: Vec<std::path::PathBuf>,
}

/// Protocol number from the CSV's `proto` column (name or number).
fn proto_number(s: &str) -> Option<u8> {
    match s.to_ascii_uppercase().as_str() {
        "TCP" => Some(6),
        "UDP" => Some(17),
        "ICMP" => Some(1),
        "ICMPV6" => Some(58),
        "IGMP" => Some(2),
        "SCTP" => Some(132),
        "ESP" => Some(50),
        "OSPF" => Some(89),
        "PGM" => Some(113),
        "GRE" => Some(47),
        other => other.parse().ok(),
    }
}

fn parse_addr(s: &str) -> Option<[u8; 16]> {
    match s.trim().parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => Some(map_v4(a.octets())),
        IpAddr::V6(a) => Some(a.octets()),
    }
}

/// Splits one CSV line into fields (RFC 4180 quoting, no embedded newlines).
pub(crate) fn split_csv(line: &str, out: &mut Vec<String>) {
    out.clear();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
}

fn file_name(p: &str) -> &str {
    p.rsplit(['/', '\\']).next().unwrap_or(p)
}

/// A ground-truth CSV that cannot be read (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelFileError {
    /// No header line.
    #[error("empty file")]
    Empty,
    /// The header lacks a column.
    #[error("missing column {name:?}")]
    Column {
        /// The column.
        name: String,
    },
}

impl LabelSet {
    /// Reads a ground-truth CSV; `Unknown` rows are skipped.
    pub fn load(path: impl AsRef<Path>, level: LabelLevel) -> Result<LabelSet> {
        Self::load_with(path, level, &LabelOptions::default())
    }

    /// Reads a ground-truth CSV keeping the rows `opt` selects.
    pub fn load_with(
        path: impl AsRef<Path>,
        level: LabelLevel,
        opt: &LabelOptions,
    ) -> Result<LabelSet> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut set = Self::parse(&text, level, opt).map_err(|e| {
            let line = matches!(e, LabelFileError::Column { .. }).then_some(1);
            Error::file(path, line, e)
        })?;
        set.files.push(path.to_path_buf());
        Ok(set)
    }

    /// Parses CSV text (see [`LabelSet::load`]).
    pub fn parse(
        text: &str,
        level: LabelLevel,
        opt: &LabelOptions,
    ) -> std::result::Result<LabelSet, LabelFileError> {
        let mut lines = text.lines();
        let header = lines.next().ok_or(LabelFileError::Empty)?;
        let mut fields = Vec::new();
        split_csv(header.trim_end_matches('\r'), &mut fields);
        let col = |name: &str| {
            fields
                .iter()
                .position(|f| f.trim() == name)
                .ok_or_else(|| LabelFileError::Column {
                    name: name.to_string(),
                })
        };
        let c_pcap = col("pcap")?;
        let c_proto = col("proto")?;
        let c_src = col("src")?;
        let c_sport = col("sport")?;
        let c_dst = col("dst")?;
        let c_dport = col("dport")?;
        let c_label = col(level.column())?;
        let c_conf = fields.iter().position(|f| f.trim() == "confidence");
        let need = [c_pcap, c_proto, c_src, c_sport, c_dst, c_dport, c_label]
            .into_iter()
            .max()
            .unwrap_or(0);
        let mut set = LabelSet::default();
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut row = Vec::new();
        for line in lines {
            let line = line.trim_end_matches('\r');
            if line.is_empty() {
                continue;
            }
            split_csv(line, &mut row);
            if row.len() <= need {
                set.skipped_rows += 1;
                continue;
            }
            let label = row[c_label].trim();
            if !opt.keep_unknown && (label.is_empty() || label == "Unknown") {
                set.unknown_rows += 1;
                continue;
            }
            if let (true, Some(c)) = (opt.dpi_only, c_conf) {
                if !row.get(c).is_some_and(|v| v.trim().starts_with("DPI")) {
                    set.guessed_rows += 1;
                    continue;
                }
            }
            let parsed = (|| {
                let proto = proto_number(row[c_proto].trim())?;
                let src = parse_addr(&row[c_src])?;
                let dst = parse_addr(&row[c_dst])?;
                let sport = port(&row[c_sport])?;
                let dport = port(&row[c_dport])?;
                Some(canon(proto, src, sport, dst, dport))
            })();
            let Some(key) = parsed else {
                set.skipped_rows += 1;
                continue;
            };
            let next = set.labels.len() as u32;
            let id = *ids.entry(label.to_string()).or_insert_with(|| {
                set.labels.push(label.to_string());
                next
            });
            let per = set
                .by_pcap
                .entry(file_name(row[c_pcap].trim()).to_string())
                .or_default();
            match per.entry(key) {
                std::collections::hash_map::Entry::Occupied(_) => set.duplicate_rows += 1,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(id);
                }
            }
        }
        Ok(set)
    }

    /// Label of a flow, matching either direction. `pcap` may be a path; only
    /// its file name is compared.
    pub fn lookup(
        &self,
        pcap: &str,
        proto: u8,
        src: &[u8; 16],
        sport: u16,
        dst: &[u8; 16],
        dport: u16,
    ) -> Option<&str> {
        let per = self.by_pcap.get(file_name(pcap))?;
        let id = per.get(&canon(proto, *src, sport, *dst, dport))?;
        Some(self.labels[*id as usize].as_str())
    }

    /// Adds the labels of `other`; a (capture, 5-tuple) both sets label
    /// keeps this set's label and is counted in `duplicate_rows`.
    pub fn merge(&mut self, other: LabelSet) {
        let mut ids: HashMap<String, u32> = self
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.clone(), i as u32))
            .collect();
        let remap: Vec<u32> = other
            .labels
            .iter()
            .map(|l| {
                let next = self.labels.len() as u32;
                *ids.entry(l.clone()).or_insert_with(|| {
                    self.labels.push(l.clone());
                    next
                })
            })
            .collect();
        for (pcap, flows) in other.by_pcap {
            let per = self.by_pcap.entry(pcap).or_default();
            for (key, id) in flows {
                match per.entry(key) {
                    std::collections::hash_map::Entry::Occupied(_) => self.duplicate_rows += 1,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(remap[id as usize]);
                    }
                }
            }
        }
        self.skipped_rows += other.skipped_rows;
        self.unknown_rows += other.unknown_rows;
        self.guessed_rows += other.guessed_rows;
        self.duplicate_rows += other.duplicate_rows;
        self.files.extend(other.files);
    }

    /// Number of labelled flows.
    pub fn len(&self) -> usize {
        self.by_pcap.values().map(|m| m.len()).sum()
    }

    /// True when no flow is labelled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Capture file names that have labels.
    pub fn pcaps(&self) -> impl Iterator<Item = &str> {
        self.by_pcap.keys().map(|s| s.as_str())
    }
}

fn port(s: &str) -> Option<u16> {
    let s = s.trim();
    if s.is_empty() {
        // ICMP and other port-less protocols have empty port columns.
        return Some(0);
    }
    s.parse().ok()
}

impl Dataset {
    /// Adds one flow with its early packets and label.
    pub fn add(&mut self, group: &str, rec: &FlowRecord, early: &[EarlyPkt], label: &str) {
        let label = self.class_id(label);
        self.samples.push(Sample {
            early: early.to_vec(),
            proto: rec.key.proto,
            sport: rec.key.sport,
            dport: rec.key.dport,
            label,
            group: group.to_string(),
        });
    }

    /// Adds every flow of a batch that `labels` knows (looked up by the
    /// capture file name `pcap`, used as the group). Returns
    /// `(labelled, unlabelled)` counts.
    pub fn add_batch(
        &mut self,
        pcap: &str,
        batch: &RecordBatch,
        labels: &LabelSet,
    ) -> (usize, usize) {
        let (mut hit, mut miss) = (0, 0);
        let group = file_name(pcap);
        for (rec, early) in batch.iter() {
            let k = &rec.key;
            match labels.lookup(group, k.proto, &k.src, k.sport, &k.dst, k.dport) {
                Some(label) => {
                    self.add(group, rec, early, label);
                    hit += 1;
                }
                None => miss += 1,
            }
        }
        (hit, miss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "pcap,proto,src,sport,dst,dport,app_label,master_proto,category\n\
        a.pcap,TCP,192.168.1.13,55523,178.62.197.130,443,TLS.ntop,TLS,Network\n\
        a.pcap,UDP,10.0.0.1,5353,224.0.0.251,5353,MDNS,MDNS,Network\n\
        a.pcap,UDP,10.0.0.2,1000,10.0.0.3,53,Unknown,Unknown,Unspecified\n\
        b.pcap,TCP,2001:db8::1,40000,2001:db8::2,80,\"HTTP.Foo, Inc\",HTTP,Web\n\
        b.pcap,TCP,not-an-ip,1,10.0.0.1,2,X,X,X\n";

    fn v4(a: [u8; 4]) -> [u8; 16] {
        map_v4(a)
    }

    #[test]
    fn lookup_matches_both_directions() {
        let set = LabelSet::parse(CSV, LabelLevel::App, &LabelOptions::default()).unwrap();
        let c = v4([192, 168, 1, 13]);
        let s = v4([178, 62, 197, 130]);
        assert_eq!(
            set.lookup("a.pcap", 6, &c, 55523, &s, 443),
            Some("TLS.ntop")
        );
        assert_eq!(
            set.lookup("/x/y/a.pcap", 6, &s, 443, &c, 55523),
            Some("TLS.ntop")
        );
        assert_eq!(set.lookup("a.pcap", 17, &c, 55523, &s, 443), None);
        assert_eq!(set.lookup("b.pcap", 6, &c, 55523, &s, 443), None);
        assert_eq!(set.lookup("a.pcap", 6, &c, 55524, &s, 443), None);
        assert_eq!(set.unknown_rows, 1);
        assert_eq!(set.skipped_rows, 1);
        assert_eq!(set.len(), 3);
        let a: [u8; 16] = "2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let b: [u8; 16] = "2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        assert_eq!(
            set.lookup("b.pcap", 6, &b, 80, &a, 40000),
            Some("HTTP.Foo, Inc")
        );
    }

    #[test]
    fn merge_unions_and_keeps_first_label() {
        let mut a = LabelSet::parse(CSV, LabelLevel::App, &LabelOptions::default()).unwrap();
        let b = LabelSet::parse(
            "pcap,proto,src,sport,dst,dport,app_label\n\
             a.pcap,TCP,178.62.197.130,443,192.168.1.13,55523,Other\n\
             c.pcap,UDP,10.0.0.1,1,10.0.0.2,2,MDNS\n",
            LabelLevel::App,
            &LabelOptions::default(),
        )
        .unwrap();
        let n = a.len();
        a.merge(b);
        assert_eq!((a.len(), a.duplicate_rows), (n + 1, 1));
        let c = v4([192, 168, 1, 13]);
        let s = v4([178, 62, 197, 130]);
        assert_eq!(a.lookup("a.pcap", 6, &c, 55523, &s, 443), Some("TLS.ntop"));
        let (x, y) = (v4([10, 0, 0, 1]), v4([10, 0, 0, 2]));
        assert_eq!(a.lookup("c.pcap", 17, &x, 1, &y, 2), Some("MDNS"));
        assert_eq!(a.skipped_rows, 1);
    }

    #[test]
    fn levels_pick_their_column() {
        let set = LabelSet::parse(CSV, LabelLevel::Category, &LabelOptions::default()).unwrap();
        let c = v4([192, 168, 1, 13]);
        let s = v4([178, 62, 197, 130]);
        assert_eq!(set.lookup("a.pcap", 6, &c, 55523, &s, 443), Some("Network"));
        let set = LabelSet::parse(
            CSV,
            LabelLevel::Proto,
            &LabelOptions {
                keep_unknown: true,
                dpi_only: false,
            },
        )
        .unwrap();
        let u1 = v4([10, 0, 0, 2]);
        let u2 = v4([10, 0, 0, 3]);
        assert_eq!(
            set.lookup("a.pcap", 17, &u1, 1000, &u2, 53),
            Some("Unknown")
        );
    }

    #[test]
    fn dpi_only_drops_guesses() {
        let csv = "pcap,proto,src,sport,dst,dport,app_label,confidence\n\
            a.pcap,TCP,10.0.0.1,1,10.0.0.2,443,TLS,DPI\n\
            a.pcap,TCP,10.0.0.1,2,10.0.0.2,443,TLS,Match by port\n\
            a.pcap,TCP,10.0.0.1,3,10.0.0.2,443,TLS,DPI (partial)\n";
        let opt = LabelOptions {
            keep_unknown: false,
            dpi_only: true,
        };
        let set = LabelSet::parse(csv, LabelLevel::App, &opt).unwrap();
        assert_eq!((set.len(), set.guessed_rows), (2, 1));
        let set = LabelSet::parse(csv, LabelLevel::App, &LabelOptions::default()).unwrap();
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn batch_flows_are_labelled_by_tuple() {
        let set = LabelSet::parse(CSV, LabelLevel::Proto, &LabelOptions::default()).unwrap();
        let mut batch = RecordBatch::with_capacity(2, 4);
        let mut rec = FlowRecord::default();
        // Reported from the server side: still found.
        rec.key.proto = 6;
        rec.key.src = v4([178, 62, 197, 130]);
        rec.key.sport = 443;
        rec.key.dst = v4([192, 168, 1, 13]);
        rec.key.dport = 55523;
        let pkt = EarlyPkt {
            size: 60,
            ..EarlyPkt::default()
        };
        batch.push(rec, &[pkt; 6]);
        rec.key.sport = 444;
        batch.push(rec, &[pkt]);
        let mut d = Dataset::default();
        assert_eq!(d.add_batch("/data/a.pcap", &batch, &set), (1, 1));
        assert_eq!(d.classes, vec!["TLS".to_string()]);
        assert_eq!(d.samples[0].early.len(), 4);
        assert_eq!(d.samples[0].group, "a.pcap");
        assert_eq!(d.samples[0].dport, 55523);
    }

    #[test]
    fn reads_the_corpus_truth_file() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/corpus/classify/dev/ndpi_truth.csv");
        if !path.exists() {
            eprintln!("skipping: corpus not found at {}", path.display());
            return;
        }
        let set = LabelSet::load(&path, LabelLevel::App).unwrap();
        // 4522 rows of which 1864 are Unknown (see the corpus MANIFEST).
        assert_eq!(
            set.len() + set.duplicate_rows + set.skipped_rows,
            4522 - 1864
        );
        // stun.pcap has the address "2600:1900:4160:5999::19::", which is not
        // an IPv6 address; mongodb.pcap lists two 5-tuples twice.
        assert_eq!((set.skipped_rows, set.duplicate_rows), (1, 2));
        let c = v4([192, 168, 1, 13]);
        let s = v4([178, 62, 197, 130]);
        assert_eq!(
            set.lookup("443-curl.pcap", 6, &s, 443, &c, 55523),
            Some("TLS.ntop")
        );
        let set = LabelSet::load(&path, LabelLevel::Category).unwrap();
        assert_eq!(
            set.lookup("443-curl.pcap", 6, &c, 55523, &s, 443),
            Some("Network")
        );
    }

    #[test]
    fn missing_column_is_an_error() {
        let e = LabelSet::parse(
            "pcap,proto,src\n",
            LabelLevel::App,
            &LabelOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            LabelFileError::Column {
                name: "sport".into()
            }
        );
        assert!(e.to_string().contains("sport"), "{e}");
        let e = LabelSet::load("/nonexistent/truth.csv", LabelLevel::App).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/truth.csv"));
    }
}
