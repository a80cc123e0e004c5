//! The layer walk: chains the protocol views from the link layer to the
//! innermost IP packet and its transport header, filling a [`Decoded`].
//!
//! Contract: [`decode`] takes one packet's captured bytes and link type,
//! resets `out` and fills it; `Err(Skip)` names why the packet belongs to no
//! flow. It never panics and never allocates; every read goes through a
//! checked slice. Rules (see also the module docs of [`super`]):
//! * Link layers: Ethernet (802.3 length frames: their LLC/SNAP header),
//!   802.1Q/QinQ tags (at most [`MAX_VLAN_TAGS`], `vlan` = first tag's id),
//!   MPLS, PPPoE session, Linux SLL v1/v2, Cisco HDLC, BSD null/loopback,
//!   raw IP on the common path; PPP, Frame Relay, 802.11 (bare, radiotap,
//!   PPI), NFLOG, SLIP and ATM LLC out of line ([`LinkType`] lists them).
//!   Each header view says what follows it ([`Next`]) and `follow` goes
//!   there; at most `MAX_LINK_HOPS` (16) such steps (`TooDeep`). A radiotap
//!   FCS and the bytes after an NFLOG payload are cut off before the IP
//!   walk. The outermost link-layer addresses (Ethernet, SLL, 802.11 SA/DA)
//!   are the packet's MACs.
//! * The transport view is bounded by `min(captured, IP length)`: bytes past
//!   the IP packet (Ethernet padding, trailers) are never read as headers.
//! * TCP needs 14 captured bytes, UDP and SCTP 4; ICMP/ICMPv6 (type and
//!   code read when 4 bytes are there) and other
//!   protocols (ESP, IGMP, OSPF, …) need none and have ports 0.
//! * Tunnels (IP-in-IP 4/41, GRE incl. ERSPAN, PPTP and MPLS, VXLAN on UDP
//!   4789/8472, Geneve on 6081, GTP-U G-PDUs on 2152, CAPWAP data on 5247,
//!   Teredo on 3544; the destination port decides first, see
//!   [`udp::tunnel_port`]): the flow is the innermost IP packet; `tunnel`
//!   and `tunnel_id` describe the innermost tunnel. A tunnel is entered only
//!   when an IP header is found inside; if the tunnel payload is not IP (ARP
//!   in VXLAN, PPP LCP in PPTP, GRE keepalives, a cut tunnel header, an
//!   802.11 management frame in CAPWAP) the outer packet is the flow (GRE:
//!   protocol 47, ports 0; UDP tunnels: the outer UDP flow). Once an inner IP header is found its errors are the
//!   packet's errors. At most [`MAX_TUNNELS`] nested tunnels (`TooDeep`).
//! * Offsets and lengths are clamped to `u16::MAX`.

use super::capwap::{self, Capwap};
use super::ethernet::{ethertype, ethertype::MIN_ETHERTYPE, Ethernet, HEADER_LEN as ETH_LEN};
use super::geneve::{self, Geneve};
use super::gre::{erspan_len, Gre};
use super::gtp::{self, GtpU};
use super::icmp::{self, Icmp};
use super::ieee80211::Ieee80211;
use super::ipv4::Ipv4;
use super::ipv6::{Ipv6, HEADER_LEN as IPV6_LEN};
use super::linux_sll::{Sll, SllNext};
use super::mpls::LabelStack;
use super::nflog::Nflog;
use super::ppi::Ppi;
use super::pppoe::PppoeSession;
use super::radiotap::Radiotap;
use super::sctp::{self, Sctp};
use super::tcp::Tcp;
use super::udp::{self, Udp};
use super::vlan::{self, VlanTag};
use super::vxlan::{self, Vxlan};
use super::LinkType;
use super::{chdlc, frame_relay, llc, ppp, slip, teredo};
use super::{ipproto, map_v4, null, Decoded, Next, Skip, TunnelKind};

/// Most nested tunnels followed.
pub const MAX_TUNNELS: u8 = 4;
/// Most VLAN tags followed in one Ethernet header.
pub const MAX_VLAN_TAGS: u8 = 4;
/// Most link-layer headers followed one after another (LLC, bridged
/// Ethernet, PPP, …) in one packet, tunnels included.
const MAX_LINK_HOPS: u8 = 16;
/// Length of an 802.11 frame check sequence.
const FCS_LEN: usize = 4;

/// Walk state that is not part of the output.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Tunnels entered so far.
    tunnels: u8,
    /// The outermost link-layer addresses have been recorded.
    have_mac: bool,
    /// Link-layer headers followed so far ([`MAX_LINK_HOPS`]).
    hops: u8,
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
        other => return decode_other(&mut cx, other, data, out),
    };
    ip(&mut cx, data, off, version, out)
}

/// The link types beyond Ethernet, null and raw IP (out of line: the
/// common ones above stay small).
#[cold]
#[inline(never)]
fn decode_other(cx: &mut Ctx, link: LinkType, data: &[u8], out: &mut Decoded) -> Result<(), Skip> {
    let (version, off, end) = link_layer(cx, link, data, 0, out)?;
    let data = data.get(..end).unwrap_or(data);
    ip(cx, data, off, version, out)
}

/// The link-layer header of type `link` at `off`, followed to an IP
/// header: its version, its offset, and where the link layer says the
/// packet ends (before a radiotap FCS, at the end of an NFLOG payload).
fn link_layer(
    cx: &mut Ctx,
    link: LinkType,
    data: &[u8],
    off: usize,
    out: &mut Decoded,
) -> Result<(u8, usize, usize), Skip> {
    let end = data.len();
    let (version, ip_off) = match link {
        LinkType::Ethernet => ethernet(cx, data, off, out)?,
        LinkType::Raw => (raw_version(at(data, off))?, off),
        LinkType::Ipv4 => (4, off),
        LinkType::Ipv6 => (6, off),
        LinkType::Null => {
            let (v, n) = null::parse(at(data, off))?;
            (v, off + n)
        }
        LinkType::CHdlc => {
            let (next, n) = chdlc::parse(at(data, off))?;
            follow(cx, data, off + n, next, out)?
        }
        // Routers' PPP captures hold Cisco HDLC frames too (serial links
        // that switch framing): their address byte, 0x0F or 0x8F, is no
        // PPP address or (compressed) protocol, so it tells them apart
        // in both PPP link types.
        LinkType::Ppp | LinkType::PppHdlc => {
            let first = *data.get(off).ok_or(Skip::Truncated)?;
            let (next, n) = if chdlc::is_cisco_address(first) {
                chdlc::parse(at(data, off))?
            } else {
                ppp::parse(at(data, off))?
            };
            follow(cx, data, off + n, next, out)?
        }
        LinkType::FrameRelay => {
            let (next, n) = frame_relay::parse(at(data, off))?;
            follow(cx, data, off + n, next, out)?
        }
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            let s = if link == LinkType::LinuxSll {
                Sll::parse_v1(at(data, off))?
            } else {
                Sll::parse_v2(at(data, off))?
            };
            if let Some(mac) = s.src_mac {
                out.src_mac = mac;
                cx.have_mac = true;
            }
            match s.next()? {
                SllNext::Next(next) => follow(cx, data, off + s.len, next, out)?,
                SllNext::Radiotap => {
                    return link_layer(cx, LinkType::Radiotap, data, off + s.len, out)
                }
            }
        }
        LinkType::Ieee80211 => wlan(cx, data, off, false, false, out)?,
        LinkType::Radiotap => {
            let r = Radiotap::parse(at(data, off))?;
            let end = if r.fcs {
                end.checked_sub(FCS_LEN).ok_or(Skip::Truncated)?
            } else {
                end
            };
            let data = data.get(..end).ok_or(Skip::Truncated)?;
            let (v, o) = wlan(cx, data, off + r.len, r.pad, false, out)?;
            return Ok((v, o, end));
        }
        LinkType::Ppi => {
            let p = Ppi::parse(at(data, off))?;
            // The inner link type, but never PPI again.
            match LinkType::from_pcap(p.dlt) {
                Some(LinkType::Ppi) => return Err(Skip::Malformed),
                Some(inner) => return link_layer(cx, inner, data, off + p.len, out),
                None => return Err(Skip::NotIp),
            }
        }
        LinkType::Nflog => {
            let n = Nflog::parse(at(data, off))?;
            return Ok((n.ip_version, off + n.offset, off + n.end));
        }
        LinkType::Slip => {
            let (v, n) = slip::parse(at(data, off))?;
            (v, off + n)
        }
        LinkType::AtmLlc => {
            if at(data, off).starts_with(&[0xaa, 0xaa, 0x03]) {
                follow(cx, data, off, Next::Llc, out)?
            } else {
                (raw_version(at(data, off))?, off)
            }
        }
    };
    Ok((version, ip_off, end))
}

/// 802.11 frame at `off` (`pad`: header padded to 4 bytes; `swapped_ok`:
/// its frame control may be byte-swapped), then its LLC.
fn wlan(
    cx: &mut Ctx,
    data: &[u8],
    off: usize,
    pad: bool,
    swapped_ok: bool,
    out: &mut Decoded,
) -> Result<(u8, usize), Skip> {
    let f = Ieee80211::parse(at(data, off), pad, swapped_ok)?;
    if !cx.have_mac {
        out.dst_mac = f.dst;
        out.src_mac = f.src;
        cx.have_mac = true;
    }
    follow(cx, data, off + f.len, Ieee80211::NEXT, out)
}

/// Follows what a header said comes next, at `off`, to an IP header.
fn follow(
    cx: &mut Ctx,
    data: &[u8],
    off: usize,
    next: Next,
    out: &mut Decoded,
) -> Result<(u8, usize), Skip> {
    cx.hops += 1;
    if cx.hops > MAX_LINK_HOPS {
        return Err(Skip::TooDeep);
    }
    match next {
        Next::Ip(v) => Ok((v, off)),
        Next::EtherType(et) => ethertype_walk(cx, data, off, et, out),
        Next::Ethernet => ethernet(cx, data, off, out),
        Next::Llc => {
            let (next, n) = llc::parse(at(data, off))?;
            follow(cx, data, off + n, next, out)
        }
        Next::Ieee80211 => wlan(cx, data, off, false, false, out),
    }
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
        et => ethertype_walk(cx, data, off, et, out),
    }
}

/// Follows VLAN tags, MPLS and PPPoE from EtherType `et` at `off` to an IP
/// header: returns its version and offset. A value below 0x0600 is an
/// 802.3 length: an LLC header follows.
fn ethertype_walk(
    cx: &mut Ctx,
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
                return follow(cx, data, off + s.len, s.next, out);
            }
            len if len < MIN_ETHERTYPE => return follow(cx, data, off, Next::Llc, out),
            _ => return Err(Skip::NotIp),
        }
    }
}

/// A non-first fragment: where its IP header is (for a reassembler).
#[cold]
fn non_first(out: &mut Decoded, off: usize, version: u8) -> Skip {
    out.ip_version = version;
    out.ip_offset = clamp16(off);
    Skip::FragmentNonFirst
}

/// IP header of `version` at `off`, then its transport.
#[inline]
fn ip(cx: &mut Ctx, data: &[u8], off: usize, version: u8, out: &mut Decoded) -> Result<(), Skip> {
    let (l4off, end, declared) = if version == 4 {
        let h = Ipv4::parse(at(data, off))?;
        if h.frag_offset != 0 {
            return Err(non_first(out, off, version));
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
            return Err(non_first(out, off, version));
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
            if udp::tunnel_port(u.sport, u.dport) {
                return udp_tunnel(cx, data, off + udp::HEADER_LEN, u.sport, u.dport, out);
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
                    let (next, n) = ppp::parse(at(data, p))?;
                    follow(cx, data, p + n, next, out)?
                }
                // MPLS over GRE (RFC 4023), tagged frames; others → NotIp.
                et => ethertype_walk(cx, data, p, et, out)?,
            };
            // PPTP (GRE version 1) puts the peer's call id in the key
            // field, a different one each way: kept out of the flow key
            // so that both directions meet in one flow.
            Ok(Inner {
                version,
                offset,
                id: if g.version == 1 { 0 } else { g.key },
            })
        }),
    }
}

/// The tunnel inside the UDP datagram whose payload starts at `off`
/// (VXLAN, Geneve, CAPWAP, GTP-U, Teredo; the destination port decides
/// first).
#[cold]
#[inline(never)]
fn udp_tunnel(
    cx: &mut Ctx,
    data: &[u8],
    off: usize,
    sport: u16,
    dport: u16,
    out: &mut Decoded,
) -> Result<(), Skip> {
    let kind = match dport {
        vxlan::PORT | udp::VXLAN_LINUX_PORT => TunnelKind::Vxlan,
        geneve::PORT => TunnelKind::Geneve,
        gtp::PORT => TunnelKind::Gtp,
        capwap::PORT => TunnelKind::Capwap,
        teredo::PORT => TunnelKind::Teredo,
        _ => match sport {
            gtp::PORT => TunnelKind::Gtp,
            capwap::PORT => TunnelKind::Capwap,
            _ => TunnelKind::Teredo,
        },
    };
    if kind == TunnelKind::Vxlan {
        enter(cx, data, out, TunnelKind::Vxlan, |cx, out| {
            let v = Vxlan::parse(at(data, off))?;
            let (version, offset) = ethernet(cx, data, off + vxlan::HEADER_LEN, out)?;
            Ok(Inner {
                version,
                offset,
                id: v.vni,
            })
        })
    } else if kind == TunnelKind::Geneve {
        enter(cx, data, out, TunnelKind::Geneve, |cx, out| {
            let g = Geneve::parse(at(data, off))?;
            let (version, offset) = follow(cx, data, off + g.len, g.next, out)?;
            Ok(Inner {
                version,
                offset,
                id: g.vni,
            })
        })
    } else if kind == TunnelKind::Gtp {
        enter(cx, data, out, TunnelKind::Gtp, |_, _| {
            let g = GtpU::parse(at(data, off))?;
            let offset = off + g.len;
            let version = match data.get(offset).ok_or(Skip::Truncated)? >> 4 {
                4 => 4,
                6 => 6,
                _ => return Err(Skip::NotIp),
            };
            // Each end sends the TEID the receiver handed out (TS 29.281),
            // a different one each way: kept out of the flow key so that
            // both directions meet in one flow.
            Ok(Inner {
                version,
                offset,
                id: 0,
            })
        })
    } else if kind == TunnelKind::Capwap {
        enter(cx, data, out, TunnelKind::Capwap, |cx, out| {
            let c = Capwap::parse(at(data, off))?;
            let (version, offset) = if c.next == Next::Ieee80211 {
                wlan(cx, data, off + c.len, false, true, out)?
            } else {
                follow(cx, data, off + c.len, c.next, out)?
            };
            Ok(Inner {
                version,
                offset,
                id: u32::from(c.rid),
            })
        })
    } else {
        enter(cx, data, out, TunnelKind::Teredo, |_, _| {
            Ok(Inner {
                version: 6,
                offset: off + teredo::parse(at(data, off))?,
                id: 0,
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
