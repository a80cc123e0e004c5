//! Counters and the end-of-run summary.
pub mod counters;
pub mod summary;

pub use counters::Counters;
pub use summary::Summary;
