//! Batch-timestamp correction (thesis Ch. 4.3: UDTS, Eq. 4.1, and WDTS,
//! Eq. 4.2) and detection of batch-stamped input, in the source stage.
//!
//! Contract:
//! - A *run* is a maximal sequence of consecutive packets of one capture
//!   file with the same timestamp. Capture engines that stamp a batch at
//!   once write each batch as a run stamped when the batch was fetched.
//! - [`Timestamps::Udts`] gives the i-th of the n packets of a run stamped
//!   t, after a run stamped t′, the time t′ + (t − t′)·i/n;
//!   [`Timestamps::Wdts`] the time t′ + (t − t′)·(s₁+…+sᵢ)/(s₁+…+sₙ), sᵢ
//!   the wire lengths. The last packet of a run keeps t, a run of one packet
//!   is unchanged, and the first run of a file (no t′) keeps its stamps.
//!   Runs are not spread across files.
//! - A run's end is known only when a packet with another stamp (or the
//!   end of the file) is read: [`Retimer::batch`] holds the trailing run of
//!   a batch back and hands it out before the next batch, once complete
//!   ([`Retimer::ready`]; the packets stay in input order, the batch itself
//!   is not copied, and the refs point into the file's bytes, which live
//!   for the whole file). A run longer than [`MAX_RUN`] packets is cut
//!   there.
//! - Detection: of the first [`SNIFF`] packets of each file (at least 64),
//!   the share stamped the same as the packet before;
//!   [`Retimer::batch_stamped`] is true above [`BATCH_STAMPED_SHARE`]. The
//!   pipeline warns and counts such a file when the correction is on (off,
//!   a run reports exactly what it did before this existed).
//!   It looks at whole batches until it has seen [`SNIFF`] packets, so
//!   it costs nothing after that.
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

impl Timestamps {
    /// The mode named `off`, `udts` or `wdts`.
    pub fn parse(s: &str) -> Result<Timestamps, String> {
        match s {
            "off" => Ok(Timestamps::Off),
            "udts" => Ok(Timestamps::Udts),
            "wdts" => Ok(Timestamps::Wdts),
            _ => Err(format!("timestamps: {s:?} is not off, udts or wdts")),
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
/// Longest run held back; a longer one is spread in parts.
pub const MAX_RUN: usize = 1 << 16;

/// Correction state of one reader's walk over the files of a run.
#[derive(Debug, Default)]
pub(crate) struct Retimer {
    mode: Timestamps,
    /// The trailing run of the last batch, held back.
    carry: Vec<PacketRef>,
    /// A held-back run completed by the last batch, to process before it.
    ready: Vec<PacketRef>,
    /// Stamp of the last run spread (or passed) in this file.
    prev: Option<Nanos>,
    /// Detection in this file: packets examined, stamped as the one before,
    /// and the last stamp examined.
    looked: u64,
    shared: u64,
    last: Option<Nanos>,
    /// Packets given a new time (whole run).
    pub retimed: u64,
}

impl Retimer {
    /// A retimer for `mode`.
    pub(crate) fn new(mode: Timestamps) -> Retimer {
        Retimer {
            mode,
            ..Retimer::default()
        }
    }

    /// A new file starts (the previous one was ended with `end` = true).
    pub(crate) fn start_file(&mut self) {
        debug_assert!(self.carry.is_empty());
        self.carry.clear();
        self.ready.clear();
        self.prev = None;
        self.looked = 0;
        self.shared = 0;
        self.last = None;
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

    /// The batch `refs` was just read (`end`: the file has no more
    /// packets; `refs` is then empty or its last packets). Examines it for
    /// detection and, unless the mode is off, corrects the stamps of the
    /// runs it completes. The packets to process now are then
    /// [`Retimer::ready`] (the run held back from the batch before, now
    /// complete) followed by `refs`; the batch is not copied.
    #[inline]
    pub(crate) fn batch(&mut self, refs: &mut Vec<PacketRef>, end: bool) {
        if self.looked < SNIFF {
            self.sniff(refs);
        }
        if self.mode == Timestamps::Off {
            return;
        }
        self.ready.clear();
        let mut from = 0;
        if let Some(first) = self.carry.first() {
            // The held-back run goes on to the first packet of another
            // stamp in this batch.
            let t = first.ts;
            let k = refs.iter().position(|p| p.ts != t).unwrap_or(refs.len());
            if k == refs.len() && !end && self.carry.len() + k < MAX_RUN {
                self.carry.append(refs);
                return;
            }
            let (a, b) = (&mut self.carry[..], &mut refs[..k]);
            if let (Some(prev), true) = (self.prev, a.len() + b.len() > 1) {
                if t > prev {
                    self.retimed += (a.len() + b.len()) as u64 - 1;
                    spread_run(self.mode, prev, t, a, b);
                }
            }
            self.prev = Some(t);
            std::mem::swap(&mut self.carry, &mut self.ready);
            from = k;
        }
        let keep = if end || from == refs.len() {
            refs.len()
        } else {
            let t = refs[refs.len() - 1].ts;
            let start = refs[from..]
                .iter()
                .rposition(|p| p.ts != t)
                .map_or(from, |i| from + i + 1);
            if refs.len() - start >= MAX_RUN {
                refs.len()
            } else {
                start
            }
        };
        self.carry.extend_from_slice(&refs[keep..]);
        refs.truncate(keep);
        self.spread(&mut refs[from..]);
    }

    /// The packets to process before the batch (see [`Retimer::batch`]).
    #[inline]
    pub(crate) fn ready(&self) -> &[PacketRef] {
        &self.ready
    }

    fn sniff(&mut self, refs: &[PacketRef]) {
        for p in refs {
            if self.last == Some(p.ts) {
                self.shared += 1;
            }
            self.last = Some(p.ts);
            self.looked += 1;
        }
    }

    /// Spreads every run of `refs` (each complete).
    fn spread(&mut self, refs: &mut [PacketRef]) {
        let mut a = 0;
        while a < refs.len() {
            let t = refs[a].ts;
            let mut b = a + 1;
            while b < refs.len() && refs[b].ts == t {
                b += 1;
            }
            let run = &mut refs[a..b];
            if let (Some(prev), true) = (self.prev, run.len() > 1) {
                if t > prev {
                    self.retimed += run.len() as u64 - 1;
                    spread_run(self.mode, prev, t, run, &mut []);
                }
            }
            self.prev = Some(t);
            a = b;
        }
    }
}

/// Gives the packets of one run stamped `t` (`a` then `b`), after a run
/// stamped `prev` (< `t`), their times by `mode` (Eq. 4.1 or 4.2).
pub(crate) fn spread_run(
    mode: Timestamps,
    prev: Nanos,
    t: Nanos,
    a: &mut [PacketRef],
    b: &mut [PacketRef],
) {
    let gap = u128::from(t - prev);
    let n = (a.len() + b.len()) as u128;
    match mode {
        Timestamps::Off => {}
        Timestamps::Udts => {
            for (i, p) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                p.ts = prev + (gap * (i as u128 + 1) / n) as Nanos;
            }
        }
        Timestamps::Wdts => {
            let total: u128 = a
                .iter()
                .chain(b.iter())
                .map(|p| u128::from(p.orig_len.max(1)))
                .sum();
            let mut sum = 0u128;
            for p in a.iter_mut().chain(b.iter_mut()) {
                sum += u128::from(p.orig_len.max(1));
                p.ts = prev + (gap * sum / total) as Nanos;
            }
        }
    }
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
        rt.batch(&mut r, true);
        assert_eq!(times(&r), vec![100, 125, 150, 175, 200, 300]);
        assert_eq!(rt.retimed, 3);
    }

    #[test]
    fn wdts_spreads_by_wire_length() {
        let mut r = refs(&[(0, 100), (1000, 100), (1000, 300), (1000, 600)]);
        let mut rt = Retimer::new(Timestamps::Wdts);
        rt.batch(&mut r, true);
        assert_eq!(times(&r), vec![0, 100, 400, 1000]);
    }

    #[test]
    fn a_run_across_batches_is_held_back_and_spread_whole() {
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
        let mut out = Vec::new();
        for (chunk, end) in [
            (&all[0..3], false),
            (&all[3..5], false),
            (&all[5..7], false),
            (&all[7..], true),
        ] {
            let mut b = chunk.to_vec();
            rt.batch(&mut b, end);
            out.extend_from_slice(rt.ready());
            out.extend(b);
        }
        assert_eq!(
            out.iter().map(|p| p.number).collect::<Vec<_>>(),
            (1..=7).collect::<Vec<_>>()
        );
        assert_eq!(times(&out), vec![10, 12, 15, 17, 20, 25, 30]);
    }

    #[test]
    fn off_changes_nothing_and_detection_sees_batch_stamped_files() {
        let stamps: Vec<(Nanos, u32)> = (0..64).map(|i| (1000 * (i / 32 + 1), 60)).collect();
        let mut r = refs(&stamps);
        let before = r.clone();
        let mut rt = Retimer::new(Timestamps::Off);
        rt.batch(&mut r, true);
        assert_eq!(r, before);
        let (yes, share) = rt.batch_stamped();
        assert!(yes && (share - 62.0 / 63.0).abs() < 1e-9, "{share}");
        rt.start_file();
        let mut r = refs(&[(1, 60), (2, 60), (3, 60), (3, 60)]);
        rt.batch(&mut r, true);
        assert!(!rt.batch_stamped().0);
    }

    #[test]
    fn stamps_going_back_and_new_files_are_left_alone() {
        let mut rt = Retimer::new(Timestamps::Udts);
        let mut r = refs(&[(500, 60), (100, 60), (100, 60)]);
        rt.batch(&mut r, true);
        assert_eq!(times(&r), vec![500, 100, 100]);
        rt.start_file();
        let mut r = refs(&[(700, 60), (700, 60)]);
        rt.batch(&mut r, true);
        assert_eq!(times(&r), vec![700, 700]);
    }
}
