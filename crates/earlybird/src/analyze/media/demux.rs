//! The first-byte demultiplexer of one 5-tuple carrying STUN, ZRTP, DTLS,
//! TURN ChannelData, RTP/RTCP and QUIC (RFC 7983, updated by RFC 9443).
//!
//! Contract: [`classify`] names what a datagram (or a TCP segment that
//! starts a frame) carries from its first byte, as RFC 9443 §3 assigns
//! the ranges: 0..=3 STUN, 16..=19 ZRTP, 20..=63 DTLS, 64..=79 TURN
//! ChannelData, 128..=191 RTP or RTCP (RTCP when the second byte is a
//! packet type 192..=223, RFC 5761), 80..=127 and 192..=255 QUIC; a
//! 64..=79 datagram whose ChannelData length does not fit is QUIC (short
//! header). [`unwrap_turn`] takes a ChannelData message or a TURN Send or
//! Data indication off once and returns the relayed datagram. Pure, no
//! allocation, never panics.

use super::stun::Stun;
use super::turn::ChannelData;

/// What one datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demux {
    /// STUN (0..=3).
    Stun,
    /// ZRTP (16..=19).
    Zrtp,
    /// DTLS (20..=63).
    Dtls,
    /// TURN ChannelData (64..=79, with a length that fits).
    TurnChannel,
    /// RTP (128..=191, second byte not an RTCP type).
    Rtp,
    /// RTCP (128..=191, second byte 192..=223).
    Rtcp,
    /// QUIC (RFC 9443's 64..=127 and 192..=255 ranges).
    Quic,
    /// Empty, or a first byte no range assigns (4..=15).
    Other,
}

/// What `b` carries (see the module docs).
pub fn classify(b: &[u8]) -> Demux {
    let Some(&first) = b.first() else {
        return Demux::Other;
    };
    match first {
        0..=3 => Demux::Stun,
        16..=19 => Demux::Zrtp,
        20..=63 => Demux::Dtls,
        64..=79 if ChannelData::parse(b).is_ok() => Demux::TurnChannel,
        64..=127 => Demux::Quic,
        128..=191 => match b.get(1) {
            Some(192..=223) => Demux::Rtcp,
            _ => Demux::Rtp,
        },
        192..=255 => Demux::Quic,
        _ => Demux::Other,
    }
}

/// How a datagram was relayed by TURN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// ChannelData.
    Channel,
    /// A Send or Data indication.
    Indication,
}

/// The datagram a TURN ChannelData message or Send/Data indication at the
/// start of `b` relays, and how; `None` for anything else.
#[inline]
pub fn unwrap_turn(b: &[u8]) -> Option<(Relay, &[u8])> {
    // Most datagrams (RTP, DTLS, QUIC) are told by their first byte here,
    // without a call.
    match b.first()? {
        0..=3 | 64..=79 => unwrap_framed(b),
        _ => None,
    }
}

/// [`unwrap_turn`] of a datagram whose first byte is STUN's or
/// ChannelData's.
fn unwrap_framed(b: &[u8]) -> Option<(Relay, &[u8])> {
    match b.first()? {
        64..=79 => ChannelData::parse(b).ok().map(|c| (Relay::Channel, c.data)),
        0..=3 => {
            let s = Stun::parse(b).ok()?;
            if s.is_turn_data() {
                s.data().map(|d| (Relay::Indication, d))
            } else {
                None
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_follow_rfc_9443() {
        assert_eq!(classify(&[0x00, 0x01]), Demux::Stun);
        assert_eq!(classify(&[0x03]), Demux::Stun);
        assert_eq!(classify(&[0x10, 0]), Demux::Zrtp);
        assert_eq!(classify(&[22, 0xfe, 0xfd]), Demux::Dtls);
        assert_eq!(classify(&[63]), Demux::Dtls);
        assert_eq!(
            classify(&[0x40, 0x00, 0x00, 0x01, 0x80]),
            Demux::TurnChannel
        );
        // 0x40 with a length that does not fit: a QUIC short header.
        assert_eq!(classify(&[0x40, 0x00, 0x10, 0x01, 0x80]), Demux::Quic);
        assert_eq!(classify(&[0x55, 0]), Demux::Quic);
        assert_eq!(classify(&[0x80, 0x6f, 0, 1]), Demux::Rtp);
        assert_eq!(classify(&[0x80, 0xef, 0, 1]), Demux::Rtp);
        assert_eq!(classify(&[0x81, 200, 0, 6]), Demux::Rtcp);
        assert_eq!(classify(&[0x80]), Demux::Rtp);
        assert_eq!(classify(&[0xc3, 0, 0, 0, 1]), Demux::Quic);
        assert_eq!(classify(&[0x05, 1]), Demux::Other);
        assert_eq!(classify(&[]), Demux::Other);
    }

    #[test]
    fn turn_relays_are_taken_off_once() {
        let rtp = [0x80u8, 0x6f, 0x00, 0x01, 0, 0, 0, 160, 1, 2, 3, 4, 9];
        let mut ch = vec![0x40, 0x02, 0x00, rtp.len() as u8];
        ch.extend_from_slice(&rtp);
        assert_eq!(unwrap_turn(&ch), Some((Relay::Channel, &rtp[..])));
        let mut ind = vec![0x00, 0x17, 0x00, 0x14];
        ind.extend_from_slice(&super::super::stun::MAGIC.to_be_bytes());
        ind.extend_from_slice(&[1; 12]);
        ind.extend_from_slice(&[0x00, 0x13, 0x00, rtp.len() as u8]);
        ind.extend_from_slice(&rtp);
        ind.extend_from_slice(&[0, 0, 0]);
        assert_eq!(unwrap_turn(&ind), Some((Relay::Indication, &rtp[..])));
        // A Binding request is STUN but relays nothing; RTP is not TURN.
        let mut bind = vec![0x00, 0x01, 0x00, 0x00];
        bind.extend_from_slice(&super::super::stun::MAGIC.to_be_bytes());
        bind.extend_from_slice(&[1; 12]);
        assert_eq!(unwrap_turn(&bind), None);
        assert_eq!(unwrap_turn(&rtp), None);
        assert_eq!(unwrap_turn(&[]), None);
    }
}
