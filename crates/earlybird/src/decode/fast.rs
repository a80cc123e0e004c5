//! The fast path: untagged Ethernet → IPv4 (no options, not a fragment) →
//! TCP or UDP, decoded with a handful of loads and one combined check.
//!
//! Contract: [`ethernet_ipv4`] looks at one Ethernet frame. When the frame
//! is the common case — EtherType 0x0800, IPv4 header of 20 bytes, fragment
//! offset 0 and more-fragments clear, a non-zero total length, TCP with a
//! valid data offset or UDP not on a tunnel port, and the transport bytes
//! the flow needs captured — it returns a [`Fast`] whose
//! [`Fast::to_decoded`] is exactly what [`super::decode`] produces for the
//! same bytes. Anything else returns `None`, and the caller runs the general
//! decoder, which gives the verdict (including every skip reason). So the
//! fast path never changes a result, only the cost: tests compare it with
//! the general decoder on every packet of the corpus and on fuzzed bytes.
//! Pure, no allocation, never panics.
//!
//! Measured reason for existing: the general walk costs ~150 instructions per
//! worst-case packet (callgrind); this path a fraction of that.

use super::{ipproto, map_v4, Decoded, TunnelKind};

/// A fast-path packet: the checked header bytes plus what the checks
/// computed. Addresses, ports and MACs are read from the header on demand,
/// so a shard that only needs the shard hash of another shard's packet
/// loads 13 bytes and builds nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fast<'a> {
    h: &'a [u8; 48],
    /// TCP or UDP.
    pub proto: u8,
    /// IPv4 total length.
    pub ip_len: u16,
    /// TCP flags (0 for UDP).
    pub tcp_flags: u8,
    /// Offset of the transport payload.
    pub payload_offset: u16,
    /// Transport payload length per the IP header.
    pub payload_len: u16,
}

/// Offset of the IPv4 header behind an untagged Ethernet header.
pub const IP_OFFSET: u16 = 14;
const L4: usize = 34;

/// Decodes the common case (see the module docs); `None` otherwise.
#[inline(always)]
pub fn ethernet_ipv4(data: &[u8]) -> Option<Fast<'_>> {
    // Ethernet 14 + IPv4 20 + the first 14 bytes of TCP (or 4 of UDP).
    let h: &[u8; 48] = data.first_chunk()?;
    let total_len = u16::from_be_bytes([h[16], h[17]]);
    let frag = u16::from_be_bytes([h[20], h[21]]) & 0x3fff;
    let proto = h[23];
    // EtherType IPv4, version 4 with IHL 5, not a fragment, not TSO (0).
    if u16::from_be_bytes([h[12], h[13]]) != 0x0800 || h[14] != 0x45 || frag != 0 {
        return None;
    }
    // The transport view ends at the IP length or the capture, whichever
    // comes first; declared = what the IP header says follows it.
    let end = data
        .len()
        .min(usize::from(IP_OFFSET) + usize::from(total_len));
    let declared = usize::from(total_len).checked_sub(20)?;
    let captured = end.checked_sub(L4)?;
    let (tcp_flags, payload_offset, payload_len) = match proto {
        ipproto::TCP => {
            let hl = tcp_header_len(h[46]);
            if captured < 14 || declared < 20 || hl < 20 || hl > declared {
                return None;
            }
            (h[47], L4 + hl, declared - hl)
        }
        ipproto::UDP => {
            let sport = u16::from_be_bytes([h[34], h[35]]);
            let dport = u16::from_be_bytes([h[36], h[37]]);
            if captured < 4 || declared < 8 || super::udp::tunnel_port(sport, dport) {
                return None;
            }
            (0, L4 + 8, declared - 8)
        }
        _ => return None,
    };
    Some(Fast {
        h,
        proto,
        ip_len: total_len,
        tcp_flags,
        payload_offset: payload_offset as u16,
        payload_len: payload_len as u16,
    })
}

/// The TCP header's length from its data-offset byte.
#[inline(always)]
fn tcp_header_len(b: u8) -> usize {
    usize::from(b >> 4) * 4
}

/// Byte of a frame that holds its TCP header's data offset (for
/// [`payload_place`]).
pub const TCP_OFFSET_AT: usize = L4 + 12;

/// Where the transport payload of a frame [`ethernet_ipv4`] accepted
/// starts and its length per the headers, as its [`Fast`] said, from its
/// protocol, its IPv4 total length (`ip_len`) and, for TCP, the frame's
/// byte at [`TCP_OFFSET_AT`] (`tcp_offset`; UDP does not read it): for a
/// caller that did not keep them (the shard's batch loop reads them
/// again only for a packet a consumer reads).
#[inline(always)]
pub fn payload_place(proto: u8, ip_len: u16, tcp_offset: u8) -> (u16, u16) {
    let declared = usize::from(ip_len).saturating_sub(20);
    let hl = if proto == ipproto::TCP {
        tcp_header_len(tcp_offset)
    } else {
        8
    };
    ((L4 + hl) as u16, declared.saturating_sub(hl) as u16)
}

/// `N` bytes of the header from offset `i` (constant offsets within the
/// 48 checked bytes: one load, no bounds check left after inlining).
#[inline(always)]
fn at<const N: usize>(h: &[u8; 48], i: usize) -> [u8; N] {
    let mut b = [0; N];
    b.copy_from_slice(&h[i..i + N]);
    b
}

impl Fast<'_> {
    /// Source address.
    #[inline(always)]
    pub fn src(&self) -> [u8; 4] {
        at::<4>(self.h, 26)
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst(&self) -> [u8; 4] {
        at::<4>(self.h, 30)
    }

    /// Source port.
    #[inline(always)]
    pub fn sport(&self) -> u16 {
        u16::from_be_bytes(at::<2>(self.h, 34))
    }

    /// Destination port.
    #[inline(always)]
    pub fn dport(&self) -> u16 {
        u16::from_be_bytes(at::<2>(self.h, 36))
    }

    /// Source MAC.
    #[inline(always)]
    pub fn src_mac(&self) -> [u8; 6] {
        at::<6>(self.h, 6)
    }

    /// Destination MAC.
    #[inline(always)]
    pub fn dst_mac(&self) -> [u8; 6] {
        at::<6>(self.h, 0)
    }

    /// The same packet in the general decoder's form.
    pub fn to_decoded(self) -> Decoded {
        Decoded {
            src: map_v4(self.src()),
            dst: map_v4(self.dst()),
            sport: self.sport(),
            dport: self.dport(),
            proto: self.proto,
            ip_version: 4,
            ip_len: self.ip_len,
            tcp_flags: self.tcp_flags,
            vlan: 0,
            tunnel: TunnelKind::None,
            tunnel_id: 0,
            src_mac: self.src_mac(),
            dst_mac: self.dst_mac(),
            ip_offset: IP_OFFSET,
            payload_offset: self.payload_offset,
            payload_len: self.payload_len,
            first_fragment: false,
            icmp: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode;
    use crate::decode::LinkType;

    /// Ethernet + IPv4 + TCP SYN 10.0.0.1:49152 → 10.0.0.2:443, 6 payload bytes.
    fn syn() -> Vec<u8> {
        let mut f = vec![
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, // Ethernet
            0x45, 0, 0, 46, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
            0xc0, 0x00, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0,
            0, // TCP
        ];
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        f
    }

    fn general(f: &[u8]) -> Option<Decoded> {
        let mut d = Decoded::default();
        decode(LinkType::Ethernet, f, &mut d).ok().map(|_| d)
    }

    #[test]
    fn common_tcp_matches_general_decoder() {
        let f = syn();
        let fast = ethernet_ipv4(&f).unwrap();
        assert_eq!(
            (fast.sport(), fast.dport(), fast.tcp_flags),
            (49152, 443, 0x02)
        );
        assert_eq!(Some(fast.to_decoded()), general(&f));
    }

    #[test]
    fn declines_what_it_does_not_handle() {
        let f = syn();
        let mut v = f.clone();
        v[12..14].copy_from_slice(&[0x81, 0x00]); // VLAN tag
        assert!(ethernet_ipv4(&v).is_none());
        let mut o = f.clone();
        o[14] = 0x46; // IPv4 options
        assert!(ethernet_ipv4(&o).is_none());
        let mut m = f.clone();
        m[20] = 0x20; // more fragments
        assert!(ethernet_ipv4(&m).is_none());
        let mut z = f.clone();
        z[16..18].copy_from_slice(&[0, 0]); // TSO capture
        assert!(ethernet_ipv4(&z).is_none());
        let mut d = f.clone();
        d[46] = 0x40; // data offset 4
        assert!(ethernet_ipv4(&d).is_none());
        assert!(general(&d).is_none(), "the general decoder skips it");
        let mut u = f.clone();
        u[23] = 17;
        u[36..38].copy_from_slice(&4789u16.to_be_bytes()); // VXLAN port
        assert!(ethernet_ipv4(&u).is_none());
        assert!(ethernet_ipv4(&f[..47]).is_none(), "short frame");
    }

    /// The payload's place read again from the frame is the one the
    /// fast path found.
    fn same_place(f: &[u8], what: &str) {
        if let Some(x) = ethernet_ipv4(f) {
            let b = if x.proto == ipproto::TCP {
                f[TCP_OFFSET_AT]
            } else {
                0xff
            };
            assert_eq!(
                payload_place(x.proto, x.ip_len, b),
                (x.payload_offset, x.payload_len),
                "{what}"
            );
        }
    }

    #[test]
    fn every_cut_and_every_byte_flip_agrees_with_general_decoder() {
        let f = syn();
        let mut u = f.clone();
        u[23] = 17;
        for base in [f, u] {
            for cut in 0..=base.len() {
                let c = &base[..cut];
                same_place(c, &format!("cut {cut}"));
                if let Some(x) = ethernet_ipv4(c) {
                    assert_eq!(Some(x.to_decoded()), general(c), "cut {cut}");
                }
            }
            for i in 0..base.len() {
                for v in [0u8, 1, 0x0f, 0x10, 0x45, 0x50, 0x80, 0xff] {
                    let mut g = base.clone();
                    g[i] = v;
                    same_place(&g, &format!("byte {i} = {v:#x}"));
                    if let Some(x) = ethernet_ipv4(&g) {
                        assert_eq!(Some(x.to_decoded()), general(&g), "byte {i} = {v:#x}");
                    }
                }
            }
        }
    }
}
