//! Packet sampling: 1 in N packets by count, before the flow table
//! (`flows --sample POLICY:N`), after the thesis (Santiago del Río 2013,
//! Ch. 6.5, Fig. 6.18).
//!
//! Contract:
//! - [`Sampling`] is a run's choice: a [`Policy`], the rate N (1 in N
//!   packets, 2..=65536) and a seed. [`Sampling::parse`] reads
//!   `systematic:N`, `stratified:N` or `random:N`.
//! - A `Sampler` decides packet by packet, in the order it is shown them:
//!   - systematic: the packets are cut into cycles of N and the first of
//!     each cycle is kept (no randomness; the seed is unused);
//!   - stratified: cycles of N, one packet of each cycle kept, at a
//!     position drawn uniformly for each cycle;
//!   - random: each packet kept with probability 1/N, independently.
//! - The draws come from SplitMix64 seeded with the run's seed and the
//!   sampler's stream number (the shard's id), so the same seed, input and
//!   number of shards keep the same packets.
//! - `Sampler::sample` copies the kept packets of a batch to a buffer and
//!   counts the others (packets and wire bytes); it reads only the
//!   `PacketRef`s (`crate::source`), never the packets, so a skipped packet costs no decode.
//! - Records of a sampled run carry [`FIELDS`]: the policy, N, and the
//!   flow's packets and bytes multiplied by N (estimates of the unsampled
//!   counts; the record's own counts stay what was seen).

use crate::schema::{Cells, Field, FieldType};

/// Which packets of a cycle are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The first of each cycle of N.
    Systematic,
    /// One of each cycle of N, at a random position.
    Stratified,
    /// Each packet with probability 1/N.
    Random,
}

impl Policy {
    /// The policy's name, as `--sample` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Systematic => "systematic",
            Policy::Stratified => "stratified",
            Policy::Random => "random",
        }
    }
}

/// A run's packet sampling (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    /// Which packets are kept.
    pub policy: Policy,
    /// N: one packet in N is kept (on average, for `random`).
    pub rate: u32,
    /// Seed of the stratified and random draws.
    pub seed: u64,
}

/// Largest N.
pub const MAX_RATE: u32 = 65_536;

/// A `--sample` value that cannot be read; each names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// No `:` between the policy and N.
    #[error("--sample {spec:?}: expected POLICY:N, e.g. systematic:8 (policies: systematic, stratified, random)")]
    Form {
        /// The value given.
        spec: String,
    },
    /// A policy that does not exist.
    #[error("--sample {spec:?}: unknown policy {policy:?} (systematic, stratified, random)")]
    Policy {
        /// The value given.
        spec: String,
        /// Its policy part.
        policy: String,
    },
    /// N not a number in 2..=[`MAX_RATE`].
    #[error("--sample {spec:?}: N must be 2..={MAX_RATE}")]
    Rate {
        /// The value given.
        spec: String,
    },
}

impl Sampling {
    /// Reads `POLICY:N` (`systematic:8`, `stratified:64`, `random:128`);
    /// the message names what is wrong.
    pub fn parse(spec: &str, seed: u64) -> Result<Sampling, SpecError> {
        let (p, n) = spec.split_once(':').ok_or_else(|| SpecError::Form {
            spec: spec.to_string(),
        })?;
        let policy = match p {
            "systematic" => Policy::Systematic,
            "stratified" => Policy::Stratified,
            "random" => Policy::Random,
            _ => {
                return Err(SpecError::Policy {
                    spec: spec.to_string(),
                    policy: p.to_string(),
                })
            }
        };
        let rate: u32 = n
            .parse()
            .ok()
            .filter(|r| (2..=MAX_RATE).contains(r))
            .ok_or_else(|| SpecError::Rate {
                spec: spec.to_string(),
            })?;
        Ok(Sampling { policy, rate, seed })
    }
}

impl std::fmt::Display for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} 1 in {}", self.policy.name(), self.rate)
    }
}

/// The record fields of a sampled run, after the analyzers'.
pub const FIELDS: &[Field] = &[
    Field::new(
        "sampling",
        FieldType::Str,
        "",
        "Packet sampling policy of the run (systematic, stratified, random); the record's packet and byte counts are of the sampled packets. Only with --sample",
    ),
    Field::new(
        "sampling_rate",
        FieldType::U64,
        "",
        "N: one packet in N was kept. Only with --sample",
    ),
    Field::new(
        "packets_estimated",
        FieldType::U64,
        "packets",
        "Estimate of the flow's packets before sampling: packets seen (both directions) × N. Only with --sample",
    ),
    Field::new(
        "bytes_estimated",
        FieldType::U64,
        "bytes",
        "Estimate of the flow's IP bytes before sampling: bytes seen (both directions) × N. Only with --sample",
    ),
];

/// Writes [`FIELDS`] for a flow that was seen with `packets` and `bytes`.
pub(crate) fn record(s: &Sampling, packets: u64, bytes: u64, out: &mut Cells<'_>) {
    let n = u64::from(s.rate);
    out.text(s.policy.name());
    out.u64(n);
    out.u64(packets.saturating_mul(n));
    out.u64(bytes.saturating_mul(n));
}

/// SplitMix64 (Steele et al. 2014): a seeded 64-bit generator.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift: no division).
    #[inline]
    fn below(&mut self, n: u32) -> u32 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u32
    }
}

/// One stream of sampling decisions (one per shard).
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    policy: Policy,
    rate: u32,
    /// Position in the current cycle (0..rate).
    pos: u32,
    /// Stratified: the position kept in the current cycle.
    pick: u32,
    rng: SplitMix,
}

/// What [`Sampler::sample`] skipped and the times of the whole part.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Skipped {
    pub packets: u64,
    /// Wire bytes (original lengths).
    pub bytes: u64,
    /// Smallest and largest timestamp of every packet shown (`u64::MAX`
    /// and 0 when none was).
    pub min_ts: u64,
    pub max_ts: u64,
}

impl Sampler {
    /// Stream `stream` of sampling `s`.
    pub(crate) fn new(s: &Sampling, stream: u64) -> Sampler {
        let mut rng = SplitMix(s.seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let pick = match s.policy {
            Policy::Stratified => rng.below(s.rate),
            _ => 0,
        };
        Sampler {
            policy: s.policy,
            rate: s.rate,
            pos: 0,
            pick,
            rng,
        }
    }

    /// Whether the next packet is kept.
    #[inline]
    pub(crate) fn keep(&mut self) -> bool {
        match self.policy {
            Policy::Random => self.rng.below(self.rate) == 0,
            Policy::Systematic | Policy::Stratified => {
                let keep = self.pos == self.pick;
                self.pos += 1;
                if self.pos == self.rate {
                    self.pos = 0;
                    if self.policy == Policy::Stratified {
                        self.pick = self.rng.below(self.rate);
                    }
                }
                keep
            }
        }
    }

    /// Puts the packets of `refs` that are kept into `kept` (cleared
    /// first), in order; returns what was skipped. `stamp` gives a
    /// packet's timestamp and original length.
    pub(crate) fn sample<T: Copy>(
        &mut self,
        refs: &[T],
        kept: &mut Vec<T>,
        stamp: impl Fn(&T) -> (u64, u32),
    ) -> Skipped {
        kept.clear();
        let mut s = Skipped {
            packets: 0,
            bytes: 0,
            min_ts: u64::MAX,
            max_ts: 0,
        };
        for r in refs {
            let (ts, orig_len) = stamp(r);
            s.min_ts = s.min_ts.min(ts);
            s.max_ts = s.max_ts.max(ts);
            if self.keep() {
                kept.push(*r);
            } else {
                s.packets += 1;
                s.bytes += u64::from(orig_len);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::PacketRef;

    fn kept(s: &Sampling, stream: u64, n: usize) -> Vec<usize> {
        let mut sm = Sampler::new(s, stream);
        (0..n).filter(|_| sm.keep()).collect()
    }

    #[test]
    fn parse_reads_the_three_policies_and_refuses_the_rest() {
        let s = Sampling::parse("systematic:8", 1).unwrap();
        assert_eq!((s.policy, s.rate, s.seed), (Policy::Systematic, 8, 1));
        assert_eq!(
            Sampling::parse("stratified:64", 0).unwrap().policy,
            Policy::Stratified
        );
        assert_eq!(Sampling::parse("random:128", 0).unwrap().rate, 128);
        for bad in [
            "systematic",
            "every:8",
            "random:1",
            "random:x",
            "random:70000",
        ] {
            assert!(Sampling::parse(bad, 0).is_err(), "{bad}");
        }
        assert_eq!(s.to_string(), "systematic 1 in 8");
    }

    #[test]
    fn systematic_keeps_the_first_of_each_cycle() {
        let s = Sampling::parse("systematic:8", 0).unwrap();
        assert_eq!(kept(&s, 0, 33), vec![0, 8, 16, 24, 32]);
        assert_eq!(kept(&s, 5, 33), vec![0, 8, 16, 24, 32]);
    }

    #[test]
    fn stratified_keeps_exactly_one_per_cycle_at_varying_places() {
        let s = Sampling::parse("stratified:16", 42).unwrap();
        let k = kept(&s, 0, 16 * 1000);
        assert_eq!(k.len(), 1000);
        for (c, i) in k.iter().enumerate() {
            assert_eq!(i / 16, c, "one per cycle");
        }
        let places: std::collections::HashSet<usize> = k.iter().map(|i| i % 16).collect();
        assert_eq!(places.len(), 16, "every position drawn at some point");
        // Reproducible by seed; another seed or stream keeps others.
        assert_eq!(k, kept(&s, 0, 16 * 1000));
        assert_ne!(k, kept(&s, 1, 16 * 1000));
        let other = Sampling { seed: 43, ..s };
        assert_ne!(k, kept(&other, 0, 16 * 1000));
    }

    #[test]
    fn random_keeps_about_one_in_n() {
        let s = Sampling::parse("random:8", 7).unwrap();
        let n = 80_000;
        let k = kept(&s, 0, n).len() as f64;
        // Binomial(80000, 1/8): mean 10000, sd ~94; 5 sd either way.
        assert!((k - 10_000.0).abs() < 470.0, "{k}");
        assert_eq!(kept(&s, 0, 1000), kept(&s, 0, 1000));
    }

    #[test]
    fn sample_counts_what_it_skips() {
        let s = Sampling::parse("systematic:4", 0).unwrap();
        let refs: Vec<PacketRef> = (0..10u64)
            .map(|i| PacketRef {
                offset: 0,
                caplen: 60,
                orig_len: 100 + i as u32,
                ts: 1000 + i,
                link: crate::decode::LinkType::Ethernet,
                number: i + 1,
            })
            .collect();
        let mut sm = Sampler::new(&s, 0);
        let mut out = Vec::new();
        let sk = sm.sample(&refs, &mut out, |r| (r.ts, r.orig_len));
        let nums: Vec<u64> = out.iter().map(|r| r.number).collect();
        assert_eq!(nums, vec![1, 5, 9]);
        assert_eq!(sk.packets, 7);
        assert_eq!(
            sk.bytes,
            (0..10).map(|i| 100 + i).sum::<u64>() - 100 - 104 - 108
        );
        assert_eq!((sk.min_ts, sk.max_ts), (1000, 1009));
        // The cycle goes on across batches: packets 11 and 12 are skipped,
        // 13 is kept.
        let sk = sm.sample(&refs[..3], &mut out, |r| (r.ts, r.orig_len));
        assert_eq!((out.len(), sk.packets), (1, 2));
        assert_eq!(out[0].number, 3);
    }
}
