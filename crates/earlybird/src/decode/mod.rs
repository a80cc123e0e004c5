//! Packet decoding: link layer → (tunnels) → IP → transport, bounds-checked.
//!
//! Contract: [`decode`] takes the captured bytes of one packet and its link
//! type, resets a caller-owned [`Decoded`] summary and fills it (no
//! allocation, no copy of the packet). It returns `Err(Skip)` when the packet
//! cannot belong to a flow; the [`Skip`] names the reason so the caller can
//! count it (Zeek-style "weirds"). It never panics, whatever the bytes.
//!
//! Each protocol lives in its own file as a pure view over a byte slice
//! (`parse(&[u8]) -> Result<View, Skip>`); `walk.rs` chains them.
//!
//! Rules worth knowing:
//! * Link layers: Ethernet II and 802.3 frames (LLC/SNAP carrying an
//!   EtherType is followed; other LLC → `NotIp`), 802.1Q / QinQ
//!   (0x8100, 0x88A8, 0x9100; `vlan` = outermost tag), MPLS (to bottom of
//!   stack, then the IP version nibble; pseudowires → `NotIp`), PPPoE session
//!   (PPP IPv4/IPv6/MPLS; discovery and PPP control → `NotIp`), Linux SLL
//!   v1/v2 (with 802.11, radiotap and LLC payloads named by their ARPHRD or
//!   protocol), BSD null/loopback (AF in either byte order), raw IPv4/IPv6,
//!   PPP and PPP in HDLC-like framing, Cisco HDLC, Frame Relay (Q.922 with
//!   NLPID/SNAP or Cisco encapsulation), IEEE 802.11 data frames (protected
//!   frames → `Encrypted`, management/control/null frames → `NotIp`) bare or
//!   under radiotap, PPI, Prism or AVS headers, NFLOG, SLIP, and ATM
//!   LLC/SNAP (RFC 1483, Linux CLIP, SunATM). Link types outside this list
//!   never reach the decoder: the capture reader counts their packets as
//!   `unsupported_link`.
//! * Snaplen-cut packets are decoded as far as the captured bytes allow; the
//!   IP length reported is the one from the IP header (what was on the wire).
//!   A transport header cut before what the flow needs is skipped
//!   (`Skip::Truncated`): TCP needs 14 bytes (ports … flags), UDP and SCTP 4
//!   (ports). ICMP/ICMPv6 and other protocols (ESP, IGMP, OSPF, …) need none
//!   and have ports 0: their flow is the host pair, as in nDPI.
//! * Malformed headers (`Skip::Malformed`): wrong IP version, IPv4 IHL < 5 or
//!   total length < header length (a total length of 0 is a TSO capture:
//!   the captured length is used, as Wireshark and nDPI do), IPv6 extension headers longer than the
//!   payload, TCP data offset < 5 or beyond the segment, UDP/TCP/SCTP
//!   segments shorter than their header.
//! * Bytes past the IP length (Ethernet padding, trailers) are never read as
//!   headers.
//! * IP fragments: the first fragment (offset 0, more-fragments set) carries
//!   the ports and is accounted to its 5-tuple flow like any packet, with
//!   `first_fragment = true`. Non-first fragments carry no transport header;
//!   they are skipped with `Skip::FragmentNonFirst` rather than creating a
//!   bogus port-0 flow; `Decoded::ip_offset` and `ip_version` then say
//!   where the fragment's IP header is (the VoIP stage reassembles them).
//! * Tunnels (IP-in-IP 4/41, GRE incl. transparent Ethernet, ERSPAN I/II/III,
//!   PPTP and MPLS over GRE, VXLAN on UDP 4789 and 8472, GTP-U on UDP 2152,
//!   Geneve on UDP 6081, Teredo on UDP 3544, CAPWAP data on UDP 5247): the flow is the
//!   innermost IP packet; the innermost tunnel's kind and identifier (GRE
//!   key, VXLAN or Geneve VNI, CAPWAP radio id) are kept in
//!   [`Decoded::tunnel`] / [`Decoded::tunnel_id`] and become part of the
//!   flow key. A GTP-U TEID and a PPTP call id differ by direction (each
//!   end names the receiver's), so their id is 0: both directions of the
//!   inner session are one flow. MACs stay those of the outermost Ethernet header. When a
//!   tunnel carries no IP (ARP in VXLAN, PPP LCP, GRE keepalive, 802.11 in
//!   GRE) the outer packet itself is the flow. Nesting is bounded
//!   ([`walk::MAX_TUNNELS`], [`walk::MAX_VLAN_TAGS`], MPLS and IPv6 extension chains):
//!   deeper is `Skip::TooDeep`.

pub mod capwap;
pub mod chdlc;
pub mod ethernet;
pub mod fast;
pub mod frame_relay;
pub mod geneve;
pub mod gre;
pub mod gtp;
pub mod icmp;
pub mod ieee80211;
pub mod ipv4;
pub mod ipv6;
pub mod linux_sll;
pub mod llc;
pub mod mpls;
pub mod nflog;
pub mod null;
pub mod ppi;
pub mod ppp;
pub mod pppoe;
pub mod radiotap;
pub mod sctp;
pub mod slip;
pub mod tcp;
pub mod teredo;
pub mod udp;
pub mod vlan;
pub mod vxlan;

mod link_type;
mod walk;

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
pub(crate) mod testutil;
#[cfg(test)]
mod walk_tests;

pub use link_type::LinkType;
pub use walk::decode;

/// IP protocol numbers used by the decoder.
pub mod ipproto {
    pub const ICMP: u8 = 1;
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6: u8 = 41;
    pub const GRE: u8 = 47;
    pub const ICMPV6: u8 = 58;
    pub const SCTP: u8 = 132;
}

/// Tunnel that carried the inner packet (part of the flow key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum TunnelKind {
    /// Not tunnelled.
    #[default]
    None = 0,
    /// GRE (RFC 2784/2890); id = GRE key or 0.
    Gre = 1,
    /// VXLAN (RFC 7348); id = VNI.
    Vxlan = 2,
    /// IP in IP (IPv4/IPv6 in IPv4/IPv6); id = 0.
    IpInIp = 3,
    /// GTP-U (3GPP TS 29.281) G-PDU; id = TEID.
    Gtp = 4,
    /// Geneve (RFC 8926); id = VNI.
    Geneve = 5,
    /// Teredo (RFC 4380): IPv6 in UDP; id = 0.
    Teredo = 6,
    /// CAPWAP data channel (RFC 5415); id = radio id.
    Capwap = 7,
}

impl TunnelKind {
    /// Inverse of `kind as u8`; unknown values map to [`TunnelKind::None`].
    #[inline]
    pub(crate) fn from_u8(v: u8) -> TunnelKind {
        match v {
            1 => TunnelKind::Gre,
            2 => TunnelKind::Vxlan,
            3 => TunnelKind::IpInIp,
            4 => TunnelKind::Gtp,
            5 => TunnelKind::Geneve,
            6 => TunnelKind::Teredo,
            7 => TunnelKind::Capwap,
            _ => TunnelKind::None,
        }
    }

    /// Short lower-case name used in records.
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::None => "",
            TunnelKind::Gre => "gre",
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::IpInIp => "ipip",
            TunnelKind::Gtp => "gtp",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Teredo => "teredo",
            TunnelKind::Capwap => "capwap",
        }
    }
}

/// Why a packet does not belong to any flow. Each reason is a named counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Skip {
    /// Link layer or IP header cut short by the capture (snaplen) or the file.
    Truncated = 0,
    /// A header field is invalid (bad IP version, header length, …).
    Malformed = 1,
    /// Not IPv4/IPv6 (ARP, LLDP, STP, …).
    NotIp = 2,
    /// Non-first IP fragment (no transport header to key a flow on).
    FragmentNonFirst = 3,
    /// Encapsulation nested deeper than the decoder follows.
    TooDeep = 4,
    /// Link-layer payload encrypted (a protected 802.11 frame, CAPWAP
    /// DTLS): no IP header can be read.
    Encrypted = 5,
}

impl Skip {
    /// Number of skip reasons (size of counter arrays).
    pub const COUNT: usize = 6;
    /// All reasons, in counter order.
    pub const ALL: [Skip; Skip::COUNT] = [
        Skip::Truncated,
        Skip::Malformed,
        Skip::NotIp,
        Skip::FragmentNonFirst,
        Skip::TooDeep,
        Skip::Encrypted,
    ];
    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            Skip::Truncated => "truncated",
            Skip::Malformed => "malformed",
            Skip::NotIp => "not_ip",
            Skip::FragmentNonFirst => "fragment_non_first",
            Skip::TooDeep => "too_deep",
            Skip::Encrypted => "encrypted",
        }
    }
}

/// What a link-layer or tunnel header says comes after it; each header
/// view returns one, with its own length, for the walk to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// An IP header of this version (4 or 6).
    Ip(u8),
    /// A payload named by an EtherType (IP, VLAN tags, MPLS, PPPoE, …).
    EtherType(u16),
    /// An Ethernet frame (bridged encapsulations).
    Ethernet,
    /// An IEEE 802.2 LLC header (SNAP).
    Llc,
    /// An IEEE 802.11 frame.
    Ieee80211,
}

/// Everything the flow stage needs from one packet. Filled in place by
/// [`decode`]; fields not present in the packet are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decoded {
    /// Source address; IPv4 addresses are stored as IPv4-mapped IPv6
    /// (`::ffff:a.b.c.d`).
    pub src: [u8; 16],
    /// Destination address, same encoding as `src`.
    pub dst: [u8; 16],
    /// Source port (TCP/UDP/SCTP); 0 for ICMP/ICMPv6 and other protocols
    /// (the flow is then the host pair, as in nDPI).
    pub sport: u16,
    /// Destination port (TCP/UDP/SCTP), 0 otherwise.
    pub dport: u16,
    /// IP protocol number of the innermost packet (TCP=6, UDP=17, …).
    pub proto: u8,
    /// 4 or 6: version of the innermost IP header.
    pub ip_version: u8,
    /// IP length from the innermost IP header (IPv4 total length; IPv6
    /// payload length + 40), i.e. what was on the wire, snaplen aside.
    pub ip_len: u16,
    /// TCP flags byte (FIN=0x01 … CWR=0x80), 0 for other protocols.
    pub tcp_flags: u8,
    /// Outermost 802.1Q VLAN id (0 = none).
    pub vlan: u16,
    /// Tunnel kind that carried the inner packet.
    pub tunnel: TunnelKind,
    /// GRE key, VXLAN or Geneve VNI, CAPWAP radio id (0 when none, and
    /// for GTP-U and PPTP, whose TEID / call id differs by direction).
    pub tunnel_id: u32,
    /// Source MAC of the outermost Ethernet header (zero when none).
    pub src_mac: [u8; 6],
    /// Destination MAC of the outermost Ethernet header.
    pub dst_mac: [u8; 6],
    /// Offset of the innermost IP header from the start of the packet.
    pub ip_offset: u16,
    /// Offset of the transport payload from the start of the packet.
    pub payload_offset: u16,
    /// Transport payload length according to the headers (not the capture).
    pub payload_len: u16,
    /// True for the first fragment of a fragmented IP datagram.
    pub first_fragment: bool,
    /// Type and code of an ICMP / ICMPv6 message that has them (4 bytes
    /// captured); `None` for other protocols.
    pub icmp: Option<icmp::Icmp>,
}

impl Decoded {
    /// True when both addresses are IPv4 (stored IPv4-mapped).
    #[inline]
    pub fn is_ipv4(&self) -> bool {
        self.ip_version == 4
    }
}

/// Writes an IPv4 address into the IPv4-mapped IPv6 form used by [`Decoded`].
#[inline]
pub fn map_v4(a: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
    ]
}

/// Formats an address stored in [`Decoded`] form as text.
pub fn fmt_addr(a: &[u8; 16]) -> String {
    if a[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        std::net::Ipv4Addr::new(a[12], a[13], a[14], a[15]).to_string()
    } else {
        std::net::Ipv6Addr::from(*a).to_string()
    }
}
