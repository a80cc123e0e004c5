//! Per-second statistics of a run: the shards' seconds merged into one
//! time series.
//!
//! Contract: a [`Merger`] takes every [`ShardSecond`] of a run (on the
//! exporter thread, off the shards' path) and adds up the figures of each
//! second over the shards. A second is complete once every clock of every
//! shard has passed it ([`ShardSecond::next`]); complete seconds come out
//! in time order, once each, through [`Merger::add`]'s callback, and the
//! ones still open at the end through [`Merger::finish`]. A second in which
//! no shard counted anything, between two that did, comes out with zeros
//! (open flows carried over), at most [`MAX_GAP`] of them in a row; a
//! longer gap (a capture with a pause of hours, a clock jump) is skipped
//! and counted in [`Merger::gaps_skipped`]. The empty seconds of a gap come
//! out in one call of the callback (a first second and a count): what the
//! merger does follows the seconds with traffic, not the length of the
//! gaps, and so do the metrics; rows are written per second only where an
//! output or an alarm reads them (`pipeline/sink.rs`). Seconds are numbered
//! with their time domain ([`ShardSecond::domain`]): a domain's seconds
//! come out after every second of the domains before, with no zero rows
//! between two domains, so the rows' times go back where a domain begins
//! earlier than the last one ended. Figures of a second that arrive after
//! it came out (not expected: a shard's clock does not go back within a
//! domain) are added to the shards' totals but to no row. The drift columns
//! of a second count the flow records made in it
//! ([`Merger::add_agreement`], from the records' [`MadeIn`] seconds),
//! whichever thread labelled them: like every other column, they depend on
//! the input only. The rows are records of the kinds [`STATS`] (one per
//! second) and [`APP_STATS`] (one per application, transport and port class
//! with anything counted, per second), written to any record output.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::counters::Counters;
#[cfg(test)]
use super::second::Part;
use super::second::ShardSecond;
use crate::decode::Skip;
use crate::flow::record::{EndReason, MadeIn};
use crate::flow::tally::{Sums, Tally, MEDIA_KINDS, PORT_CLASSES, TRANSPORTS};
use crate::schema::{Field, FieldType, Kind, RowBatch};

use FieldType::{Str, U64};

/// Longest run of empty seconds written as zero rows.
pub const MAX_GAP: u64 = 3600;

/// One row per second of packet time (`--stats-out`).
pub const STATS: Kind = Kind::new(
    "stats",
    &[
        Field::new("time", U64, "s", "The second (Unix time of packet time)"),
        Field::new("packets", U64, "packets", "Packets read"),
        Field::new(
            "bytes",
            U64,
            "bytes",
            "Bytes of the packets read, as on the wire",
        ),
        Field::new(
            "packets_flowed",
            U64,
            "packets",
            "Packets accounted to flows",
        ),
        Field::new(
            "ip_bytes_flowed",
            U64,
            "bytes",
            "IP bytes accounted to flows",
        ),
        Field::new(
            "skipped",
            U64,
            "packets",
            "Packets that belong to no flow, any reason",
        ),
        Field::new("skipped_truncated", U64, "packets", "Skipped: cut short"),
        Field::new(
            "skipped_malformed",
            U64,
            "packets",
            "Skipped: a header field invalid",
        ),
        Field::new("skipped_not_ip", U64, "packets", "Skipped: not IPv4/IPv6"),
        Field::new(
            "skipped_fragment_non_first",
            U64,
            "packets",
            "Skipped: a non-first IP fragment",
        ),
        Field::new(
            "skipped_too_deep",
            U64,
            "packets",
            "Skipped: nested too deep",
        ),
        Field::new(
            "skipped_encrypted",
            U64,
            "packets",
            "Skipped: link layer encrypted",
        ),
        Field::new("flows_new", U64, "flows", "Flows started"),
        Field::new("flows_ended", U64, "flows", "Flows ended, any reason"),
        Field::new("ended_idle", U64, "flows", "Flows ended: idle timeout"),
        Field::new("ended_active", U64, "flows", "Flows ended: active timeout"),
        Field::new("ended_fin", U64, "flows", "Flows ended: FIN both ways"),
        Field::new("ended_rst", U64, "flows", "Flows ended: RST"),
        Field::new(
            "ended_end_of_input",
            U64,
            "flows",
            "Flows ended: end of input",
        ),
        Field::new("ended_evicted", U64, "flows", "Flows ended: table full"),
        Field::new(
            "flows_active",
            U64,
            "flows",
            "Flows open when the second ended",
        ),
        Field::new("flows_classified", U64, "flows", "Verdicts given"),
        Field::new(
            "labelled_flows",
            U64,
            "flows",
            "Flow records made in the second (the flows_ended) with a payload label and a model verdict (classify/drift.rs)",
        ),
        Field::new(
            "agreeing_flows",
            U64,
            "flows",
            "Of them, records whose model verdict is their payload label's class (at --learn-level)",
        ),
        Field::new(
            "disagreeing_flows",
            U64,
            "flows",
            "labelled_flows - agreeing_flows: the alarm series of drift",
        ),
    ],
);

/// Per second, per application, transport and port class with anything
/// counted (`--app-stats-out`).
pub const APP_STATS: Kind = Kind::new(
    "app_stats",
    &[
        Field::new("time", U64, "s", "The second (Unix time of packet time)"),
        Field::new(
            "of",
            Str,
            "",
            "\"app\" (a class of the model, or unknown), \"transport\", \"port\" (TCP and UDP flows by server port class) or \"media\" (the media analyzer's kinds; with --analyzer media)",
        ),
        Field::new(
            "name",
            Str,
            "",
            "The application, transport (tcp, udp, icmp, other), port class (tcp/443, udp/53, tcp/system, udp/registered, tcp/ephemeral, ...; OPERATIONS.md lists them) or media kind (audio, video, file)",
        ),
        Field::new(
            "flows_classified",
            U64,
            "flows",
            "Flows that got this verdict (media: that were decided this kind)",
        ),
        Field::new("flows_ended", U64, "flows", "Flows that ended"),
        Field::new(
            "packets",
            U64,
            "packets",
            "Packets of the flows that ended (media: packets media flows carried in the second, from the deciding packet on)",
        ),
        Field::new(
            "bytes",
            U64,
            "bytes",
            "IP bytes of the flows that ended (media: IP bytes media flows carried in the second, from the deciding packet on)",
        ),
    ],
);

/// The figures of one second (or of the whole run so far), all shards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Figures {
    /// Counters' increase.
    pub counters: Counters,
    /// Flows open at the end of the second (started and not ended, all
    /// seconds so far; not kept in the run's totals).
    pub active: u64,
    /// Verdicts and ended flows per application, transport and port class.
    pub tally: Tally,
    /// Of the flow records made in the second, those with a payload label
    /// and a model verdict, and those of them that agreed
    /// (`classify/drift.rs`; zero without the payload labellers).
    pub agreement: (u64, u64),
}

impl Figures {
    fn new(classes: usize) -> Figures {
        Figures {
            tally: Tally::new(classes),
            ..Figures::default()
        }
    }

    fn add(&mut self, s: &ShardSecond) {
        self.counters.merge(&s.counters);
        self.tally.add(&s.tally);
    }
}

/// Merges the shards' seconds (see the module docs).
pub struct Merger {
    classes: Arc<[String]>,
    /// Per shard and clock (`2 × shard + part`), the time domain and the
    /// second it is in ((0, 0): not heard from yet).
    next: Vec<(u64, u64)>,
    /// Seconds not out yet, by time domain and second.
    open: BTreeMap<(u64, u64), Figures>,
    /// The last second that came out, and its time domain.
    last: Option<(u64, u64)>,
    /// Open flows of the last second out (carried into empty seconds).
    active: u64,
    /// Every figure received, all seconds.
    pub totals: Figures,
    /// Empty seconds not written (gaps longer than [`MAX_GAP`]).
    pub gaps_skipped: u64,
}

impl Merger {
    /// A merger for `shards` shards and a model of `classes` (empty: none).
    pub fn new(shards: usize, classes: Arc<[String]>) -> Merger {
        Merger {
            next: vec![(0, 0); 2 * shards.max(1)],
            open: BTreeMap::new(),
            last: None,
            active: 0,
            totals: Figures::new(classes.len()),
            gaps_skipped: 0,
            classes,
        }
    }

    /// Adds a shard's second; `out` gets every second that is complete now,
    /// as `out(first, n, figures)`: the `n` seconds from `first` on each had
    /// `figures` (`n` > 1 only for the empty seconds of a gap).
    pub fn add(&mut self, s: ShardSecond, out: &mut impl FnMut(u64, u64, &Figures)) {
        if let Some(n) = self.next.get_mut(2 * s.shard + s.part as usize) {
            *n = (*n).max((s.next_domain, s.next));
        }
        self.totals.add(&s);
        if let Some(sec) = s.second {
            let at = (s.domain, sec);
            if self.last.is_none_or(|l| at > l) {
                let classes = self.classes.len();
                self.open
                    .entry(at)
                    .or_insert_with(|| Figures::new(classes))
                    .add(&s);
            }
        }
        let watermark = self.next.iter().copied().min().unwrap_or((0, 0));
        self.emit_before(watermark, out);
    }

    /// Adds the drift counted among flow records made in second
    /// `m.second` of domain `m.domain` ([`MadeIn`]; the exporter thread
    /// labels or receives them before the shard's clock passes that
    /// second, so before it comes out).
    pub fn add_agreement(&mut self, m: &MadeIn) {
        if m.labelled == 0 {
            return;
        }
        let add = |f: &mut Figures| {
            f.agreement.0 += m.labelled;
            f.agreement.1 += m.agreeing;
        };
        add(&mut self.totals);
        let at = (m.domain, m.second);
        if self.last.is_none_or(|l| at > l) {
            let classes = self.classes.len();
            add(self.open.entry(at).or_insert_with(|| Figures::new(classes)));
        }
    }

    /// Every second still open comes out (end of the run).
    pub fn finish(&mut self, out: &mut impl FnMut(u64, u64, &Figures)) {
        self.emit_before((u64::MAX, u64::MAX), out);
    }

    fn emit_before(&mut self, watermark: (u64, u64), out: &mut impl FnMut(u64, u64, &Figures)) {
        while let Some(entry) = self.open.first_entry() {
            let at @ (domain, sec) = *entry.key();
            if at >= watermark {
                break;
            }
            let mut figures = entry.remove();
            // Open flows: every flow started and not ended so far.
            let c = &figures.counters;
            figures.active = (self.active + c.flows.created).saturating_sub(c.flows_ended());
            // Zero rows fill a gap within a domain, never between two.
            if let Some((_, last)) = self.last.filter(|l| l.0 == domain) {
                let gap = sec - last - 1;
                if gap > MAX_GAP {
                    self.gaps_skipped += gap;
                } else if gap > 0 {
                    let empty = Figures {
                        active: self.active,
                        ..Figures::new(self.classes.len())
                    };
                    out(last + 1, gap, &empty);
                }
            }
            out(sec, 1, &figures);
            self.last = Some(at);
            self.active = figures.active;
        }
    }
}

/// The name of tally index `i` of a model of `classes`: its class, or
/// "unknown" (the index past the classes).
pub fn app_name(classes: &[String], i: usize) -> &str {
    classes.get(i).map_or("unknown", String::as_str)
}

/// Appends the [`STATS`] row of second `sec` to `rows`.
pub fn stats_row(rows: &mut RowBatch, sec: u64, f: &Figures) {
    let (c, drift) = (&f.counters, f.agreement);
    rows.push(|r| {
        r.u64(sec);
        r.u64(c.packets_read);
        r.u64(c.bytes_read);
        r.u64(c.packets_flowed);
        r.u64(c.ip_bytes_flowed);
        r.u64(c.skipped_total());
        for s in Skip::ALL {
            r.u64(c.skipped[s as usize]);
        }
        r.u64(c.flows.created);
        r.u64(c.flows_ended());
        for e in EndReason::ALL {
            r.u64(c.flows.ended[e as usize]);
        }
        r.u64(f.active);
        r.u64(c.flows.classified);
        r.u64(drift.0);
        r.u64(drift.1);
        r.u64(drift.0.saturating_sub(drift.1));
    });
}

/// Appends the [`APP_STATS`] rows of second `sec` to `rows`: one per
/// application, transport and port class with anything counted.
pub fn app_rows(rows: &mut RowBatch, sec: u64, f: &Figures, classes: &[String]) {
    let apps = (f.tally.apps.iter().enumerate()).map(|(i, s)| ("app", app_name(classes, i), s));
    let transports = (f.tally.transports.iter())
        .zip(TRANSPORTS)
        .map(|(s, n)| ("transport", n, s));
    let ports = (f.tally.ports.iter())
        .zip(PORT_CLASSES)
        .map(|(s, n)| ("port", n, s));
    let media = (f.tally.media.iter())
        .zip(MEDIA_KINDS)
        .map(|(s, n)| ("media", n, s));
    let all = apps.chain(transports).chain(ports).chain(media);
    for (of, name, s) in all.filter(|(_, _, s)| !s.is_zero()) {
        let s: &Sums = s;
        rows.push(|r| {
            r.u64(sec);
            r.text(of);
            r.text(name);
            r.u64(s.classified);
            r.u64(s.ended);
            r.u64(s.packets);
            r.u64(s.bytes);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(shard: usize, sec: u64, next: u64, packets: u64) -> ShardSecond {
        ShardSecond {
            shard,
            part: Part::Read,
            second: Some(sec),
            domain: 0,
            next,
            next_domain: if next == u64::MAX { u64::MAX } else { 0 },
            counters: Counters {
                packets_read: packets,
                ..Counters::default()
            },
            tally: Tally::new(1),
        }
    }

    /// A merger of `shards` shards whose running clocks are done (the
    /// tests follow one clock per shard).
    fn reading_only(shards: usize, classes: Arc<[String]>) -> Merger {
        let mut m = Merger::new(shards, classes);
        for shard in 0..shards {
            let done = ShardSecond {
                part: Part::Run,
                second: None,
                next: u64::MAX,
                next_domain: u64::MAX,
                ..second(shard, 0, 0, 0)
            };
            m.add(done, &mut |_, _, _| panic!("nothing is complete yet"));
        }
        m
    }

    #[test]
    fn a_second_comes_out_once_every_shard_has_passed_it() {
        let mut m = reading_only(2, vec!["web".to_string()].into());
        let mut got = Vec::new();
        let mut out = |s: u64, n: u64, f: &Figures| {
            got.extend((s..s + n).map(|s| (s, f.counters.packets_read, f.active)))
        };
        m.add(second(0, 100, 101, 5), &mut out);
        m.add(second(0, 101, 104, 6), &mut out);
        // Shard 1 has not been heard from: nothing is complete.
        m.add(second(1, 100, 102, 1), &mut out);
        // Shard 1 is in 102 now: 100 and 101 are complete.
        m.add(second(1, 102, 104, 2), &mut out);
        m.add(second(0, 104, u64::MAX, 1), &mut out);
        m.add(
            ShardSecond {
                second: None,
                next: u64::MAX,
                next_domain: u64::MAX,
                ..second(1, 0, 0, 0)
            },
            &mut out,
        );
        m.finish(&mut out);
        assert_eq!(
            got,
            vec![
                (100, 6, 0),
                (101, 6, 0),
                (102, 2, 0),
                (103, 0, 0),
                (104, 1, 0)
            ]
        );
        assert_eq!(m.totals.counters.packets_read, 15);
    }

    #[test]
    fn long_gaps_are_skipped_and_counted() {
        let mut m = Merger::new(1, Arc::from(Vec::new()));
        let mut got = Vec::new();
        let mut calls = 0;
        let mut out = |s: u64, n: u64, _: &Figures| {
            calls += 1;
            got.extend(s..s + n)
        };
        let run = ShardSecond {
            part: Part::Run,
            next: u64::MAX,
            next_domain: u64::MAX,
            ..second(0, 10, 0, 0)
        };
        m.add(run, &mut out);
        m.add(second(0, 10, 20, 1), &mut out);
        m.add(second(0, 20, 20 + MAX_GAP + 5, 1), &mut out);
        m.add(second(0, 20 + MAX_GAP + 5, u64::MAX, 1), &mut out);
        // 10, the 9 empty seconds up to 20 in one call, 20, and the
        // second after the long gap.
        assert_eq!(calls, 4);
        assert_eq!(got.len(), 10 + 2);
        assert_eq!(m.gaps_skipped, MAX_GAP + 4);
    }

    #[test]
    fn a_time_domain_comes_out_after_the_one_before_without_a_gap() {
        // The second domain begins 97 s before the first one ended.
        let mut m = reading_only(2, Arc::from(Vec::new()));
        let mut got = Vec::new();
        let mut out = |s: u64, n: u64, f: &Figures| {
            got.extend((s..s + n).map(|s| (s, f.counters.packets_read)))
        };
        let ended = |shard, sec, packets| ShardSecond {
            next: 0,
            next_domain: 1,
            ..second(shard, sec, 0, packets)
        };
        let later = |shard, sec, next, packets| ShardSecond {
            domain: 1,
            next_domain: if next == u64::MAX { u64::MAX } else { 1 },
            ..second(shard, sec, next, packets)
        };
        m.add(second(0, 100, 102, 3), &mut out);
        m.add(ended(0, 102, 4), &mut out);
        // Shard 1 is still in second 101 of the first domain.
        m.add(second(1, 100, 101, 1), &mut out);
        m.add(ended(1, 101, 2), &mut out);
        // Second 5 of the second domain, by shard 0, and shard 1's 5 too.
        m.add(later(0, 5, 7, 5), &mut out);
        m.add(later(1, 5, u64::MAX, 1), &mut out);
        m.add(later(0, 7, u64::MAX, 2), &mut out);
        m.finish(&mut out);
        assert_eq!(
            got,
            vec![(100, 4), (101, 2), (102, 4), (5, 6), (6, 0), (7, 2)]
        );
        assert_eq!(m.gaps_skipped, 0);
    }

    #[test]
    fn the_agreement_counts_in_the_second_its_records_were_made() {
        let mut m = reading_only(1, Arc::from(Vec::new()));
        let mut got = Vec::new();
        let mut out =
            |s: u64, n: u64, f: &Figures| got.extend((s..s + n).map(|s| (s, f.agreement)));
        let made = |second, labelled, agreeing| MadeIn {
            from: 0,
            domain: 0,
            second,
            labelled,
            agreeing,
        };
        // Records of 100 and 102, labelled before the shard passed them.
        m.add_agreement(&made(100, 3, 2));
        m.add_agreement(&made(102, 1, 0));
        m.add(second(0, 100, 102, 1), &mut out);
        m.add_agreement(&made(102, 2, 2));
        // No record counted: nothing opens.
        m.add_agreement(&made(103, 0, 0));
        m.add(second(0, 102, u64::MAX, 1), &mut out);
        // Late (not expected): the totals only.
        m.add_agreement(&made(101, 5, 5));
        m.finish(&mut out);
        assert_eq!(got, vec![(100, (3, 2)), (101, (0, 0)), (102, (3, 2))]);
        assert_eq!(m.totals.agreement, (11, 9));
    }

    #[test]
    fn the_field_names_follow_the_counters() {
        for s in Skip::ALL {
            let name = format!("skipped_{}", s.name());
            assert!(STATS.position(&name).is_some(), "{name}");
        }
        for e in EndReason::ALL {
            let name = format!("ended_{}", e.name());
            assert!(STATS.position(&name).is_some(), "{name}");
        }
        let mut rows = RowBatch::new(&STATS);
        stats_row(&mut rows, 7, &Figures::default());
        assert_eq!(rows.len(), 1);
    }
}
