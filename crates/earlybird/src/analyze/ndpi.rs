//! The `ndpi` analyzer: nDPI's verdict per flow (application, master
//! protocol, category, confidence kind), from the IP packets of the flow,
//! through the system's libndpi (feature `ndpi`; Debian's libndpi-dev,
//! nDPI 4.2).
//!
//! Contract: per flow it feeds nDPI the flow's packets as captured, from
//! the (innermost) IP header ([`PacketView::ip`]; packets whose headers
//! were not captured are not fed), and stops as ndpiReader does: once nDPI
//! names an application and can read no more of it, or after
//! [`MAX_TCP`] TCP / [`MAX_UDP`] UDP packets (then, if nothing was found,
//! it gives up), or when the flow ends (it gives up, with nDPI's guess by
//! port and address, whose confidence kind says so). nDPI's per-flow state
//! is allocated at the flow's first packet and freed as soon as the
//! verdict is final (at the latest when the flow ends, the slot is reused
//! or the table is dropped), so at most one state per flow of the table is
//! alive; [`live_flows`] counts them. A flow nDPI saw nothing of records
//! `Unknown`. One nDPI module per flow table (shard), opened at its first
//! packet; if nDPI cannot allocate, flows record `Unknown` and
//! [`failures`] counts it. Never panics.

use super::ndpi_lib::{Flow, Module, Verdict, FAILED, LIVE};
use super::{Action, Analyzer, PacketView};
use crate::decode::ipproto;
use crate::schema::{Cells, Field};
use std::cell::OnceCell;
use std::sync::atomic::Ordering;

/// TCP packets a flow shows nDPI at most (ndpiReader's limit).
pub const MAX_TCP: u32 = 80;
/// UDP packets a flow shows nDPI at most (ndpiReader's limit).
pub const MAX_UDP: u32 = 24;

/// nDPI flow states alive in this process (all flow tables).
pub fn live_flows() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// nDPI modules and flow states that could not be allocated.
pub fn failures() -> u64 {
    FAILED.load(Ordering::Relaxed)
}

/// The analyzer: one nDPI module, opened when the first packet comes.
#[derive(Default)]
pub struct Ndpi {
    module: OnceCell<Option<Module>>,
}

/// Per-flow state.
#[derive(Default)]
pub struct State {
    /// nDPI's state while it still reads the flow.
    flow: Option<Flow>,
    /// The verdict so far (final once `done`).
    verdict: Verdict,
    /// Packets shown to nDPI.
    packets: u32,
    /// The verdict is final (nDPI's state is freed).
    done: bool,
}

impl Ndpi {
    fn module(&self) -> Option<&Module> {
        self.module.get_or_init(Module::open).as_ref()
    }
}

impl Analyzer for Ndpi {
    type State = State;
    const NAME: &'static str = super::ndpi_fields::NAME;
    const ABOUT: &'static str = super::ndpi_fields::ABOUT;
    const PAYLOAD: bool = true;
    const IP: bool = true;
    const FIELDS: &'static [Field] = super::ndpi_fields::FIELDS;

    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if st.done || p.ip.is_empty() {
            return Action::Continue;
        }
        let Some(m) = self.module() else {
            return Action::Continue;
        };
        if st.flow.is_none() {
            st.flow = m.flow();
        }
        let Some(flow) = st.flow.as_mut() else {
            st.done = true;
            return Action::Continue;
        };
        let (v, more) = m.process(flow, p.ip, p.ts / 1_000_000);
        st.verdict = v;
        st.packets += 1;
        let enough = match p.proto {
            ipproto::TCP => st.packets > MAX_TCP,
            ipproto::UDP => st.packets > MAX_UDP,
            _ => false,
        };
        if enough || (v.app != 0 && !more) {
            if v.app == 0 {
                st.verdict = m.giveup(flow);
            }
            st.flow = None;
            st.done = true;
        }
        Action::Continue
    }

    fn finish(&self, st: &mut State) {
        if let (Some(flow), Some(m)) =
            (st.flow.as_mut(), self.module.get().and_then(|m| m.as_ref()))
        {
            st.verdict = m.giveup(flow);
        }
        st.flow = None;
        st.done = true;
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        let v = &st.verdict;
        match self.module.get().and_then(|m| m.as_ref()) {
            Some(m) if v.master != 0 || v.app != 0 => {
                out.text(&m.label(v));
                let master = if v.master != 0 { v.master } else { v.app };
                let app = if v.app != 0 { v.app } else { v.master };
                out.text(&m.proto_name(master));
                out.text(&m.proto_name(app));
                out.text(&m.category_name(v.category));
            }
            _ => {
                for _ in 0..3 {
                    out.text("Unknown");
                }
                out.text("Unspecified");
            }
        }
        out.text(&Module::confidence_name(v.confidence));
        out.u64(u64::from(st.packets));
    }
}
