//! Packet sources: capture files (pcap, pcapng), in-memory buffers, live
//! interfaces (AF_PACKET, [`af_packet`]) and the synthetic generator.
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
pub mod fanout;
pub mod file;
pub mod inputs;
pub mod netdev;
pub mod pcap;
pub mod pcapng;
pub mod populate;
pub mod stream;
pub mod vanish;
mod walk;

pub use file::{CaptureFile, CaptureReader};

use crate::time::Nanos;

/// Default number of packets in a batch (the seeds use chunks of 128).
pub const BATCH: usize = 256;

/// Link-layer header type of a packet (the pcap LINKTYPE_* numbering, with
/// the DLT aliases folded in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_ETHERNET (1).
    Ethernet,
    /// LINKTYPE_NULL (0) and LINKTYPE_LOOP (108): 4-byte address family.
    Null,
    /// LINKTYPE_RAW (101, DLT 12/14): raw IPv4 or IPv6.
    Raw,
    /// LINKTYPE_IPV4 (228).
    Ipv4,
    /// LINKTYPE_IPV6 (229).
    Ipv6,
    /// LINKTYPE_LINUX_SLL (113): Linux cooked capture v1.
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): Linux cooked capture v2.
    LinuxSll2,
    /// LINKTYPE_C_HDLC (104): Cisco HDLC, 4-byte header with an EtherType.
    CHdlc,
    /// LINKTYPE_PPP (9): PPP, with or without the 0xFF 0x03 framing bytes.
    Ppp,
    /// LINKTYPE_PPP_HDLC (50): PPP in HDLC-like framing, or Cisco HDLC
    /// (address byte 0x0F/0x8F).
    PppHdlc,
    /// LINKTYPE_FRELAY (107): Frame Relay.
    FrameRelay,
    /// LINKTYPE_IEEE802_11 (105): 802.11 frames.
    Ieee80211,
    /// LINKTYPE_IEEE802_11_RADIOTAP (127): radiotap header, then 802.11.
    Radiotap,
    /// LINKTYPE_PPI (192): PPI header naming the inner link type.
    Ppi,
    /// LINKTYPE_NFLOG (239): Linux netfilter log records.
    Nflog,
    /// LINKTYPE_SLIP (8): 16-byte SLIP pseudo-header, then IP.
    Slip,
    /// LINKTYPE_ATM_RFC1483 (100) and DLT_ATM_CLIP (106): an LLC/SNAP
    /// header, or raw IP when there is none.
    AtmLlc,
}

impl LinkType {
    /// Maps a pcap/pcapng link-type number to a supported [`LinkType`].
    pub fn from_pcap(linktype: u32) -> Option<LinkType> {
        Some(match linktype {
            1 => LinkType::Ethernet,
            0 | 108 => LinkType::Null,
            101 | 12 | 14 => LinkType::Raw,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            104 => LinkType::CHdlc,
            9 => LinkType::Ppp,
            50 => LinkType::PppHdlc,
            107 => LinkType::FrameRelay,
            105 => LinkType::Ieee80211,
            127 => LinkType::Radiotap,
            192 => LinkType::Ppi,
            239 => LinkType::Nflog,
            8 => LinkType::Slip,
            100 | 106 => LinkType::AtmLlc,
            _ => return None,
        })
    }

    /// Every link type, in declaration order.
    pub const ALL: [LinkType; 17] = [
        LinkType::Ethernet,
        LinkType::Null,
        LinkType::Raw,
        LinkType::Ipv4,
        LinkType::Ipv6,
        LinkType::LinuxSll,
        LinkType::LinuxSll2,
        LinkType::CHdlc,
        LinkType::Ppp,
        LinkType::PppHdlc,
        LinkType::FrameRelay,
        LinkType::Ieee80211,
        LinkType::Radiotap,
        LinkType::Ppi,
        LinkType::Nflog,
        LinkType::Slip,
        LinkType::AtmLlc,
    ];
}

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
