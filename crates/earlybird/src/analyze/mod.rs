//! Per-flow analyzers: code that sees every packet of the flows it is
//! turned on for (payload included), keeps state per flow, and adds fields
//! to the flow's record or ends the flow.
//!
//! Contract:
//! - An [`Analyzer`] declares its name, its record fields ([`Analyzer::FIELDS`])
//!   and whether it reads payload, next to its code, in one file of this
//!   folder; `registry!` lists the analyzers a run can turn on (one line
//!   each). A run turns analyzers on by name (`--analyzer NAME`,
//!   [`crate::config::FlowConfig::analyzers`]); with none on, the flow table
//!   pays one predictable branch per packet and nothing else.
//! - Calls are statically dispatched: `Active` holds one optional side
//!   array of states per registered analyzer, indexed by the flow's slot in
//!   the table, and the table calls `Active::packet` after it has
//!   accounted each packet (the packet count in [`PacketView::index`]
//!   includes it). A slot's state is reset to `Default` when a flow starts in
//!   it, so an analyzer never sees another flow's state.
//! - Payload: [`PacketView::payload`] is the transport payload as captured
//!   (cut by the snaplen, never past the IP length), a view into the
//!   capture's bytes with no copy. It is empty when no analyzer on this run
//!   reads payload (the shard then does not look it up).
//! - IP packet: [`PacketView::ip`] is the packet from its (innermost) IP
//!   header on, as captured (cut by the snaplen, never past the IP length),
//!   a view into the same bytes with no copy, for analyzers that declare
//!   [`Analyzer::IP`] (DPI libraries want it). It is empty when none on
//!   this run does, or when the packet's headers were not all captured.
//! - Flow end: the table calls [`Analyzer::finish`] (with the state
//!   mutable: an analyzer frees what it holds there) and then
//!   [`Analyzer::record`]. A state still held when a slot is reused or the
//!   table is dropped is dropped with it.
//! - When a flow ends, `Active::record` appends the analyzers' fields to
//!   the record's row of cells ([`crate::schema::Rows`]), in registry order;
//!   exporters write them after the flow's own fields.
//! - An analyzer may say when no later packet of a flow can change its
//!   record ([`Analyzer::ENDS_EARLY`], [`Analyzer::done`]); when every
//!   analyzer on does and all are done with a flow, its later packets are
//!   not shown to them (one test per packet).
//! - [`Action::End`] ends the flow after the packet: its record says
//!   `active` (as when the active timeout splits a flow) and the flow's next
//!   packet starts a new flow.
//!
//! Early features, full statistics and DSCP marking are not analyzers: see
//! `docs/ARCHITECTURE.md`, "Per-flow analyzers", for why.

pub mod dns;
pub mod dns_cache;
pub mod dns_wire;
pub mod handshake;
pub mod http;
pub mod media;
#[cfg(feature = "ndpi")]
pub mod ndpi;
mod ndpi_fields;
#[cfg(feature = "ndpi")]
mod ndpi_lib;
pub mod payload;
pub mod quic;
pub mod rtp;
pub mod rtp_stats;
pub mod ssh;
pub mod tls;
pub mod tls_hello;

/// The payload labellers: the analyzers whose names give a record's
/// payload label (`classify/labeller.rs`), which `labellers` turns on
/// all at once.
pub const LABELLERS: [&str; 4] = ["tls", "http", "ssh", "dns"];

/// Analyzers built only with a cargo feature: (name, feature, what it
/// adds, its fields), in every build, for the field reference.
pub const OPTIONAL: &[(&str, &str, &str, &[Field])] = &[(
    ndpi_fields::NAME,
    ndpi_fields::FEATURE,
    ndpi_fields::ABOUT,
    ndpi_fields::FIELDS,
)];

use crate::schema::{Cells, Field, Rows};
use crate::time::Nanos;

/// One packet of a flow, as an analyzer sees it.
#[derive(Debug, Clone, Copy)]
pub struct PacketView<'a> {
    /// Capture timestamp, nanoseconds since the Unix epoch.
    pub ts: Nanos,
    /// Sent by the flow's client (the sender of its first packet).
    pub from_client: bool,
    /// Number of this packet in its flow, 1 for the first (both directions).
    pub index: u32,
    /// IP length (header and payload, from the IP header).
    pub size: u16,
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
    /// IP protocol number of the flow.
    pub proto: u8,
    /// Transport payload length according to the headers (what was on the
    /// wire, whatever the snaplen kept); 0 when no analyzer on this run
    /// reads payload.
    pub payload_len: u16,
    /// Transport payload as captured (see the module docs).
    pub payload: &'a [u8],
    /// The IP packet as captured (see the module docs; empty unless an
    /// analyzer on declares [`Analyzer::IP`]).
    pub ip: &'a [u8],
}

/// What an analyzer asks of the flow after a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Action {
    /// Nothing: the flow goes on.
    #[default]
    Continue,
    /// End the flow after this packet (see the module docs).
    End,
}

/// A per-flow analyzer (see the module docs; `payload.rs` is an example).
pub trait Analyzer: Default + Send + 'static {
    /// Per-flow state, reset to `Default` when a flow starts.
    type State: Default + Send;
    /// Name on the command line (`--analyzer NAME`).
    const NAME: &'static str;
    /// One line for `--help` and the field reference.
    const ABOUT: &'static str;
    /// The record fields it adds, in order.
    const FIELDS: &'static [Field];
    /// Whether it reads [`PacketView::payload`].
    const PAYLOAD: bool;
    /// Whether it reads [`PacketView::ip`] (implies the payload lookup).
    const IP: bool = false;
    /// Whether it says when it wants no more packets of a flow
    /// ([`Self::done`]). When every analyzer on a run does, a flow they are
    /// all done with costs one test per packet (the payload labellers).
    const ENDS_EARLY: bool = false;
    /// The analyzer for a run's options (analyzers with options read them
    /// from it; the default ignores it).
    fn configure(_opts: &Options<'_>) -> Self {
        Self::default()
    }
    /// Sees one packet of a flow (after the flow table accounted it).
    fn packet(&self, state: &mut Self::State, p: &PacketView<'_>) -> Action;
    /// True once no later packet of the flow can change what it records
    /// (read after each packet, only when [`Self::ENDS_EARLY`]): its later
    /// packets are then not shown to it.
    fn done(&self, _state: &Self::State) -> bool {
        false
    }
    /// The flow ended (called once, just before [`Self::record`]).
    fn finish(&self, _state: &mut Self::State) {}
    /// Writes the fields of a finished flow, [`Self::FIELDS`] in order.
    fn record(&self, state: &Self::State, out: &mut Cells<'_>);
}

/// The options of the analyzers that have some (a run's `FlowConfig`
/// lends them; `analyze` sits below `config`).
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The `media` analyzer's intervals and thresholds.
    pub media: &'a media::MediaConfig,
    /// The run's packet sampling, if any: analyzers that time packets
    /// correct for it, and the records carry [`crate::sample::FIELDS`]
    /// after the analyzers' fields.
    pub sample: Option<&'a crate::sample::Sampling>,
}

/// One analyzer's side array of per-flow states.
struct Slots<A: Analyzer> {
    analyzer: A,
    states: Vec<A::State>,
}

impl<A: Analyzer> Slots<A> {
    fn new(opts: &Options<'_>) -> Self {
        Slots {
            analyzer: A::configure(opts),
            states: Vec::new(),
        }
    }

    #[inline]
    fn start(&mut self, s: usize) {
        match self.states.get_mut(s) {
            Some(st) => *st = A::State::default(),
            None => self.states.resize_with(s + 1, A::State::default),
        }
    }

    #[inline]
    fn packet(&mut self, s: usize, p: &PacketView<'_>) -> Action {
        match self.states.get_mut(s) {
            Some(st) => self.analyzer.packet(st, p),
            None => Action::Continue,
        }
    }

    #[inline]
    fn done(&self, s: usize) -> bool {
        self.states.get(s).is_some_and(|st| self.analyzer.done(st))
    }

    fn record(&mut self, s: usize, out: &mut Cells<'_>) {
        match self.states.get_mut(s) {
            Some(st) => {
                self.analyzer.finish(st);
                self.analyzer.record(st, out);
            }
            None => self.analyzer.record(&A::State::default(), out),
        }
    }
}

/// An analyzer name a run cannot turn on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// An analyzer of an optional feature this build was made without.
    #[error("analyzer {name:?} is not in this build: build earlybird with `--features {feature}`")]
    NotBuilt {
        /// The analyzer.
        name: String,
        /// The cargo feature that has it.
        feature: &'static str,
    },
    /// No analyzer has that name.
    #[error("unknown analyzer {name:?} (known: {})", known.join(", "))]
    Unknown {
        /// The name given.
        name: String,
        /// The analyzers of this build.
        known: Vec<&'static str>,
    },
}

/// `Ok` when every name is an analyzer a run can turn on; else an error
/// naming the first unknown one and the known ones.
pub fn check_names(names: &[String]) -> Result<(), NameError> {
    match names
        .iter()
        .find(|n| !AVAILABLE.iter().any(|(known, _)| known == n))
    {
        None => Ok(()),
        Some(bad) => {
            if let Some((_, feature, _, _)) = OPTIONAL.iter().find(|o| o.0 == bad) {
                return Err(NameError::NotBuilt {
                    name: bad.clone(),
                    feature,
                });
            }
            Err(NameError::Unknown {
                name: bad.clone(),
                known: AVAILABLE.iter().map(|(k, _)| *k).collect(),
            })
        }
    }
}

/// The record fields of the analyzers `names` turns on, in registry order.
pub fn fields_of(names: &[String]) -> Vec<Field> {
    Active::new(names).map(|a| a.fields()).unwrap_or_default()
}

/// Declares the analyzers a run can turn on: `name: Type` per line.
macro_rules! registry {
    ($($(#[$attr:meta])* $name:ident: $ty:ty),* $(,)?) => {
        /// The state arrays of the registered analyzers (`None`: off).
        struct Each {
            $($(#[$attr])* $name: Option<Slots<$ty>>,)*
        }

        /// The analyzers turned on for one flow table.
        pub(crate) struct Active {
            each: Each,
            payload: bool,
            ip: bool,
            width: usize,
            /// The run's sampling: its fields end every row.
            sample: Option<crate::sample::Sampling>,
            /// Every analyzer on says when it is done with a flow
            /// ([`Analyzer::ENDS_EARLY`]).
            gate: bool,
            /// Per slot (with `gate`): every analyzer on is done with the
            /// flow, whose later packets are not shown to them.
            finished: Vec<bool>,
        }

        /// Every analyzer a run can turn on: (name, what it adds).
        pub const AVAILABLE: &[(&str, &str)] =
            &[$($(#[$attr])* (<$ty as Analyzer>::NAME, <$ty as Analyzer>::ABOUT),)*];

        impl Active {
            /// The analyzers named (each known name at most once, any
            /// order), with their default options; [`check_names`]'s
            /// message when one is unknown.
            pub(crate) fn new(names: &[String]) -> Result<Active, NameError> {
                let media = media::MediaConfig::default();
                Active::configured(names, &Options { media: &media, sample: None })
            }

            /// As [`Active::new`], each analyzer configured from `opts`.
            pub(crate) fn configured(
                names: &[String],
                opts: &Options<'_>,
            ) -> Result<Active, NameError> {
                check_names(names)?;
                let on = |name: &str| names.iter().any(|n| n == name);
                let mut a = Active {
                    each: Each {
                        $($(#[$attr])* $name: on(<$ty as Analyzer>::NAME).then(|| Slots::new(opts)),)*
                    },
                    payload: false,
                    ip: false,
                    width: 0,
                    sample: opts.sample.copied(),
                    gate: false,
                    finished: Vec::new(),
                };
                let mut gate = true;
                $($(#[$attr])* if a.each.$name.is_some() {
                    a.payload |= <$ty as Analyzer>::PAYLOAD || <$ty as Analyzer>::IP;
                    a.ip |= <$ty as Analyzer>::IP;
                    a.width += <$ty as Analyzer>::FIELDS.len();
                    gate &= <$ty as Analyzer>::ENDS_EARLY;
                })*
                a.gate = gate && a.any();
                if a.sample.is_some() {
                    a.width += crate::sample::FIELDS.len();
                }
                Ok(a)
            }

            /// True when at least one analyzer is on.
            pub(crate) fn any(&self) -> bool {
                let mut any = false;
                $($(#[$attr])* {
                    any |= self.each.$name.is_some();
                })*
                any
            }

            /// True when records get a row of cells: an analyzer is on, or
            /// the run samples packets.
            pub(crate) fn rows(&self) -> bool {
                self.width > 0
            }

            /// True when an analyzer on reads payload.
            pub(crate) fn wants_payload(&self) -> bool {
                self.payload
            }

            /// True when an analyzer on reads the IP packet.
            pub(crate) fn wants_ip(&self) -> bool {
                self.ip
            }

            /// The record fields of the analyzers on, in order.
            pub(crate) fn fields(&self) -> Vec<Field> {
                let mut f = Vec::new();
                $($(#[$attr])* if self.each.$name.is_some() {
                    f.extend_from_slice(<$ty as Analyzer>::FIELDS);
                })*
                if self.sample.is_some() {
                    f.extend_from_slice(crate::sample::FIELDS);
                }
                f
            }

            /// A flow starts in slot `s`.
            #[inline]
            pub(crate) fn start(&mut self, s: usize) {
                $($(#[$attr])* if let Some(x) = &mut self.each.$name {
                    x.start(s);
                })*
                if self.gate {
                    match self.finished.get_mut(s) {
                        Some(f) => *f = false,
                        None => self.finished.resize(s + 1, false),
                    }
                }
            }

            /// A packet of the flow in slot `s`.
            #[inline]
            pub(crate) fn packet(&mut self, s: usize, p: &PacketView<'_>) -> Action {
                if self.gate && self.finished.get(s).copied().unwrap_or(false) {
                    return Action::Continue;
                }
                let mut act = Action::Continue;
                $($(#[$attr])* if let Some(x) = &mut self.each.$name {
                    if x.packet(s, p) == Action::End {
                        act = Action::End;
                    }
                })*
                // Only a packet with payload moves a labeller to done.
                if self.gate && p.payload_len > 0 {
                    let mut done = true;
                    $($(#[$attr])* if let Some(x) = &self.each.$name {
                        done = done && x.done(s);
                    })*
                    if let Some(f) = self.finished.get_mut(s) {
                        *f = done;
                    }
                }
                act
            }

            /// Appends the fields of the flow in slot `s` as one row; the
            /// flow was seen with `(packets, bytes)` (for the sampling
            /// estimates).
            pub(crate) fn record(&mut self, s: usize, rows: &mut Rows, seen: (u64, u64)) {
                let sample = self.sample;
                rows.push_row(self.width, |c| {
                    $($(#[$attr])* if let Some(x) = &mut self.each.$name {
                        c.section(<$ty as Analyzer>::FIELDS.len(), |c| x.record(s, c));
                    })*
                    if let Some(smp) = &sample {
                        c.section(crate::sample::FIELDS.len(), |c| {
                            crate::sample::record(smp, seen.0, seen.1, c)
                        });
                    }
                    let _ = (&c, s);
                });
            }
        }
    };
}

impl Active {
    /// The `media` analyzer's per-kind figures since the last call, when
    /// it is on ([`media::Media::take_counts`]).
    pub(crate) fn take_media(&self) -> Option<[media::KindCounts; 3]> {
        self.each.media.as_ref().map(|m| m.analyzer.take_counts())
    }

    /// True when the `dns` analyzer is on (flows then take the cached
    /// name of their server address, [`Active::dns_flow_start`]).
    pub(crate) fn dns_on(&self) -> bool {
        self.each.dns.is_some()
    }

    /// The `dns` analyzer's cache takes its turns from `board`, as shard
    /// `shard` ([`dns::Dns::with_board`]), when it is on.
    pub(crate) fn dns_board(&mut self, board: std::sync::Arc<dns_cache::Board>, shard: usize) {
        if let Some(d) = &mut self.each.dns {
            d.analyzer = dns::Dns::with_board(board, shard);
        }
    }

    /// The shard is about to run turn `turn` ([`dns::Dns::turn`]).
    pub(crate) fn dns_turn(&self, turn: u64) {
        if let Some(d) = &self.each.dns {
            d.analyzer.turn(turn);
        }
    }

    /// The flow in slot `s` starts at `ts` towards `server`
    /// ([`dns::Dns::flow_start`]).
    pub(crate) fn dns_flow_start(&mut self, s: usize, server: std::net::IpAddr, ts: Nanos) {
        if let Some(d) = &mut self.each.dns {
            if let Some(st) = d.states.get_mut(s) {
                d.analyzer.flow_start(st, server, ts);
            }
        }
    }
}

registry! {
    payload: payload::PayloadBytes,
    media: media::Media,
    http: http::Http,
    ssh: ssh::Ssh,
    dns: dns::Dns,
    tls: tls::Tls,
    // nDPI's verdict per flow (libndpi; feature "ndpi").
    #[cfg(feature = "ndpi")]
    ndpi: ndpi::Ndpi,
    // Ends flows after a few packets: the unit tests' analyzer for
    // `Action::End` (in no other build).
    #[cfg(test)]
    test_end: tests::EndAfter,
}

#[cfg(test)]
mod tests;

#[cfg(all(test, feature = "ndpi"))]
mod ndpi_tests;
