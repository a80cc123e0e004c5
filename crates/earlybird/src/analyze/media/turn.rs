//! TURN ChannelData messages (RFC 8656 §12.4).
//!
//! Contract: [`ChannelData::parse`] reads one ChannelData message at the
//! start of `b`: a channel number in 0x4000..=0x4FFF, a 16-bit length and
//! that many bytes of application data (the relayed datagram). The data
//! must fit the bytes given; bytes after it (padding to 4 over TCP, or the
//! next frame) are left alone and [`ChannelData::wire_len`] says where the
//! next frame starts over TCP. TURN's Send and Data indications are STUN
//! messages ([`super::stun::Stun::is_turn_data`]). Pure view, no
//! allocation, never panics.

/// Lowest channel number (RFC 8656 §12).
pub const CHANNEL_MIN: u16 = 0x4000;
/// Highest channel number (RFC 8656 §12).
pub const CHANNEL_MAX: u16 = 0x4FFF;

/// Why bytes are not a ChannelData message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnError {
    /// Fewer than 4 bytes.
    Short,
    /// The channel number is outside 0x4000..=0x4FFF.
    Channel(u16),
    /// The length passes the end of the bytes.
    Length {
        /// The length field.
        said: u16,
        /// Bytes after the 4-byte header.
        have: usize,
    },
}

/// One ChannelData message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelData<'a> {
    /// Channel number.
    pub channel: u16,
    /// The relayed datagram.
    pub data: &'a [u8],
}

impl<'a> ChannelData<'a> {
    /// Parses the message at the start of `b` (see the module docs).
    pub fn parse(b: &'a [u8]) -> Result<ChannelData<'a>, TurnError> {
        let h: &[u8; 4] = b.first_chunk().ok_or(TurnError::Short)?;
        let channel = u16::from_be_bytes([h[0], h[1]]);
        if !(CHANNEL_MIN..=CHANNEL_MAX).contains(&channel) {
            return Err(TurnError::Channel(channel));
        }
        let said = u16::from_be_bytes([h[2], h[3]]);
        let data = b.get(4..4 + usize::from(said)).ok_or(TurnError::Length {
            said,
            have: b.len() - 4,
        })?;
        Ok(ChannelData { channel, data })
    }

    /// Bytes the message takes over TCP: header, data and the padding to
    /// a multiple of 4 (RFC 8656 §12.5).
    pub fn wire_len(&self) -> usize {
        (4 + self.data.len() + 3) & !3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_data_carries_the_datagram() {
        // Channel 0x4001, 5 bytes of data, 3 bytes of padding (TCP).
        let b = [
            0x40, 0x01, 0x00, 0x05, 0x80, 0x00, 0x12, 0x34, 0x56, 0, 0, 0,
        ];
        let c = ChannelData::parse(&b).unwrap();
        assert_eq!(c.channel, 0x4001);
        assert_eq!(c.data, &[0x80, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(c.wire_len(), 12);
        let c = ChannelData::parse(&[0x4f, 0xff, 0, 0]).unwrap();
        assert_eq!((c.channel, c.data.len(), c.wire_len()), (0x4fff, 0, 4));
    }

    #[test]
    fn bad_channels_and_lengths_are_refused() {
        assert_eq!(ChannelData::parse(&[0x40, 0x01, 0]), Err(TurnError::Short));
        assert_eq!(
            ChannelData::parse(&[0x3f, 0xff, 0, 0]),
            Err(TurnError::Channel(0x3fff))
        );
        assert_eq!(
            ChannelData::parse(&[0x50, 0x00, 0, 0]),
            Err(TurnError::Channel(0x5000))
        );
        assert_eq!(
            ChannelData::parse(&[0x40, 0x00, 0x00, 0x09, 1, 2, 3]),
            Err(TurnError::Length { said: 9, have: 3 })
        );
    }
}
