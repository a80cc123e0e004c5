//! Frame Relay (LINKTYPE_FRELAY 107): a Q.922 address, then either the
//! multiprotocol encapsulation of RFC 2427 (UI control 0x03, optional pad,
//! NLPID) or Cisco's (an EtherType right after the address).
//!
//! Contract: [`parse`] reads the address — 2 to 4 bytes, each with its
//! extension bit (bit 0) clear except the last — and returns what follows
//! with the length of everything before it: NLPID 0xCC IPv4 and 0x8E IPv6
//! as [`Next::Ip`]; NLPID 0x80 then a SNAP header (see [`super::llc::snap`],
//! bridged Ethernet with no pad); in Cisco's form the EtherType as
//! [`Next::EtherType`]. Other NLPIDs (Q.933 signalling, CLNP, ES-IS, IS-IS,
//! FRF.12/15/16) are [`Skip::NotIp`]; an address that ends after one byte
//! or runs past four is [`Skip::Malformed`]; bytes cut short are
//! [`Skip::Truncated`]. The DLCI is not kept. No allocation; pure.

use super::llc;
use super::{Next, Skip};

/// UI control field of the RFC 2427 encapsulation.
const UI: u8 = 0x03;
/// NLPIDs (ISO/IEC TR 9577).
const NLPID_IPV4: u8 = 0xcc;
const NLPID_IPV6: u8 = 0x8e;
const NLPID_SNAP: u8 = 0x80;
const NLPID_PAD: u8 = 0x00;

/// Length of the Q.922 address at the start of `data`.
#[inline]
fn address_len(data: &[u8]) -> Result<usize, Skip> {
    for (i, b) in data.iter().take(4).enumerate() {
        if b & 1 == 1 {
            return if i == 0 {
                Err(Skip::Malformed)
            } else {
                Ok(i + 1)
            };
        }
    }
    if data.len() < 4 {
        Err(Skip::Truncated)
    } else {
        Err(Skip::Malformed)
    }
}

/// Returns what follows the Frame Relay header and the header length.
#[inline]
pub fn parse(data: &[u8]) -> Result<(Next, usize), Skip> {
    let a = address_len(data)?;
    let b = |i: usize| data.get(i).copied().ok_or(Skip::Truncated);
    if b(a)? != UI {
        // Cisco encapsulation: an EtherType follows the address.
        let et = u16::from_be_bytes([b(a)?, b(a + 1)?]);
        return Ok((Next::EtherType(et), a + 2));
    }
    let mut p = a + 1;
    if b(p)? == NLPID_PAD {
        p += 1;
    }
    match b(p)? {
        NLPID_IPV4 => Ok((Next::Ip(4), p + 1)),
        NLPID_IPV6 => Ok((Next::Ip(6), p + 1)),
        NLPID_SNAP => {
            let (next, _pad) = llc::snap(data.get(p + 1..).unwrap_or(&[]))?;
            Ok((next, p + 1 + llc::SNAP_LEN))
        }
        _ => Err(Skip::NotIp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cisco_encapsulation_from_a_real_capture() {
        // tcpdump vrrp-vrrp_print-oobr.pcap: 3-byte address 80 ea 9d,
        // EtherType 08 00, then the IPv4 header 47 ….
        let f = [0x80, 0xea, 0x9d, 0x08, 0x00, 0x47, 0x7f];
        assert_eq!(parse(&f), Ok((Next::EtherType(0x0800), 5)));
    }

    #[test]
    fn rfc2427_nlpids() {
        // DLCI 100 (address 18 41), UI, NLPID IPv4.
        assert_eq!(parse(&[0x18, 0x41, 0x03, 0xcc, 0x45]), Ok((Next::Ip(4), 4)));
        assert_eq!(parse(&[0x18, 0x41, 0x03, 0x8e, 0x60]), Ok((Next::Ip(6), 4)));
        // Pad, NLPID SNAP, OUI 0, PID IPv4.
        let snap = [0x18, 0x41, 0x03, 0x00, 0x80, 0, 0, 0, 0x08, 0x00, 0x45];
        assert_eq!(parse(&snap), Ok((Next::EtherType(0x0800), 10)));
        // Bridged Ethernet without pad after the PID (RFC 2427 §4.2).
        let br = [0x18, 0x41, 0x03, 0x00, 0x80, 0x00, 0x80, 0xc2, 0x00, 0x07];
        assert_eq!(parse(&br), Ok((Next::Ethernet, 10)));
        // tcpdump esis_snpa_asan-3.pcap: 3-byte address 00 0c 05, then
        // 22 00 82 (Wireshark reads an ES-IS NLPID after a non-UI control
        // byte; read here as Cisco type 0x2200: not IP either way).
        assert_eq!(
            parse(&[0x00, 0x0c, 0x05, 0x22, 0x00, 0x82]),
            Ok((Next::EtherType(0x2200), 5))
        );
        // tcpdump isis_stlv_asan-4.pcap: 1c 00 0c 07 is a 4-byte address,
        // then 22 00 83 (IS-IS for Wireshark, type 0x2200 here).
        assert_eq!(
            parse(&[0x1c, 0x00, 0x0c, 0x07, 0x22, 0x00]),
            Ok((Next::EtherType(0x2200), 6))
        );
        assert_eq!(parse(&[0x18, 0x41, 0x03, 0x83]), Err(Skip::NotIp));
        assert_eq!(parse(&[0x18, 0x41, 0x03, 0x08]), Err(Skip::NotIp));
    }

    #[test]
    fn bad_addresses_and_truncation() {
        // One-byte address.
        assert_eq!(parse(&[0x19, 0x03, 0xcc]), Err(Skip::Malformed));
        // tcpdump q933-heapoverflow-2.pcap: 80 00 00 00 …: no end in 4 bytes.
        assert_eq!(parse(&[0x80, 0, 0, 0, 0xff, 0xff]), Err(Skip::Malformed));
        let f = [0x18, 0x41, 0x03, 0x00, 0xcc];
        for n in 0..f.len() {
            assert_eq!(parse(&f[..n]), Err(Skip::Truncated), "len {n}");
        }
        assert_eq!(parse(&f), Ok((Next::Ip(4), 5)));
    }
}
