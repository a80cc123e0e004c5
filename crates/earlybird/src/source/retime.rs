//! Batch-timestamp correction (thesis Ch. 4.3: UDTS, Eq. 4.1, and WDTS,
//! Eq. 4.2) and detection of batch-stamped input, in the source stage.
//!
//! Contract:
//! - A *run* is a maximal sequence of consecutive packets of one capture
//!   file with the same timestamp. Capture engines that stamp a batch at
//!   once write each batch as a run stamped when the batch was fetched.
//! - [`Timestamps::Udts`] gives the i-th of the n packets of a run stamped
//!   t, after a run stamped t′ < t, the time t′ + ⌊(t − t′)·i/n⌋;
//!   [`Timestamps::Wdts`] the time t′ + ⌊(t − t′)·(s₁+…+sᵢ)/(s₁+…+sₙ)⌋,
//!   sᵢ the wire lengths. The last packet of a run keeps t, a run of one
//!   packet is unchanged, and so is the first run of a file (no t′) and a
//!   run stamped before the one before it. Runs are not spread across
//!   files. Only the first [`MAX_RUN`] packets of a run are spread (as a
//!   run of that length); the rest keep their stamps.
//! - [`Retimer::batch`] corrects the packets of a batch in place as they
//!   come, in file order; when the batch ends inside a run it reads the
//!   packets after it ([`Ahead`], which does not move the batch's reader)
//!   to find the run's length. Nothing is held back or copied.
//! - The correction of a packet depends only on the file's packets, not on
//!   where batches begin and end: a reader that steps over packets another
//!   reader corrected goes on from that reader's [`RunState`] at the end
//!   of them ([`Retimer::set_state`]), so several shards that each read
//!   some turns of a file give every packet the time one shard would.
//! - Detection ([`Retimer::sniff`]): of the first [`SNIFF`] packets of each
//!   file (at least 64), the share stamped the same as the packet before;
//!   [`Retimer::batch_stamped`] is true above [`BATCH_STAMPED_SHARE`]. The
//!   pipeline looks and warns only when the correction is on.
//! - [`Timestamps::Off`] changes nothing.

use crate::source::PacketRef;
use crate::time::Nanos;

/// How packet timestamps are corrected (`--timestamps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timestamps {
    /// As captured (the default).
    #[default]
    Off,
    /// Runs of equal stamps spread uniformly (UDTS).
    Udts,
    /// Runs of equal stamps spread by wire length (WDTS).
    Wdts,
}

/// A `timestamps` value that names no mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timestamps: {given:?} is not off, udts or wdts")]
pub struct ModeError {
    /// The value given.
    pub given: String,
}

impl Timestamps {
    /// The mode named `off`, `udts` or `wdts`.
    pub fn parse(s: &str) -> Result<Timestamps, ModeError> {
        match s {
            "off" => Ok(Timestamps::Off),
            "udts" => Ok(Timestamps::Udts),
            "wdts" => Ok(Timestamps::Wdts),
            _ => Err(ModeError {
                given: s.to_string(),
            }),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Timestamps::Off => "off",
            Timestamps::Udts => "udts",
            Timestamps::Wdts => "wdts",
        }
    }
}

/// Packets per file examined for equal stamps.
pub const SNIFF: u64 = 4096;
/// Above this share of examined packets stamped as their predecessor, a
/// file is taken as batch-stamped.
pub const BATCH_STAMPED_SHARE: f64 = 0.5;
/// Longest run spread; the packets of a longer run after this many keep
/// their stamps.
pub const MAX_RUN: usize = 1 << 16;

/// The run open after the packets seen so far of a file: all a reader
/// needs to go on correcting from there. It depends only on the file's
/// packets up to that point (and, for its length, the packets after), so
/// it is the same whichever shard computed it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunState {
    /// Stamp of the run before the open one (`None`: the file's first).
    prev: Option<Nanos>,
    /// Stamp of the open run (`None`: no packet seen yet).
    ts: Option<Nanos>,
    /// Packets of the open run seen so far, and the wire bytes of those
    /// of them within the first [`MAX_RUN`] (WDTS only).
    seen: u64,
    seen_bytes: u64,
    /// The run's length, at most [`MAX_RUN`], and the wire bytes of those
    /// packets (WDTS only), once known (0 before).
    len: u64,
    bytes: u64,
}

/// Packets read ahead of a batch to find where its last run ends: fills
/// the vector (cleared first) with up to the number of packets asked for,
/// continuing where the previous call stopped; returns how many (0 at the
/// end of the file).
pub type Ahead<'a> = dyn FnMut(&mut Vec<PacketRef>, usize) -> usize + 'a;

/// Correction state of one reader's walk over the files of a run.
#[derive(Debug, Default)]
pub struct Retimer {
    mode: Timestamps,
    st: RunState,
    /// Packets read ahead.
    ahead: Vec<PacketRef>,
    /// Detection in this file: packets examined and stamped as the one
    /// before.
    looked: u64,
    shared: u64,
    /// Packets given a new time.
    pub retimed: u64,
}

impl Retimer {
    /// A retimer for `mode`.
    pub fn new(mode: Timestamps) -> Retimer {
        Retimer {
            mode,
            ..Retimer::default()
        }
    }

    /// Whether it changes stamps (the mode is not off).
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.mode != Timestamps::Off
    }

    /// The mode.
    pub(crate) fn mode(&self) -> Timestamps {
        self.mode
    }

    /// A new file starts: runs do not go on across files.
    pub fn start_file(&mut self) {
        self.st = RunState::default();
        self.looked = 0;
        self.shared = 0;
    }

    /// Examines the first [`SNIFF`] packets of the file `reader` reads
    /// (a reader of its own, from the start) for detection.
    pub(crate) fn sniff(&mut self, mut reader: crate::source::CaptureReader<'_>) {
        let mut refs = Vec::with_capacity(SNIFF as usize);
        reader.next_batch(&mut refs, SNIFF as usize);
        self.looked = refs.len() as u64;
        self.shared = shared(&refs);
    }

    /// Whether the first packets of the current file look batch-stamped,
    /// and the share found (of [`Retimer::looked`] packets).
    pub(crate) fn batch_stamped(&self) -> (bool, f64) {
        if self.looked < 64 {
            return (false, 0.0);
        }
        let share = self.shared as f64 / (self.looked - 1) as f64;
        (share > BATCH_STAMPED_SHARE, share)
    }

    /// Packets examined for detection in the current file.
    pub(crate) fn looked(&self) -> u64 {
        self.looked
    }

    /// The run state after the packets seen so far.
    pub(crate) fn state(&self) -> RunState {
        self.st
    }

    /// Goes on from `st`, the state another reader reached after the
    /// packets this one stepped over.
    pub(crate) fn set_state(&mut self, st: RunState) {
        self.st = st;
    }

    /// Corrects the stamps of `refs`, the next packets of the file in
    /// order, by the mode (nothing when off); `ahead` reads the packets
    /// after them when the last run's length is needed. The packets given
    /// a new time are counted in [`Retimer::retimed`].
    #[inline]
    pub fn batch(&mut self, refs: &mut [PacketRef], ahead: &mut Ahead<'_>) {
        if self.mode == Timestamps::Off || refs.is_empty() {
            return;
        }
        let n = refs.len();
        let mut i = 0;
        // The open run going on from the batch before.
        if self.st.ts == Some(refs[0].ts) {
            let t = refs[0].ts;
            let j = 1 + refs[1..].iter().take_while(|p| p.ts == t).count();
            if let Some(prev) = self.st.prev.filter(|&p| t > p) {
                self.spread(prev, t, &mut refs[..j], j == n, ahead);
            }
            self.st.seen += j as u64;
            if j == n {
                return;
            }
            i = j;
        }
        // Runs that start in the batch: only the last may go on after it,
        // and a run of one packet before that changes nothing.
        let t_last = refs[n - 1].ts;
        let last = n - refs[i..]
            .iter()
            .rev()
            .take_while(|p| p.ts == t_last)
            .count();
        let mut prev = self.st.ts;
        while i < last {
            let t = refs[i].ts;
            let mut j = i + 1;
            // Stops at `last` at the latest: refs[last] is stamped t_last,
            // unlike the packet before it.
            while j < last && refs[j].ts == t {
                j += 1;
            }
            if j - i > 1 {
                if let Some(p) = prev.filter(|&p| t > p) {
                    self.st = RunState {
                        prev,
                        ts: Some(t),
                        ..RunState::default()
                    };
                    self.spread(p, t, &mut refs[i..j], false, ahead);
                }
            }
            prev = Some(t);
            i = j;
        }
        self.st = RunState {
            prev,
            ts: Some(t_last),
            ..RunState::default()
        };
        if let Some(p) = prev.filter(|&p| t_last > p) {
            self.spread(p, t_last, &mut refs[last..], true, ahead);
        }
        self.st.seen = (n - last) as u64;
    }

    /// Spreads `run`, the next packets of the open run (stamped `t`, after
    /// a run stamped `prev` < `t`); `last`: they end the batch, so the run
    /// may go on after it.
    fn spread(
        &mut self,
        prev: Nanos,
        t: Nanos,
        run: &mut [PacketRef],
        last: bool,
        ahead: &mut Ahead<'_>,
    ) {
        let wdts = self.mode == Timestamps::Wdts;
        let cap = MAX_RUN as u64;
        let seen = self.st.seen;
        if seen >= cap {
            return;
        }
        // The packets of `run` within the first MAX_RUN of the run.
        let within = run.len().min((cap - seen) as usize);
        let run = &mut run[..within];
        if self.st.len == 0 {
            let mut len = seen + within as u64;
            let mut bytes = self.st.seen_bytes;
            if wdts {
                bytes += run.iter().map(wire).sum::<u64>();
            }
            if last && len < cap {
                // The run may go on after the batch: read ahead to its end.
                let mut want = 8;
                'ahead: loop {
                    let got = ahead(&mut self.ahead, want);
                    for p in &self.ahead[..got] {
                        if p.ts != t || len == cap {
                            break 'ahead;
                        }
                        len += 1;
                        if wdts {
                            bytes += wire(p);
                        }
                    }
                    if got < want {
                        break;
                    }
                    want = (want * 2).min(crate::source::BATCH);
                }
            }
            (self.st.len, self.st.bytes) = (len, bytes);
        }
        let len = self.st.len;
        if len <= 1 {
            return;
        }
        let gap = t - prev;
        // The run's last packet keeps t: it is not counted.
        self.retimed += within as u64 - u64::from(seen + within as u64 == len);
        match self.mode {
            Timestamps::Off => {}
            Timestamps::Udts => udts(run, prev, gap, seen + 1, len),
            Timestamps::Wdts => {
                self.st.seen_bytes = wdts_run(run, prev, gap, self.st.seen_bytes, self.st.bytes);
            }
        }
    }
}

/// Packets of `refs` stamped as the one before.
fn shared(refs: &[PacketRef]) -> u64 {
    refs.windows(2).filter(|w| w[0].ts == w[1].ts).count() as u64
}

/// A packet's weight in WDTS: its wire length (at least 1).
#[inline]
fn wire(p: &PacketRef) -> u64 {
    u64::from(p.orig_len.max(1))
}

/// UDTS (Eq. 4.1): the packets of `run`, numbers `first`, `first` + 1, …
/// of a run of `len`, get prev + ⌊gap·i/len⌋. Exact, with one division per
/// call: the quotient and remainder step on by gap/len.
#[inline]
fn udts(run: &mut [PacketRef], prev: Nanos, gap: u64, first: u64, len: u64) {
    let at = u128::from(gap) * u128::from(first);
    let (mut q, mut r) = ((at / u128::from(len)) as u64, (at % u128::from(len)) as u64);
    let (dq, dr) = (gap / len, gap % len);
    for p in run {
        p.ts = prev + q;
        q += dq;
        r += dr;
        if r >= len {
            q += 1;
            r -= len;
        }
    }
}

/// WDTS (Eq. 4.2): the packets of `run` get prev + ⌊gap·S/total⌋, S the
/// wire bytes of the run up to and including each (`before`: those of the
/// run's packets before `run`). Returns the bytes up to the end of `run`.
///
/// Exact, without a division per packet: while gap·total fits in 64 bits
/// (gaps of days for runs of jumbo frames), x = gap·S does too, and its
/// quotient by `total` is the high half of x·m, m = ⌊(2⁶⁴ − 1)/total⌋,
/// corrected by one step (see [`div_by`]). Beyond that, a u128 division per
/// packet.
#[inline]
fn wdts_run(run: &mut [PacketRef], prev: Nanos, gap: u64, before: u64, total: u64) -> u64 {
    let mut s = before;
    if gap.checked_mul(total).is_some() {
        let m = u64::MAX / total;
        for p in run {
            s += wire(p);
            p.ts = prev + div_by(gap * s, total, m);
        }
        return s;
    }
    let (g, tot) = (u128::from(gap), u128::from(total));
    for p in run {
        s += wire(p);
        p.ts = prev + (g * u128::from(s) / tot) as u64;
    }
    s
}

/// ⌊x/d⌋ for d ≥ 1, given m = ⌊(2⁶⁴ − 1)/d⌋: a multiply and one
/// correction. m = 2⁶⁴/d − e with 0 < e ≤ 1, so the high half of x·m,
/// ⌊x/d − x·e/2⁶⁴⌋, is ⌊x/d⌋ or one less (x·e/2⁶⁴ < 1); the remainder it
/// leaves says which.
#[inline(always)]
fn div_by(x: u64, d: u64, m: u64) -> u64 {
    let q = ((u128::from(x) * u128::from(m)) >> 64) as u64;
    q + u64::from(x - q * d >= d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::LinkType;

    fn refs(stamps: &[(Nanos, u32)]) -> Vec<PacketRef> {
        stamps
            .iter()
            .enumerate()
            .map(|(i, &(ts, len))| PacketRef {
                offset: i,
                caplen: len,
                orig_len: len,
                ts,
                link: LinkType::Ethernet,
                number: i as u64 + 1,
            })
            .collect()
    }

    fn times(r: &[PacketRef]) -> Vec<Nanos> {
        r.iter().map(|p| p.ts).collect()
    }

    /// Corrects `all[from..to]` as one batch, reading ahead in the rest.
    fn batch_of(rt: &mut Retimer, all: &[PacketRef], from: usize, to: usize) -> Vec<PacketRef> {
        let mut b = all[from..to].to_vec();
        let mut at = to;
        let mut ahead = |v: &mut Vec<PacketRef>, max: usize| {
            v.clear();
            let end = (at + max).min(all.len());
            v.extend_from_slice(&all[at..end]);
            at = end;
            v.len()
        };
        rt.batch(&mut b, &mut ahead);
        b
    }

    /// Corrects `all` in batches ending at `cuts`; returns the packets in
    /// order.
    fn by_batches(rt: &mut Retimer, all: &[PacketRef], cuts: &[usize]) -> Vec<PacketRef> {
        let mut out = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain([&all.len()]) {
            out.extend(batch_of(rt, all, from, to));
            from = to;
        }
        out
    }

    #[test]
    fn udts_spreads_each_run_over_the_gap_before_it() {
        let mut r = refs(&[
            (100, 60),
            (200, 60),
            (200, 60),
            (200, 60),
            (200, 60),
            (300, 60),
        ]);
        let mut rt = Retimer::new(Timestamps::Udts);
        r = by_batches(&mut rt, &r, &[]);
        assert_eq!(times(&r), vec![100, 125, 150, 175, 200, 300]);
        assert_eq!(rt.retimed, 3);
    }

    #[test]
    fn wdts_spreads_by_wire_length() {
        let r = refs(&[(0, 100), (1000, 100), (1000, 300), (1000, 600)]);
        let mut rt = Retimer::new(Timestamps::Wdts);
        let r = by_batches(&mut rt, &r, &[]);
        assert_eq!(times(&r), vec![0, 100, 400, 1000]);
        // Uneven weights round down, as the integer formula does.
        let r = refs(&[(0, 60), (1000, 64), (1000, 1514), (1000, 77), (1000, 9000)]);
        let mut rt = Retimer::new(Timestamps::Wdts);
        let r = by_batches(&mut rt, &r, &[2]);
        let total = 64 + 1514 + 77 + 9000;
        let want: Vec<u64> = [0, 64, 64 + 1514, 64 + 1514 + 77, total]
            .iter()
            .enumerate()
            .map(|(i, s)| if i == 0 { 0 } else { 1000 * s / total })
            .collect();
        assert_eq!(times(&r), want);
        // Gaps of any size (over 2^50 ns the quotient is divided out).
        for gap in [(1u64 << 50) - 1, 1 << 50, u64::MAX / 2] {
            let input = refs(&[(1, 60), (1 + gap, 64), (1 + gap, 1514), (1 + gap, 77)]);
            let mut rt = Retimer::new(Timestamps::Wdts);
            let got = by_batches(&mut rt, &input, &[]);
            assert_eq!(
                times(&got),
                reference(Timestamps::Wdts, &input),
                "gap {gap}"
            );
        }
    }

    /// xorshift64 from `seed`.
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn division_by_reciprocal_is_exact() {
        let mut next = rng(7);
        let edge = [1, 2, 3, 7, 1 << 32, (1 << 32) + 1, u64::MAX - 1, u64::MAX];
        for k in 0..200_000u64 {
            // Divisors and dividends of every bit length, and the edges.
            let d = match k % 4 {
                0 => edge[(k / 4 % 8) as usize],
                1 => 1 << (next() % 64),
                _ => (next() >> (next() % 64)).max(1),
            };
            let x = match k % 3 {
                0 => u64::MAX - next() % 3,
                _ => next() >> (next() % 64),
            };
            assert_eq!(div_by(x, d, u64::MAX / d), x / d, "{x} / {d}");
            // Multiples of d and their neighbours.
            let y = d.wrapping_mul(next() % (u64::MAX / d).max(1));
            for y in [y.saturating_sub(1), y, y.saturating_add(1)] {
                assert_eq!(div_by(y, d, u64::MAX / d), y / d, "{y} / {d}");
            }
        }
    }

    #[test]
    fn wdts_equals_the_exact_formula_on_random_runs() {
        let mut next = rng(11);
        for round in 0..3000u64 {
            let n = match round % 5 {
                0 => 2 + (next() % 2000) as usize,
                _ => 2 + (next() % 64) as usize,
            };
            // Sizes: frames, tiny, and up to u32::MAX (the largest orig_len).
            let sizes: Vec<u32> = (0..n)
                .map(|_| match next() % 4 {
                    0 => (next() % 64) as u32,
                    1 => u32::MAX - (next() % 3) as u32,
                    _ => (next() % 65536) as u32,
                })
                .collect();
            let total: u64 = sizes.iter().map(|&l| u64::from(l.max(1))).sum();
            // Gaps of every bit length, and those where gap·total is
            // just within 64 bits and just beyond.
            let fit = u64::MAX / total;
            let gap = match round % 4 {
                0 => fit - next() % 2.min(fit),
                1 => fit + 1 + next() % 2,
                _ => (next() >> (next() % 64)).max(1),
            }
            .clamp(1, u64::MAX - 1);
            let prev = next() % (u64::MAX - gap);
            let mut run = refs(&sizes.iter().map(|&l| (prev + gap, l)).collect::<Vec<_>>());
            // Spread in pieces, as batches cut a run.
            let (mut at, mut s) = (0, 0);
            while at < n {
                let to = (at + 1 + (next() % 40) as usize).min(n);
                s = wdts_run(&mut run[at..to], prev, gap, s, total);
                at = to;
            }
            assert_eq!(s, total);
            let mut sum = 0u128;
            for (i, p) in run.iter().enumerate() {
                sum += u128::from(wire(p));
                let want = prev + (u128::from(gap) * sum / u128::from(total)) as u64;
                assert_eq!(
                    p.ts, want,
                    "round {round} packet {i} gap {gap} total {total}"
                );
            }
            assert_eq!(run[n - 1].ts, prev + gap);
        }
    }

    #[test]
    fn a_run_across_batches_is_spread_whole() {
        let all = refs(&[
            (10, 60),
            (20, 60),
            (20, 60),
            (20, 60),
            (20, 60),
            (30, 60),
            (30, 60),
        ]);
        let mut rt = Retimer::new(Timestamps::Udts);
        let out = by_batches(&mut rt, &all, &[3, 5, 7]);
        assert_eq!(
            out.iter().map(|p| p.number).collect::<Vec<_>>(),
            (1..=7).collect::<Vec<_>>()
        );
        assert_eq!(times(&out), vec![10, 12, 15, 17, 20, 25, 30]);
        assert_eq!(rt.retimed, 4);
    }

    /// Stamps with runs of 1 to 40 packets, some going back, and sizes.
    fn mixed(seed: u64, n: usize) -> Vec<PacketRef> {
        let mut x = seed | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut v, mut t) = (Vec::new(), 1_000_000u64);
        while v.len() < n {
            let run = 1 + next() % 40;
            t = if next() % 17 == 0 {
                t - next() % 1000
            } else {
                t + 1 + next() % 5_000_000
            };
            for _ in 0..run {
                v.push((t, 40 + (next() % 1500) as u32));
            }
        }
        v.truncate(n);
        refs(&v)
    }

    /// The thesis's formulas run by run, with a division per packet.
    fn reference(mode: Timestamps, all: &[PacketRef]) -> Vec<Nanos> {
        let mut out: Vec<Nanos> = times(all);
        let (mut a, mut prev) = (0, None::<Nanos>);
        while a < all.len() {
            let t = all[a].ts;
            let b = a + all[a..].iter().take_while(|p| p.ts == t).count();
            let n = (b - a).min(MAX_RUN);
            if let Some(p) = prev.filter(|&p| t > p && n > 1) {
                let gap = u128::from(t - p);
                let w = |q: &PacketRef| u128::from(wire(q));
                let total: u128 = all[a..a + n].iter().map(w).sum();
                let mut sum = 0;
                for (i, q) in all[a..a + n].iter().enumerate() {
                    sum += w(q);
                    out[a + i] = p + match mode {
                        Timestamps::Wdts => gap * sum / total,
                        _ => gap * (i as u128 + 1) / n as u128,
                    } as Nanos;
                }
            }
            prev = Some(t);
            a = b;
        }
        out
    }

    #[test]
    fn batch_boundaries_and_readers_taking_turns_change_nothing() {
        for mode in [Timestamps::Udts, Timestamps::Wdts] {
            for seed in 1..20u64 {
                let all = mixed(seed, 3000);
                let mut one = Retimer::new(mode);
                let whole = by_batches(&mut one, &all, &[]);
                assert!(one.retimed > 1000);
                assert_eq!(times(&whole), reference(mode, &all), "{mode:?} seed {seed}");
                // Two readers taking turns of 37 packets, each going on
                // from the state the other reached (as shards do).
                let (mut a, mut b) = (Retimer::new(mode), Retimer::new(mode));
                let mut out = Vec::new();
                for (k, from) in (0..all.len()).step_by(37).enumerate() {
                    let to = (from + 37).min(all.len());
                    let (me, other) = if k % 2 == 0 {
                        (&mut a, &mut b)
                    } else {
                        (&mut b, &mut a)
                    };
                    me.set_state(other.state());
                    out.extend(batch_of(me, &all, from, to));
                }
                assert_eq!(a.retimed + b.retimed, one.retimed);
                assert_eq!(times(&out), times(&whole), "{mode:?} seed {seed}");
            }
        }
    }

    #[test]
    fn only_the_first_max_run_packets_of_a_run_are_spread() {
        let mut v = vec![(1_000u64, 60u32)];
        v.extend(std::iter::repeat_n(
            (1_000 + MAX_RUN as u64 * 2, 60),
            MAX_RUN + 5,
        ));
        v.push((1_000 + MAX_RUN as u64 * 3, 60));
        let all = refs(&v);
        let mut rt = Retimer::new(Timestamps::Udts);
        let cuts: Vec<usize> = (256..all.len()).step_by(256).collect();
        let out = by_batches(&mut rt, &all, &cuts);
        assert_eq!(out[1].ts, 1_002);
        assert_eq!(out[MAX_RUN].ts, 1_000 + MAX_RUN as u64 * 2);
        assert_eq!(out[MAX_RUN + 1].ts, 1_000 + MAX_RUN as u64 * 2);
        assert_eq!(rt.retimed, MAX_RUN as u64 - 1);
    }

    #[test]
    fn off_changes_nothing_and_detection_counts_equal_neighbours() {
        let stamps: Vec<(Nanos, u32)> = (0..64).map(|i| (1000 * (i / 32 + 1), 60)).collect();
        let r = refs(&stamps);
        let mut rt = Retimer::new(Timestamps::Off);
        assert_eq!(by_batches(&mut rt, &r, &[10]), r);
        assert_eq!(shared(&r), 62);
        assert_eq!(shared(&refs(&[(1, 60), (2, 60), (3, 60), (3, 60)])), 1);
    }

    #[test]
    fn stamps_going_back_and_new_files_are_left_alone() {
        let mut rt = Retimer::new(Timestamps::Udts);
        let r = refs(&[(500, 60), (100, 60), (100, 60)]);
        assert_eq!(times(&by_batches(&mut rt, &r, &[])), vec![500, 100, 100]);
        rt.start_file();
        let r = refs(&[(700, 60), (700, 60)]);
        assert_eq!(times(&by_batches(&mut rt, &r, &[])), vec![700, 700]);
    }
}
