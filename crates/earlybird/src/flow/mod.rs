//! Flows: keys, the per-shard flow table, and the records it emits.
pub mod record;
