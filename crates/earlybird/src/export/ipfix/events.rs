//! Early-verdict events as IPFIX data records (`--events ipfix+udp://…`).
//!
//! Contract: [`encode`] writes row `i` of a batch of
//! [`crate::flow::events::VERDICTS`] records as one data record of the
//! event template for its addresses (260 for IPv4, 261 for IPv6;
//! `elements::EVENT_ELEMENTS`, listed in `docs/IPFIX.md`) and returns the
//! template id and the export time (the verdict's packet time, Unix
//! seconds); a row whose addresses do not parse, or whose client and
//! server are of different families, is not encoded (`None`). Values are
//! taken by field position from the row; a cell of another type than the
//! element's is written as 0 (the rows come from the flow table, whose
//! cells always have their field's type). Nothing allocates.

use std::net::IpAddr;

use super::elements::{Source, Template, VARLEN};
use super::record::ntp;
use crate::schema::{Rows, Value};

/// Encodes row `i` of `rows` into `out` (cleared first) with the event
/// template of its address family from `templates` (IPv4, IPv6).
pub(crate) fn encode(
    out: &mut Vec<u8>,
    templates: &[Template],
    rows: &Rows,
    i: usize,
) -> Option<(u16, u32)> {
    let addr = |j| match rows.get(i, j) {
        Value::Text(t) => t.parse::<IpAddr>().ok(),
        _ => None,
    };
    let (src, dst) = (addr(0)?, addr(1)?);
    let t = match (src, dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => &templates[0],
        (IpAddr::V6(_), IpAddr::V6(_)) => &templates[1],
        _ => return None,
    };
    let num = |j| match rows.get(i, j) {
        Value::U64(v) => v,
        _ => 0,
    };
    out.clear();
    for f in &t.fields {
        let Source::Cell(j) = f.src else {
            continue;
        };
        match (f.ty, f.len) {
            ("ipv4Address" | "ipv6Address", _) => match if j == 0 { src } else { dst } {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            },
            ("dateTimeNanoseconds", _) => out.extend_from_slice(&ntp(num(j)).to_be_bytes()),
            ("float32", _) => {
                let v = match rows.get(i, j) {
                    Value::F64(v) => v as f32,
                    _ => 0.0,
                };
                out.extend_from_slice(&v.to_be_bytes());
            }
            ("string", VARLEN) => {
                let text = match rows.get(i, j) {
                    Value::Text(t) => t.as_bytes(),
                    _ => &[],
                };
                // Event text is at most 256 bytes (`schema::MAX_TEXT`).
                out.push(text.len().min(254) as u8);
                out.extend_from_slice(&text[..text.len().min(254)]);
            }
            (_, len) => {
                let v = num(j).to_be_bytes();
                out.extend_from_slice(&v[8 - usize::from(len).min(8)..]);
            }
        }
    }
    let time = (num(9) / 1_000_000_000).min(u64::from(u32::MAX)) as u32;
    Some((t.id, time))
}
