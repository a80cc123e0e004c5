//! Counters and run summaries.
