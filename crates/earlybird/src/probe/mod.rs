//! The probe: one configuration for a whole run, and the run it builds.
//!
//! Contract: [`Config`] (`config.rs`) holds every option of `earlybird
//! flows` with its default; the command line, the TOML probe file and
//! Python all fill it in, and only it turns options into a run.
//! [`Config::plan`] (`build.rs`) checks it without creating anything,
//! [`Plan::open`] opens outputs and sockets, [`Probe::run`] runs. The call
//! database and the call and stream outputs are [`CallOutputs`]
//! (`calls.rs`). Signals, progress bars and the summary's printing belong
//! to the fronts.

mod build;
mod calls;
pub(crate) mod config;
mod labels;

pub use build::{Plan, Probe, DEFAULT_MODEL, DEFAULT_MODEL_NAME};
pub use calls::CallOutputs;
pub use config::{AlarmPcapSection, Config, DumpSection, IpfixSection, LearnSection};
