//! Counters, the per-second statistics and the end-of-run summary.
pub mod alarms;
pub mod counters;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod second;
pub mod series;
pub mod summary;

pub use counters::Counters;
pub use summary::Summary;
