//! The layer walk: chains the protocol views from the link layer to the
//! innermost IP packet and its transport header, filling a [`Decoded`].
//!
//! Contract: [`decode`] takes one packet's captured bytes and link type,
//! resets `out` and fills it; `Err(Skip)` names why the packet belongs to no
//! flow. It never panics and never allocates; every read goes through a
//! checked slice. Rules (see also the module docs of [`super`]):
//! * Link layers: Ethernet (802.3 length frames → `NotIp`), 802.1Q/QinQ tags
//!   (at most [`MAX_VLAN_TAGS`], `vlan` = first tag's id), MPLS, PPPoE
//!   session, Linux SLL v1/v2, Cisco HDLC, BSD null/loopback, raw IP.
//! * The transport view is bounded by `min(captured, IP length)`: bytes past
//!   the IP packet (Ethernet padding, trailers) are never read as headers.
//! * TCP needs 14 captured bytes, UDP and SCTP 4; ICMP/ICMPv6 (type and
//!   code read when 4 bytes are there) and other
//!   protocols (ESP, IGMP, OSPF, …) need none and have ports 0.
//! * Tunnels (IP-in-IP 4/41, GRE incl. ERSPAN, PPTP and MPLS, VXLAN on UDP 4789,
//!   GTP-U G-PDUs on UDP 2152): the flow is the innermost IP packet; `tunnel`
//!   and `tunnel_id` describe the innermost tunnel. A tunnel is entered only
//!   when an IP header is found inside; if the tunnel payload is not IP (ARP
//!   in VXLAN, PPP LCP in PPTP, GRE keepalives, a cut tunnel header) the
//!   outer packet is the flow (GRE: protocol 47, ports 0; VXLAN/GTP: the
//!   outer UDP flow). Once an inner IP header is found its errors are the
//!   packet's errors. At most [`MAX_TUNNELS`] nested tunnels (`TooDeep`).
//! * Offsets and lengths are clamped to `u16::MAX`.

use super::ethernet::{ethertype, Ethernet, HEADER_LEN as ETH_LEN};
use super::gre::{erspan_len, Gre};
use super::gtp::{self, GtpU};
use super::icmp::{self, Icmp};
use super::ipv4::Ipv4;
use super::ipv6::{Ipv6, HEADER_LEN as IPV6_LEN};
use super::linux_sll::Sll;
use super::mpls::LabelStack;
use super::pppoe::{ppp_ip, PppoeSession};
use super::sctp::{self, Sctp};
use super::tcp::Tcp;
use super::udp::{self, Udp};
use super::vlan::{self, VlanTag};
use super::vxlan::{self, Vxlan};
use super::{ipproto, map_v4, null, Decoded, Skip, TunnelKind};
use crate::source::LinkType;

/// Most nested tunnels followed.
pub const MAX_TUNNELS: u8 = 4;
/// Most VLAN tags followed in one Ethernet header.
pub const MAX_VLAN_TAGS: u8 = 4;

/// Walk state that is not part of the output.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Tunnels entered so far.
    tunnels: u8,
    /// The outermost link-layer addresses have been recorded.
    have_mac: bool,
}

/// An inner IP packet found inside a tunnel.
struct Inner {
    version: u8,
    offset: usize,
    id: u32,
}

#[inline(always)]
fn at(data: &[u8], off: usize) -> &[u8] {
    data.get(off..).unwrap_or(&[])
}

#[inline(always)]
fn clamp16(x: usize) -> u16 {
    if x > usize::from(u16::MAX) {
        u16::MAX
    } else {
        x as u16
    }
}

/// Decodes one packet into `out` (see the module docs for the rules).
#[inline]
pub fn decode(link: LinkType, data: &[u8], out: &mut Decoded) -> Result<(), Skip> {
    *out = Decoded::default();
    let mut cx = Ctx::default();
    let (version, off) = match link {
        LinkType::Ethernet => ethernet(&mut cx, data, 0, out)?,
        LinkType::Raw => (raw_version(data)?, 0),
        LinkType::Ipv4 => (4, 0),
        LinkType::Ipv6 => (6, 0),
        LinkType::Null => null::parse(data)?,
        LinkType::CHdlc => {
            // Address, control, then an EtherType (Cisco HDLC framing).
            let h = data.get(..4).ok_or(Skip::Truncated)?;
            ethertype_walk(data, 4, u16::from_be_bytes([h[2], h[3]]), out)?
        }
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            let s = if link == LinkType::LinuxSll {
                Sll::parse_v1(data)?
            } else {
                Sll::parse_v2(data)?
            };
            if let Some(mac) = s.src_mac {
                out.src_mac = mac;
                cx.have_mac = true;
            }
            ethertype_walk(data, s.len, s.protocol, out)?
        }
    };
    ip(&mut cx, data, off, version, out)
}

/// Version nibble of a raw IP packet.
#[inline]
fn raw_version(data: &[u8]) -> Result<u8, Skip> {
    match data.first().ok_or(Skip::Truncated)? >> 4 {
        4 => Ok(4),
        6 => Ok(6),
        _ => Err(Skip::Malformed),
    }
}

/// Ethernet header at `off`, then whatever its EtherType leads to.
#[inline]
fn ethernet(cx: &mut Ctx, data: &[u8], off: usize, out: &mut Decoded) -> Result<(u8, usize), Skip> {
    let e = Ethernet::parse(at(data, off))?;
    if !cx.have_mac {
        out.dst_mac = e.dst;
        out.src_mac = e.src;
        cx.have_mac = true;
    }
    let off = off + ETH_LEN;
    match e.ethertype {
        ethertype::IPV4 => Ok((4, off)),
        ethertype::IPV6 => Ok((6, off)),
        et => ethertype_walk(data, off, et, out),
    }
}

/// Follows VLAN tags, MPLS and PPPoE from EtherType `et` at `off` to an IP
/// header: returns its version and offset.
fn ethertype_walk(
    data: &[u8],
    mut off: usize,
    mut et: u16,
    out: &mut Decoded,
) -> Result<(u8, usize), Skip> {
    let mut tags = 0u8;
    loop {
        match et {
            ethertype::IPV4 => return Ok((4, off)),
            ethertype::IPV6 => return Ok((6, off)),
            tpid if vlan::is_tpid(tpid) => {
                tags += 1;
                if tags > MAX_VLAN_TAGS {
                    return Err(Skip::TooDeep);
                }
                let t = VlanTag::parse(at(data, off))?;
                if out.vlan == 0 {
                    out.vlan = t.id;
                }
                et = t.ethertype;
                off += vlan::TAG_LEN;
            }
            ethertype::MPLS_UC | ethertype::MPLS_MC => {
                let s = LabelStack::parse(at(data, off))?;
                return Ok((s.ip_version, off + s.len));
            }
            ethertype::PPPOE_SESSION => {
                let s = PppoeSession::parse(at(data, off))?;
                return Ok((s.ip_version, off + s.len));
            }
            _ => return Err(Skip::NotIp),
        }
    }
}

/// IP header of `version` at `off`, then its transport.
#[inline]
fn ip(cx: &mut Ctx, data: &[u8], off: usize, version: u8, out: &mut Decoded) -> Result<(), Skip> {
    let (l4off, end, declared) = if version == 4 {
        let h = Ipv4::parse(at(data, off))?;
        if h.frag_offset != 0 {
            return Err(Skip::FragmentNonFirst);
        }
        out.src = map_v4(h.src);
        out.dst = map_v4(h.dst);
        out.proto = h.proto;
        out.ip_len = h.total_len;
        out.first_fragment = h.more_fragments;
        let end = data.len().min(off + usize::from(h.total_len));
        (off + h.header_len, end, h.payload_len())
    } else {
        let h = Ipv6::parse(at(data, off))?;
        if h.frag_offset != 0 {
            return Err(Skip::FragmentNonFirst);
        }
        out.src = h.src;
        out.dst = h.dst;
        out.proto = h.proto;
        out.ip_len = clamp16(usize::from(h.payload_len) + IPV6_LEN);
        out.first_fragment = h.more_fragments;
        let end = if h.jumbo {
            data.len()
        } else {
            data.len().min(off + IPV6_LEN + usize::from(h.payload_len))
        };
        (off + h.header_len, end, h.upper_len(data.len() - off))
    };
    out.ip_version = version;
    out.ip_offset = clamp16(off);
    // The packet as far as the IP header says it goes.
    let data = data.get(..end).unwrap_or(data);
    transport(cx, data, l4off, declared, out)
}

/// Transport header at `off`; `declared` is its length per the IP header.
#[inline]
fn transport(
    cx: &mut Ctx,
    data: &[u8],
    off: usize,
    declared: usize,
    out: &mut Decoded,
) -> Result<(), Skip> {
    let l4 = at(data, off);
    let (payload_off, payload_len) = match out.proto {
        ipproto::TCP => {
            let t = Tcp::parse(l4, declared)?;
            out.sport = t.sport;
            out.dport = t.dport;
            out.tcp_flags = t.flags;
            (off + t.header_len, declared - t.header_len)
        }
        ipproto::UDP => {
            let u = Udp::parse(l4, declared)?;
            out.sport = u.sport;
            out.dport = u.dport;
            out.payload_offset = clamp16(off + udp::HEADER_LEN);
            out.payload_len = clamp16(declared - udp::HEADER_LEN);
            if u.dport == vxlan::PORT || u.dport == gtp::PORT || u.sport == gtp::PORT {
                return udp_tunnel(cx, data, off + udp::HEADER_LEN, u.dport, out);
            }
            return Ok(());
        }
        ipproto::ICMP | ipproto::ICMPV6 => {
            // A message too short for its type and code is still a packet
            // of its (host-pair) flow, without them.
            out.icmp = Icmp::parse(l4).ok();
            (off + icmp::HEADER_LEN, icmp::payload_len(declared))
        }
        ipproto::SCTP => {
            let s = Sctp::parse(l4, declared)?;
            out.sport = s.sport;
            out.dport = s.dport;
            (off + sctp::HEADER_LEN, declared - sctp::HEADER_LEN)
        }
        ipproto::IPIP | ipproto::IPV6 | ipproto::GRE => {
            out.payload_offset = clamp16(off);
            out.payload_len = clamp16(declared);
            return ip_tunnel(cx, data, off, out);
        }
        _ => (off, declared),
    };
    out.payload_offset = clamp16(payload_off);
    out.payload_len = clamp16(payload_len);
    Ok(())
}

/// IP-in-IP and GRE (the outer packet's protocol is in `out.proto`).
#[cold]
#[inline(never)]
fn ip_tunnel(cx: &mut Ctx, data: &[u8], off: usize, out: &mut Decoded) -> Result<(), Skip> {
    match out.proto {
        ipproto::IPIP => enter(cx, data, out, TunnelKind::IpInIp, |_, _| {
            Ok(Inner {
                version: 4,
                offset: off,
                id: 0,
            })
        }),
        ipproto::IPV6 => enter(cx, data, out, TunnelKind::IpInIp, |_, _| {
            Ok(Inner {
                version: 6,
                offset: off,
                id: 0,
            })
        }),
        _ => enter(cx, data, out, TunnelKind::Gre, |cx, out| {
            let g = Gre::parse(at(data, off))?;
            let p = off + g.len;
            let (version, offset) = match g.protocol {
                ethertype::IPV4 => (4, p),
                ethertype::IPV6 => (6, p),
                ethertype::TEB => ethernet(cx, data, p, out)?,
                ethertype::ERSPAN_II | ethertype::ERSPAN_III => {
                    let e = erspan_len(&g, at(data, p))?;
                    ethernet(cx, data, p + e, out)?
                }
                ethertype::PPP => {
                    let (v, n) = ppp_ip(at(data, p))?;
                    (v, p + n)
                }
                // MPLS over GRE (RFC 4023), tagged frames; others → NotIp.
                et => ethertype_walk(data, p, et, out)?,
            };
            Ok(Inner {
                version,
                offset,
                id: g.key,
            })
        }),
    }
}

/// VXLAN and GTP-U inside the UDP datagram whose payload starts at `off`.
#[cold]
#[inline(never)]
fn udp_tunnel(
    cx: &mut Ctx,
    data: &[u8],
    off: usize,
    dport: u16,
    out: &mut Decoded,
) -> Result<(), Skip> {
    if dport == vxlan::PORT {
        enter(cx, data, out, TunnelKind::Vxlan, |cx, out| {
            let v = Vxlan::parse(at(data, off))?;
            let (version, offset) = ethernet(cx, data, off + vxlan::HEADER_LEN, out)?;
            Ok(Inner {
                version,
                offset,
                id: v.vni,
            })
        })
    } else {
        enter(cx, data, out, TunnelKind::Gtp, |_, _| {
            let g = GtpU::parse(at(data, off))?;
            let offset = off + g.len;
            let version = match data.get(offset).ok_or(Skip::Truncated)? >> 4 {
                4 => 4,
                6 => 6,
                _ => return Err(Skip::NotIp),
            };
            Ok(Inner {
                version,
                offset,
                id: g.teid,
            })
        })
    }
}

/// Runs `find` to locate an IP header inside a tunnel. When one is found the
/// walk continues there as the new innermost packet; when the payload is not
/// IP the outer packet stays the flow (`out` and `cx` are restored), except
/// for `TooDeep`, which always propagates.
fn enter(
    cx: &mut Ctx,
    data: &[u8],
    out: &mut Decoded,
    kind: TunnelKind,
    find: impl FnOnce(&mut Ctx, &mut Decoded) -> Result<Inner, Skip>,
) -> Result<(), Skip> {
    if cx.tunnels >= MAX_TUNNELS {
        return Err(Skip::TooDeep);
    }
    let saved = (*out, *cx);
    match find(cx, out) {
        Ok(inner) => {
            cx.tunnels += 1;
            out.tunnel = kind;
            out.tunnel_id = inner.id;
            out.sport = 0;
            out.dport = 0;
            out.tcp_flags = 0;
            ip(cx, data, inner.offset, inner.version, out)
        }
        Err(Skip::TooDeep) => Err(Skip::TooDeep),
        Err(_) => {
            (*out, *cx) = saved;
            Ok(())
        }
    }
}
