//! Packet decoding: link layer → (tunnels) → IP → transport, bounds-checked.
//!
//! Contract: [`decode`] takes the captured bytes of one packet, its link type
//! and original length, and fills a caller-owned [`Decoded`] summary (no
//! allocation). It returns `Err(Skip)` when the packet cannot belong to a flow;
//! the [`Skip`] names the reason so the caller can count it (Zeek-style
//! "weirds"). It never panics, whatever the bytes.
//!
//! Each protocol lives in its own file as a pure view over a byte slice.
//!
//! Rules worth knowing:
//! * Snaplen-cut packets are decoded as far as the captured bytes allow; the
//!   IP length reported is the one from the IP header (what was on the wire).
//!   A packet whose transport header is cut off is skipped (`Skip::Truncated`).
//! * IP fragments: the first fragment (offset 0) carries the ports and is
//!   accounted to its 5-tuple flow like any packet. Non-first fragments carry
//!   no transport header; they are skipped with `Skip::FragmentNonFirst`
//!   rather than creating a bogus port-0 flow.
//! * GRE and VXLAN: the flow is the innermost IP packet; the tunnel kind and
//!   its identifier (GRE key, VXLAN VNI) are kept in [`Decoded::tunnel`] and
//!   become part of the flow key.

pub mod ethernet;
pub mod gre;
pub mod gtp;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod linux_sll;
pub mod mpls;
pub mod null;
pub mod pppoe;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

mod walk;

#[cfg(test)]
mod testutil;
#[cfg(test)]
mod walk_tests;
#[cfg(test)]
mod corpus_tests;

pub use walk::{decode, MAX_TUNNELS, MAX_VLAN_TAGS};

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
}

impl TunnelKind {
    /// Short lower-case name used in records.
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::None => "",
            TunnelKind::Gre => "gre",
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::IpInIp => "ipip",
            TunnelKind::Gtp => "gtp",
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
}

impl Skip {
    /// Number of skip reasons (size of counter arrays).
    pub const COUNT: usize = 5;
    /// All reasons, in counter order.
    pub const ALL: [Skip; Skip::COUNT] = [
        Skip::Truncated,
        Skip::Malformed,
        Skip::NotIp,
        Skip::FragmentNonFirst,
        Skip::TooDeep,
    ];
    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            Skip::Truncated => "truncated",
            Skip::Malformed => "malformed",
            Skip::NotIp => "not_ip",
            Skip::FragmentNonFirst => "fragment_non_first",
            Skip::TooDeep => "too_deep",
        }
    }
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
    /// GRE key (PPTP: call id), VXLAN VNI or GTP TEID (0 when none).
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
