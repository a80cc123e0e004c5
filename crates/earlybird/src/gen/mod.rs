//! Synthetic traffic generator: `earlybird gen worst|realistic|handshakes`.
//!
//! Contract:
//! - Input: [`GenOptions`] (traffic model, packet count, seed and the model's
//!   knobs) and any [`std::io::Write`] sink.
//! - Output: a classic pcap stream (little-endian, version 2.4, link type 1 =
//!   Ethernet; microsecond timestamps, or nanosecond ones with
//!   [`GenOptions::nanos`]) and a [`GenSummary`] with the ground truth the
//!   benchmarks compare flow meters against.
//! - Deterministic: the same options (seed included) give byte-identical
//!   output on the same platform.
//! - Failures: invalid options are an `io::Error` of kind `InvalidInput`
//!   before anything is written; a failing sink is returned as its own
//!   `io::Error`. Nothing panics.
//! - Allocation: none per packet. Output goes through one 1 MiB buffer. The
//!   worst-case model keeps no per-flow state at all (a flow is arithmetic in
//!   its number), so a window of 10,000,000 concurrent flows costs nothing;
//!   the realistic model keeps about 60 bytes per connection (≈ 1.3 bytes per
//!   packet at the mean of ~49 packets per connection) plus a heap of the
//!   connections active at the same moment.
//!
//! The two models follow the peer benchmark's reference generator
//! (`shared/bench/genpcap.py`), so figures measured on our files compare with
//! the peers' (`worst_1M`, `realistic_1M`, …):
//! - [`GenKind::Worst`] (see `worst.rs`): HPTRAC worst case, 60-byte frames,
//!   one new 5-tuple every `packets_per_flow` packets, `window` flows active at
//!   once, back-to-back at line rate.
//! - [`GenKind::Realistic`] (see `realistic.rs`): CAIDA-like mix of TCP and UDP
//!   connections in both directions, heavy-tailed sizes, paced on a link at a
//!   given load, cut at `snaplen`.
//! - [`GenKind::Handshakes`] (see `handshakes.rs`, our own): short flows one
//!   after another, each a real TLS 1.3, QUIC v1 Initial, DNS, HTTP/1.1 or
//!   SSH handshake, whole, for the payload labellers.
//!
//! [`replay`] is the other half of a benchmark: it sends capture files out
//! of a network interface (`earlybird replay`, AF_PACKET transmit ring).

mod frame;
mod handshakes;
mod realistic;
pub mod voip;
mod worst;

#[cfg(test)]
mod test_pcap;

use std::fmt;
use std::io;

use crate::source::pcap_writer::PcapOut;

/// Which traffic model to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenKind {
    /// HPTRAC worst case: minimum-size frames, every flow new, many active.
    Worst,
    /// CAIDA-like backbone mix (TCP/UDP, both directions, heavy tails).
    Realistic,
    /// Short flows each carrying an application handshake (TLS, QUIC,
    /// DNS, HTTP, SSH) for the payload labellers.
    Handshakes,
}

/// Parameters of a generation run. Build with [`GenOptions::new`] and change
/// the fields you need.
#[derive(Debug, Clone, PartialEq)]
pub struct GenOptions {
    /// Traffic model.
    pub kind: GenKind,
    /// Exact number of packets to write.
    pub packets: u64,
    /// Seed of every pseudo-random choice (payload bytes included).
    pub seed: u64,
    /// Worst: number of flows active at the same time (flows are emitted in
    /// blocks of `window`, packet j of every flow of the block before packet
    /// j+1). Ignored by the realistic model.
    pub window: u64,
    /// Worst: packets per flow (SYN, ACK, PSH|ACK…, FIN|ACK). Ignored by the
    /// realistic model.
    pub packets_per_flow: u32,
    /// Link speed in Gbit/s used to space the timestamps.
    pub gbps: f64,
    /// Realistic: link utilisation in (0, 1]. Worst packets are always
    /// back-to-back (load 1).
    pub load: f64,
    /// Largest captured length; caplen = min(frame length, snaplen), the
    /// record's original length is always the real frame length.
    pub snaplen: u32,
    /// Write nanosecond timestamps (pcap magic 0xa1b23c4d) instead of
    /// microseconds.
    pub nanos: bool,
}

impl GenOptions {
    /// Options with the reference generator's defaults for `kind`:
    /// - worst: seed 1, window 10,000, 5 packets per flow, 10 Gbit/s,
    ///   load 1, snaplen 65,535, microsecond timestamps;
    /// - realistic: seed 1, 1 Gbit/s, load 0.5, snaplen 128, microsecond
    ///   timestamps (window 10,000 and 5 packets per flow are unused);
    /// - handshakes: seed 1, snaplen 65,535, microsecond timestamps (the
    ///   other fields are unused: packets are 2 to 8 µs apart).
    pub fn new(kind: GenKind, packets: u64) -> Self {
        let (gbps, load, snaplen) = match kind {
            GenKind::Worst => (10.0, 1.0, 65_535),
            GenKind::Realistic => (1.0, 0.5, 128),
            GenKind::Handshakes => (1.0, 1.0, 65_535),
        };
        GenOptions {
            kind,
            packets,
            seed: 1,
            window: 10_000,
            packets_per_flow: 5,
            gbps,
            load,
            snaplen,
            nanos: false,
        }
    }

    /// Checks the options; the message names the offending field.
    fn validate(&self) -> io::Result<()> {
        let bad = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        if !(self.gbps.is_finite() && self.gbps > 0.0 && self.gbps <= 10_000.0) {
            return bad(format!("gbps must be in (0, 10000], got {}", self.gbps));
        }
        if !(1..=MAX_SNAPLEN).contains(&self.snaplen) {
            return bad(format!(
                "snaplen must be in 1..={MAX_SNAPLEN}, got {}",
                self.snaplen
            ));
        }
        match self.kind {
            GenKind::Worst => {
                if self.window == 0 {
                    return bad("window must be at least 1".into());
                }
                if self.packets_per_flow == 0 {
                    return bad("packets_per_flow must be at least 1".into());
                }
                if self
                    .window
                    .checked_mul(u64::from(self.packets_per_flow))
                    .is_none()
                {
                    return bad("window * packets_per_flow overflows".into());
                }
            }
            GenKind::Realistic => {
                if !(self.load.is_finite() && self.load > 0.0 && self.load <= 1.0) {
                    return bad(format!("load must be in (0, 1], got {}", self.load));
                }
                if self.packets > u64::from(u32::MAX) {
                    return bad(format!(
                        "realistic: at most {} packets, got {}",
                        u32::MAX,
                        self.packets
                    ));
                }
            }
            GenKind::Handshakes => {
                if self.packets > u64::from(u32::MAX) {
                    return bad(format!(
                        "handshakes: at most {} packets, got {}",
                        u32::MAX,
                        self.packets
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Largest snaplen accepted (the usual pcap maximum).
pub const MAX_SNAPLEN: u32 = 262_144;

/// First timestamp of every generated trace: 2020-09-13T12:26:40Z, as in the
/// reference generator.
pub const START_NS: u64 = 1_600_000_000 * 1_000_000_000;

/// Ground truth of a generated trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenSummary {
    /// Packets written.
    pub packets: u64,
    /// Connections (bidirectional flows, one per 5-tuple).
    pub flows: u64,
    /// Unidirectional flows (a connection seen in both directions counts 2).
    pub unidirectional_flows: u64,
    /// Sum of the IP total lengths of all packets.
    pub bytes_ip: u64,
    /// Packets carrying TCP.
    pub tcp_packets: u64,
    /// Last timestamp minus first timestamp, in nanoseconds (before any
    /// truncation to microseconds).
    pub duration_ns: u64,
    /// `bytes_ip / packets` (0 for an empty trace).
    pub mean_ip_size: f64,
}

impl fmt::Display for GenSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tcp_share = if self.packets == 0 {
            0.0
        } else {
            100.0 * self.tcp_packets as f64 / self.packets as f64
        };
        let per_flow = if self.flows == 0 {
            0.0
        } else {
            self.packets as f64 / self.flows as f64
        };
        write!(
            f,
            "{} packets in {} connections ({} unidirectional flows, {:.1} packets/connection), \
             {:.1}% TCP packets, mean IP size {:.1} B ({} IP bytes), duration {:.6} s",
            self.packets,
            self.flows,
            self.unidirectional_flows,
            per_flow,
            tcp_share,
            self.mean_ip_size,
            self.bytes_ip,
            self.duration_ns as f64 / 1e9
        )
    }
}

/// Writes a classic pcap to `w` (little-endian, Ethernet).
///
/// Invalid options fail with `io::ErrorKind::InvalidInput` before anything
/// is written. `w` is written in large chunks; wrapping it in a `BufWriter`
/// is unnecessary.
///
/// ```
/// use earlybird::{generate, GenKind, GenOptions};
///
/// let mut opts = GenOptions::new(GenKind::Worst, 1000);
/// opts.window = 100; // 100 flows active at once, 5 packets each
/// let mut pcap = Vec::new();
/// let summary = generate(&opts, &mut pcap).unwrap();
/// assert_eq!(summary.flows, 200);
/// assert_eq!(pcap.len(), 24 + 1000 * (16 + 60));
/// eprintln!("{summary}");
/// ```
pub fn generate<W: io::Write>(opts: &GenOptions, w: W) -> io::Result<GenSummary> {
    opts.validate()?;
    let out = PcapOut::new(w, opts.nanos, opts.snaplen)?;
    let mut summary = match opts.kind {
        GenKind::Worst => worst::generate(opts, out)?,
        GenKind::Realistic => realistic::generate(opts, out)?,
        GenKind::Handshakes => handshakes::generate(opts, out)?,
    };
    summary.mean_ip_size = if summary.packets == 0 {
        0.0
    } else {
        summary.bytes_ip as f64 / summary.packets as f64
    };
    Ok(summary)
}

/// SplitMix64 finaliser: a well-mixed 64-bit hash used for stateless
/// per-packet pseudo-random values (payload bytes, jitter).
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform value in [0, 1) from a 64-bit hash (53 significant bits).
#[inline]
fn unit_f64(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_reference_generator() {
        let w = GenOptions::new(GenKind::Worst, 10);
        assert_eq!((w.window, w.packets_per_flow, w.gbps), (10_000, 5, 10.0));
        let r = GenOptions::new(GenKind::Realistic, 10);
        assert_eq!((r.gbps, r.load, r.snaplen, r.nanos), (1.0, 0.5, 128, false));
    }

    #[test]
    fn invalid_options_are_rejected_before_writing() {
        let cases: [fn(&mut GenOptions); 6] = [
            |o| o.window = 0,
            |o| o.packets_per_flow = 0,
            |o| o.gbps = 0.0,
            |o| o.gbps = f64::NAN,
            |o| o.snaplen = 0,
            |o| {
                o.kind = GenKind::Realistic;
                o.load = 1.5
            },
        ];
        for change in cases {
            let mut o = GenOptions::new(GenKind::Worst, 10);
            change(&mut o);
            let mut out = Vec::new();
            let e = generate(&o, &mut out).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{o:?}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn empty_trace_is_just_a_header() {
        for kind in [GenKind::Worst, GenKind::Realistic, GenKind::Handshakes] {
            let mut out = Vec::new();
            let s = generate(&GenOptions::new(kind, 0), &mut out).unwrap();
            assert_eq!(out.len(), 24);
            assert_eq!((s.packets, s.flows, s.mean_ip_size), (0, 0, 0.0));
        }
    }

    #[test]
    fn sink_errors_are_returned() {
        struct Broken;
        impl io::Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        for kind in [GenKind::Worst, GenKind::Realistic, GenKind::Handshakes] {
            let e = generate(&GenOptions::new(kind, 100_000), Broken).unwrap_err();
            assert_eq!(e.to_string(), "disk full");
        }
    }

    #[test]
    fn summary_display_is_one_line() {
        let s = GenSummary {
            packets: 10,
            flows: 2,
            unidirectional_flows: 3,
            bytes_ip: 460,
            tcp_packets: 10,
            duration_ns: 672,
            mean_ip_size: 46.0,
        };
        let text = s.to_string();
        assert!(!text.contains('\n'));
        assert!(text.contains("10 packets in 2 connections"), "{text}");
        assert!(text.contains("100.0% TCP"), "{text}");
    }

    #[test]
    fn unit_values_are_in_range() {
        for i in 0..10_000u64 {
            let u = unit_f64(mix64(i));
            assert!((0.0..1.0).contains(&u));
        }
    }
}
