//! Packet taps beside the flow table: the rotating packet dumper
//! (`--dump-dir`) and the bounded packet ring kept for forensic pcaps.
//!
//! Contract:
//! - A shard holds its [`Taps`] as one of its packet taps
//!   (`shard/taps.rs`, `PacketTap`; `None`: off).
//!   With taps on, the shard hands them the packets of the batch it runs,
//!   bytes borrowed from the batch (no copy before the write itself):
//!   - one shard ([`Taps::whole_batch`] after the batch, in input order):
//!     every packet of the batch, flow or not, to the ring and to an
//!     unfiltered dumper; a filtered dumper gets the packets of matching
//!     flows one by one as the flow table runs them ([`Taps::flow_packet`]);
//!   - several shards: each shard hands its taps the packets of its own
//!     flows as it runs its shard batches ([`Taps::flow_packet`]), and the shard
//!     that read a batch hands its taps the packets that belong to no flow
//!     ([`Taps::no_flow_packet`]); every packet thus reaches exactly one shard's
//!     taps, and each shard writes its own files (no lock).
//! - [`DumpFilter`]: with no filter every packet is dumped. With
//!   `--dump-port` a packet is dumped when its flow has one of the ports
//!   (either side); with `--dump-app` when its flow's verdict is one of the
//!   classes. The packets a flow had before its verdict are held in a
//!   bounded store ([`held`], [`Taps::flow_packet_held`]) and written when
//!   the verdict (at a later packet, or at the flow's end) matches, so the
//!   dump has the whole flow; without that store (`hold_bytes` 0) only the
//!   packets after the packet the verdict was taken at are dumped.
//!   `unknown` names flows the classifier decided it could not label;
//!   flows that end undecided match no class. Both given: a packet must
//!   match both.
//! - One shard with an unfiltered dumper: the dumper runs on a thread of
//!   its own ([`Taps::thread`], [`thread`]), which takes each batch after
//!   the shard ran it; records of a classic pcap input file go by their
//!   place in the file (the shard copies nothing): copied file to file in
//!   the kernel (nanosecond stamps) or read in runs with each stamp's
//!   fraction rewritten (microsecond stamps).
//! - Writing, rotation, file names and failures: [`dumper`]. The ring:
//!   [`ring`].

mod copy;
mod direct;
pub mod dumper;
pub mod forensic;
pub mod held;
pub mod ring;
pub mod thread;

pub use dumper::{DumpCounters, Dumper};
pub use forensic::{ForensicConfig, Forensics};
pub use held::{Held, HeldCounters};
pub use ring::PacketRing;
pub use thread::DumpThread;

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::flow::held::HeldEnd;
use crate::flow::key::TableKey;
use crate::flow::packet::{Pkt, V6Icmp};
use crate::flow::table::FlowTable;
use crate::source::PacketRef;

/// The name records give flows without a class (as `--mark` maps do).
const UNKNOWN: &str = "unknown";

/// The file format of the dumper (`--dump-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DumpFormat {
    /// Classic pcap, nanosecond stamps; one link type per file.
    #[default]
    Pcap,
    /// pcapng: one interface per link type, nanosecond stamps.
    Pcapng,
}

impl DumpFormat {
    /// The file name extension: `pcap` or `pcapng`.
    pub fn extension(self) -> &'static str {
        match self {
            DumpFormat::Pcap => "pcap",
            DumpFormat::Pcapng => "pcapng",
        }
    }

    /// The format named `pcap` or `pcapng`; an error names the others.
    pub fn parse(s: &str) -> std::result::Result<DumpFormat, FormatError> {
        match s {
            "pcap" => Ok(DumpFormat::Pcap),
            "pcapng" => Ok(DumpFormat::Pcapng),
            _ => Err(FormatError {
                given: s.to_string(),
            }),
        }
    }
}

/// A dump format name that is neither `pcap` nor `pcapng`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dump format {given:?}: pcap or pcapng")]
pub struct FormatError {
    /// The name given.
    pub given: String,
}

/// What `--dump-*` asks for (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpConfig {
    /// Directory the files are written to (created if missing).
    pub dir: PathBuf,
    /// The files' format.
    pub format: DumpFormat,
    /// Start a new file before one would grow past this many bytes
    /// (`None`: no size limit).
    pub max_bytes: Option<u64>,
    /// Start a new file at each multiple of this many nanoseconds of
    /// packet time (`None`: no time limit).
    pub period: Option<u64>,
    /// Dump only the packets of flows with one of these ports (either
    /// side); empty: any port.
    pub ports: Vec<u16>,
    /// Dump only the packets of flows whose verdict is one of these class
    /// names (`unknown` allowed); empty: any flow.
    pub apps: Vec<String>,
    /// With `apps`: bytes (all shards together) of packets held while
    /// their flow has no verdict yet, written once it matches (`held`);
    /// 0: none held, only the packets from the verdict's on are dumped.
    pub hold_bytes: u64,
    /// Write the classic pcap files past the page cache (`O_DIRECT`,
    /// `--dump-direct`; see `check_direct`).
    pub direct: bool,
}

/// Whether `cfg`'s files can be written past the page cache, when it asks
/// for that: classic pcap, and a directory (existing) whose file system
/// takes `O_DIRECT` writes; the error names the directory.
pub(crate) fn check_direct(cfg: &DumpConfig) -> Result<()> {
    if !cfg.direct {
        return Ok(());
    }
    if cfg.format != DumpFormat::Pcap {
        return Err(Error::Config(
            "--dump-direct writes classic pcap files: it cannot go with --dump-format pcapng"
                .into(),
        ));
    }
    direct::probe(&cfg.dir).map_err(|e| Error::Output {
        name: format!("dump directory {}", cfg.dir.display()),
        reason: format!("its file system does not take direct (O_DIRECT) writes: {e}"),
    })
}

/// Which flows' packets a dumper writes, resolved against the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpFilter {
    /// Ports, either side (empty: any).
    ports: Vec<u16>,
    /// Classes by index (empty vector and `!unknown`: any flow).
    classes: Vec<bool>,
    /// `unknown` was named.
    unknown: bool,
    /// An application filter is on.
    by_app: bool,
}

impl DumpFilter {
    /// The filter of `cfg` for a model whose classes are `class_names`;
    /// fails naming a class the model does not have (and listing those
    /// it has).
    pub fn resolve(cfg: &DumpConfig, class_names: &[String]) -> Result<DumpFilter> {
        let mut f = DumpFilter {
            ports: cfg.ports.clone(),
            classes: vec![false; class_names.len()],
            unknown: false,
            by_app: !cfg.apps.is_empty(),
        };
        for name in &cfg.apps {
            if name == UNKNOWN {
                f.unknown = true;
                continue;
            }
            match class_names.iter().position(|c| c == name) {
                Some(i) => f.classes[i] = true,
                None if class_names.is_empty() => {
                    return Err(Error::Config(format!(
                        "--dump-app {name}: the run has no model, so no flow gets a verdict"
                    )))
                }
                None => {
                    return Err(Error::Config(format!(
                        "--dump-app {name}: not a class of the model; available classes: {}, \
                         unknown",
                        class_names.join(", ")
                    )))
                }
            }
        }
        Ok(f)
    }

    /// Whether every packet is dumped.
    pub fn is_all(&self) -> bool {
        self.ports.is_empty() && !self.by_app
    }

    /// Whether a packet of the flow keyed `key` is dumped; `class` gives
    /// the flow's verdict once the packet comes after it (asked only when
    /// an application filter is on).
    #[inline]
    pub fn matches(&self, key: &TableKey, class: impl FnOnce() -> Option<u16>) -> bool {
        if !self.ports_match(key) {
            return false;
        }
        !self.by_app || class().is_some_and(|c| self.class_matches(c))
    }

    /// Whether the flow keyed `key` passes the port filter (any flow
    /// without one).
    #[inline]
    pub fn ports_match(&self, key: &TableKey) -> bool {
        self.ports.is_empty() || self.ports.iter().any(|&p| p == key.pa || p == key.pb)
    }

    /// Whether verdict `c` passes the application filter (any verdict
    /// without one).
    #[inline]
    pub fn class_matches(&self, c: u16) -> bool {
        match c {
            _ if !self.by_app => true,
            crate::classify::Verdict::UNKNOWN => self.unknown,
            c => self.classes.get(c as usize).copied().unwrap_or(false),
        }
    }

    /// Whether an application filter is on.
    pub fn by_app(&self) -> bool {
        self.by_app
    }
}

/// A tap of another part that is shown every packet the taps are shown,
/// in the same order (the call stage's, `crate::voip::stage`, wired in by
/// the pipeline).
pub trait FrameTap: Send {
    /// One packet that belongs to no flow (bytes in `data`).
    fn frame(&mut self, data: &[u8], r: &PacketRef);
    /// One packet of a flow, as the shard decoded it (`p`: its [`Pkt`]
    /// and side; `first`: the flow's first packet); returns whether the
    /// tap wants the flow's next packets (the shard shows it none of them
    /// once it says no).
    fn flow_frame(&mut self, data: &[u8], r: &PacketRef, p: (&Pkt, &V6Icmp), first: bool) -> bool {
        let _ = (p, first);
        self.frame(data, r);
        true
    }
    /// `n` packets of flows the tap follows no more were not shown to it
    /// (counted as seen).
    fn not_shown(&mut self, n: u64) {
        let _ = n;
    }
    /// The shard has run a turn (a batch; with several shards, one turn
    /// of the exchange).
    fn turn_done(&mut self) {}
}

/// A shard's taps (see the module docs): the dumper, the ring, or both
/// (and another part's [`FrameTap`]).
pub struct Taps {
    /// The rotating dumper (`--dump-dir`) when it runs in the shard.
    pub dumper: Option<Dumper>,
    /// The rotating dumper when it runs on its own thread (one shard, no
    /// filter; [`thread`]).
    pub thread: Option<DumpThread>,
    /// The bounded ring of recent packets (for alarms).
    pub ring: Option<PacketRing>,
    /// Packets of undecided flows held for an application-filtered
    /// dumper ([`held`]).
    pub held: Option<Held>,
}

impl Taps {
    /// Whether the dumper writes only the packets of some flows.
    #[inline]
    pub fn filtering(&self) -> bool {
        self.dumper.as_ref().is_some_and(|d| !d.filter.is_all())
    }

    /// A dumper taps: in the shard, or on its thread.
    pub fn with_dumper(dumper: Dumper, shard: usize, own_thread: bool) -> Taps {
        let (dumper, thread) = match own_thread && dumper.filter.is_all() {
            true => match DumpThread::start(dumper, shard) {
                Ok(t) => (None, Some(t)),
                Err(d) => (Some(*d), None),
            },
            false => (Some(dumper), None),
        };
        Taps {
            dumper,
            thread,
            ring: None,
            held: None,
        }
    }

    /// Whether the dumper's thread would take the records of an input
    /// file by place ([`Taps::set_input`]).
    pub fn wants_input(&self) -> bool {
        self.thread.is_some()
    }

    /// The next batches come from this input (`data`, its bytes as the
    /// batches hold them); `file`: it opened again when its records are a
    /// dump file's ([`crate::source::CaptureFile`]), else `None`.
    pub(crate) fn set_input(
        &mut self,
        data: &[u8],
        file: Option<crate::source::file::RecordsFile>,
    ) {
        if let Some(t) = self.thread.as_mut() {
            t.set_input(data, file);
        }
    }

    /// Ends the dumper (its thread's jobs done, its file closed): its
    /// counters and its first error; `None` without a dumper.
    pub fn finish_dumper(&mut self) -> Option<(DumpCounters, Option<String>)> {
        if let Some(mut t) = self.thread.take() {
            return Some(match t.finish() {
                Ok(mut d) => (d.finish(), d.error.take()),
                Err(e) => (
                    DumpCounters::default(),
                    Some(format!("{e}; its files may be cut short")),
                ),
            });
        }
        let held = self.held.as_ref().map(|h| h.counters);
        self.dumper.as_mut().map(|d| {
            let mut c = d.finish();
            if let Some(h) = held {
                c.held.merge(&h);
            }
            (c, d.error.take())
        })
    }

    /// One shard, after a batch: every packet of `refs` (bytes in `data`)
    /// to the ring and, when it has no filter, to the dumper.
    pub fn whole_batch(&mut self, data: &[u8], refs: &[PacketRef]) {
        if let Some(t) = self.thread.as_mut() {
            t.batch(data, refs);
        }
        let dump_all = !self.filtering();
        if self.ring.is_none() && !(dump_all && self.dumper.is_some()) {
            // Nothing here takes the batch's packets one by one.
            return;
        }
        for r in refs {
            let Some(bytes) = data.get(r.offset..r.offset + r.caplen as usize) else {
                continue;
            };
            if let Some(ring) = self.ring.as_mut() {
                ring.push(r.ts, bytes, r.orig_len, r.link);
            }
            if dump_all {
                if let Some(d) = self.dumper.as_mut() {
                    d.write(r.ts, r.orig_len, r.link, bytes);
                }
            }
        }
    }

    /// A packet of a flow (key `key`, verdict per `class` as in
    /// [`DumpFilter::matches`]): to a filtered dumper if it matches, and
    /// with `all` (several shards: nothing else hands it over) to the ring
    /// and to an unfiltered dumper.
    #[inline]
    pub fn flow_packet(
        &mut self,
        data: &[u8],
        r: &PacketRef,
        key: &TableKey,
        class: impl FnOnce() -> Option<u16>,
        all: bool,
    ) {
        let Some(bytes) = data.get(r.offset..r.offset + r.caplen as usize) else {
            return;
        };
        if all {
            self.ring_push(r, bytes);
        }
        if let Some(d) = self.dumper.as_mut() {
            let dump = if d.filter.is_all() {
                all
            } else {
                d.filter.matches(key, class)
            };
            if dump {
                d.write(r.ts, r.orig_len, r.link, bytes);
            }
        }
    }

    /// A packet of a flow the ring takes (several shards: none else hands
    /// it over; the frame tap has its flow packets from the shard).
    #[inline]
    fn ring_push(&mut self, r: &PacketRef, bytes: &[u8]) {
        if let Some(ring) = self.ring.as_mut() {
            ring.push(r.ts, bytes, r.orig_len, r.link);
        }
    }

    /// [`Taps::flow_packet`] when packets are held ([`held`]): the packet
    /// of the flow in `slot` of `table` goes to the ring (with `all`), and
    /// for the dumper: a flow with a verdict has its held packets written
    /// (verdict matches) or dropped (it does not), then the packet is
    /// written if the verdict matches; a flow without one has the packet
    /// held.
    #[inline(never)]
    pub fn flow_packet_held<C: crate::flow::consumer::Consumer>(
        &mut self,
        data: &[u8],
        r: &PacketRef,
        key: &TableKey,
        (table, slot): (&mut FlowTable<C>, usize),
        all: bool,
    ) {
        let Some(bytes) = data.get(r.offset..r.offset + r.caplen as usize) else {
            return;
        };
        if all {
            self.ring_push(r, bytes);
        }
        let (Some(d), Some(h)) = (self.dumper.as_mut(), self.held.as_mut()) else {
            return;
        };
        if !d.filter.ports_match(key) {
            return;
        }
        let v = table.flow_view(slot);
        match v.class {
            Some(c) => {
                let dump = d.filter.class_matches(c);
                if v.held {
                    table.set_held(slot, false);
                    match dump {
                        true => h.release(v.ident, d),
                        false => h.discard(v.ident),
                    }
                }
                if dump {
                    d.write(r.ts, r.orig_len, r.link, bytes);
                }
            }
            None => {
                if h.keep(v.ident, r.ts, r.orig_len, r.link, bytes) && !v.held {
                    table.set_held(slot, true);
                }
            }
        }
    }

    /// Flows with held packets that have ended (`ended`, drained): their
    /// packets are written when the final verdict matches, else dropped.
    #[cold]
    pub fn resolve_held(&mut self, ended: &mut Vec<HeldEnd>) {
        let (Some(d), Some(h)) = (self.dumper.as_mut(), self.held.as_mut()) else {
            ended.clear();
            return;
        };
        for e in ended.drain(..) {
            match e.class.is_some_and(|c| d.filter.class_matches(c)) {
                true => h.release(e.ident, d),
                false => h.discard(e.ident),
            }
        }
    }

    /// Several shards: a packet that belongs to no flow, read by this
    /// shard: to the ring and to an unfiltered dumper.
    #[cold]
    pub fn no_flow_packet(&mut self, data: &[u8], r: &PacketRef) {
        let Some(bytes) = data.get(r.offset..r.offset + r.caplen as usize) else {
            return;
        };
        self.ring_push(r, bytes);
        if let Some(d) = self.dumper.as_mut().filter(|d| d.filter.is_all()) {
            d.write(r.ts, r.orig_len, r.link, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pa: u16, pb: u16) -> TableKey {
        TableKey {
            a: 1,
            b: 2,
            pa,
            pb,
            proto: 6,
            kind: 0,
            vlan: 0,
            tunnel_id: 0,
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ports_match_either_side_and_apps_after_the_verdict() {
        let cfg = DumpConfig {
            ports: vec![443, 53],
            ..DumpConfig::default()
        };
        let f = DumpFilter::resolve(&cfg, &[]).unwrap();
        assert!(!f.is_all());
        assert!(f.matches(&key(443, 50000), || None));
        assert!(f.matches(&key(50000, 53), || None));
        assert!(!f.matches(&key(80, 50000), || None));

        let cfg = DumpConfig {
            apps: names(&["DNS", "unknown"]),
            ..DumpConfig::default()
        };
        let f = DumpFilter::resolve(&cfg, &names(&["HTTP", "DNS"])).unwrap();
        assert!(f.matches(&key(1, 2), || Some(1)));
        assert!(!f.matches(&key(1, 2), || Some(0)));
        assert!(f.matches(&key(1, 2), || Some(crate::classify::Verdict::UNKNOWN)));
        assert!(!f.matches(&key(1, 2), || None), "before the verdict");

        let both = DumpConfig {
            apps: names(&["DNS"]),
            ports: vec![53],
            ..DumpConfig::default()
        };
        let f = DumpFilter::resolve(&both, &names(&["HTTP", "DNS"])).unwrap();
        assert!(f.matches(&key(53, 9), || Some(1)));
        assert!(!f.matches(&key(54, 9), || Some(1)));
        assert!(!f.matches(&key(53, 9), || Some(0)));
        assert!(DumpFilter::resolve(&DumpConfig::default(), &[])
            .unwrap()
            .is_all());
    }

    #[test]
    fn unknown_class_names_are_errors_listing_the_model_classes() {
        let cfg = DumpConfig {
            apps: names(&["Zoom"]),
            ..DumpConfig::default()
        };
        let e = DumpFilter::resolve(&cfg, &names(&["HTTP", "DNS"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--dump-app Zoom") && e.contains("HTTP, DNS"),
            "{e}"
        );
        let e = DumpFilter::resolve(&cfg, &[]).unwrap_err().to_string();
        assert!(e.contains("no model"), "{e}");
    }

    /// Every packet of a capture, read back from where it went.
    fn read(path: &std::path::Path) -> Vec<(u64, u32, Vec<u8>)> {
        let file = crate::source::CaptureFile::open(path).unwrap();
        let mut r = file.reader();
        let mut batch = Vec::new();
        let mut all = Vec::new();
        while r.next_batch(&mut batch, 64) > 0 {
            for p in &batch {
                all.push((p.ts, p.orig_len, p.bytes(r.data()).to_vec()));
            }
        }
        all
    }

    fn ring_taps() -> Option<Box<Taps>> {
        Some(Box::new(Taps {
            dumper: None,
            thread: None,
            ring: Some(PacketRing::new(u64::MAX / 4, 8 << 20)),
            held: None,
        }))
    }

    #[test]
    fn the_ring_gets_every_packet_through_one_shard_or_the_shard_batches_of_two() {
        let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/pcap/ndpi__iphone.pcap");
        let want = read(&input);
        let file = crate::source::CaptureFile::open(&input).unwrap();
        let cfg = crate::config::FlowConfig::default();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("w.pcap");

        let mut one = crate::shard::Shard::new(0, 1, &cfg, None).unwrap();
        one.set_taps(ring_taps());
        let mut r = file.reader();
        let mut refs = Vec::new();
        while r.next_batch(&mut refs, 64) > 0 {
            one.batch(r.data(), &refs);
        }
        let ring = one.taps.dump.as_ref().unwrap().ring.as_ref().unwrap();
        ring.write_window(&out, 0, u64::MAX).unwrap();
        assert!(read(&out) == want, "one shard");

        let mut shards: Vec<_> = (0..2)
            .map(|id| crate::shard::Shard::new(id, 2, &cfg, None).unwrap())
            .collect();
        for s in &mut shards {
            s.set_taps(ring_taps());
        }
        let mut shard_batches: Vec<_> = (0..2)
            .map(|_| crate::shard::ShardBatch::with_capacity(64))
            .collect();
        let mut r = file.reader();
        let mut turn = 0;
        while r.next_batch(&mut refs, 64) > 0 {
            shard_batches.iter_mut().for_each(|p| p.clear());
            shards[turn % 2].split(r.data(), &refs, &mut shard_batches);
            for (s, p) in shards.iter_mut().zip(&shard_batches) {
                s.run_shard_batch(p, r.data());
            }
            turn += 1;
        }
        let mut got = Vec::new();
        for s in &shards {
            let ring = s.taps.dump.as_ref().unwrap().ring.as_ref().unwrap();
            ring.write_window(&out, 0, u64::MAX).unwrap();
            got.extend(read(&out));
        }
        got.sort();
        let mut want = want;
        want.sort();
        assert!(got == want, "two shards: {} of {}", got.len(), want.len());
    }
}
