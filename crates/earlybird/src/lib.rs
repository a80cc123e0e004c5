//! earlybird: a wire-speed flow meter that labels each flow's application
//! from its first few packets.
//!
//! ```text
//!  source ──batches──▶ shard 0..N-1 (batch t is read and decoded by shard
//!                      t mod N, which hands each shard the packets whose
//!                      symmetric flow hash is its own: exchange.rs)
//!     per shard, one thread, run to completion:
//!     decode ─▶ flow table ─▶ early features ─▶ inline classifier
//!                     │
//!                     ▼ finished records (batches, bounded channel)
//!               exporter thread (CSV, JSON lines, …)
//! ```
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod analyze;
pub mod bench;
pub mod classify;
pub mod config;
pub mod decode;
pub mod error;
pub mod exchange;
pub mod export;
pub mod features;
pub mod flow;
pub mod gen;
pub mod learn;
pub mod mark;
pub mod outpath;
pub mod pipeline;
mod prefetch;
pub mod schema;
pub mod shard;
pub mod source;
pub mod telemetry;
pub mod time;

pub use error::{Error, Result};
