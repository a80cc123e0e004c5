//! The `-w` writer a shard holds: every packet read, in input order, to a
//! pcap file; with `--mark` (single-shard runs), packets of a flow after its
//! verdict carry the DSCP of its class.
//!
//! Contract: [`Marker::open`] creates the file for the run's first capture
//! (its link type) and resolves the DSCP map against the model's classes
//! (errors name the file or the class). Per batch the shard calls
//! [`Marker::note`] for each packet whose flow has a verdict to mark, then
//! [`Marker::write_batch`] once, which writes every packet of the batch in
//! input order with the marks noted and forgets them. The first write
//! error stops writing (kept in [`Marker::error`]); flows go on. The
//! marker is one of the shard's packet taps (`shard/taps.rs`).

use std::path::Path;

use super::{DscpMap, MarkWriter};
use crate::classify::Verdict;
use crate::decode::LinkType;
use crate::source::{CaptureFile, PacketRef};

/// The writer of `-w` (see the module docs).
pub struct Marker {
    /// The output file.
    pub writer: MarkWriter,
    /// DSCP per class index (None = unchanged).
    pub by_class: Vec<Option<u8>>,
    /// DSCP of flows whose verdict is "unknown".
    pub unknown: Option<u8>,
    /// The first write error; writing stops there, flows go on.
    pub error: Option<crate::error::Error>,
    /// Whether packets are marked (else they are copied as read).
    marking: bool,
    /// Per packet of the batch: (IP header offset, IP version, DSCP).
    marks: Vec<Option<(usize, u8, u8)>>,
}

impl Marker {
    /// A marker writing through `writer` with the resolved DSCP table.
    pub fn new(writer: MarkWriter, by_class: Vec<Option<u8>>, unknown: Option<u8>) -> Marker {
        Marker {
            writer,
            by_class,
            unknown,
            error: None,
            marking: true,
            marks: Vec::new(),
        }
    }

    /// A writer of every packet as read, marking none (`-w` alone; any
    /// shard count: the shard that reads every batch writes it).
    pub fn copy(writer: MarkWriter) -> Marker {
        Marker {
            marking: false,
            ..Marker::new(writer, Vec::new(), None)
        }
    }

    /// The writer of `out` for a run whose first capture is `first`:
    /// marking per the DSCP map file `map` (class names of `classes`), or
    /// copying when there is none.
    pub fn open(
        first: &CaptureFile,
        map: Option<&Path>,
        out: &Path,
        classes: &[String],
    ) -> crate::Result<Marker> {
        let map = match map {
            Some(m) => {
                let map = DscpMap::load(m)?;
                Some((map.resolve(classes)?, map.unknown()))
            }
            None => None,
        };
        let mut refs = Vec::new();
        let link = match first.reader().next_batch(&mut refs, 1) {
            0 => LinkType::Ethernet,
            _ => refs[0].link,
        };
        let linktype = super::pcap_out::input_linktype(first, link);
        let writer = MarkWriter::create(out, linktype)?;
        Ok(match map {
            Some((by_class, unknown)) => Marker::new(writer, by_class, unknown),
            None => Marker::copy(writer),
        })
    }

    /// Whether packets are DSCP-marked.
    #[inline]
    pub fn marking(&self) -> bool {
        self.marking
    }

    /// Packet `idx` of a batch of `len` belongs to a flow whose verdict is
    /// `class`: it is written with that class's DSCP (if the map gives one)
    /// in the IP header at `ip_offset` (IPv6 when `v6`).
    #[inline]
    pub fn note(&mut self, idx: u16, len: usize, class: u16, ip_offset: u16, v6: bool) {
        let dscp = if class == Verdict::UNKNOWN {
            self.unknown
        } else {
            self.by_class.get(class as usize).copied().flatten()
        };
        if self.marks.len() < len {
            self.marks.resize(len, None);
        }
        if let Some(m) = self.marks.get_mut(idx as usize) {
            *m = dscp.map(|d| (ip_offset as usize, if v6 { 6 } else { 4 }, d));
        }
    }

    /// Writes every packet of the batch `refs` (bytes in `data`) in order,
    /// with the marks noted for it, and forgets the marks.
    pub fn write_batch(&mut self, data: &[u8], refs: &[PacketRef]) {
        if self.error.is_none() {
            for (i, r) in refs.iter().enumerate() {
                let bytes = data
                    .get(r.offset..r.offset + r.caplen as usize)
                    .unwrap_or(&[]);
                let mark = self.marks.get(i).copied().flatten();
                if let Err(e) = self.writer.write(r.link, r.ts, r.orig_len, bytes, mark) {
                    self.error = Some(e);
                    break;
                }
            }
        }
        self.marks.clear();
    }
}
