//! `-w OUT.pcap`: every input packet, DSCP-marked (`--mark`) or as read, in
//! input order.
//!
//! Contract:
//! - Output is a classic pcap (little-endian, v2.4, nanosecond magic
//!   0xa1b23c4d, snaplen 262,144) whose link type is the LINKTYPE_* number
//!   given at creation: the input's ([`input_linktype`]). A pcapng input may
//!   mix link types; one file holds one, so packets of another link type are
//!   counted ([`MarkCounters::skipped_link`]) and not written, as are packets
//!   longer than 262,144 captured bytes (`skipped_oversize`), which libpcap
//!   readers refuse.
//! - [`MarkWriter::write`] copies the captured bytes once, into the writer's
//!   1 MiB output buffer, and rewrites the DSCP there with
//!   [`super::rewrite_dscp`]; the caller's bytes are never modified. A mark
//!   whose IP header is not fully captured leaves the packet as it was
//!   (`unmarkable`). Record headers keep the timestamp (ns) and original
//!   length given. Nothing is allocated per packet.
//! - Failures are I/O errors of the output, returned as [`Error::Output`]
//!   naming the file. Nothing panics on any packet bytes.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::dscp::rewrite_dscp;
use crate::decode::LinkType;
use crate::error::{Error, Result};
use crate::source::pcap;
use crate::source::pcap_writer::{linktype_number, PcapOut};
use crate::source::CaptureFile;
use crate::time::Nanos;

/// Snaplen written in the header and largest record written.
pub const OUT_SNAPLEN: u32 = crate::source::pcap_writer::MAX_SNAPLEN;

/// What the `-w` writer did with the packets it was given
/// ([`crate::RunOptions::write`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkCounters {
    /// Written with the requested DSCP.
    pub marked: u64,
    /// Written as read: no mark requested.
    pub unchanged: u64,
    /// Written as read: a mark was requested but the IP header is not fully
    /// captured (or does not match the version given).
    pub unmarkable: u64,
    /// Not written: link type differs from the output file's.
    pub skipped_link: u64,
    /// Not written: more than 262,144 captured bytes (the output's
    /// snapshot length).
    pub skipped_oversize: u64,
}

impl MarkCounters {
    /// Packets written to the file.
    pub fn written(&self) -> u64 {
        self.marked + self.unchanged + self.unmarkable
    }
}

/// The LINKTYPE_* number to write for `input`: the classic pcap header's
/// own number (so LOOP stays 108 and DLT_RAW aliases keep theirs), or for
/// pcapng that of `first`, the link type of the first packet.
pub fn input_linktype(input: &CaptureFile, first: LinkType) -> u32 {
    let bytes = input.bytes();
    if pcap::is_pcap(bytes) {
        if let Ok(h) = pcap::parse_header(bytes) {
            return h.linktype;
        }
    }
    linktype_number(first)
}

/// A classic pcap output receiving every packet, DSCP-marked or not.
pub struct MarkWriter<W: Write = File> {
    out: Option<PcapOut<W>>,
    name: String,
    link: LinkType,
    counters: MarkCounters,
}

impl MarkWriter<File> {
    /// Creates (truncates) the file at `path` with link type `linktype`.
    pub fn create(path: &Path, linktype: u32) -> Result<Self> {
        let name = path.display().to_string();
        let file = File::create(path).map_err(|e| Error::Output {
            name: name.clone(),
            reason: format!("cannot create: {e}"),
        })?;
        MarkWriter::new(file, &name, linktype)
    }
}

impl<W: Write> MarkWriter<W> {
    /// A writer over any sink; `name` is used in errors. Fails when
    /// `linktype` is not one earlybird reads.
    pub fn new(sink: W, name: &str, linktype: u32) -> Result<Self> {
        let fail = |reason: String| Error::Output {
            name: name.to_string(),
            reason,
        };
        let link = LinkType::from_pcap(linktype)
            .ok_or_else(|| fail(format!("unsupported link type {linktype}")))?;
        let out = PcapOut::with_linktype(sink, true, OUT_SNAPLEN, linktype)
            .map_err(|e| fail(e.to_string()))?;
        Ok(MarkWriter {
            out: Some(out),
            name: name.to_string(),
            link,
            counters: MarkCounters::default(),
        })
    }

    /// Writes one packet of link type `link` captured at `ts_ns` with
    /// original length `orig_len`. `mark` is `(ip_offset, ip_version, dscp)`
    /// of the IP header to mark (`Decoded::ip_offset`, `ip_version`), or
    /// `None` to write the packet as read.
    pub fn write(
        &mut self,
        link: LinkType,
        ts_ns: Nanos,
        orig_len: u32,
        bytes: &[u8],
        mark: Option<(usize, u8, u8)>,
    ) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Err(self.fail("write after finish".into()));
        };
        if link != self.link {
            self.counters.skipped_link += 1;
            return Ok(());
        }
        if bytes.len() > OUT_SNAPLEN as usize {
            self.counters.skipped_oversize += 1;
            return Ok(());
        }
        let mut marked = false;
        let res = out.record_with(ts_ns, orig_len, bytes.len(), |dst| {
            dst.copy_from_slice(bytes);
            if let Some((ip_offset, version, dscp)) = mark {
                marked = rewrite_dscp(dst, ip_offset, version, dscp);
            }
        });
        res.map_err(|e| self.fail(e.to_string()))?;
        match (mark, marked) {
            (None, _) => self.counters.unchanged += 1,
            (Some(_), true) => self.counters.marked += 1,
            (Some(_), false) => self.counters.unmarkable += 1,
        }
        Ok(())
    }

    /// Writes what is buffered, flushes and returns the counters (a second
    /// call only returns them).
    pub fn finish(&mut self) -> Result<MarkCounters> {
        if let Some(out) = self.out.take() {
            out.finish().map_err(|e| self.fail(e.to_string()))?;
        }
        Ok(self.counters)
    }

    fn fail(&self, reason: String) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mark::dscp::{ones_complement_sum, read_dscp};
    use crate::source::BATCH;

    /// Ethernet + IPv4 (valid checksum, ECN 2) + 8 bytes of payload.
    fn eth_v4() -> Vec<u8> {
        let mut p = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
        let mut ip = [
            0x45, 0x02, 0, 28, 0, 7, 0, 0, 64, 17, 0, 0, 10, 1, 1, 1, 10, 1, 1, 2,
        ];
        let c = ones_complement_sum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        p.extend_from_slice(&ip);
        p.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
        p
    }

    fn read_back(bytes: Vec<u8>) -> Vec<(u64, u32, LinkType, Vec<u8>)> {
        let file = CaptureFile::from_bytes("out.pcap", bytes).unwrap();
        let mut r = file.reader();
        let mut batch = Vec::new();
        let mut all = Vec::new();
        while r.next_batch(&mut batch, BATCH) > 0 {
            for p in &batch {
                all.push((p.ts, p.orig_len, p.link, p.bytes(r.data()).to_vec()));
            }
        }
        assert!(r.warning().is_none());
        all
    }

    #[test]
    fn marks_counts_and_keeps_order_and_caller_bytes() {
        let pkt = eth_v4();
        let mut w = MarkWriter::new(Vec::new(), "mem.pcap", 1).unwrap();
        let ts = 1_700_000_000_123_456_789;
        w.write(LinkType::Ethernet, ts, 60, &pkt, Some((14, 4, 46)))
            .unwrap();
        w.write(LinkType::Ethernet, ts + 1, 60, &pkt, None).unwrap();
        w.write(
            LinkType::Ethernet,
            ts + 2,
            60,
            &pkt[..20],
            Some((14, 4, 46)),
        )
        .unwrap();
        w.write(LinkType::Raw, ts + 3, 28, &pkt[14..], Some((0, 4, 46)))
            .unwrap();
        w.write(LinkType::Ethernet, ts + 4, 1 << 20, &vec![0; 300_000], None)
            .unwrap();
        assert_eq!(pkt, eth_v4(), "caller's bytes untouched");
        let counters = w.finish().unwrap();
        assert_eq!(
            counters,
            MarkCounters {
                marked: 1,
                unchanged: 1,
                unmarkable: 1,
                skipped_link: 1,
                skipped_oversize: 1
            }
        );
        assert_eq!(counters.written(), 3);
        let e = w
            .write(LinkType::Ethernet, ts, 60, &pkt, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mem.pcap") && e.contains("after finish"), "{e}");
    }

    #[test]
    fn output_reads_back_with_nanosecond_timestamps_and_input_link_type() {
        let pkt = eth_v4();
        let mut sink = Vec::new();
        {
            let mut w = MarkWriter::new(&mut sink, "mem.pcap", 1).unwrap();
            w.write(
                LinkType::Ethernet,
                5_000_000_007,
                70,
                &pkt,
                Some((14, 4, 10)),
            )
            .unwrap();
            w.write(LinkType::Ethernet, 6_000_000_009, 60, &pkt, None)
                .unwrap();
            w.finish().unwrap();
        }
        assert_eq!(&sink[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        let all = read_back(sink);
        assert_eq!(all.len(), 2);
        let (ts, orig, link, ref b) = all[0];
        assert_eq!((ts, orig, link), (5_000_000_007, 70, LinkType::Ethernet));
        assert_eq!(read_dscp(b, 14, 4), Some(10));
        assert_eq!(b[15] & 3, 2, "ECN kept");
        assert_eq!(ones_complement_sum(&b[14..34]), 0);
        assert_eq!((all[1].0, all[1].1), (6_000_000_009, 60));
        assert_eq!(all[1].3, pkt);
    }

    #[test]
    fn link_type_number_is_written_and_checked() {
        let mut sink = Vec::new();
        let mut w = MarkWriter::new(&mut sink, "loop.pcap", 108).unwrap();
        w.finish().unwrap();
        assert_eq!(u32::from_le_bytes(sink[20..24].try_into().unwrap()), 108);
        let e = MarkWriter::new(Vec::new(), "x.pcap", 147)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("x.pcap") && e.contains("unsupported link type 147"),
            "{e}"
        );
        for link in LinkType::ALL {
            assert_eq!(LinkType::from_pcap(linktype_number(link)), Some(link));
        }
    }

    #[test]
    fn io_errors_name_the_output() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut w = MarkWriter::new(Full, "full.pcap", 1).unwrap();
        w.write(LinkType::Ethernet, 0, 60, &eth_v4(), None).unwrap();
        let e = w.finish().unwrap_err().to_string();
        assert!(e.contains("full.pcap") && e.contains("disk full"), "{e}");
        let e = MarkWriter::create(Path::new("/nonexistent-dir/o.pcap"), 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/nonexistent-dir/o.pcap"), "{e}");
    }
}
