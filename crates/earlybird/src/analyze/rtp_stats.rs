//! Quality figures of one RTP stream (one SSRC in one direction), as RFC
//! 3550 defines them and VoIP probes report them.
//!
//! Contract: [`StreamStats::packet`] takes the stream's packets in arrival
//! order (arrival time from the capture, in nanoseconds, never the wall
//! clock) with their sequence number and RTP timestamp, and keeps:
//! - packets and payload bytes received;
//! - the extended highest sequence number (RFC 3550 A.1: 16-bit wraps
//!   counted as cycles; a jump of more than [`MAX_DROPOUT`] ahead or
//!   [`MAX_MISORDER`] behind is taken as a restart of the sequence);
//! - expected packets (`extended highest − first + 1`) and lost packets
//!   (`expected − received`, negative when duplicates outnumber losses);
//! - duplicates (a sequence number seen among the last 128, beyond the
//!   100 a late packet may trail by) and
//!   reordered packets (older than the highest so far, not duplicates);
//! - interarrival jitter per RFC 3550 §6.4.1, `J += (|D| − J) / 16` with
//!   `D` the difference between the arrival spacing and the RTP timestamp
//!   spacing of consecutive packets in arrival order, in milliseconds at
//!   the stream's clock rate; its mean over the packets that have a jitter
//!   value (every packet after the first when the clock is known from the
//!   start; Wireshark's RTP analysis averages the same way) and its
//!   maximum. [`StreamStats::set_clock`] gives a stream a clock later (a
//!   clock inferred from the stream, or inferred again): the jitter
//!   figures then start afresh at that clock, so they are never a mix of
//!   two rates;
//! - the largest gap between consecutive arrivals.
//!
//! The jitter needs the stream's clock rate: a stream whose rate is not
//! known (a dynamic payload type without the SDP that maps it) has no
//! jitter figures (`None`), rather than figures at a guessed rate.
//!
//! Pure arithmetic on the arguments; no allocation after
//! [`StreamStats::new`]; never panics.

/// A sequence number this far ahead of the highest is a restart.
pub const MAX_DROPOUT: u16 = 3000;
/// A sequence number this far behind the highest is a restart.
pub const MAX_MISORDER: u16 = 100;
/// Sequence numbers remembered for duplicate detection.
pub(crate) const WINDOW: usize = 128;

/// The figures of one stream (see the module docs).
#[derive(Debug, Clone)]
pub struct StreamStats {
    /// RTP clock rate in Hz used for the jitter (0 = unknown: no jitter).
    pub clock: u32,
    /// Packets received (duplicates included).
    pub packets: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Duplicated packets.
    pub duplicates: u64,
    /// Packets that arrived after a higher sequence number.
    pub reordered: u64,
    /// Sequence restarts (jumps beyond the dropout limits).
    pub restarts: u64,
    first_seq: u32,
    /// Extended highest sequence number (cycles × 65536 + seq).
    max_ext: u32,
    /// Arrival and RTP timestamp of the previous packet.
    last: Option<(u64, u32)>,
    jitter_ms: f64,
    jitter_sum_ms: f64,
    /// Packets that added a jitter value to `jitter_sum_ms`.
    jitter_n: u64,
    max_jitter_ms: f64,
    /// Largest gap between consecutive arrivals, ns.
    pub max_delta_ns: u64,
    /// First and last arrival, ns.
    pub first_ns: u64,
    /// Last arrival, ns.
    pub last_ns: u64,
    seen: Box<[u32; WINDOW]>,
}

impl StreamStats {
    /// A stream at `clock` Hz (0 when the rate is not known).
    pub fn new(clock: u32) -> StreamStats {
        StreamStats {
            clock,
            packets: 0,
            bytes: 0,
            duplicates: 0,
            reordered: 0,
            restarts: 0,
            first_seq: 0,
            max_ext: 0,
            last: None,
            jitter_ms: 0.0,
            jitter_sum_ms: 0.0,
            jitter_n: 0,
            max_jitter_ms: 0.0,
            max_delta_ns: 0,
            first_ns: 0,
            last_ns: 0,
            seen: Box::new([u32::MAX; WINDOW]),
        }
    }

    /// Accounts one packet (see the module docs).
    pub fn packet(&mut self, arrival_ns: u64, seq: u16, ts: u32, payload_len: usize) {
        self.bytes += payload_len as u64;
        if self.packets == 0 {
            self.packets = 1;
            self.first_seq = u32::from(seq);
            self.max_ext = u32::from(seq);
            self.first_ns = arrival_ns;
            self.last_ns = arrival_ns;
            self.last = Some((arrival_ns, ts));
            self.seen[seq as usize % WINDOW] = u32::from(seq);
            return;
        }
        self.packets += 1;
        let max_seq = self.max_ext as u16;
        let ahead = seq.wrapping_sub(max_seq);
        let ext = if ahead == 0 {
            self.max_ext
        } else if ahead < MAX_DROPOUT {
            // In order, with a gap that is permissible.
            let cycles = self.max_ext & 0xffff_0000;
            let ext =
                cycles.wrapping_add(u32::from(seq)) + if seq < max_seq { 0x1_0000 } else { 0 };
            self.max_ext = ext;
            ext
        } else if max_seq.wrapping_sub(seq) <= MAX_MISORDER {
            // Late: a duplicate or a reordered packet.
            let cycles = self.max_ext & 0xffff_0000;
            let mut ext = cycles.wrapping_add(u32::from(seq));
            if seq > max_seq {
                ext = ext.wrapping_sub(0x1_0000);
            }
            ext
        } else {
            // A jump: the sender restarted its sequence.
            self.restarts += 1;
            let ext = (self.max_ext & 0xffff_0000).wrapping_add(0x1_0000) | u32::from(seq);
            // The packets so far keep counting: the span before the jump
            // is carried over.
            let span = self.max_ext.wrapping_sub(self.first_seq) + 1;
            self.first_seq = ext.wrapping_sub(span);
            self.max_ext = ext;
            ext
        };
        let slot = ext as usize % WINDOW;
        if self.seen[slot] == ext {
            self.duplicates += 1;
        } else {
            if ext < self.max_ext {
                self.reordered += 1;
            }
            self.seen[slot] = ext;
        }
        if let Some((prev_ns, prev_ts)) = self.last {
            let delta_ns = arrival_ns.saturating_sub(prev_ns);
            self.max_delta_ns = self.max_delta_ns.max(delta_ns);
            if self.clock > 0 {
                let arrival_ms = (arrival_ns as f64 - prev_ns as f64) / 1e6;
                let ts_ms =
                    f64::from(ts.wrapping_sub(prev_ts) as i32) * 1000.0 / f64::from(self.clock);
                let d = (arrival_ms - ts_ms).abs();
                self.jitter_ms += (d - self.jitter_ms) / 16.0;
                self.max_jitter_ms = self.max_jitter_ms.max(self.jitter_ms);
                self.jitter_sum_ms += self.jitter_ms;
                self.jitter_n += 1;
            }
        }
        self.last = Some((arrival_ns, ts));
        self.last_ns = self.last_ns.max(arrival_ns);
    }

    /// Packets expected from the sequence numbers.
    pub fn expected(&self) -> u64 {
        if self.packets == 0 {
            0
        } else {
            u64::from(self.max_ext.wrapping_sub(self.first_seq)) + 1
        }
    }

    /// Expected minus received (negative when duplicates outnumber losses).
    pub fn lost(&self) -> i64 {
        self.expected() as i64 - self.packets as i64
    }

    /// The current jitter, ms (`None` at an unknown clock rate).
    pub fn jitter_ms(&self) -> Option<f64> {
        (self.clock > 0).then_some(self.jitter_ms)
    }

    /// The largest jitter, ms (`None` at an unknown clock rate).
    pub fn max_jitter_ms(&self) -> Option<f64> {
        (self.clock > 0).then_some(self.max_jitter_ms)
    }

    /// Mean jitter over the packets that have a jitter value, ms (`None`
    /// at an unknown clock rate; 0 before any packet has one).
    pub fn mean_jitter_ms(&self) -> Option<f64> {
        if self.clock == 0 {
            None
        } else if self.jitter_n == 0 {
            Some(0.0)
        } else {
            Some(self.jitter_sum_ms / self.jitter_n as f64)
        }
    }

    /// Sets the clock rate the jitter is computed at. A different rate
    /// starts the jitter figures afresh (the next packet's spacing from
    /// the previous one is the first at the new rate); the same rate
    /// changes nothing.
    pub fn set_clock(&mut self, clock: u32) {
        if clock != self.clock {
            self.clock = clock;
            self.jitter_ms = 0.0;
            self.jitter_sum_ms = 0.0;
            self.jitter_n = 0;
            self.max_jitter_ms = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 ms G.711 packets (160 timestamp units at 8 kHz).
    fn feed(s: &mut StreamStats, seqs: &[(u16, u64)]) {
        for &(seq, arrival_ms) in seqs {
            let ts = u32::from(seq).wrapping_mul(160);
            s.packet(arrival_ms * 1_000_000, seq, ts, 160);
        }
    }

    #[test]
    fn a_perfect_stream_has_no_jitter_or_loss() {
        let mut s = StreamStats::new(8000);
        let p: Vec<(u16, u64)> = (0..50).map(|i| (1000 + i as u16, 20 * i)).collect();
        feed(&mut s, &p);
        assert_eq!((s.packets, s.expected(), s.lost()), (50, 50, 0));
        assert_eq!(
            (s.max_jitter_ms(), s.mean_jitter_ms()),
            (Some(0.0), Some(0.0))
        );
        assert_eq!(s.max_delta_ns, 20_000_000);
        assert_eq!(s.bytes, 50 * 160);
    }

    #[test]
    fn loss_duplicates_reordering_and_wrap() {
        let mut s = StreamStats::new(8000);
        // 65534, 65535, 0, (1 lost), 3, 2 (late), 3 again (duplicate), 4.
        feed(
            &mut s,
            &[
                (65534, 0),
                (65535, 20),
                (0, 40),
                (3, 100),
                (2, 101),
                (3, 102),
                (4, 120),
            ],
        );
        assert_eq!(s.packets, 7);
        assert_eq!(s.expected(), 7, "65534 ..= 65540 extended");
        assert_eq!((s.duplicates, s.reordered), (1, 1));
        assert_eq!(s.lost(), 0, "one lost, one duplicate");
        assert_eq!(s.max_delta_ns, 60_000_000);
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut s = StreamStats::new(8000);
        // Second packet 10 ms late: D = 10 ms, J = 10/16; third on time
        // relative to the second's timestamp but 10 ms early on arrival
        // spacing: D = 10, J = 10/16 + (10 - 10/16)/16.
        feed(&mut s, &[(1, 0), (2, 30), (3, 40)]);
        let j1 = 10.0 / 16.0;
        let j2 = j1 + (10.0 - j1) / 16.0;
        assert!((s.jitter_ms().unwrap() - j2).abs() < 1e-9);
        assert!((s.max_jitter_ms().unwrap() - j2).abs() < 1e-9);
        assert!((s.mean_jitter_ms().unwrap() - (j1 + j2) / 2.0).abs() < 1e-9);
        // A restart does not count as 60,000 lost packets; an unknown
        // clock rate gives no jitter.
        let mut r = StreamStats::new(0);
        feed(&mut r, &[(10, 0), (11, 20), (40000, 40), (40001, 60)]);
        assert_eq!((r.restarts, r.lost()), (1, 0));
        assert_eq!(
            (r.jitter_ms(), r.mean_jitter_ms(), r.max_jitter_ms()),
            (None, None, None)
        );
    }

    #[test]
    fn a_clock_set_later_averages_only_its_own_packets() {
        // Three packets at no clock, then 8 kHz: only the packets from
        // then on have a jitter value, and the mean is over them alone.
        let mut s = StreamStats::new(0);
        feed(&mut s, &[(1, 0), (2, 20), (3, 40)]);
        s.set_clock(8000);
        feed(&mut s, &[(4, 70), (5, 80)]);
        let j1 = 10.0 / 16.0;
        let j2 = j1 + (10.0 - j1) / 16.0;
        assert!((s.mean_jitter_ms().unwrap() - (j1 + j2) / 2.0).abs() < 1e-9);
        assert!((s.max_jitter_ms().unwrap() - j2).abs() < 1e-9);
        // Another rate starts afresh: packet 6 is 20 ms after 5 with a
        // timestamp step of 160, which at 16 kHz is 10 ms: D = 10.
        s.set_clock(16_000);
        assert_eq!(
            (s.mean_jitter_ms(), s.max_jitter_ms()),
            (Some(0.0), Some(0.0))
        );
        feed(&mut s, &[(6, 100)]);
        assert!((s.max_jitter_ms().unwrap() - 10.0 / 16.0).abs() < 1e-9);
        assert!((s.mean_jitter_ms().unwrap() - 10.0 / 16.0).abs() < 1e-9);
        // The same rate again changes nothing.
        s.set_clock(16_000);
        assert!((s.jitter_ms().unwrap() - 10.0 / 16.0).abs() < 1e-9);
        assert_eq!(s.packets, 6);
    }
}
