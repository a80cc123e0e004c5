//! Flows: keys, the per-shard flow table, and the records it emits.
pub mod arena;
pub mod entry;
pub mod key;
pub mod prefault;
pub mod record;
pub mod snapshot;
pub mod table;

#[cfg(test)]
mod table_tests;
