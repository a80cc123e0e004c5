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

/// Formats a duration for people: `3.2 ms`, `14.0 s`, `2.5 h`, `3.0 days`.
pub fn span(ns: Nanos) -> String {
    let s = ns as f64 / SECOND as f64;
    match s {
        s if s < 1e-3 => format!("{:.1} µs", s * 1e6),
        s if s < 1.0 => format!("{:.1} ms", s * 1e3),
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.1} days", s / 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(span(1_500), "1.5 µs");
        assert_eq!(span(3_200_000), "3.2 ms");
        assert_eq!(span(14 * SECOND), "14.0 s");
        assert_eq!(span(5400 * SECOND), "90.0 min");
        assert_eq!(span(9000 * SECOND), "2.5 h");
        assert_eq!(span(3 * 86_400 * SECOND), "3.0 days");
    }
}
