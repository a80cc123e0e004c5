//! Packets in and out: capture files (pcap, pcapng), in-memory buffers and
//! live interfaces (AF_PACKET receive rings, [`af_packet`]) in; classic pcap
//! files (`pcap_writer`, for the marker and the generators) and an
//! interface's transmit ring ([`replay`]) out.
//!
//! Contract: a source hands out *batches* of [`PacketRef`]s — offsets into a
//! byte buffer it owns (a memory-mapped file or an in-memory capture) plus the
//! per-packet metadata already normalised (timestamp in ns, link type,
//! captured and original length). No packet is copied and nothing is
//! allocated per packet: the caller reuses one `Vec<PacketRef>` for every
//! batch. Structural damage in a file that still leaves earlier packets usable
//! (a capture cut mid-record) ends the file with a [`Warning`] naming the byte
//! offset; a file that is unusable from the start is an [`crate::Error`].

pub mod af_packet;
#[cfg(feature = "tools")]
mod af_packet_tx;
pub mod af_xdp;
#[cfg(feature = "tools")]
pub mod af_xdp_tx;
pub mod btf;
pub mod capfilter;
pub mod fanout;
pub(crate) mod feed;
pub mod file;
pub mod hwstamp;
pub mod inputs;
pub mod netdev;
pub mod pcap;
pub(crate) mod pcap_writer;
pub mod pcapng;
pub(crate) mod pcapng_writer;
pub mod populate;
#[cfg(feature = "tools")]
pub mod replay;
pub mod retime;
pub mod snaprule;
pub mod stream;
pub mod vanish;
mod walk;
#[cfg(feature = "tools")]
pub mod xdp_live;
pub mod xdp_mesh;

pub use file::{CaptureFile, CaptureReader};

use crate::decode::LinkType;
use crate::time::Nanos;

/// Default number of packets in a batch (the seeds use chunks of 128).
pub const BATCH: usize = 256;

/// One packet of a batch: where its bytes are in the source's buffer and what
/// the capture header said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRef {
    /// Byte offset of the first captured byte in the source buffer.
    pub offset: usize,
    /// Captured length (bytes present in the buffer).
    pub caplen: u32,
    /// Original length on the wire (≥ `caplen` when snaplen cut it).
    pub orig_len: u32,
    /// Timestamp, nanoseconds since the epoch.
    pub ts: Nanos,
    /// Link type of this packet (pcapng interfaces may differ).
    pub link: LinkType,
    /// 1-based packet number within its file, for error messages.
    pub number: u64,
}

impl PacketRef {
    /// The captured bytes of this packet inside `buf` (the source buffer).
    #[inline]
    pub fn bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.offset..self.offset + self.caplen as usize]
    }
}

/// A non-fatal problem with an input, reported once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// File name as given by the user (or "interface NAME").
    pub file: String,
    /// Byte offset where the problem starts ([`Warning::NO_OFFSET`] for a
    /// live interface).
    pub offset: u64,
    /// What is wrong.
    pub message: String,
}

impl Warning {
    /// The offset of a warning about a live interface, where none applies.
    pub const NO_OFFSET: u64 = u64::MAX;

    /// A live capture that ended early: `error` names the interface.
    pub fn live(error: &crate::Error) -> Warning {
        Warning {
            file: String::new(),
            offset: Warning::NO_OFFSET,
            message: error.to_string(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.offset == Warning::NO_OFFSET {
            return write!(f, "{}", self.message);
        }
        write!(
            f,
            "{}: at byte offset {}: {}",
            self.file, self.offset, self.message
        )
    }
}
