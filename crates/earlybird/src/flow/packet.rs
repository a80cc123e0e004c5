//! What the flow table takes per packet: the [`Pkt`] a shard's first pass
//! builds (key, hash, timestamp, sizes, flags), what a packet of the
//! general decoding path carries beside it ([`V6Icmp`]: IPv6 addresses, ICMP
//! type) and its transport payload for the analyzers ([`Payload`]).
//!
//! Contract: plain `Copy` values, no allocation; a `Pkt` is 64 bytes so a
//! batch of them stays small in the shard batches shards exchange.

use super::entry::V6Addrs;
use super::key::{Key, TableKey};
use crate::decode::icmp::Icmp;
use crate::decode::ipproto;
use crate::time::Nanos;

/// One packet as the flow table needs it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pkt {
    /// Flow key (canonical in bidirectional mode).
    pub key: TableKey,
    /// Table hash of the flow (the same for every packet of a flow).
    pub hash: u64,
    /// Timestamp.
    pub ts: Nanos,
    /// IP length.
    pub size: u16,
    /// TCP flags (0 when not TCP).
    pub flags: u8,
    /// Sent by endpoint `a` of the key.
    pub from_a: bool,
    /// Source and destination MAC.
    pub macs: [[u8; 6]; 2],
    /// Index of the packet in its batch.
    pub idx: u16,
    /// Offset of the innermost IP header in the packet.
    pub ip_offset: u16,
    /// Offset of the transport payload in the packet (its frame); set
    /// only when a consumer reads packets (else 0).
    pub payload_at: u16,
    /// Transport payload length according to the headers; set only when
    /// a consumer reads packets (else 0). With `payload_at` 0,
    /// [`Pkt::FAST_PLACE`]: a packet of the fast path
    /// (`decode/fast.rs`), whose payload's place is read from its frame
    /// when a consumer reads it ([`crate::decode::fast::payload_place`]).
    pub payload_len: u16,
}

const _: () = assert!(std::mem::size_of::<Pkt>() == 64);

/// A packet's transport payload, for the analyzers that read it: where
/// it lies in its batch's bytes, sliced only when a consumer reads it
/// ([`Payload::bytes`], [`Payload::ip`]), so that a packet no consumer
/// reads costs no slicing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Payload<'a> {
    /// The bytes the payload lies in (its batch's; empty: no payload).
    data: &'a [u8],
    /// Offset of the payload's first byte in `data`.
    start: usize,
    /// Bytes captured of it (cut by the snaplen, never past the IP length).
    captured: u16,
    /// Its length according to the headers.
    pub len: u16,
    /// Bytes of the (innermost) IP and transport headers before it in
    /// `data`; 0 when the IP packet is not shown (not captured whole, or
    /// no consumer reads it).
    head: u16,
}

impl<'a> Payload<'a> {
    /// No payload (no analyzer reads it).
    pub const NONE: Payload<'static> = Payload {
        data: &[],
        start: 0,
        captured: 0,
        len: 0,
        head: 0,
    };

    /// The payload `captured` bytes of which are at `start` in `data`
    /// (`len` long per its headers), after `head` bytes of IP and
    /// transport headers (0: the IP packet is not shown).
    #[inline(always)]
    pub fn at(data: &'a [u8], start: usize, captured: u16, len: u16, head: u16) -> Payload<'a> {
        Payload {
            data,
            start,
            captured,
            len,
            head,
        }
    }

    /// The payload `bytes` (`len` long per its headers), without its IP
    /// packet.
    pub fn of(bytes: &'a [u8], len: u16) -> Payload<'a> {
        Payload::at(bytes, 0, bytes.len().min(u16::MAX as usize) as u16, len, 0)
    }

    /// The payload of the IP packet `ip`, after its first `head` bytes
    /// (`len` long per its headers).
    pub fn in_ip(ip: &'a [u8], head: u16, len: u16) -> Payload<'a> {
        let captured = ip
            .len()
            .saturating_sub(head as usize)
            .min(u16::MAX as usize) as u16;
        Payload::at(ip, head as usize, captured, len, head)
    }

    /// The payload as captured (cut by the snaplen; empty when it is not
    /// inside the bytes).
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.data
            .get(self.start..self.start + self.captured as usize)
            .unwrap_or(&[])
    }

    /// The (innermost) IP packet the payload ends, from the IP header, as
    /// captured (empty unless a consumer reads it and its headers were all
    /// captured).
    #[inline]
    pub fn ip(&self) -> &'a [u8] {
        match self.start.checked_sub(self.head as usize) {
            Some(from) if self.head != 0 => self
                .data
                .get(from..self.start + self.captured as usize)
                .unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// Where the flow table finds the payload of a packet when a consumer
/// reads it: [`PayloadSource::payload`] is called only for a packet a
/// consumer follows, so a packet no consumer reads costs no lookup.
pub(crate) trait PayloadSource<'a>: Copy {
    /// The packet `p` carries no transport payload (by its headers).
    fn empty(&self, p: &Pkt) -> bool;
    /// The payload of packet `p`.
    fn payload(self, p: &Pkt) -> Payload<'a>;
    /// The (innermost) IP packet `p` up to its payload's end, as captured
    /// ([`Payload::ip`] whether or not a consumer reads it: empty when
    /// its headers were not all captured).
    fn ip(self, p: &Pkt) -> &'a [u8];
}

/// A payload already found is its own source.
impl<'a> PayloadSource<'a> for Payload<'a> {
    #[inline(always)]
    fn empty(&self, _: &Pkt) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn payload(self, _: &Pkt) -> Payload<'a> {
        self
    }

    fn ip(self, _: &Pkt) -> &'a [u8] {
        Payload::ip(&self)
    }
}

/// What a packet of the general decoding path carries beside its [`Pkt`]
/// (read only by IPv6 and ICMP flows; the fast path's IPv4 TCP/UDP packets
/// need none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V6Icmp {
    /// The 16-byte addresses of endpoints `a`, `b` of an IPv6 packet.
    pub wide: V6Addrs,
    /// Type and code of an ICMP / ICMPv6 packet that has them.
    pub icmp: Option<Icmp>,
}

impl V6Icmp {
    /// The side of an IPv6 packet of no ICMP type.
    pub fn of_v6(wide: V6Addrs) -> V6Icmp {
        V6Icmp { wide, icmp: None }
    }
}

/// True for the protocols whose flows record an ICMP type and code.
#[inline(always)]
pub fn is_icmp(proto: u8) -> bool {
    proto == ipproto::ICMP || proto == ipproto::ICMPV6
}

impl Pkt {
    /// [`Pkt::payload_len`] of a fast-path packet whose payload's place
    /// is to be read from its frame (no IPv4 packet's payload is this
    /// long: its total length is at most 65,535 bytes, headers included).
    pub const FAST_PLACE: u16 = u16::MAX;

    /// The payload's place is read from the frame ([`Pkt::FAST_PLACE`]).
    #[inline(always)]
    pub fn place_in_frame(&self) -> bool {
        self.payload_at == 0 && self.payload_len == Pkt::FAST_PLACE
    }

    /// The packet of a full key (`v6`: IPv6 addresses, which then go to
    /// [`FlowTable::packet_wide`] beside it), hashed with the default table
    /// hash; the other fields are zero.
    pub fn from_key(key: &Key, v6: bool, from_a: bool) -> Pkt {
        let tk = TableKey::from_key(key, v6);
        Pkt {
            key: tk,
            hash: key.shard_hash(),
            from_a,
            ..Pkt::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Payload;

    #[test]
    fn a_payload_is_sliced_where_it_lies_and_never_past_its_bytes() {
        // An IPv4 header (20 bytes), a UDP header (8), 4 bytes of payload.
        let mut ip = vec![0u8; 28];
        ip.extend_from_slice(b"ping");
        let pl = Payload::in_ip(&ip, 28, 4);
        assert_eq!((pl.bytes(), pl.ip(), pl.len), (&b"ping"[..], &ip[..], 4));
        // The IP packet not shown (no consumer reads it).
        let pl = Payload::at(&ip, 28, 4, 4, 0);
        assert_eq!((pl.bytes(), pl.ip()), (&b"ping"[..], &[][..]));
        // Cut by the snap length: 2 of 300 bytes captured.
        let pl = Payload::of(b"GE", 300);
        assert_eq!((pl.bytes(), pl.ip(), pl.len), (&b"GE"[..], &[][..], 300));
        // A span outside its bytes, or headers longer than the offset.
        assert!(Payload::at(&ip, 30, 4, 4, 28).bytes().is_empty());
        assert!(Payload::at(&ip, 30, 4, 4, 28).ip().is_empty());
        assert_eq!(Payload::at(&ip, 24, 4, 4, 20).ip().len(), 24);
        assert!(Payload::at(&ip, 4, 4, 4, 20).ip().is_empty());
        assert!(Payload::NONE.bytes().is_empty() && Payload::NONE.ip().is_empty());
    }
}
