//! VoIP: the wire formats of calls, one file per protocol.
//!
//! Contract: `sip` (SIP messages over datagrams and streams) and `sdp`
//! (the media an offer or answer announces) are pure parsers over captured
//! bytes: views or small owned results, every length checked, errors that
//! name the offset, no panic on any input (each has a fuzz target in
//! `fuzz/`). RTP, RTCP and RTP stream statistics live below, in
//! `analyze::rtp` and `analyze::rtp_stats`, which the media analyzer
//! shares; `stream` puts one direction of
//! a TCP connection back in order (bounded) for SIP over TCP. They know
//! nothing of flows or calls; the call tracking built on them reads the
//! payloads the shards give and keeps its own state.

pub mod audio;
pub mod defrag;
pub mod mos;
pub mod record;
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
