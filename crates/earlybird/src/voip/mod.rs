//! VoIP: the wire formats of calls, one file per protocol.
//!
//! Contract: `sip` (SIP messages over datagrams and streams), `sdp` (the
//! media an offer or answer announces) and `rtp` (RTP, RTCP report blocks,
//! RFC 4733 events) are pure parsers over captured bytes: views or small
//! owned results, every length checked, errors that name the offset, no
//! panic on any input (each has a fuzz target in `fuzz/`). `rtp_stats`
//! keeps one RTP stream's loss, duplicates, reordering and RFC 3550
//! jitter from the packets' capture times; `stream` puts one direction of
//! a TCP connection back in order (bounded) for SIP over TCP. They know
//! nothing of flows or calls; the call tracking built on them reads the
//! payloads the shards give and keeps its own state.

pub mod audio;
pub mod defrag;
pub mod mos;
pub mod record;
pub mod rtp;
pub mod rtp_stats;
pub mod run;
pub mod sctp;
pub mod sdp;
pub mod sip;
pub mod stage;
#[cfg(feature = "sqlite")]
pub mod store;
pub mod stream;
pub mod tap;
pub mod tracker;
