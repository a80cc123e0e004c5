//! Classic pcap writer for the DSCP marker (`mark`) and the generators
//! (`gen`).
//!
//! Contract: writes the 24-byte global header (little-endian, v2.4, link
//! type 1 = Ethernet or the one given to [`PcapOut::with_linktype`], magic
//! 0xa1b2c3d4 for microseconds or 0xa1b23c4d for nanoseconds) and then one
//! 16-byte record header + captured bytes per packet. Timestamps come in as
//! absolute nanoseconds and are truncated to the file's resolution. Records
//! are assembled in one 1 MiB buffer that is handed to the sink with
//! `write_all` when full and on [`PcapOut::finish`]; nothing is allocated per
//! packet. The only failures are the sink's own `io::Error`s, returned
//! unchanged.

use std::io::{self, Write};

use crate::decode::LinkType;

/// Size of the output buffer; a record is at most 16 + 262,144 bytes.
const BUF_SIZE: usize = 1 << 20;

/// The largest snaplen libpcap readers accept (262,144), the snaplen of
/// the files the `-w` copy and the dumper write.
pub(crate) const MAX_SNAPLEN: u32 = 262_144;

/// Length of a pcap record header.
const REC_HDR: usize = 16;

/// The LINKTYPE_* number of a link type (canonical one for folded aliases:
/// Null → 0, Raw → 101).
pub(crate) fn linktype_number(link: LinkType) -> u32 {
    match link {
        LinkType::Ethernet => 1,
        LinkType::Null => 0,
        LinkType::Raw => 101,
        LinkType::Ipv4 => 228,
        LinkType::Ipv6 => 229,
        LinkType::LinuxSll => 113,
        LinkType::LinuxSll2 => 276,
        LinkType::CHdlc => 104,
        LinkType::Ppp => 9,
        LinkType::PppHdlc => 50,
        LinkType::FrameRelay => 107,
        LinkType::Ieee80211 => 105,
        LinkType::Radiotap => 127,
        LinkType::Ppi => 192,
        LinkType::Nflog => 239,
        LinkType::Slip => 8,
        LinkType::AtmLlc => 100,
    }
}

/// A pcap stream being written to `W`.
pub(crate) struct PcapOut<W: Write> {
    sink: W,
    buf: Box<[u8]>,
    pos: usize,
    nanos: bool,
}

impl<W: Write> PcapOut<W> {
    /// Starts a stream: the global header goes into the buffer (nothing is
    /// written to `sink` yet).
    pub(crate) fn new(sink: W, nanos: bool, snaplen: u32) -> io::Result<Self> {
        Self::with_linktype(sink, nanos, snaplen, 1)
    }

    /// Same as [`PcapOut::new`] with another LINKTYPE_* number in the
    /// global header (the DSCP marker copies its input's link type).
    pub(crate) fn with_linktype(
        sink: W,
        nanos: bool,
        snaplen: u32,
        linktype: u32,
    ) -> io::Result<Self> {
        let mut out = PcapOut {
            sink,
            buf: vec![0u8; BUF_SIZE].into_boxed_slice(),
            pos: 0,
            nanos,
        };
        let magic: u32 = if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 };
        let hdr = &mut out.buf[..24];
        hdr[0..4].copy_from_slice(&magic.to_le_bytes());
        hdr[4..6].copy_from_slice(&2u16.to_le_bytes());
        hdr[6..8].copy_from_slice(&4u16.to_le_bytes());
        hdr[8..16].fill(0); // thiszone, sigfigs
        hdr[16..20].copy_from_slice(&snaplen.to_le_bytes());
        hdr[20..24].copy_from_slice(&linktype.to_le_bytes());
        out.pos = 24;
        Ok(out)
    }

    /// Appends one record of `caplen` captured bytes with original length
    /// `orig_len`; `fill` receives exactly the `caplen` bytes to write (they
    /// hold stale data from earlier records and must all be overwritten).
    #[inline]
    pub(crate) fn record_with<F: FnOnce(&mut [u8])>(
        &mut self,
        ts_ns: u64,
        orig_len: u32,
        caplen: usize,
        fill: F,
    ) -> io::Result<()> {
        let need = REC_HDR + caplen;
        if self.buf.len() - self.pos < need {
            self.flush_buf()?;
            if need > self.buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("record of {caplen} bytes exceeds the output buffer"),
                ));
            }
        }
        let rec = &mut self.buf[self.pos..self.pos + need];
        let (hdr, data) = rec.split_at_mut(REC_HDR);
        write_rec_header(hdr, ts_ns, caplen as u32, orig_len, self.nanos);
        fill(data);
        self.pos += need;
        Ok(())
    }

    /// Appends one record whose captured bytes are `data`.
    #[inline]
    pub(crate) fn record(&mut self, ts_ns: u64, orig_len: u32, data: &[u8]) -> io::Result<()> {
        self.record_with(ts_ns, orig_len, data.len(), |dst| dst.copy_from_slice(data))
    }

    /// Bytes assembled and not yet handed to the sink (the rotating
    /// dumper learns from it which records reached the sink).
    #[inline]
    pub(crate) fn buffered(&self) -> usize {
        self.pos
    }

    /// Bytes the buffer takes before it must go to the sink.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `len` bytes of the buffer (at most [`PcapOut::room`]),
    /// for records read straight into it; [`PcapOut::advance`] takes them.
    #[inline]
    pub(crate) fn spare(&mut self, len: usize) -> &mut [u8] {
        &mut self.buf[self.pos..self.pos + len]
    }

    /// The first `len` bytes of [`PcapOut::spare`] now hold whole records
    /// of this stream's resolution.
    #[inline]
    pub(crate) fn advance(&mut self, len: usize) {
        self.pos += len;
    }

    /// Hands the sink everything buffered and returns the sink, so that
    /// bytes written to it directly follow the records so far (the
    /// dumper's copies of whole records, `crate::dump`).
    pub(crate) fn flushed_sink(&mut self) -> io::Result<&mut W> {
        self.flush_buf()?;
        Ok(&mut self.sink)
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

/// Rewrites the stamp of the record header `h` of a microsecond pcap in
/// nanoseconds (its fraction, below 10⁶, times 1,000).
#[inline]
pub(crate) fn micros_to_nanos(h: &mut [u8]) {
    let frac = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    h[4..8].copy_from_slice(&frac.wrapping_mul(1_000).to_le_bytes());
}

/// Fills a 16-byte record header.
#[inline]
pub(crate) fn write_rec_header(
    hdr: &mut [u8],
    ts_ns: u64,
    caplen: u32,
    orig_len: u32,
    nanos: bool,
) {
    let secs = ts_ns / 1_000_000_000;
    let frac = ts_ns % 1_000_000_000;
    let frac = if nanos { frac } else { frac / 1_000 };
    hdr[0..4].copy_from_slice(&(secs as u32).to_le_bytes());
    hdr[4..8].copy_from_slice(&(frac as u32).to_le_bytes());
    hdr[8..12].copy_from_slice(&caplen.to_le_bytes());
    hdr[12..16].copy_from_slice(&orig_len.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_records_are_little_endian_classic_pcap() {
        let mut out = PcapOut::new(Vec::new(), false, 128).unwrap();
        out.record(1_600_000_000_123_456_789, 60, &[0xAB; 4])
            .unwrap();
        let bytes = out.finish().unwrap();
        assert_eq!(
            &bytes[..24],
            &[
                0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0, 1, 0, 0,
                0
            ]
        );
        let rec = &bytes[24..];
        assert_eq!(
            u32::from_le_bytes(rec[0..4].try_into().unwrap()),
            1_600_000_000
        );
        assert_eq!(u32::from_le_bytes(rec[4..8].try_into().unwrap()), 123_456);
        assert_eq!(u32::from_le_bytes(rec[8..12].try_into().unwrap()), 4);
        assert_eq!(u32::from_le_bytes(rec[12..16].try_into().unwrap()), 60);
        assert_eq!(&rec[16..], &[0xAB; 4]);
    }

    #[test]
    fn nanosecond_files_use_their_own_magic_and_resolution() {
        let mut out = PcapOut::new(Vec::new(), true, 65_535).unwrap();
        out.record(1_600_000_000_123_456_789, 60, &[1]).unwrap();
        let bytes = out.finish().unwrap();
        assert_eq!(&bytes[..4], &[0x4D, 0x3C, 0xB2, 0xA1]);
        assert_eq!(
            u32::from_le_bytes(bytes[28..32].try_into().unwrap()),
            123_456_789
        );
    }

    #[test]
    fn many_records_cross_buffer_boundaries_intact() {
        let mut out = PcapOut::new(Vec::new(), false, 2000).unwrap();
        let n = 3 * BUF_SIZE / 1016 + 7;
        for i in 0..n {
            let data = [(i % 251) as u8; 1000];
            out.record(i as u64 * 1000, 1000, &data).unwrap();
        }
        let bytes = out.finish().unwrap();
        assert_eq!(bytes.len(), 24 + n * 1016);
        for i in 0..n {
            let rec = &bytes[24 + i * 1016..24 + (i + 1) * 1016];
            assert_eq!(u32::from_le_bytes(rec[4..8].try_into().unwrap()), i as u32);
            assert!(rec[16..].iter().all(|&b| b == (i % 251) as u8));
        }
    }
}
