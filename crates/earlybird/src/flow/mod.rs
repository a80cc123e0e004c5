//! Flows: keys, the per-shard flow table, and the records it emits.
pub mod arena;
pub mod consumer;
pub mod entry;
pub mod events;
mod expiry;
pub mod held;
pub mod key;
pub mod packet;
pub mod prefault;
pub mod record;
pub mod snapshot;
pub mod table;
pub mod tally;
mod verdicts;

#[cfg(test)]
mod consumer_tests;
#[cfg(test)]
mod table_tests;
