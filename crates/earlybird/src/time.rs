//! Packet time.
//!
//! All flow timing in earlybird comes from packet timestamps, expressed as
//! nanoseconds since the Unix epoch in a `u64` ([`Nanos`]). Nothing on the
//! data path reads the wall clock, so a file gives the same output at any
//! processing speed.

/// Nanoseconds since the Unix epoch, taken from the packet's capture header.
pub type Nanos = u64;

/// One second in [`Nanos`].
pub const SECOND: Nanos = 1_000_000_000;

/// Formats nanoseconds as `seconds.nanoseconds` (e.g. `1700000000.000001000`).
pub fn fmt_secs(ns: Nanos) -> String {
    format!("{}.{:09}", ns / SECOND, ns % SECOND)
}
