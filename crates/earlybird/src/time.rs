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

/// The clock of a live run's idle checks: the latest packet time seen,
/// carried on by the monotonic clock since it was seen (before any packet,
/// the system clock when the run began, carried on the same way).
///
/// A quiet live link still has to end idle flows and close seconds, so its
/// shards need a time that goes on without packets. Reading the system
/// clock for it tied that time to every step of the clock: stepped forward
/// an hour, an idle check ended every open flow and wrote an hour of empty
/// seconds before the next packet came. This clock moves only with the
/// packets' own stamps and with elapsed time: a step of the wall clock
/// reaches the run through the stamps of the packets after it, as in a
/// capture file, and never through an idle check (docs/OPERATIONS.md,
/// "What survives what").
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdleClock {
    /// The packet time (or start time) the clock was set to.
    stamp: Nanos,
    /// When it was set.
    at: std::time::Instant,
}

impl IdleClock {
    /// A clock at the system clock's time now.
    pub(crate) fn start() -> IdleClock {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        IdleClock {
            stamp: wall,
            at: std::time::Instant::now(),
        }
    }

    /// A packet of time `ts` was read (the latest so far): the clock goes
    /// on from it. A stamp older than the clock's own start (or than a
    /// stamp given before) is not a later time and changes nothing.
    #[inline]
    pub(crate) fn saw(&mut self, ts: Nanos) {
        if ts > self.stamp {
            self.stamp = ts;
            self.at = std::time::Instant::now();
        }
    }

    /// The time now: the last stamp plus the monotonic time since.
    pub(crate) fn now(&self) -> Nanos {
        let since = u64::try_from(self.at.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stamp.saturating_add(since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_clock_goes_on_from_the_latest_stamp_only() {
        let mut c = IdleClock::start();
        let began = c.now();
        // A stamp an hour later moves it on; one two hours earlier (a clock
        // stepped back) does not move it back.
        c.saw(began + 3600 * SECOND);
        assert!(c.now() >= began + 3600 * SECOND);
        c.saw(began - 7200 * SECOND);
        assert!(c.now() >= began + 3600 * SECOND);
        // Without packets it goes on by elapsed time, never backwards.
        let a = c.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(c.now() > a);
    }

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
