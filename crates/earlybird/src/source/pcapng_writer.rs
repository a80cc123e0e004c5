//! pcapng writer for the packet dumper (`--dump-format pcapng`).
//!
//! Contract: writes one section, little-endian: a Section Header Block
//! (version 1.0, section length -1 = not given, option `shb_userappl` =
//! "earlybird"), then for each packet an Enhanced Packet Block. Packets
//! may be of several link types: the first packet of a link type adds an
//! Interface Description Block for it (LINKTYPE_* number as
//! [`linktype_number`] gives it, the snaplen given to [`PcapngOut::new`],
//! option `if_tsresol` = 9: nanoseconds), and the packet's EPB names that
//! interface (interface ids are numbered from 0 in the order the link
//! types first came). Timestamps are absolute nanoseconds, written whole
//! as the EPB's 64-bit timestamp. Packet data is padded with zeros to a
//! multiple of 4 bytes. Blocks are assembled in one 1 MiB buffer handed
//! to the sink with `write_all` when full and on [`PcapngOut::finish`];
//! a block is never split across two hand-overs, so whatever reached the
//! sink ends on a block boundary. Nothing is allocated per packet (the
//! table of interfaces has one entry per link type). The only failures
//! are the sink's own `io::Error`s, returned unchanged, and a packet too
//! large for the buffer (`InvalidInput`).

use std::io::{self, Write};

use super::pcap_writer::linktype_number;
use crate::decode::LinkType;

/// Size of the output buffer.
const BUF_SIZE: usize = 1 << 20;

/// Block types.
const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;

/// The application named in the section header.
const USERAPPL: &[u8] = b"earlybird";

/// Bytes of an IDB: type, length, link type, reserved, snaplen,
/// `if_tsresol` (4 + 1 padded to 4), end of options, length.
pub(crate) const IDB_LEN: usize = 4 + 4 + 2 + 2 + 4 + 8 + 4 + 4;

/// Bytes of an EPB around its padded data: type, length, interface,
/// timestamp (2 × 4), captured and original length, trailing length.
const EPB_FIXED: usize = 4 + 4 + 4 + 8 + 4 + 4 + 4;

/// Bytes of the section header block written by [`PcapngOut::new`].
pub(crate) const SHB_LEN: usize = 4 + 4 + 4 + 2 + 2 + 8 + (4 + pad4(USERAPPL.len())) + 4 + 4;

/// `n` rounded up to a multiple of 4.
const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// A pcapng stream being written to `W`.
pub(crate) struct PcapngOut<W: Write> {
    sink: W,
    buf: Box<[u8]>,
    pos: usize,
    snaplen: u32,
    /// The link type of each interface described so far, by interface id.
    interfaces: Vec<LinkType>,
}

impl<W: Write> PcapngOut<W> {
    /// Starts a stream: the section header goes into the buffer (nothing
    /// is written to `sink` yet). `snaplen` goes into every interface
    /// description.
    pub(crate) fn new(sink: W, snaplen: u32) -> Self {
        let mut out = PcapngOut {
            sink,
            buf: vec![0u8; BUF_SIZE].into_boxed_slice(),
            pos: 0,
            snaplen,
            interfaces: Vec::new(),
        };
        let b = &mut out.buf[..SHB_LEN];
        put32(b, 0, SHB);
        put32(b, 4, SHB_LEN as u32);
        put32(b, 8, 0x1A2B_3C4D);
        b[12..14].copy_from_slice(&1u16.to_le_bytes());
        b[14..16].copy_from_slice(&0u16.to_le_bytes());
        b[16..24].copy_from_slice(&(-1i64).to_le_bytes());
        // shb_userappl (code 4).
        b[24..26].copy_from_slice(&4u16.to_le_bytes());
        b[26..28].copy_from_slice(&(USERAPPL.len() as u16).to_le_bytes());
        let end = 28 + pad4(USERAPPL.len());
        b[28..end].fill(0);
        b[28..28 + USERAPPL.len()].copy_from_slice(USERAPPL);
        // opt_endofopt, then the trailing length.
        put32(b, end, 0);
        put32(b, end + 4, SHB_LEN as u32);
        out.pos = SHB_LEN;
        out
    }

    /// Bytes a packet of `caplen` captured bytes and link type `link` adds
    /// to the stream: its EPB, and an IDB when `link` is new to it.
    #[inline]
    pub(crate) fn record_len(&self, link: LinkType, caplen: usize) -> usize {
        let idb = if self.interfaces.contains(&link) {
            0
        } else {
            IDB_LEN
        };
        idb + EPB_FIXED + pad4(caplen)
    }

    /// Appends one packet of link type `link`: `data` captured, `orig_len`
    /// bytes on the wire, stamped `ts_ns`; first an IDB when `link` is new.
    pub(crate) fn record(
        &mut self,
        ts_ns: u64,
        orig_len: u32,
        link: LinkType,
        data: &[u8],
    ) -> io::Result<()> {
        let need = self.record_len(link, data.len());
        if self.buf.len() - self.pos < need {
            self.flush_buf()?;
            if need > self.buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("packet of {} bytes exceeds the output buffer", data.len()),
                ));
            }
        }
        let iface = match self.interfaces.iter().position(|&l| l == link) {
            Some(i) => i,
            None => {
                self.interface(link);
                self.interfaces.len() - 1
            }
        };
        let len = EPB_FIXED + pad4(data.len());
        let b = &mut self.buf[self.pos..self.pos + len];
        put32(b, 0, EPB);
        put32(b, 4, len as u32);
        put32(b, 8, iface as u32);
        put32(b, 12, (ts_ns >> 32) as u32);
        put32(b, 16, ts_ns as u32);
        put32(b, 20, data.len() as u32);
        put32(b, 24, orig_len);
        b[28..28 + data.len()].copy_from_slice(data);
        b[28 + data.len()..len - 4].fill(0);
        put32(b, len - 4, len as u32);
        self.pos += len;
        Ok(())
    }

    /// Appends the IDB of a new interface of link type `link` (the caller
    /// made room for it).
    fn interface(&mut self, link: LinkType) {
        let b = &mut self.buf[self.pos..self.pos + IDB_LEN];
        put32(b, 0, IDB);
        put32(b, 4, IDB_LEN as u32);
        b[8..10].copy_from_slice(&(linktype_number(link) as u16).to_le_bytes());
        b[10..12].fill(0);
        put32(b, 12, self.snaplen);
        // if_tsresol (code 9), one byte: 10^-9 s.
        b[16..18].copy_from_slice(&9u16.to_le_bytes());
        b[18..20].copy_from_slice(&1u16.to_le_bytes());
        b[20..24].copy_from_slice(&[9, 0, 0, 0]);
        put32(b, 24, 0);
        put32(b, 28, IDB_LEN as u32);
        self.pos += IDB_LEN;
        self.interfaces.push(link);
    }

    /// Bytes assembled and not yet handed to the sink.
    #[inline]
    pub(crate) fn buffered(&self) -> usize {
        self.pos
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        if self.pos > 0 {
            self.sink.write_all(&self.buf[..self.pos])?;
            self.pos = 0;
        }
        Ok(())
    }

    /// Writes everything buffered, flushes the sink and returns it.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.flush_buf()?;
        self.sink.flush()?;
        Ok(self.sink)
    }
}

#[inline]
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{CaptureFile, BATCH};

    #[test]
    fn blocks_are_laid_out_as_the_format_says() {
        let mut out = PcapngOut::new(Vec::new(), 1000);
        assert_eq!(out.record_len(LinkType::Ethernet, 5), IDB_LEN + 32 + 8);
        out.record(0x1_2345_6789, 60, LinkType::Ethernet, &[0xAB; 5])
            .unwrap();
        assert_eq!(out.record_len(LinkType::Ethernet, 4), 32 + 4);
        let b = out.finish().unwrap();
        let u = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        assert_eq!((u(0), u(4), u(8)), (SHB, SHB_LEN as u32, 0x1A2B_3C4D));
        assert_eq!(u(SHB_LEN - 4), SHB_LEN as u32);
        let i = SHB_LEN;
        assert_eq!((u(i), u(i + 4), u(i + 12)), (IDB, IDB_LEN as u32, 1000));
        assert_eq!(&b[i + 16..i + 21], &[9, 0, 1, 0, 9]);
        let e = i + IDB_LEN;
        assert_eq!((u(e), u(e + 4), u(e + 8)), (EPB, 40, 0));
        assert_eq!((u(e + 12), u(e + 16)), (1, 0x2345_6789));
        assert_eq!((u(e + 20), u(e + 24)), (5, 60));
        assert_eq!(&b[e + 28..e + 36], &[0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0, 0, 0]);
        assert_eq!(u(e + 36), 40);
        assert_eq!(b.len(), e + 40);
    }

    #[test]
    fn earlybirds_reader_reads_back_every_packet_of_every_link_type() {
        let mut out = PcapngOut::new(Vec::new(), 262_144);
        let mut sent = Vec::new();
        // Enough packets to cross the buffer several times.
        for i in 0..3000u64 {
            let link =
                [LinkType::Ethernet, LinkType::Raw, LinkType::LinuxSll][(i % 7 % 3) as usize];
            let data: Vec<u8> = (0..(i as usize % 1500 + 1))
                .map(|j| (i as usize + j) as u8)
                .collect();
            let ts = 1_700_000_000_000_000_000 + i * 1_234_567;
            out.record(ts, data.len() as u32 + 3, link, &data).unwrap();
            sent.push((ts, data.len() as u32 + 3, link, data));
        }
        let bytes = out.finish().unwrap();
        let file = CaptureFile::from_bytes("w.pcapng", bytes).unwrap();
        let mut r = file.reader();
        let mut batch = Vec::new();
        let mut back = Vec::new();
        while r.next_batch(&mut batch, BATCH) > 0 {
            for p in &batch {
                back.push((p.ts, p.orig_len, p.link, p.bytes(r.data()).to_vec()));
            }
        }
        assert!(r.warning().is_none(), "{:?}", r.warning());
        assert!(
            back == sent,
            "{} of {} packets back",
            back.len(),
            sent.len()
        );
    }
}
