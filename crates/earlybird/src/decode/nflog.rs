//! Linux netfilter NFLOG captures (LINKTYPE_NFLOG 239): a 4-byte header
//! (address family, version, resource id) and a list of TLVs, one of which
//! (NFULA_PAYLOAD, type 9) holds the packet from its network header on.
//!
//! Contract: [`Nflog::parse`] reads the header and walks the TLVs — length
//! (header included) and type, both in the capturing host's byte order,
//! each TLV padded to 4 bytes — to the payload TLV. The byte order is taken
//! from the first TLV: little-endian unless only the big-endian reading
//! gives a sane length. It returns the IP version the family says
//! (AF_INET 2 → 4, AF_INET6 10 → 6) and where the payload starts and ends
//! (a payload cut by the snaplen ends at the captured bytes). Other
//! families and a TLV list without a payload are [`Skip::NotIp`]; a TLV
//! shorter than its own header is [`Skip::Malformed`]; a header, a TLV
//! header or a TLV before the payload cut short is [`Skip::Truncated`];
//! more than 64 TLVs before the payload is [`Skip::TooDeep`]. No
//! allocation; pure.

use super::Skip;

/// NFLOG header length.
pub const HEADER_LEN: usize = 4;
/// TLV type of the packet payload.
pub const NFULA_PAYLOAD: u16 = 9;
/// Most TLVs read before giving up (a packet holds about ten).
const MAX_TLVS: usize = 64;

/// Where the logged IP packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nflog {
    /// IP version per the address family.
    pub ip_version: u8,
    /// Offset of the payload (the IP header).
    pub offset: usize,
    /// End of the payload (≤ the captured length).
    pub end: usize,
}

impl Nflog {
    /// Parses the header and TLVs of one NFLOG record.
    pub fn parse(data: &[u8]) -> Result<Nflog, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let ip_version = match h[0] {
            2 => 4,
            10 => 6,
            _ => return Err(Skip::NotIp),
        };
        let mut p = HEADER_LEN;
        let mut big = None;
        for _ in 0..MAX_TLVS {
            let Some(t) = data.get(p..).and_then(|d| d.first_chunk::<4>()) else {
                return Err(if p < data.len() {
                    Skip::Truncated
                } else {
                    Skip::NotIp
                });
            };
            let big = *big.get_or_insert_with(|| {
                let le = usize::from(u16::from_le_bytes([t[0], t[1]]));
                let be = usize::from(u16::from_be_bytes([t[0], t[1]]));
                let fits = |n: usize| n >= 4 && n <= data.len() - p;
                !fits(le) && fits(be)
            });
            let rd = |a: u8, b: u8| {
                if big {
                    u16::from_be_bytes([a, b])
                } else {
                    u16::from_le_bytes([a, b])
                }
            };
            let (len, kind) = (usize::from(rd(t[0], t[1])), rd(t[2], t[3]) & 0x7fff);
            if len < 4 {
                return Err(Skip::Malformed);
            }
            if kind != NFULA_PAYLOAD && p + len > data.len() {
                return Err(Skip::Truncated);
            }
            if kind == NFULA_PAYLOAD {
                return Ok(Nflog {
                    ip_version,
                    offset: p + 4,
                    end: (p + len).min(data.len()),
                });
            }
            p += (len + 3) & !3;
        }
        Err(Skip::TooDeep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeek nflog-http.pcap, frame 1 up to the payload: AF_INET, version 0,
    /// resource 0x2a; TLVs (little-endian) 8/1 packet header, 5/10 prefix
    /// (padded to 8), 8/5, 8/11, 8/14, then 0x40/9: the 60-byte IP packet.
    const FRAME1: [u8; 48] = [
        0x02, 0x00, 0x00, 0x2a, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x05, 0x00, 0x0a,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00,
        0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40,
        0x00, 0x09, 0x00,
    ];

    #[test]
    fn payload_tlv_from_a_real_capture() {
        let mut f = FRAME1.to_vec();
        f.extend_from_slice(&[0x45; 60]);
        assert_eq!(
            Nflog::parse(&f),
            Ok(Nflog {
                ip_version: 4,
                offset: 48,
                end: 108
            })
        );
        // Cut by the snaplen: the payload ends with the capture.
        assert_eq!(Nflog::parse(&f[..70]).unwrap().end, 70);
        // IPv6 family.
        f[0] = 10;
        assert_eq!(Nflog::parse(&f).unwrap().ip_version, 6);
    }

    #[test]
    fn big_endian_tlvs() {
        let mut f = vec![0x02, 0x00, 0x00, 0x01];
        f.extend_from_slice(&[0x00, 0x08, 0x00, 0x01, 0, 0, 0x08, 0]);
        f.extend_from_slice(&[0x00, 0x18, 0x00, 0x09]);
        f.extend_from_slice(&[0x45; 20]);
        assert_eq!(
            Nflog::parse(&f),
            Ok(Nflog {
                ip_version: 4,
                offset: 16,
                end: 36
            })
        );
    }

    #[test]
    fn bad_and_missing_payloads() {
        // zeek nflog-bad-tlv-len.pcap: a first TLV of length 256 (LE; 1
        // read big-endian) in a 12-byte record.
        let bad = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0, 0, 0, 0];
        assert_eq!(Nflog::parse(&bad), Err(Skip::Truncated));
        // A TLV shorter than its own header.
        let short = [0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0, 0, 0, 0];
        assert_eq!(Nflog::parse(&short), Err(Skip::Malformed));
        // No payload TLV.
        assert_eq!(Nflog::parse(&FRAME1[..44]), Err(Skip::NotIp));
        // A TLV header cut short.
        assert_eq!(Nflog::parse(&FRAME1[..46]), Err(Skip::Truncated));
        // Bridge family (7).
        let mut br = FRAME1;
        br[0] = 7;
        assert_eq!(Nflog::parse(&br), Err(Skip::NotIp));
        for n in 0..HEADER_LEN {
            assert_eq!(Nflog::parse(&FRAME1[..n]), Err(Skip::Truncated));
        }
    }
}
