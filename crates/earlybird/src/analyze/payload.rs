//! The `payload` analyzer: transport payload per direction, and the first
//! payload bytes each direction sent — what a newcomer's analyzer looks like
//! (state, fields, per-packet code and record, in one file).
//!
//! Contract: counts, per direction, the packets that carry transport payload
//! and their payload bytes according to the headers (on the wire, whatever
//! the snaplen kept), and keeps the first [`FIRST`] captured bytes of the
//! first packet with payload in each direction. A direction without payload
//! has counts 0 and no first bytes (empty in CSV, `null` in JSON). Pure
//! arithmetic on the view; never fails.

use super::{Action, Analyzer, PacketView};
use crate::schema::{Cells, Field, FieldType};

/// Payload bytes kept from the first payload of each direction.
pub const FIRST: usize = 16;

/// The analyzer (it has no configuration).
#[derive(Debug, Default)]
pub struct PayloadBytes;

/// Per-flow state: index 0 is client → server, 1 server → client.
#[derive(Debug, Clone, Default)]
pub struct State {
    bytes: [u64; 2],
    packets: [u64; 2],
    first: [[u8; FIRST]; 2],
    /// Bytes kept in `first`; `None` until the direction had payload.
    first_len: [Option<u8>; 2],
}

impl Analyzer for PayloadBytes {
    type State = State;
    const NAME: &'static str = "payload";
    const ABOUT: &'static str =
        "transport payload packets and bytes per direction, and the first payload bytes of each";
    const PAYLOAD: bool = true;
    const FIELDS: &'static [Field] = &[
        Field::new(
            "fwd_payload_packets",
            FieldType::U64,
            "packets",
            "Packets client → server carrying transport payload",
        ),
        Field::new(
            "bwd_payload_packets",
            FieldType::U64,
            "packets",
            "Packets server → client carrying transport payload",
        ),
        Field::new(
            "fwd_payload_bytes",
            FieldType::U64,
            "bytes",
            "Transport payload bytes client → server, from the headers (on the wire, whatever the snaplen kept)",
        ),
        Field::new(
            "bwd_payload_bytes",
            FieldType::U64,
            "bytes",
            "Transport payload bytes server → client, from the headers",
        ),
        Field::new(
            "fwd_first_payload",
            FieldType::Str,
            "",
            "First captured bytes (at most 16, lower-case hex) of the first packet client → server with payload; empty when none",
        ),
        Field::new(
            "bwd_first_payload",
            FieldType::Str,
            "",
            "First captured bytes (at most 16, lower-case hex) of the first packet server → client with payload; empty when none",
        ),
    ];

    #[inline]
    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if p.payload_len == 0 {
            return Action::Continue;
        }
        let d = usize::from(!p.from_client);
        st.packets[d] += 1;
        st.bytes[d] += u64::from(p.payload_len);
        if st.first_len[d].is_none() {
            let n = p.payload.len().min(FIRST);
            st.first[d][..n].copy_from_slice(&p.payload[..n]);
            st.first_len[d] = Some(n as u8);
        }
        Action::Continue
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        out.u64(st.packets[0]);
        out.u64(st.packets[1]);
        out.u64(st.bytes[0]);
        out.u64(st.bytes[1]);
        for d in 0..2 {
            match st.first_len[d] {
                Some(n) => out.hex(&st.first[d][..usize::from(n)]),
                None => out.null(),
            }
        }
    }
}
