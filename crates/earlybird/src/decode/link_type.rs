//! The link-layer header types the decoder understands, numbered as pcap's
//! LINKTYPE_* values. Capture readers map a file's or ring's link type to
//! one of these ([`LinkType::from_pcap`]); a packet of any other link type
//! never reaches [`super::decode`].

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
