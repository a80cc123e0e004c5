//! Per-flow feature state machines, updated once per packet from the packet
//! timestamp only (never the wall clock).
//!
//! * [`stats`]: full-flow statistics per direction.
//! * [`tcp`]: TCP flag counts and the FIN/RST close state.
//! * [`early`]: size, direction and inter-arrival of the first N packets.
pub mod early;
pub mod stats;
pub mod tcp;
