//! IEEE 802.11 MAC frames (LINKTYPE_IEEE802_11 105, and inside radiotap,
//! PPI, Prism, AVS and CAPWAP): data frames down to their LLC header.
//!
//! Contract: [`Ieee80211::parse`] reads the frame control field and, for a
//! data frame carrying data, the MAC header — 24 bytes, +6 for the fourth
//! address (to-DS and from-DS both set), +2 QoS control (QoS subtypes), +4
//! HT control (QoS with the order bit), rounded up to 4 bytes when the
//! capture says the driver padded it (`pad`, radiotap's flag) — and, when
//! the QoS control says A-MSDU, the first subframe's 14-byte header. It
//! returns the length of all that ([`Next::Llc`] follows), and the
//! frame's source and destination addresses chosen by the DS bits.
//! Management, control and extension frames and data subtypes without
//! data (null, CF-ack/poll) are [`Skip::NotIp`]; a protected frame is
//! [`Skip::Encrypted`]; a non-first 802.11 fragment is
//! [`Skip::FragmentNonFirst`]; a protocol version other than 0 is
//! [`Skip::Malformed`]; bytes cut short are [`Skip::Truncated`]. A trailing
//! FCS is the caller's to cut. Cisco access points send the frame control
//! field byte-swapped inside CAPWAP (Wireshark's "swap frame control",
//! nDPI's CAPWAP decoding), and their sequence control too: with
//! `swapped_ok`, a frame control whose version bits are non-zero as read
//! but zero swapped is read swapped, and so is the sequence control.
//! No allocation; pure.

use super::{Next, Skip};

/// Shortest data frame header (frame control … sequence control).
pub const HEADER_LEN: usize = 24;

const TYPE_DATA: u8 = 2;
const FLAG_TO_DS: u8 = 0x01;
const FLAG_FROM_DS: u8 = 0x02;
const FLAG_PROTECTED: u8 = 0x40;
const FLAG_ORDER: u8 = 0x80;
/// Subtype bit: QoS data.
const SUBTYPE_QOS: u8 = 0x8;
/// Subtype bit: no data (null, CF-ack, CF-poll without data).
const SUBTYPE_NO_DATA: u8 = 0x4;
/// QoS control bit: the body is an A-MSDU.
const QOS_AMSDU: u8 = 0x80;
/// A-MSDU subframe header: DA, SA, length.
const AMSDU_SUBFRAME_LEN: usize = 14;

/// A data frame whose body starts with an LLC header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ieee80211 {
    /// Destination address (DA).
    pub dst: [u8; 6],
    /// Source address (SA).
    pub src: [u8; 6],
    /// Bytes before the LLC header.
    pub len: usize,
}

#[inline]
fn mac(h: &[u8], at: usize) -> Result<[u8; 6], Skip> {
    h.get(at..at + 6)
        .and_then(|m| m.try_into().ok())
        .ok_or(Skip::Truncated)
}

impl Ieee80211 {
    /// What follows an 802.11 frame: [`Next::Llc`] after [`Ieee80211::len`].
    pub const NEXT: Next = Next::Llc;

    /// Parses the MAC header of a data frame; `pad` rounds the header up
    /// to a multiple of 4 bytes; `swapped_ok` accepts a byte-swapped frame
    /// control (see the module docs).
    #[inline]
    pub fn parse(data: &[u8], pad: bool, swapped_ok: bool) -> Result<Ieee80211, Skip> {
        let mut fc: [u8; 2] = *data.first_chunk().ok_or(Skip::Truncated)?;
        let swapped = fc[0] & 0x03 != 0 && swapped_ok && fc[1] & 0x03 == 0;
        if swapped {
            fc.swap(0, 1);
        }
        if fc[0] & 0x03 != 0 {
            return Err(Skip::Malformed);
        }
        let (ftype, subtype, flags) = ((fc[0] >> 2) & 0x03, fc[0] >> 4, fc[1]);
        if ftype != TYPE_DATA || subtype & SUBTYPE_NO_DATA != 0 {
            return Err(Skip::NotIp);
        }
        if flags & FLAG_PROTECTED != 0 {
            return Err(Skip::Encrypted);
        }
        let h = data.get(..HEADER_LEN).ok_or(Skip::Truncated)?;
        // Fragment number: low 4 bits of the little-endian sequence
        // control (big-endian in the swapped form).
        if h[if swapped { 23 } else { 22 }] & 0x0f != 0 {
            return Err(Skip::FragmentNonFirst);
        }
        let four = flags & (FLAG_TO_DS | FLAG_FROM_DS) == FLAG_TO_DS | FLAG_FROM_DS;
        let mut len = HEADER_LEN + if four { 6 } else { 0 };
        let mut amsdu = false;
        if subtype & SUBTYPE_QOS != 0 {
            amsdu = *data.get(len).ok_or(Skip::Truncated)? & QOS_AMSDU != 0;
            len += 2;
            if flags & FLAG_ORDER != 0 {
                len += 4;
            }
        }
        let (mut dst, mut src) = match flags & (FLAG_TO_DS | FLAG_FROM_DS) {
            0 => (mac(data, 4)?, mac(data, 10)?),
            FLAG_TO_DS => (mac(data, 16)?, mac(data, 10)?),
            FLAG_FROM_DS => (mac(data, 4)?, mac(data, 16)?),
            _ => (mac(data, 16)?, mac(data, 24)?),
        };
        if pad {
            len = (len + 3) & !3;
        }
        if amsdu {
            dst = mac(data, len)?;
            src = mac(data, len + 6)?;
            len += AMSDU_SUBFRAME_LEN;
        }
        if data.len() < len {
            return Err(Skip::Truncated);
        }
        Ok(Ieee80211 { dst, src, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeek wlanmon.pcap, frame 1: QoS data (88), to-DS (01), then
    /// duration 2c 00, BSSID/RA, SA/TA, DA, sequence 10 00, QoS 06 00,
    /// and the LLC header aa aa 03 ….
    const QOS_TO_DS: [u8; 29] = [
        0x88, 0x01, 0x2c, 0x00, 0x8a, 0x15, 0x14, 0x9b, 0x5a, 0xe0, 0x90, 0x72, 0x40, 0x97, 0xb6,
        0xf5, 0x44, 0x2b, 0x03, 0xaa, 0xab, 0x8d, 0x10, 0x00, 0x06, 0x00, 0xaa, 0xaa, 0x03,
    ];

    #[test]
    fn qos_data_to_ds_from_a_real_capture() {
        let f = Ieee80211::parse(&QOS_TO_DS, false, false).unwrap();
        assert_eq!(f.len, 26);
        assert_eq!(f.src, [0x90, 0x72, 0x40, 0x97, 0xb6, 0xf5]);
        assert_eq!(f.dst, [0x44, 0x2b, 0x03, 0xaa, 0xab, 0x8d]);
        // With radiotap's padding flag the 26-byte header is padded to 28.
        assert_eq!(Ieee80211::parse(&QOS_TO_DS, true, false).unwrap().len, 28);
    }

    #[test]
    fn plain_data_from_ds_and_four_addresses() {
        // zeek wlanmon.pcap, frame 3: data (08), from-DS (02): DA = addr1,
        // SA = addr3.
        let mut f = vec![0x08, 0x02, 0x00, 0x00];
        f.extend_from_slice(&[0x33, 0x33, 0, 0, 0, 0xfb]);
        f.extend_from_slice(&[0x8a, 0x15, 0x14, 0x9b, 0x5a, 0xe0]);
        f.extend_from_slice(&[0xa4, 0x67, 0x06, 0xf7, 0xec, 0x54]);
        f.extend_from_slice(&[0xb0, 0xad]);
        let d = Ieee80211::parse(&f, false, false).unwrap();
        assert_eq!((d.len, d.dst[0], d.src[0]), (24, 0x33, 0xa4));
        // WDS: both DS bits, a fourth address (SA) after sequence control.
        f[1] = 0x03;
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let d = Ieee80211::parse(&f, false, false).unwrap();
        assert_eq!((d.len, d.src, d.dst[0]), (30, [1, 2, 3, 4, 5, 6], 0xa4));
    }

    #[test]
    fn amsdu_ht_control_and_skips() {
        let mut f = QOS_TO_DS.to_vec();
        f[24] |= QOS_AMSDU;
        f.truncate(26);
        f.extend_from_slice(&[9; 12]);
        f.extend_from_slice(&[0, 40]);
        let d = Ieee80211::parse(&f, false, false).unwrap();
        assert_eq!((d.len, d.dst, d.src), (40, [9; 6], [9; 6]));
        f.pop();
        assert_eq!(Ieee80211::parse(&f, false, false), Err(Skip::Truncated));
        let mut ht = QOS_TO_DS.to_vec();
        ht[1] |= FLAG_ORDER;
        ht.resize(30, 0);
        assert_eq!(Ieee80211::parse(&ht, false, false).unwrap().len, 30);
        // Protected (tcpdump/zeek captures of WPA traffic set 0x40).
        let mut p = QOS_TO_DS;
        p[1] |= FLAG_PROTECTED;
        assert_eq!(Ieee80211::parse(&p, false, false), Err(Skip::Encrypted));
        // Beacon (80 00), ack (d4 00), QoS null (c8 01).
        for fc in [[0x80, 0x00], [0xd4, 0x00], [0xc8, 0x01]] {
            assert_eq!(Ieee80211::parse(&fc, false, false), Err(Skip::NotIp));
        }
        // Second fragment.
        let mut fr = QOS_TO_DS;
        fr[22] = 0x11;
        assert_eq!(
            Ieee80211::parse(&fr, false, false),
            Err(Skip::FragmentNonFirst)
        );
        let mut v = QOS_TO_DS;
        v[0] |= 1;
        assert_eq!(Ieee80211::parse(&v, false, false), Err(Skip::Malformed));
        // nDPI capwap.pcap: a Cisco AP's swapped frame control 01 08 is
        // data (08), to-DS (01).
        let mut sw = QOS_TO_DS;
        sw[0] = 0x01;
        sw[1] = 0x88;
        assert_eq!(Ieee80211::parse(&sw, false, false), Err(Skip::Malformed));
        assert_eq!(Ieee80211::parse(&sw, false, true).unwrap().len, 26);
        // Its sequence control 01 10 is sequence 17, fragment 0 (read
        // little-endian it would be fragment 1).
        sw[22] = 0x01;
        sw[23] = 0x10;
        assert_eq!(Ieee80211::parse(&sw, false, true).unwrap().len, 26);
        sw[23] = 0x11;
        assert_eq!(
            Ieee80211::parse(&sw, false, true),
            Err(Skip::FragmentNonFirst)
        );
        for n in 0..26 {
            assert_eq!(
                Ieee80211::parse(&QOS_TO_DS[..n], false, false),
                Err(Skip::Truncated)
            );
        }
    }
}
