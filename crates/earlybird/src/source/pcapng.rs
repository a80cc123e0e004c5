//! pcapng files: sections, interfaces and packet blocks.
//!
//! Contract:
//! - [`check_header`] is a pure check that a buffer starts with a well-formed
//!   Section Header Block (either byte order, major version 1).
//! - [`PcapngReader`] walks the blocks and appends one [`PacketRef`] per
//!   Enhanced Packet Block, Simple Packet Block (interface 0, timestamp 0) or
//!   obsolete Packet Block (type 2). Each section (SHB) has its own byte order
//!   and interface list; each interface its own link type, `if_tsresol`
//!   (power of 10 or of 2) and `if_tsoffset`. Timestamps are converted to ns
//!   (saturating). Unknown blocks are skipped. Packets on interfaces whose
//!   link type earlybird cannot decode are counted and skipped, and the
//!   first interface of each such link type gets a warning
//!   ([`PcapngReader::link_warnings`]) at the offset of its block.
//! - Block lengths are validated (≥ 12, multiple of 4, trailing copy equal,
//!   inside the file, large enough for the block's fields). A file cut off
//!   mid-block, a bad length, a packet referring to a missing interface or an
//!   absurd captured length ends the walk after every complete packet before
//!   it, with a [`Warning`] naming the byte offset of the bad block.
//! - Never panics; every block moves the cursor forward by ≥ 12 bytes, so the
//!   walk ends. Allocates only per interface (the interface table), never per
//!   packet.

use super::pcap::{MAX_CAPLEN, MAX_RESERVE};
use super::walk::Walk;
use super::{PacketRef, Warning};
use crate::decode::LinkType;

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const PB_OBSOLETE: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

/// True when `bytes` starts with the pcapng Section Header Block type.
pub fn is_pcapng(bytes: &[u8]) -> bool {
    bytes.first_chunk::<4>() == Some(&SHB.to_le_bytes())
}

/// Byte-order aware reads from a buffer; `None` when out of range.
#[derive(Debug, Clone, Copy)]
struct Order {
    big: bool,
}

impl Order {
    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let v = *b.get(at..)?.first_chunk::<2>()?;
        Some(if self.big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        })
    }
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let v = *b.get(at..)?.first_chunk::<4>()?;
        Some(if self.big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        })
    }
    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let v = *b.get(at..)?.first_chunk::<8>()?;
        Some(if self.big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        })
    }
}

/// One well-formed block located in the buffer.
#[derive(Debug, Clone, Copy)]
struct Block {
    kind: u32,
    /// Offset of the block's first byte.
    at: usize,
    /// Total block length (header, body and trailing length).
    len: usize,
}

/// Why a block could not be read.
#[derive(Debug, Clone)]
enum BlockErr {
    /// The file ends inside the block (a cut-off capture).
    Truncated(String),
    /// The block is structurally invalid.
    Corrupt(String),
}

/// Reads the block at `at`. For an SHB the byte order is taken from the
/// block itself and `order` is updated.
fn read_block(data: &[u8], at: usize, order: &mut Order) -> Result<Block, BlockErr> {
    let rest = data.len() - at;
    if rest < 12 {
        return Err(BlockErr::Truncated(format!(
            "file ends inside a block header ({rest} bytes left); capture cut off"
        )));
    }
    let kind_le = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
    if kind_le == SHB {
        match (Order { big: false }).u32(data, at + 8) {
            Some(BYTE_ORDER_MAGIC) => order.big = false,
            Some(m) if m.swap_bytes() == BYTE_ORDER_MAGIC => order.big = true,
            _ => {
                return Err(BlockErr::Corrupt(
                    "section header block with a bad byte-order magic".into(),
                ))
            }
        }
    }
    let kind = order.u32(data, at).unwrap_or(0);
    let len = order.u32(data, at + 4).unwrap_or(0) as usize;
    if len < 12 || len & 3 != 0 {
        return Err(BlockErr::Corrupt(format!(
            "bad block length {len} (block type 0x{kind:x})"
        )));
    }
    if len > rest {
        return Err(BlockErr::Truncated(format!(
            "block of {len} bytes extends past the end of the file ({rest} bytes left); \
             capture cut off"
        )));
    }
    let trailer = order.u32(data, at + len - 4).unwrap_or(0) as usize;
    if trailer != len {
        return Err(BlockErr::Corrupt(format!(
            "block length {len} does not match its trailing copy {trailer} (block type 0x{kind:x})"
        )));
    }
    let min = match kind {
        SHB => 28,
        IDB => 20,
        EPB | PB_OBSOLETE => 32,
        SPB => 16,
        _ => 12,
    };
    if len < min {
        return Err(BlockErr::Corrupt(format!(
            "block type 0x{kind:x} too short ({len} bytes, at least {min})"
        )));
    }
    Ok(Block { kind, at, len })
}

/// What is wrong with the Section Header Block a pcapng file starts with
/// (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The file does not start with a Section Header Block.
    #[error("no pcapng section header block")]
    NoSection,
    /// The block is truncated or damaged.
    #[error("section header: {0}")]
    Block(String),
    /// A major version this reader does not know.
    #[error("unsupported pcapng major version {0}")]
    Version(u16),
}

/// Checks that `bytes` starts with a well-formed Section Header Block.
pub fn check_header(bytes: &[u8]) -> Result<(), HeaderError> {
    if !is_pcapng(bytes) {
        return Err(HeaderError::NoSection);
    }
    let mut order = Order { big: false };
    let b = read_block(bytes, 0, &mut order).map_err(|e| match e {
        BlockErr::Truncated(m) | BlockErr::Corrupt(m) => HeaderError::Block(m),
    })?;
    match order.u16(bytes, b.at + 12) {
        Some(1) => Ok(()),
        v => Err(HeaderError::Version(v.unwrap_or(0))),
    }
}

/// How an interface's timestamp units become nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    /// ns = units × k (resolution 10^-k with k ≤ 9).
    Mul(u64),
    /// ns = units ÷ k (resolution 10^-k with 9 < k ≤ 28).
    Div(u64),
    /// ns = units × 10^9 ÷ 2^k (resolution 2^-k).
    Pow2(u32),
    /// Resolution so fine that every timestamp is below 1 ns.
    Zero,
}

impl Scale {
    /// Decodes the `if_tsresol` option byte.
    fn from_tsresol(v: u8) -> Scale {
        let e = u32::from(v & 0x7f);
        if v & 0x80 != 0 {
            Scale::Pow2(e)
        } else if e <= 9 {
            Scale::Mul(10u64.pow(9 - e))
        } else if e - 9 <= 19 {
            Scale::Div(10u64.pow(e - 9))
        } else {
            Scale::Zero
        }
    }

    fn to_ns(self, units: u64) -> u64 {
        match self {
            Scale::Mul(k) => units.saturating_mul(k),
            Scale::Div(k) => units / k,
            Scale::Pow2(e) => {
                let ns = (u128::from(units) * 1_000_000_000) >> e;
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
            Scale::Zero => 0,
        }
    }
}

/// What the reader keeps per interface of the current section.
#[derive(Debug, Clone, Copy)]
struct Iface {
    link: Option<LinkType>,
    snaplen: u32,
    scale: Scale,
    /// `if_tsoffset` in seconds (added to every timestamp).
    offset_s: i64,
}

impl Iface {
    /// Parses an IDB (already validated by [`read_block`]).
    fn parse(data: &[u8], b: Block, order: Order) -> Iface {
        let mut iface = Iface {
            link: LinkType::from_pcap(u32::from(order.u16(data, b.at + 8).unwrap_or(0))),
            snaplen: order.u32(data, b.at + 12).unwrap_or(0),
            scale: Scale::Mul(1_000),
            offset_s: 0,
        };
        // Options run from byte 16 to the trailing length; malformed options
        // are ignored (they do not affect packet delivery).
        let end = b.at + b.len - 4;
        let mut p = b.at + 16;
        while p + 4 <= end {
            let code = order.u16(data, p).unwrap_or(0);
            let olen = usize::from(order.u16(data, p + 2).unwrap_or(0));
            let val = p + 4;
            if code == 0 || val + olen > end {
                break;
            }
            match (code, olen) {
                (9, 1) => iface.scale = Scale::from_tsresol(data[val]),
                (14, 8) => iface.offset_s = order.u64(data, val).unwrap_or(0) as i64,
                _ => {}
            }
            p = val + ((olen + 3) & !3);
        }
        iface
    }

    fn timestamp(&self, high: u32, low: u32) -> u64 {
        let ns = self.scale.to_ns(u64::from(high) << 32 | u64::from(low));
        if self.offset_s == 0 {
            ns
        } else {
            let t = i128::from(ns) + i128::from(self.offset_s) * 1_000_000_000;
            t.clamp(0, i128::from(u64::MAX)) as u64
        }
    }
}

/// Walks the blocks of a pcapng file held in `data`.
#[derive(Debug, Clone)]
pub struct PcapngReader<'a> {
    name: &'a str,
    w: Walk<'a>,
    order: Order,
    ifaces: Vec<Iface>,
    skipped: u64,
    /// One warning per undecoded link type met, and those link types.
    link_warnings: Vec<Warning>,
    warned: Vec<u16>,
    /// The interface table as it was when the current batch began, kept
    /// (`saved`) only once the batch changes it (an SHB or IDB), for
    /// [`PcapngReader::restore`].
    saved_ifaces: Vec<Iface>,
    saved: bool,
}

/// Where a [`PcapngReader`] was, to go back there
/// ([`PcapngReader::restore`]; only to the start of the last batch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    pos: usize,
    number: u64,
    skipped: u64,
    order: Order,
}

impl Mark {
    /// The byte position marked.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
}

impl<'a> PcapngReader<'a> {
    /// A reader positioned on the first block (the SHB); `name` is used in
    /// warnings.
    pub fn new(name: &'a str, data: &'a [u8]) -> Self {
        PcapngReader {
            name,
            w: Walk::new(data, 0),
            order: Order { big: false },
            ifaces: Vec::new(),
            skipped: 0,
            link_warnings: Vec::new(),
            warned: Vec::new(),
            saved_ifaces: Vec::new(),
            saved: false,
        }
    }

    /// Where the reader is now (before a batch).
    #[inline(always)]
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            pos: self.w.pos,
            number: self.w.number,
            skipped: self.skipped,
            order: self.order,
        }
    }

    /// Goes back to `m`, the mark taken before the last batch, as if that
    /// batch was not read.
    pub(crate) fn restore(&mut self, m: Mark) {
        if self.saved {
            std::mem::swap(&mut self.ifaces, &mut self.saved_ifaces);
            self.saved = false;
        }
        self.w.restart(m.pos, m.number);
        self.skipped = m.skipped;
        self.order = m.order;
    }

    /// The walk's state (`file.rs` limits and ends it when the file
    /// shrinks).
    pub(crate) fn walk_mut(&mut self) -> &mut Walk<'a> {
        &mut self.w
    }

    /// Keeps the interface table as it was before this batch changes it.
    fn save_ifaces(&mut self) {
        if !self.saved {
            self.saved_ifaces.clone_from(&self.ifaces);
            self.saved = true;
        }
    }

    /// Clears `out` and appends up to `max` packets; 0 means end of file.
    pub fn next_batch(&mut self, out: &mut Vec<PacketRef>, max: usize) -> usize {
        out.clear();
        self.saved = false;
        if self.w.done || max == 0 {
            return 0;
        }
        out.reserve(max.min(MAX_RESERVE));
        while out.len() < max {
            if self.w.pos >= self.w.data.len() {
                self.w.done = true;
                self.w.at_end = true;
                break;
            }
            let block = match read_block(self.w.data, self.w.pos, &mut self.order) {
                Ok(b) => b,
                Err(BlockErr::Truncated(m)) => {
                    self.stop(m);
                    self.w.at_end = true;
                    break;
                }
                Err(BlockErr::Corrupt(m)) => {
                    self.stop(m);
                    break;
                }
            };
            if let Err(BlockErr::Truncated(m) | BlockErr::Corrupt(m)) = self.block(block, out) {
                self.stop(m);
                break;
            }
            self.w.pos += block.len;
        }
        out.len()
    }

    /// Handles one valid block; an error message ends the walk at it.
    fn block(&mut self, b: Block, out: &mut Vec<PacketRef>) -> Result<(), BlockErr> {
        let (d, o, at) = (self.w.data, self.order, b.at);
        let (iface_id, ts, caplen, orig, data_at) = match b.kind {
            SHB => {
                let major = o.u16(d, at + 12).unwrap_or(0);
                if major != 1 {
                    return Err(BlockErr::Corrupt(format!(
                        "section with unsupported pcapng major version {major}"
                    )));
                }
                self.save_ifaces();
                self.ifaces.clear();
                return Ok(());
            }
            IDB => {
                self.save_ifaces();
                let iface = Iface::parse(d, b, o);
                let linktype = o.u16(d, at + 8).unwrap_or(0);
                if iface.link.is_none() && !self.warned.contains(&linktype) {
                    self.warned.push(linktype);
                    self.link_warnings.push(Warning {
                        file: self.name.to_string(),
                        offset: at as u64,
                        message: format!(
                            "interface {}: {}",
                            self.ifaces.len(),
                            super::pcap::unsupported_link_message(u32::from(linktype))
                        ),
                    });
                }
                self.ifaces.push(iface);
                return Ok(());
            }
            EPB => (
                o.u32(d, at + 8).unwrap_or(0),
                (
                    o.u32(d, at + 12).unwrap_or(0),
                    o.u32(d, at + 16).unwrap_or(0),
                ),
                o.u32(d, at + 20).unwrap_or(0),
                o.u32(d, at + 24).unwrap_or(0),
                at + 28,
            ),
            PB_OBSOLETE => (
                u32::from(o.u16(d, at + 8).unwrap_or(0)),
                (
                    o.u32(d, at + 12).unwrap_or(0),
                    o.u32(d, at + 16).unwrap_or(0),
                ),
                o.u32(d, at + 20).unwrap_or(0),
                o.u32(d, at + 24).unwrap_or(0),
                at + 28,
            ),
            SPB => {
                let orig = o.u32(d, at + 8).unwrap_or(0);
                let room = (b.len - 16).min(u32::MAX as usize) as u32;
                let snap = match self.ifaces.first() {
                    Some(i) if i.snaplen > 0 => i.snaplen,
                    _ => u32::MAX,
                };
                (0, (0, 0), orig.min(room).min(snap), orig, at + 12)
            }
            _ => return Ok(()),
        };
        let Some(iface) = self.ifaces.get(iface_id as usize) else {
            return Err(BlockErr::Corrupt(format!(
                "packet block refers to interface {iface_id}, but the section has {}",
                self.ifaces.len()
            )));
        };
        if caplen > MAX_CAPLEN {
            return Err(BlockErr::Corrupt(format!(
                "corrupt packet block: captured length {caplen} exceeds {MAX_CAPLEN}"
            )));
        }
        // Packet data must end before the trailing length.
        if data_at + caplen as usize > at + b.len - 4 {
            return Err(BlockErr::Corrupt(format!(
                "corrupt packet block: captured length {caplen} exceeds the block ({} bytes)",
                b.len
            )));
        }
        self.w.number += 1;
        let Some(link) = iface.link else {
            self.skipped += 1;
            return Ok(());
        };
        let ts = if b.kind == SPB {
            0
        } else {
            iface.timestamp(ts.0, ts.1)
        };
        out.push(PacketRef {
            offset: data_at,
            caplen,
            orig_len: orig.max(caplen),
            ts,
            link,
            number: self.w.number,
        });
        Ok(())
    }

    fn stop(&mut self, message: String) {
        self.w.done = true;
        self.w.warning = Some(Warning {
            file: self.name.to_string(),
            offset: self.w.pos as u64,
            message,
        });
    }

    /// The buffer [`PacketRef::offset`] points into (the whole file).
    pub fn data(&self) -> &'a [u8] {
        self.w.data
    }

    /// Set once the walk stopped on a cut-off or corrupt block.
    pub fn warning(&self) -> Option<&Warning> {
        self.w.warning.as_ref()
    }

    /// Packets skipped because their interface's link type is unsupported.
    pub fn skipped_unsupported_link(&self) -> u64 {
        self.skipped
    }

    /// A warning for the first interface of each link type met so far that
    /// earlybird does not decode.
    pub fn link_warnings(&self) -> &[Warning] {
        &self.link_warnings
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.w.pos as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Little- or big-endian block writer for test files.
    #[derive(Clone, Copy)]
    struct W {
        be: bool,
    }

    impl W {
        fn u16(self, v: u16) -> [u8; 2] {
            if self.be {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn u32(self, v: u32) -> [u8; 4] {
            if self.be {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn block(self, kind: u32, body: &[u8]) -> Vec<u8> {
            let pad = (4 - body.len() % 4) % 4;
            let len = (12 + body.len() + pad) as u32;
            let mut v = Vec::new();
            v.extend_from_slice(&self.u32(kind));
            v.extend_from_slice(&self.u32(len));
            v.extend_from_slice(body);
            v.resize(v.len() + pad, 0);
            v.extend_from_slice(&self.u32(len));
            v
        }
        fn shb(self) -> Vec<u8> {
            let mut b = self.u32(BYTE_ORDER_MAGIC).to_vec();
            b.extend_from_slice(&self.u16(1));
            b.extend_from_slice(&self.u16(0));
            b.extend_from_slice(&[0xff; 8]); // section length unknown
            self.block(SHB, &b)
        }
        fn idb(self, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> Vec<u8> {
            let mut b = self.u16(linktype).to_vec();
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&self.u32(snaplen));
            for (code, val) in opts {
                b.extend_from_slice(&self.u16(*code));
                b.extend_from_slice(&self.u16(val.len() as u16));
                b.extend_from_slice(val);
                b.resize(b.len() + (4 - val.len() % 4) % 4, 0);
            }
            if !opts.is_empty() {
                b.extend_from_slice(&[0; 4]); // opt_endofopt
            }
            self.block(IDB, &b)
        }
        fn epb(self, iface: u32, ts: u64, data: &[u8], orig: u32) -> Vec<u8> {
            let mut b = self.u32(iface).to_vec();
            b.extend_from_slice(&self.u32((ts >> 32) as u32));
            b.extend_from_slice(&self.u32(ts as u32));
            b.extend_from_slice(&self.u32(data.len() as u32));
            b.extend_from_slice(&self.u32(orig));
            b.extend_from_slice(data);
            self.block(EPB, &b)
        }
        fn spb(self, orig: u32, data: &[u8]) -> Vec<u8> {
            let mut b = self.u32(orig).to_vec();
            b.extend_from_slice(data);
            self.block(SPB, &b)
        }
    }

    fn drain(data: &[u8], batch: usize) -> (Vec<PacketRef>, Option<Warning>, u64) {
        let mut r = PcapngReader::new("t.pcapng", data);
        let mut all = Vec::new();
        let mut b = Vec::new();
        while r.next_batch(&mut b, batch) > 0 {
            all.extend_from_slice(&b);
        }
        assert_eq!(r.next_batch(&mut b, batch), 0);
        assert_eq!(r.data().len(), data.len());
        (all, r.warning().cloned(), r.skipped_unsupported_link())
    }

    /// Four interfaces: Ethernet µs, raw IP ns with a -10 s offset,
    /// LINKTYPE_USER0 (unsupported), Linux SLL with 2^-10 s resolution.
    fn multi(w: W) -> Vec<u8> {
        let mut f = w.shb();
        f.extend(w.idb(1, 65535, &[]));
        let off = (-10i64 as u64).to_le_bytes();
        let off = if w.be { (-10i64).to_be_bytes() } else { off };
        f.extend(w.idb(101, 0, &[(9, &[9]), (14, &off), (2, b"eth0")]));
        f.extend(w.idb(147, 0, &[]));
        f.extend(w.idb(113, 0, &[(9, &[0x80 | 10])]));
        f.extend(w.epb(0, 1_700_000_000_000_001, &[1, 2, 3, 4, 5], 5));
        f.extend(w.epb(1, 1_700_000_000_123_456_789, &[0x45], 40));
        f.extend(w.epb(2, 7, &[9, 9], 2));
        f.extend(w.epb(3, 3 * 1024 + 512, &[7; 8], 8));
        f
    }

    #[test]
    fn multi_interface_tsresol_and_offset_both_orders() {
        for be in [false, true] {
            let f = multi(W { be });
            assert_eq!(check_header(&f), Ok(()));
            for batch in [1, 2, 256, usize::MAX] {
                let (p, w, skipped) = drain(&f, batch);
                assert!(w.is_none(), "{w:?}");
                assert_eq!(skipped, 1);
                assert_eq!(p.len(), 3);
                assert_eq!(p[0].link, LinkType::Ethernet);
                assert_eq!(p[0].ts, 1_700_000_000_000_001_000);
                assert_eq!(p[0].bytes(&f), &[1, 2, 3, 4, 5]);
                assert_eq!((p[0].caplen, p[0].orig_len, p[0].number), (5, 5, 1));
                assert_eq!(p[1].link, LinkType::Raw);
                assert_eq!(p[1].ts, 1_700_000_000_123_456_789 - 10_000_000_000);
                assert_eq!((p[1].caplen, p[1].orig_len), (1, 40));
                assert_eq!(p[2].link, LinkType::LinuxSll);
                assert_eq!(p[2].ts, 3_500_000_000);
                assert_eq!(p[2].number, 4, "skipped packet keeps its number");
                assert_eq!(p[2].bytes(&f), &[7; 8]);
            }
        }
    }

    #[test]
    fn tsresol_decoding() {
        assert_eq!(Scale::from_tsresol(6), Scale::Mul(1_000));
        assert_eq!(Scale::from_tsresol(9), Scale::Mul(1));
        assert_eq!(Scale::from_tsresol(12), Scale::Div(1_000));
        assert_eq!(Scale::from_tsresol(0x7f), Scale::Zero);
        assert_eq!(Scale::from_tsresol(12).to_ns(5_000_000), 5_000);
        assert_eq!(Scale::from_tsresol(0x80).to_ns(3), 3_000_000_000);
        assert_eq!(Scale::from_tsresol(0xff).to_ns(u64::MAX), 0);
        assert_eq!(Scale::Mul(1_000).to_ns(u64::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn spb_obsolete_pb_and_unknown_blocks() {
        let w = W { be: false };
        let mut f = w.shb();
        f.extend(w.block(0x0bad, &[1, 2, 3, 4, 5])); // unknown, padded
        f.extend(w.idb(1, 4, &[])); // snaplen 4
        f.extend(w.block(4, &[0; 8])); // name resolution block
        f.extend(w.spb(6, &[1, 2, 3, 4, 5, 6, 0, 0])); // cut to snaplen 4
        let mut pb = w.u16(0).to_vec();
        pb.extend_from_slice(&w.u16(0)); // drops
        pb.extend_from_slice(&w.u32(0));
        pb.extend_from_slice(&w.u32(2_000_000)); // 2 s in µs
        pb.extend_from_slice(&w.u32(2));
        pb.extend_from_slice(&w.u32(2));
        pb.extend_from_slice(&[0xaa, 0xbb]);
        f.extend(w.block(PB_OBSOLETE, &pb));
        f.extend(w.block(5, &[0; 20])); // interface statistics
        let (p, warn, _) = drain(&f, 8);
        assert!(warn.is_none(), "{warn:?}");
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].ts, p[0].caplen, p[0].orig_len), (0, 4, 6));
        assert_eq!(p[0].bytes(&f), &[1, 2, 3, 4]);
        assert_eq!((p[1].ts, p[1].caplen, p[1].number), (2_000_000_000, 2, 2));
        assert_eq!(p[1].bytes(&f), &[0xaa, 0xbb]);
    }

    #[test]
    fn sections_switch_byte_order_and_reset_interfaces() {
        let (le, be) = (W { be: false }, W { be: true });
        let mut f = le.shb();
        f.extend(le.idb(1, 0, &[]));
        f.extend(le.epb(0, 1, &[1], 1));
        f.extend(be.shb());
        f.extend(be.idb(229, 0, &[]));
        f.extend(be.epb(0, 2, &[2], 1));
        let good = f.len();
        f.extend(be.epb(1, 3, &[3], 1)); // interface 1 only existed... nowhere
        let (p, w, _) = drain(&f, 256);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].link, p[0].ts), (LinkType::Ethernet, 1_000));
        assert_eq!((p[1].link, p[1].ts), (LinkType::Ipv6, 2_000));
        let w = w.unwrap();
        assert_eq!(w.offset, good as u64);
        assert!(w.message.contains("interface 1"), "{}", w.message);
    }

    #[test]
    fn corrupt_blocks_stop_with_warning() {
        let w = W { be: false };
        let mut base = w.shb();
        base.extend(w.idb(1, 0, &[]));
        base.extend(w.epb(0, 1, &[1, 2, 3, 4], 4));
        let at = base.len();
        let bad_epb = w.epb(0, 1, &[1, 2, 3, 4], 4);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                {
                    let mut b = bad_epb.clone();
                    b[4] = 30;
                    b
                },
                "bad block length",
            ),
            (
                {
                    let mut b = bad_epb.clone();
                    b[4] = 8;
                    b
                },
                "bad block length",
            ),
            (
                {
                    let mut b = bad_epb.clone();
                    let n = b.len();
                    b[n - 4] = 4;
                    b
                },
                "trailing",
            ),
            (
                {
                    let mut b = bad_epb.clone();
                    b[20] = 200;
                    b
                },
                "exceeds the block",
            ),
            (
                {
                    let mut b = bad_epb.clone();
                    b[20..24].copy_from_slice(&(1u32 << 20).to_le_bytes());
                    b
                },
                "exceeds 262144",
            ),
            (w.block(EPB, &[0; 16]), "too short"),
            (
                {
                    let mut b = w.shb();
                    b[8] = 0;
                    b
                },
                "byte-order",
            ),
            (
                {
                    let mut b = w.shb();
                    b[12] = 2;
                    b
                },
                "major version 2",
            ),
        ];
        for (tail, want) in cases {
            let mut f = base.clone();
            f.extend(&tail);
            f.extend(w.epb(0, 1, &[9], 1));
            let (p, warn, _) = drain(&f, 256);
            assert_eq!(p.len(), 1, "{want}");
            let warn = warn.unwrap();
            assert_eq!(warn.offset, at as u64, "{want}");
            assert!(warn.message.contains(want), "{want}: {}", warn.message);
        }
    }

    #[test]
    fn truncated_at_every_offset() {
        for be in [false, true] {
            let f = multi(W { be });
            // Block boundaries and packets complete before each.
            let mut bounds = vec![0usize];
            let mut order = Order { big: false };
            while *bounds.last().unwrap() < f.len() {
                let b = read_block(&f, *bounds.last().unwrap(), &mut order).unwrap();
                bounds.push(b.at + b.len);
            }
            for cut in 0..=f.len() {
                let (p, w, _) = drain(&f[..cut], 3);
                let last = *bounds.iter().filter(|&&b| b <= cut).max().unwrap();
                // Blocks 0..5 are SHB + 4 IDBs; block 5+i is packet i (i=2 skipped).
                let blocks = bounds.iter().filter(|&&b| b <= cut).count() - 1;
                let want = blocks.saturating_sub(5) - usize::from(blocks >= 8);
                assert_eq!(p.len(), want, "cut {cut}");
                if last == cut {
                    assert!(w.is_none(), "cut {cut}: {w:?}");
                } else {
                    let w = w.unwrap();
                    assert_eq!(w.offset, last as u64, "cut {cut}");
                    assert!(w.message.contains("cut off"), "cut {cut}: {}", w.message);
                }
            }
        }
    }

    #[test]
    fn header_checks() {
        let w = W { be: true };
        let f = w.shb();
        assert_eq!(check_header(&f), Ok(()));
        assert!(check_header(&f[..20])
            .unwrap_err()
            .to_string()
            .contains("past the end"));
        assert!(check_header(b"abcd").is_err());
        let mut v1 = w.shb();
        v1[13] = 2; // version 2 (big-endian low byte of major)
        assert_eq!(check_header(&v1), Err(HeaderError::Version(2)));
        assert!(check_header(&v1)
            .unwrap_err()
            .to_string()
            .contains("version 2"));
    }

    #[test]
    fn undecoded_link_types_are_counted_and_warned_once_each() {
        let w = W { be: false };
        let mut f = w.shb();
        f.extend(w.idb(147, 0, &[]));
        f.extend(w.idb(1, 0, &[]));
        f.extend(w.idb(147, 0, &[]));
        f.extend(w.idb(148, 0, &[]));
        for i in [0, 1, 2, 3, 1] {
            f.extend(w.epb(i, 1, &[0x45; 4], 4));
        }
        let mut r = PcapngReader::new("u.pcapng", &f);
        let mut b = Vec::new();
        let mut n = 0;
        while r.next_batch(&mut b, 2) > 0 {
            n += b.len();
        }
        assert_eq!((n, r.skipped_unsupported_link()), (2, 3));
        let ws = r.link_warnings();
        assert_eq!(ws.len(), 2, "{ws:?}");
        assert_eq!(ws[0].offset, 28);
        assert!(
            ws[0].message.starts_with("interface 0: link type 147 "),
            "{}",
            ws[0]
        );
        assert!(
            ws[1].message.starts_with("interface 3: link type 148 "),
            "{}",
            ws[1]
        );
        assert!(ws[1].message.contains("unsupported_link"));
        assert_eq!(ws[1].file, "u.pcapng");
    }
}
