//! The per-flow analyzers of a run (`crate::analyze`) as one flow
//! consumer, with the fields the run's packet sampling adds to records.
//!
//! Contract: on when an analyzer is turned on or the run samples packets
//! (records then carry a row of cells). It starts each analyzer's state
//! when a flow starts in a slot, shows each analyzer every packet of the
//! flow until all are done with it (as a [`PacketView`], with where the
//! flow's TCP streams start, which the table keeps when an analyzer
//! reads them; when one asks, the flow ends after the packet) and, when the flow ends, corrects its early packets' gaps for
//! the sampling rate and appends the analyzers' and the sampling fields
//! as the record's row. Allocates only when a slot is first used (the
//! analyzers' side arrays grow to the highest slot).

use crate::analyze::media::KindCounts;
use crate::analyze::{Action, Active, PacketView};
use crate::config::FlowConfig;
use crate::decode::ipproto::TCP;
use crate::flow::consumer::{Consumer, FlowRef, Follows};
use crate::flow::packet::{Payload, Pkt};
use crate::flow::prefault::Region;
use crate::flow::record::{EndReason, RecordBatch};
use crate::flow::tally::{Sums, Tally};

/// The analyzers turned on, and the run's sampling rate.
pub struct Analyzers {
    active: Active,
    /// At least one analyzer is on (else only the sampling fields).
    on: bool,
    /// N of the run's packet sampling (1: none).
    sample_rate: u32,
    /// The `dns` analyzer is on: flows take their server's cached name.
    dns: bool,
}

/// The server address of a flow (the destination of its first packet).
fn server(flow: FlowRef<'_>) -> std::net::IpAddr {
    let client_is_a = flow.entry.state & crate::flow::entry::CLIENT_IS_A != 0;
    match flow.wide {
        Some(w) => std::net::IpAddr::from(w[usize::from(client_is_a)]),
        None => {
            let k = &flow.entry.key;
            std::net::IpAddr::from(if client_is_a { k.b } else { k.a }.to_be_bytes())
        }
    }
}

impl Analyzers {
    /// The analyzers `cfg` turns on, configured from it; `None` when
    /// records get no row of cells (no analyzer, no sampling). Fails on an
    /// unknown analyzer name.
    pub fn new(cfg: &FlowConfig) -> crate::Result<Option<Analyzers>> {
        let opts = crate::analyze::Options {
            media: &cfg.media,
            sample: cfg.sample.as_ref(),
        };
        let mut active = Active::configured(&cfg.analyzers, &opts)
            .map_err(|e| crate::Error::Config(e.to_string()))?;
        // No per-second figures until the shard keeps them.
        active.count_media(false);
        Ok(active.rows().then(|| Analyzers {
            on: active.any(),
            dns: active.dns_on(),
            sample_rate: cfg.sample.map_or(1, |s| s.rate),
            active,
        }))
    }

    /// The record fields the analyzers (and the sampling) add, in order.
    pub fn fields(&self) -> Vec<crate::schema::Field> {
        self.active.fields()
    }

    /// The `dns` analyzer's cache takes its turns from `board` as shard
    /// `shard` (`analyze/dns.rs`).
    pub fn dns_board(
        &mut self,
        board: std::sync::Arc<crate::analyze::dns_cache::Board>,
        shard: usize,
    ) {
        self.active.dns_board(board, shard);
    }

    /// The shard is about to run turn `turn` (`analyze/dns.rs`).
    pub fn dns_turn(&self, turn: u64) {
        self.active.dns_turn(turn);
    }

    /// The shard keeps per-second statistics: the `media` analyzer counts
    /// its figures for them ([`Analyzers::media_into`]).
    pub fn count_media(&mut self) {
        self.active.count_media(true);
    }

    /// The `media` analyzer's per-kind figures since the last call, added
    /// to a second's `tally`, when it is on.
    pub fn media_into(&self, tally: &mut Tally) {
        if let Some(m) = self.active.take_media() {
            media_counted(tally, &m);
        }
    }
}

/// Adds the media analyzer's figures of a second to `tally`.
fn media_counted(tally: &mut Tally, m: &[KindCounts; 3]) {
    for (s, k) in tally.media.iter_mut().zip(m) {
        s.add(&Sums {
            classified: k.decided,
            ended: k.ended,
            packets: k.packets,
            bytes: k.bytes,
        });
    }
}

impl Consumer for Analyzers {
    fn reads_packets(&self) -> bool {
        self.on
    }

    fn reads_payload(&self) -> bool {
        self.active.wants_payload()
    }

    fn reads_ip(&self) -> bool {
        self.active.wants_ip()
    }

    fn reads_tcp_starts(&self) -> bool {
        self.active.reads_starts()
    }

    fn slot_arrays(&mut self, capacity: usize) -> Vec<Region> {
        self.active
            .reserve(capacity)
            .into_iter()
            .map(|(base, per_slot)| Region { base, per_slot })
            .collect()
    }

    #[inline]
    fn start(&mut self, slot: usize) {
        if self.on {
            self.active.start(slot);
        }
    }

    /// The flow's server address takes its cached name (with the `dns`
    /// analyzer), whether or not an analyzer is shown its first packet (a
    /// TCP flow's SYN has no payload).
    #[inline(always)]
    fn opened(&mut self, flow: FlowRef<'_>) {
        if self.dns {
            let ts = flow.entry.first_ts;
            self.active.dns_flow_start(flow.slot, || server(flow), ts);
        }
    }

    #[inline(always)]
    fn follows_new(&self, flow: FlowRef<'_>) -> Follows {
        self.active.follows_new(flow.entry.key.proto == TCP)
    }

    #[inline]
    fn packet(&mut self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> Option<Follows> {
        let h = flow.entry;
        let from_client = flow.sent_by_client(p);
        // The view is made only when an analyzer on is shown the packet
        // (else another consumer reads it).
        let view = || PacketView {
            ts: p.ts,
            from_client,
            index: h.packets[0] + h.packets[1],
            size: p.size,
            tcp_flags: p.flags,
            proto: h.key.proto,
            payload_len: pl.len,
            payload: pl.bytes(),
            ip: pl.ip(),
            tcp_starts: flow.tcp_starts,
        };
        match self.active.packet_with(
            flow.slot,
            h.key.proto == TCP,
            from_client,
            pl.len == 0,
            view,
        ) {
            (Action::End, _) => None,
            (Action::Continue, f) => Some(f),
        }
    }

    #[inline(always)]
    fn declines_first(&self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> bool {
        // The view `packet` makes, spelled out again: made by one helper
        // for both, `packet`'s copy cost voip200's media run 0.4–0.7 %
        // more instructions (BENCHMARKS.md, S39).
        let h = flow.entry;
        self.active.declines_first(&PacketView {
            ts: p.ts,
            from_client: flow.sent_by_client(p),
            index: h.packets[0] + h.packets[1],
            size: p.size,
            tcp_flags: p.flags,
            proto: h.key.proto,
            payload_len: pl.len,
            payload: pl.bytes(),
            ip: pl.ip(),
            tcp_starts: flow.tcp_starts,
        })
    }

    #[inline]
    fn end(&mut self, flow: FlowRef<'_>, _: EndReason, out: &mut RecordBatch) {
        let seen = (flow.packets(), flow.bytes());
        if self.sample_rate > 1 {
            out.correct_last_early(self.sample_rate);
        }
        self.active.record(flow.slot, &mut out.analyzed, seen, || {
            let k = &flow.entry.key;
            match flow.entry.state & crate::flow::entry::CLIENT_IS_A != 0 {
                true => [k.pa, k.pb],
                false => [k.pb, k.pa],
            }
        });
    }
}
