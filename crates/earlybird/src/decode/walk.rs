//! (to be written) The layer walk that chains the protocol views.
use super::{Decoded, Skip};
use crate::source::LinkType;

/// Decodes one packet into `out`.
pub fn decode(_link: LinkType, _data: &[u8], _out: &mut Decoded) -> Result<(), Skip> {
    Err(Skip::Malformed)
}
