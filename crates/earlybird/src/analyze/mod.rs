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
//!   the table (a sparse one's, [`Analyzer::SPARSE`]: a side array of
//!   4-byte indexes into the states it made, each returned when its flow
//!   is recorded), and the
//!   table calls `Active::packet_with` after it has
//!   accounted each packet (the packet count in [`PacketView::index`]
//!   includes it); the loop over the analyzers on is compiled per route
//!   (one analyzer alone, the payload labellers together, any other
//!   set), so a run tests only those it has on. A slot's state is reset
//!   to `Default` when a flow starts in it, so an analyzer never sees
//!   another flow's state; a lazy analyzer's
//!   ([`Analyzer::LAZY`]: the payload labellers) only when the flow is
//!   first shown to it a packet it does not decline
//!   ([`Analyzer::declines`]: one it would give the flow, or a side, up
//!   at, recording nothing): a flow it declines costs it no reset, no
//!   call and no record (its fields stay null, or hold what
//!   [`Analyzer::record_declined`] writes).
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
//!   [`Analyzer::record_ports`], which by default is [`Analyzer::record`]
//!   (neither for a lazy analyzer's state the flow did not make). A state still held when a later flow of its slot makes
//!   its own, or when the table is dropped, is dropped then.
//! - When a flow ends, `Active::record` appends the analyzers' fields to
//!   the record's row of cells ([`crate::schema::Rows`]), in registry order;
//!   exporters write them after the flow's own fields.
//! - An analyzer may say when no later packet of a flow can change its
//!   record ([`Analyzer::ENDS_EARLY`], [`Analyzer::done`], read after each
//!   packet it is shown): it is then shown no more packets of that flow
//!   (its state is kept for [`Analyzer::finish`] and [`Analyzer::record`]).
//!   It may also say so of one side's packets ([`Analyzer::done_with`]),
//!   and that it never reads packets without payload
//!   ([`Analyzer::EMPTY`]), or, of a TCP flow whose lazy state it has
//!   not made, none ([`Analyzer::TCP_EMPTY_DECLINED`]). A packet every analyzer on would not be shown
//!   (the flow left the analyzers, or they are done with its side, or it
//!   has no payload) costs the flow table one test of a mask it keeps in
//!   the flow's entry (`Active::follows`, which `Active::packet_with` returns
//!   and `shard/analyzers.rs` hands to the table): the analyzers'
//!   consumer is not called, and its payload is never sliced.
//! - Where a TCP flow's streams start: an analyzer that declares
//!   [`Analyzer::STARTS`] reads in [`PacketView::tcp_starts`] the sequence
//!   number of the last SYN without payload each side sent so far, kept
//!   by the flow table (`flow/table.rs`) from each such SYN of a side the
//!   consumers follow, so that it need not be shown those SYNs to know
//!   where the streams start (a SYN with payload it is shown, if it reads
//!   payload, and reads itself).
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

use crate::schema::{Cells, Field, Rows, Template};
use crate::time::Nanos;

/// Which packets of a flow a consumer reads (`flow::consumer`'s
/// `Consumer::packet` returns it; the analyzers compute theirs): bit 0 the
/// client's packets with payload, bit 1 the client's without, bit 2 the
/// server's with, bit 3 the server's without.
pub type Follows = u8;

/// Every packet of the flow.
pub const FOLLOW_ALL: Follows = 0b1111;

/// Where a TCP flow's two streams start: the sequence number of the last
/// SYN without payload each side sent so far (index 0 the flow's client,
/// 1 its server), as the flow table keeps it for the consumers that read
/// it (a SYN whose TCP header was not captured is not counted). 12 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TcpStarts {
    seq: [u32; 2],
    seen: [bool; 2],
}

impl TcpStarts {
    /// No SYN seen.
    pub const NONE: TcpStarts = TcpStarts {
        seq: [0; 2],
        seen: [false; 2],
    };

    /// The sequence number of the last SYN of the client (`side` 0) or
    /// the server (1), if one came.
    #[inline]
    pub fn syn(&self, side: usize) -> Option<u32> {
        self.seen[side].then_some(self.seq[side])
    }

    /// A SYN of `side` with sequence number `seq` came.
    #[inline]
    pub fn set(&mut self, side: usize, seq: u32) {
        self.seq[side] = seq;
        self.seen[side] = true;
    }
}

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
    /// TCP: where the flow's streams start, so far (see the module docs;
    /// [`TcpStarts::NONE`] unless an analyzer on declares
    /// [`Analyzer::STARTS`]).
    pub tcp_starts: &'a TcpStarts,
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
    /// ([`Self::done`]). A flow every analyzer on is done with costs one
    /// test per packet; an analyzer that never says so keeps every flow
    /// in the analyzers while it is on.
    const ENDS_EARLY: bool = false;
    /// Whether it reads packets that carry no payload
    /// ([`PacketView::payload_len`] 0); when false it is not shown them
    /// (only for an analyzer that reads payload: without one on, every
    /// packet's `payload_len` is 0).
    const EMPTY: bool = true;
    /// Whether it reads [`PacketView::tcp_starts`] (the flow table then
    /// keeps them; only for an analyzer that reads payload: it is shown a
    /// SYN with payload, to read itself).
    const STARTS: bool = false;
    /// Whether its state of a flow is made (reset to `Default`) only when
    /// a packet of the flow is first shown to it that it does not
    /// [`Self::declines`] (only with [`Self::ENDS_EARLY`]): it then says
    /// that a flow whose state was never made records what
    /// [`Self::record_declined`] writes (what its [`Self::record`] of a
    /// `Default` state writes, after a [`Self::finish`] that does
    /// nothing), and a flow it declines costs it no state reset, no call
    /// and no record of a state.
    const LAZY: bool = false;
    /// With [`Self::LAZY`]: whether its states are kept apart, one for
    /// each flow it reads, found through a side array of 4-byte indexes
    /// by slot and returned when the flow is recorded, rather than one
    /// per slot. For an analyzer that reads few of the flows it is shown
    /// (the payload labellers): less memory per slot, no state filled in
    /// or dropped for the slots between, one load more for each packet it
    /// is shown of a flow it reads.
    const SPARSE: bool = false;
    /// With [`Self::LAZY`]: whether, while its state of a TCP flow is not
    /// made, it declines every TCP packet without payload (SYN or not),
    /// and what it does with the flow's later packets does not depend on
    /// those. The flow table then does not show it such packets of a flow
    /// whose state it has not made: the flow's first payload makes the
    /// state or is declined.
    const TCP_EMPTY_DECLINED: bool = false;
    /// The analyzer for a run's options (analyzers with options read them
    /// from it; the default ignores it).
    fn configure(_opts: &Options<'_>) -> Self {
        Self::default()
    }
    /// Sees one packet of a flow (after the flow table accounted it).
    fn packet(&self, state: &mut Self::State, p: &PacketView<'_>) -> Action;
    /// With [`Self::LAZY`], for a packet shown to a flow whose state was
    /// not made (every packet shown to it before was declined):
    /// `Some(sides)` when the packet, shown to a `Default` state, would
    /// leave one that records what [`Self::record_declined`] writes and
    /// is done with the client's packets (`sides[0]`) and the server's
    /// (`sides[1]`) (neither: it left the state `Default`), and with
    /// which a later packet of a side not done does what it does with a
    /// `Default` state (their done bits kept, the analyzer's own state
    /// not made); `None` to have it made and shown the packet.
    #[inline(always)]
    fn declines(&self, _p: &PacketView<'_>) -> Option<[bool; 2]> {
        None
    }
    /// With [`Self::LAZY`], writes the fields of a flow whose state was
    /// not made (as [`Self::record`] does of a `Default` state); by
    /// default none (all null). The same for every flow: a row no
    /// analyzer on made a state for is written once and copied
    /// (`Active::unmade`).
    #[inline(always)]
    fn record_declined(&self, _out: &mut Cells<'_>) {}
    /// True once no later packet of the flow can change what it records
    /// nor anything it counts (read after each packet it is shown, only
    /// when [`Self::ENDS_EARLY`]): its later packets are then not shown to
    /// it.
    fn done(&self, _state: &Self::State) -> bool {
        false
    }
    /// True once no later packet sent by one side (the client when
    /// `from_client`) can change what it records (read with
    /// [`Self::done`]): that side's later packets are not shown to it.
    fn done_with(&self, _state: &Self::State, _from_client: bool) -> bool {
        false
    }
    /// The flow ended (called once, just before [`Self::record`]).
    fn finish(&self, _state: &mut Self::State) {}
    /// Writes the fields of a finished flow, [`Self::FIELDS`] in order;
    /// the fields after the last one written are null (a flow the
    /// analyzer found nothing in may write none).
    fn record(&self, state: &Self::State, out: &mut Cells<'_>);
    /// [`Self::record`] of a flow whose client's and server's ports were
    /// `ports` (the table calls this one; by default the ports are not
    /// read).
    #[inline(always)]
    fn record_ports(&self, state: &Self::State, ports: [u16; 2], out: &mut Cells<'_>) {
        let _ = ports;
        self.record(state, out);
    }
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

/// One analyzer's per-flow states: a side array indexed by the flow's
/// slot; for a sparse one ([`Analyzer::SPARSE`]) the states it made,
/// with a side array of 4-byte indexes into them, so that a flow it
/// declines costs it no state, and a state it made is returned when its
/// flow is recorded.
struct Slots<A: Analyzer> {
    analyzer: A,
    /// By slot; sparse: the states made, where `index` says.
    states: Vec<A::State>,
    /// Sparse: per slot, 1 + the place in `states` of the slot's state, 0
    /// when it has none.
    index: Vec<u32>,
    /// Sparse: places in `states` whose flow was recorded, to make the
    /// next state in.
    free: Vec<u32>,
}

/// Whether analyzer `A`'s states are kept apart ([`Analyzer::SPARSE`], only
/// with [`Analyzer::LAZY`]).
const fn sparse<A: Analyzer>() -> bool {
    A::SPARSE && A::LAZY
}

impl<A: Analyzer> Slots<A> {
    fn new(opts: &Options<'_>) -> Self {
        Slots {
            analyzer: A::configure(opts),
            states: Vec::new(),
            index: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Makes slot `s`'s state: `Default`.
    #[inline]
    fn start(&mut self, s: usize) {
        if sparse::<A>() {
            self.start_apart(s);
        } else {
            start_slot(&mut self.states, s, A::State::default);
        }
    }

    /// [`Self::start`] of a sparse analyzer: the slot's state made where
    /// a recorded flow left one, or at the end.
    // Out of line: inlined into a route's loop it moved the loop's
    // registers (voip200's media run +1.1 M, BENCHMARKS.md S27).
    #[inline(never)]
    fn start_apart(&mut self, s: usize) {
        if let Some(at) = self.place(s) {
            // A state its slot's earlier flow left (not recorded).
            self.states[at] = A::State::default();
            return;
        }
        let at = match self.free.pop() {
            Some(at) => {
                self.states[at as usize] = A::State::default();
                at
            }
            None => {
                self.states.push(A::State::default());
                (self.states.len() - 1) as u32
            }
        };
        start_slot(&mut self.index, s, || 0);
        self.index[s] = at + 1;
    }

    /// Where slot `s`'s state is in `states`: the slot itself, or for a
    /// sparse analyzer where its index says (`None`: it has none).
    #[inline(always)]
    fn place(&self, s: usize) -> Option<usize> {
        if !sparse::<A>() {
            return Some(s);
        }
        match self.index.get(s) {
            Some(&k) if k != 0 => Some(k as usize - 1),
            _ => None,
        }
    }

    /// Slot `s`'s state, if it has one.
    #[inline(always)]
    fn state(&mut self, s: usize) -> Option<&mut A::State> {
        self.place(s).and_then(|at| self.states.get_mut(at))
    }

    /// Whether slot `s` holds a state.
    #[cfg(test)]
    fn holds(&self, s: usize) -> bool {
        self.place(s).is_some_and(|at| at < self.states.len())
    }

    /// [`Self::packet`] for a flow whose state is not made (`fresh`, with
    /// [`Analyzer::LAZY`]): the packet declined, or the state made and
    /// shown it.
    // Always inlined, as `packet`: a route's loop is one of several in
    // the caller, where the compiler would otherwise call them.
    #[inline(always)]
    fn packet_lazy(
        &mut self,
        s: usize,
        p: &PacketView<'_>,
        fresh: &mut bool,
    ) -> (Action, [bool; 2]) {
        if A::LAZY && *fresh {
            if let Some(sides) = self.analyzer.declines(p) {
                return (Action::Continue, sides);
            }
            self.start(s);
            *fresh = false;
        }
        self.packet(s, p)
    }

    /// Shows packet `p` to the flow in slot `s`: what the analyzer asks,
    /// and whether it is done with the client's and the server's packets
    /// of the flow after it.
    #[inline(always)]
    fn packet(&mut self, s: usize, p: &PacketView<'_>) -> (Action, [bool; 2]) {
        let Some(at) = self.place(s) else {
            return (Action::Continue, [false; 2]);
        };
        match self.states.get_mut(at) {
            Some(st) => {
                let act = self.analyzer.packet(st, p);
                if !A::ENDS_EARLY {
                    return (act, [false; 2]);
                }
                if self.analyzer.done(st) {
                    return (act, [true; 2]);
                }
                let a = &self.analyzer;
                (act, [a.done_with(st, true), a.done_with(st, false)])
            }
            None => (Action::Continue, [false; 2]),
        }
    }

    /// Reserves the per-slot array (the index of a sparse analyzer, else
    /// the states) for `capacity` slots ([`reserve_slots`]); returns it to
    /// be populated ahead of use unless it holds the states of a lazy
    /// analyzer (`media`'s, 312 bytes a slot: a run where no flow
    /// engages it would commit them all for nothing).
    fn reserve(&mut self, capacity: usize) -> Option<SlotArray> {
        if sparse::<A>() {
            reserve_slots(&mut self.index, capacity)
        } else {
            let states = reserve_slots(&mut self.states, capacity);
            states.filter(|_| !A::LAZY)
        }
    }

    /// Writes the record's fields of the flow in slot `s`, whose client's
    /// and server's ports were `ports` ([`Analyzer::record_declined`]'s
    /// when its state was not made, `fresh`: [`Analyzer::LAZY`]).
    fn record(&mut self, s: usize, out: &mut Cells<'_>, fresh: bool, ports: [u16; 2]) {
        if A::LAZY && fresh {
            self.analyzer.record_declined(out);
            return;
        }
        let at = self.place(s);
        if let (true, Some(at)) = (sparse::<A>(), at) {
            // The state goes back with its flow's record.
            self.index[s] = 0;
            self.free.push(at as u32);
        }
        match at.and_then(|at| self.states.get_mut(at)) {
            Some(st) => {
                self.analyzer.finish(st);
                self.analyzer.record_ports(st, ports, out);
            }
            None => self.analyzer.record_ports(&A::State::default(), ports, out),
        }
    }
}

/// Whether analyzer `x` (on) declines packet `p` for both sides of a flow
/// whose state it has not made ([`Analyzer::declines`]).
#[inline(always)]
fn declined<A: Analyzer>(x: &Option<Slots<A>>, p: &PacketView<'_>) -> bool {
    x.as_ref()
        .is_some_and(|x| x.analyzer.declines(p) == Some([true; 2]))
}

/// A per-slot array's first byte and the bytes each slot takes, for the
/// table's prefault helper (`flow/prefault.rs`).
pub(crate) type SlotArray = (*const u8, usize);

/// Reserves room for `capacity` slots in a per-slot array, so that it never
/// moves while a table of that many slots fills it, and returns it as a
/// [`SlotArray`]; `None` when the room cannot be had (the array then grows
/// as it is used, and its pages are cleared by the thread that first
/// writes them).
fn reserve_slots<T>(v: &mut Vec<T>, capacity: usize) -> Option<SlotArray> {
    v.try_reserve_exact(capacity.saturating_sub(v.len())).ok()?;
    huge_pages(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<T>());
    Some((v.as_ptr().cast(), std::mem::size_of::<T>()))
}

/// Asks for the whole pages of `len` bytes at `ptr` (one allocation) to
/// be backed by transparent huge pages where the system leaves them to
/// `madvise` (as the flow table's arrays are, `flow/arena.rs`): the
/// states of the slots a table fills then cost a page fault per 2 MiB,
/// not per 4 KiB. Nothing is committed before it is touched; a refusal
/// leaves 4 KiB pages.
fn huge_pages(ptr: *const u8, len: usize) {
    const PAGE: usize = 4096;
    if len < 2 << 20 {
        return;
    }
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + len) & !(PAGE - 1);
    // SAFETY: [start, end) lies within one live allocation of `len` bytes
    // at `ptr` (the caller's); MADV_HUGEPAGE changes how its pages are
    // backed, never what they hold.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

/// Slot `s` of a side array holds `fresh()` (the array grown to it when
/// shorter; a table's new slots come in order, so most often by one).
#[inline(always)]
fn start_slot<T>(v: &mut Vec<T>, s: usize, fresh: impl Fn() -> T) {
    if s < v.len() {
        v[s] = fresh();
    } else if s == v.len() {
        v.push(fresh());
    } else {
        v.resize_with(s + 1, fresh);
    }
}

/// The [`Follows`] of a flow whose analyzers on (bits `all`) are done
/// with its client's and its server's packets as `done` says, when those
/// of `no_empty` are not shown packets without payload.
#[inline(always)]
fn follows_done(all: u16, no_empty: u16, done: [u16; 2]) -> Follows {
    let side =
        |d: u16| Follows::from(d & all != all) | Follows::from((d | no_empty) & all != all) << 1;
    side(done[0]) | side(done[1]) << 2
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

// What the flow table shows an analyzer and how its states are made, as
// flags ([`traits`]).
const SHOWN_NO_EMPTY: u8 = 1;
const READS_STARTS: u8 = 2;
const KEEPS_DONE: u8 = 4;
const MADE_LAZILY: u8 = 8;
const SKIPS_EMPTY_TCP: u8 = 16;

/// Analyzer `A`'s flags: not shown packets without payload
/// ([`Analyzer::EMPTY`] false); reads where TCP streams start
/// ([`Analyzer::STARTS`]); keeps the done bits (the first, or
/// [`Analyzer::ENDS_EARLY`]); states made lazily ([`Analyzer::LAZY`] with
/// `ENDS_EARLY`), and then [`Analyzer::TCP_EMPTY_DECLINED`].
const fn traits<A: Analyzer>() -> u8 {
    const fn flag(on: bool, f: u8) -> u8 {
        if on {
            f
        } else {
            0
        }
    }
    let lazy = A::LAZY && A::ENDS_EARLY;
    flag(!A::EMPTY, SHOWN_NO_EMPTY)
        | flag(A::STARTS, READS_STARTS)
        | flag(A::ENDS_EARLY || !A::EMPTY, KEEPS_DONE)
        | flag(lazy, MADE_LAZILY)
        | flag(lazy && A::TCP_EMPTY_DECLINED, SKIPS_EMPTY_TCP)
}

/// The bits of the registered analyzers whose [`traits`] have `flag`.
const fn with(flag: u8) -> u16 {
    let mut b = 0;
    let mut i = 0;
    while i < TRAITS.len() {
        if TRAITS[i].1 & flag != 0 {
            b |= TRAITS[i].0;
        }
        i += 1;
    }
    b
}

// The masks of the registered analyzers by flag: `Active::packet_on`'s
// constants for a route (its `no_empty`, `early` and
// `tcp_empty_declined`), and what `Active::configured` keeps of them.
const NO_EMPTY: u16 = with(SHOWN_NO_EMPTY);
const STARTS: u16 = with(READS_STARTS);
const EARLY: u16 = with(KEEPS_DONE);
const LAZY: u16 = with(MADE_LAZILY);
const TCP_EMPTY_DECLINED: u16 = with(SKIPS_EMPTY_TCP);

/// Declares the analyzers a run can turn on: `name: Type` per line.
macro_rules! registry {
    ($($(#[$attr:meta])* $name:ident: $ty:ty),* $(,)?) => {
        /// The state arrays of the registered analyzers (`None`: off).
        struct Each {
            $($(#[$attr])* $name: Option<Slots<$ty>>,)*
        }

        /// Each registered analyzer's bit in the per-slot done words, by
        /// name (registry order).
        #[allow(non_upper_case_globals)]
        mod bit {
            #[allow(non_camel_case_types, dead_code)]
            enum At {
                $($(#[$attr])* $name,)*
            }
            $($(#[$attr])* pub(super) const $name: u16 = 1 << At::$name as u16;)*
        }

        /// The analyzers a packet's loop is made for ([`Active::packet_on`]
        /// is compiled once per route, with only their calls): one
        /// analyzer alone, the payload labellers together, or any set.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[allow(non_camel_case_types)]
        enum Route {
            Any,
            Labellers,
            $($(#[$attr])* $name,)*
        }

        /// Each registered analyzer's bit and its [`traits`] (registry
        /// order): [`with`] makes the masks of `Active::packet_on`'s routes
        /// and of [`Active::configured`] from it.
        const TRAITS: &[(u16, u8)] = &[$($(#[$attr])* (bit::$name, traits::<$ty>()),)*];

        /// The analyzers turned on for one flow table.
        pub(crate) struct Active {
            each: Each,
            /// Which compiled loop shows packets to them (from `all`).
            route: Route,
            payload: bool,
            ip: bool,
            width: usize,
            /// The run's sampling: its fields end every row.
            sample: Option<crate::sample::Sampling>,
            /// An analyzer on says when it is done with a flow
            /// ([`Analyzer::ENDS_EARLY`]) or skips packets without
            /// payload ([`Analyzer::EMPTY`]): `done` is kept.
            early: bool,
            /// The bits of the analyzers on (one each, in registry order).
            all: u16,
            /// The bits of the analyzers on that are not shown packets
            /// without payload.
            no_empty: u16,
            /// An analyzer on reads where TCP streams start
            /// ([`Analyzer::STARTS`]).
            starts: bool,
            /// The bits of the analyzers on whose states are made lazily
            /// ([`Analyzer::LAZY`]).
            lazy: u16,
            /// The bits of the lazy analyzers on not shown a TCP packet
            /// without payload of a flow whose state they have not made
            /// ([`Analyzer::TCP_EMPTY_DECLINED`]).
            tcp_empty_declined: u16,
            /// The `dns` analyzer's bit (0 when it is off).
            dns_bit: u16,
            /// The row of a flow none of the analyzers on made a state
            /// for, when it is the same for every such flow: they are all
            /// lazy (each writes [`Analyzer::record_declined`]'s cells),
            /// and the run does not sample packets (whose fields end the
            /// row). A row of nulls when each records all null.
            unmade: Option<Template>,
            /// Per slot (with `early`), for the client's and the server's
            /// packets: the bits of the analyzers done with them (both:
            /// done with the flow); all of `all` for both: the flow left
            /// the analyzers. Third: the bits of the lazy analyzers whose
            /// state the flow has not made.
            done: Vec<[u16; 3]>,
        }

        // One bit per registered analyzer in `Active::done`.
        const _: () = assert!([$(stringify!($name)),*].len() <= 16);

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
                    route: Route::Any,
                    payload: false,
                    ip: false,
                    width: 0,
                    sample: opts.sample.copied(),
                    early: false,
                    all: 0,
                    no_empty: 0,
                    starts: false,
                    lazy: 0,
                    tcp_empty_declined: 0,
                    dns_bit: 0,
                    unmade: None,
                    done: Vec::new(),
                };
                $($(#[$attr])* {
                    if a.each.$name.is_some() {
                        a.payload |= <$ty as Analyzer>::PAYLOAD || <$ty as Analyzer>::IP;
                        a.ip |= <$ty as Analyzer>::IP;
                        a.width += <$ty as Analyzer>::FIELDS.len();
                        a.all |= bit::$name;
                        if <$ty as Analyzer>::NAME == <dns::Dns as Analyzer>::NAME {
                            a.dns_bit = bit::$name;
                        }
                    }
                })*
                a.early = a.all & EARLY != 0;
                a.no_empty = a.all & NO_EMPTY;
                a.starts = a.all & STARTS != 0;
                a.lazy = a.all & LAZY;
                a.tcp_empty_declined = a.all & TCP_EMPTY_DECLINED;
                if a.sample.is_some() {
                    a.width += crate::sample::FIELDS.len();
                }
                if a.all != 0 && a.lazy == a.all && a.sample.is_none() {
                    a.unmade = a.unmade_row();
                }
                $($(#[$attr])* if a.all == bit::$name {
                    a.route = Route::$name;
                })*
                if a.all == LABELLER_BITS {
                    a.route = Route::Labellers;
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

            /// True when an analyzer on reads where TCP streams start
            /// ([`Analyzer::STARTS`]).
            pub(crate) fn reads_starts(&self) -> bool {
                self.starts
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

            /// Reserves the per-slot arrays of the analyzers on for
            /// `capacity` slots, so that they never move, and returns
            /// those the table is to populate ahead of use (not a lazy
            /// analyzer's states, [`Slots::reserve`]; an array whose room
            /// cannot be had is left out and grows as used).
            pub(crate) fn reserve(&mut self, capacity: usize) -> Vec<SlotArray> {
                let mut arrays = Vec::new();
                $($(#[$attr])* if let Some(x) = &mut self.each.$name {
                    arrays.extend(x.reserve(capacity));
                })*
                if self.early {
                    arrays.extend(reserve_slots(&mut self.done, capacity));
                }
                arrays
            }

            /// A flow starts in slot `s`.
            #[inline]
            pub(crate) fn start(&mut self, s: usize) {
                // A lazy analyzer's state is made when the flow first
                // engages it: nothing to look up here.
                $($(#[$attr])* if !(<$ty as Analyzer>::LAZY && <$ty as Analyzer>::ENDS_EARLY) {
                    if let Some(x) = &mut self.each.$name {
                        x.start(s);
                    }
                })*
                if self.early {
                    let lazy = self.lazy;
                    start_slot(&mut self.done, s, || [0, 0, lazy]);
                }
            }

            /// The bits of the analyzers on not shown a packet of the flow
            /// in slot `s` sent by the client (`from_client`) or the
            /// server, with a payload or not (`empty`); `None` when no
            /// analyzer on is shown it (see the module docs).
            #[cfg(test)]
            pub(crate) fn skip(&self, s: usize, from_client: bool, empty: bool) -> Option<u16> {
                if !self.early {
                    return Some(0);
                }
                let done = match self.done.get(s) {
                    Some(d) => d[usize::from(!from_client)],
                    None => 0,
                };
                let skip = done | if empty { self.no_empty } else { 0 };
                (skip & self.all != self.all).then_some(skip)
            }

            /// Whether an analyzer on is shown a packet of the flow in slot
            /// `s` sent by the client (`from_client`) or the server, with a
            /// payload or not (`empty`); see the module docs.
            #[cfg(test)]
            pub(crate) fn live(&self, s: usize, from_client: bool, empty: bool) -> bool {
                self.skip(s, from_client, empty).is_some()
            }

            /// Which packets of the flow in slot `s` an analyzer on is
            /// shown ([`Active::live`] of each side, with payload or not,
            /// as one [`Follows`] mask).
            pub(crate) fn follows(&self, s: usize, tcp: bool) -> Follows {
                if !self.early {
                    return FOLLOW_ALL;
                }
                let d = self.done.get(s).copied().unwrap_or([0; 3]);
                let unmade = if tcp { d[2] & self.tcp_empty_declined } else { 0 };
                follows_done(self.all, self.no_empty | unmade, [d[0], d[1]])
            }

            /// [`Active::follows`] of a flow that just started (over TCP
            /// or not).
            #[inline]
            pub(crate) fn follows_new(&self, tcp: bool) -> Follows {
                if !self.early {
                    return FOLLOW_ALL;
                }
                let unmade = if tcp { self.lazy & self.tcp_empty_declined } else { 0 };
                follows_done(self.all, self.no_empty | unmade, [0; 2])
            }

            /// A packet of the flow in slot `s`, shown to each analyzer
            /// on that is not done with the flow; `End` when one asks to
            /// end the flow, and the flow's [`Active::follows`] after it.
            #[cfg(test)]
            pub(crate) fn packet(&mut self, s: usize, p: &PacketView<'_>) -> (Action, Follows) {
                self.packet_with(s, p.proto == 6, p.from_client, p.payload_len == 0, || *p)
            }

            /// A packet of the flow in slot `s` (over TCP or not) sent by
            /// the client (`from_client`) or the server, with a payload or not
            /// (`empty`), shown to each analyzer
            /// on that is not done with that side or kind of packet (its
            /// view made by `view`, only when one is); `End` when one asks
            /// to end the flow, and the flow's [`Active::follows`] after
            /// it.
            #[inline]
            pub(crate) fn packet_with<'a>(
                &mut self,
                s: usize,
                tcp: bool,
                from_client: bool,
                empty: bool,
                view: impl FnOnce() -> PacketView<'a>,
            ) -> (Action, Follows) {
                match self.route {
                    Route::Any => {
                        self.packet_on::<{ u16::MAX }>(s, tcp, from_client, empty, view)
                    }
                    Route::Labellers => {
                        self.packet_on::<LABELLER_BITS>(s, tcp, from_client, empty, view)
                    }
                    $($(#[$attr])* Route::$name => {
                        self.packet_on::<{ bit::$name }>(s, tcp, from_client, empty, view)
                    })*
                }
            }

            /// [`Active::packet_with`] compiled for the analyzers on being
            /// those of `ON` (all of them when `ON` is every bit: then each
            /// registered analyzer's `Option` is tested), so that a run
            /// tests only the analyzers it has on, with their bits as
            /// constants.
            #[inline(always)]
            fn packet_on<'a, const ON: u16>(
                &mut self,
                s: usize,
                tcp: bool,
                from_client: bool,
                empty: bool,
                view: impl FnOnce() -> PacketView<'a>,
            ) -> (Action, Follows) {
                let (all, no_empty, early) = if ON == u16::MAX {
                    (self.all, self.no_empty, self.early)
                } else {
                    (ON, ON & NO_EMPTY, ON & EARLY != 0)
                };
                debug_assert!((all, no_empty, early) == (self.all, self.no_empty, self.early));
                let tcp_empty_declined = if ON == u16::MAX {
                    self.tcp_empty_declined
                } else {
                    ON & TCP_EMPTY_DECLINED
                };
                debug_assert_eq!(tcp_empty_declined, self.tcp_empty_declined);
                // Of a TCP flow, the analyzers not shown packets without
                // payload while they have not made its state.
                let unmade = |done: &[u16; 3]| {
                    if tcp {
                        done[2] & tcp_empty_declined
                    } else {
                        0
                    }
                };
                // Which analyzers on are not shown the packet.
                let (mut done, skip) = if early {
                    let done = self.done.get(s).copied().unwrap_or([0; 3]);
                    let skip = done[usize::from(!from_client)] | if empty {
                        no_empty | unmade(&done)
                    } else {
                        0
                    };
                    if skip & all == all {
                        // None (another consumer reads the packet).
                        let follows = follows_done(
                            all,
                            no_empty | unmade(&done),
                            [done[0], done[1]],
                        );
                        return (Action::Continue, follows);
                    }
                    (done, skip)
                } else {
                    ([0; 3], 0)
                };
                let p = &view();
                // The labellers' first payload of a flow none of them made a
                // state for: when each declines it for both sides, the flow
                // leaves them, with the done words the loop below would
                // leave (most flows of most traffic).
                if ON == LABELLER_BITS
                    && !empty
                    && done[2] & ON == ON
                    && skip & ON == 0
                    && self.labellers_decline(p)
                {
                    if let Some(d) = self.done.get_mut(s) {
                        *d = [ON, ON, done[2]];
                    }
                    return (Action::Continue, 0);
                }
                let mut act = Action::Continue;
                $($(#[$attr])* if ON & bit::$name != 0 {
                    if let Some(x) = &mut self.each.$name {
                        const BIT: u16 = bit::$name;
                        if skip & BIT == 0 {
                            let (a, d) = if <$ty as Analyzer>::LAZY && done[2] & BIT != 0 {
                                let mut fresh = true;
                                let r = x.packet_lazy(s, p, &mut fresh);
                                if !fresh {
                                    done[2] &= !BIT;
                                }
                                r
                            } else {
                                x.packet(s, p)
                            };
                            if a == Action::End {
                                act = Action::End;
                            }
                            if d[0] {
                                done[0] |= BIT;
                            }
                            if d[1] {
                                done[1] |= BIT;
                            }
                        }
                    }
                })*
                if early {
                    if let Some(d) = self.done.get_mut(s) {
                        *d = done;
                    }
                    let no_empty = no_empty | unmade(&done);
                    (act, follows_done(all, no_empty, [done[0], done[1]]))
                } else {
                    (act, FOLLOW_ALL)
                }
            }

            /// Whether each of the four labellers declines packet `p`
            /// for both sides of a flow none of them made a state for
            /// ([`declined`]), `dns` first (BENCHMARKS.md, S38: the
            /// order that keeps voip200's labelled run where it was).
            #[inline(always)]
            fn labellers_decline(&self, p: &PacketView<'_>) -> bool {
                declined(&self.each.dns, p)
                    && declined(&self.each.tls, p)
                    && declined(&self.each.http, p)
                    && declined(&self.each.ssh, p)
            }

            /// Whether packet `p`, with payload, the first packet of a
            /// flow that just started, leaves the analyzers on as
            /// [`Active::packet_with`] would leave them, done with both
            /// sides, with nothing else to do: they are all lazy and each
            /// declines it for both sides ([`Analyzer::declines`]). The
            /// flow's done words may then stay as [`Active::start`] left
            /// them: its record reads only which states it made, and no
            /// later packet of it is shown.
            #[inline(always)]
            pub(crate) fn declines_first(&self, p: &PacketView<'_>) -> bool {
                if self.route == Route::Labellers {
                    return self.labellers_decline(p);
                }
                if !self.early || self.lazy != self.all || p.payload_len == 0 {
                    return false;
                }
                let mut all = true;
                $($(#[$attr])* if let Some(x) = &self.each.$name {
                    all = all
                        && <$ty as Analyzer>::LAZY
                        && x.analyzer.declines(p) == Some([true; 2]);
                })*
                all
            }

            /// Appends the fields of the flow in slot `s` as one row; the
            /// flow was seen with `(packets, bytes)` (for the sampling
            /// estimates), and `ports` gives its client's and server's
            /// ports (asked only when an analyzer made a state of it).
            #[inline]
            pub(crate) fn record(
                &mut self,
                s: usize,
                rows: &mut Rows,
                seen: (u64, u64),
                ports: impl FnOnce() -> [u16; 2],
            ) {
                let fresh = self.done.get(s).map_or(0, |d| d[2]);
                if let Some(t) = &self.unmade {
                    if fresh & self.all == self.all {
                        // No analyzer on made a state of the flow (all
                        // lazy): the row each declined flow records.
                        rows.push_template(self.width, t);
                        return;
                    }
                }
                self.record_made(s, rows, seen, fresh, ports());
            }

            /// The row of a flow none of the analyzers on (all lazy) made
            /// a state for: what each one's [`Analyzer::record_declined`]
            /// writes, kept once ([`Active::unmade`]).
            fn unmade_row(&mut self) -> Option<Template> {
                Template::of(self.width, |c| {
                    $($(#[$attr])* {
                        if let Some(x) = &mut self.each.$name {
                            c.section(<$ty as Analyzer>::FIELDS.len(), |c| {
                                x.record(0, c, true, [0; 2])
                            });
                        }
                    })*
                    let _ = &c;
                })
            }

            /// [`Active::record`] of a flow an analyzer on made a state
            /// for (or whose row is not all null).
            #[inline(never)]
            fn record_made(
                &mut self,
                s: usize,
                rows: &mut Rows,
                seen: (u64, u64),
                fresh: u16,
                ports: [u16; 2],
            ) {
                let sample = self.sample;
                let mut bit = 1u16;
                rows.push_row(self.width, |c| {
                    $($(#[$attr])* {
                        if let Some(x) = &mut self.each.$name {
                            let fresh = fresh & bit != 0;
                            c.section(<$ty as Analyzer>::FIELDS.len(), |c| {
                                x.record(s, c, fresh, ports)
                            });
                        }
                        bit <<= 1;
                    })*
                    let _ = bit;
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

    /// Whether the `media` analyzer's per-second figures are taken
    /// ([`media::Media::count_per_second`]).
    pub(crate) fn count_media(&mut self, on: bool) {
        if let Some(m) = &mut self.each.media {
            m.analyzer.count_per_second(on);
        }
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

    /// The flow in slot `s` starts at `ts` towards `server()`
    /// ([`dns::Dns::flow_start`]).
    #[inline]
    pub(crate) fn dns_flow_start(
        &mut self,
        s: usize,
        server: impl FnOnce() -> std::net::IpAddr,
        ts: Nanos,
    ) {
        let Some(d) = &mut self.each.dns else {
            return;
        };
        // The flow's state is not made yet (`Dns` is lazy): made only for
        // a name found.
        if let Some(name) = d.analyzer.cached(server, ts) {
            d.start(s);
            if let Some(st) = d.state(s) {
                st.keep_cached(name);
            }
            if let Some(bits) = self.done.get_mut(s) {
                bits[2] &= !self.dns_bit;
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

/// The bits of the payload labellers ([`LABELLERS`]) in the done words:
/// a run with exactly them on shows packets through a loop made for them.
const LABELLER_BITS: u16 = bit::tls | bit::http | bit::ssh | bit::dns;

#[cfg(test)]
mod tests;

#[cfg(all(test, feature = "ndpi"))]
mod ndpi_tests;
