//! Per-flow feature state machines, updated once per packet from the packet
//! timestamp only (never the wall clock).
//!
//! * [`stats`]: full-flow statistics per direction.
//! * [`tcp`]: TCP flag counts and the FIN/RST close state.
//! * [`early`]: size, direction and inter-arrival of the first N packets.
//!
//! The types the later layers share ([`Dir`], [`early::EarlyPkt`],
//! [`stats::Stat`]) live here, with the state machines that produce them.
pub mod early;
pub mod stats;
pub mod tcp;

/// Direction of a packet relative to the flow: the sender of the flow's first
/// packet is the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Dir {
    /// Client to server (same direction as the first packet).
    #[default]
    Fwd = 0,
    /// Server to client.
    Bwd = 1,
}
