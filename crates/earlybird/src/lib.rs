//! earlybird: a wire-speed flow meter that labels each flow's application
//! from its first few packets.
//!
//! ```text
//!  source ──batches──▶ shard 0..N-1 (batch t is read and decoded by shard
//!                      t mod N, which hands each shard the packets whose
//!                      symmetric flow hash is its own: exchange.rs)
//!     per shard, one thread, run to completion:
//!     decode ─▶ flow table ─▶ early features ─▶ inline classifier
//!                     │
//!                     ▼ finished records (batches, bounded channel)
//!               exporter thread (CSV, JSON lines, …)
//! ```
//!
//! # The API
//!
//! The crate root is the whole surface; the folders behind it are private
//! and may change (their layering: `docs/ARCHITECTURE.md`, "Layers").
//!
//! - **Run on capture files**: [`open_all`] then [`run`], or [`Inputs`]
//!   (directories, standard input, compressed captures, in a chosen
//!   [`InputOrder`]) then [`run_inputs`]; [`RunOptions`] (with the flow
//!   rules in [`FlowConfig`]), [`RunControl`] (stop, progress, reopen),
//!   [`ModelRef`] (the inline classifier, or none).
//! - **Run live**: [`open_live`] (AF_PACKET rings per [`LiveConfig`]) then
//!   [`run_live`].
//! - **Collect records** in memory instead of exporting them: [`collect`],
//!   [`collect_inputs`] ([`CollectedFlow`]).
//! - **Read a capture** packet by packet: [`CaptureFile::reader`] gives
//!   batches of [`PacketRef`]s ([`LinkType`], timestamps, lengths).
//! - **The report** of a run: [`Report`] ([`Counters`], [`Summary`],
//!   [`Warning`]s, …).
//! - **Record types**: [`FlowRecord`] ([`RecordKey`], [`Stat`],
//!   [`Verdict`], [`EndReason`]), its early packets ([`EarlyPkt`]) and
//!   [`RecordBatch`].
//! - **Per-flow analyzers** turned on by name ([`FlowConfig::analyzers`]):
//!   [`mod@analyze`]; the fields they add to a record are cells ([`Rows`],
//!   [`OwnedValue`]) described by [`Field`]s.
//! - **Exporters**: [`Exporter`], opened by [`Format`] on a path
//!   ([`open_exporter`]) or over any writer ([`to_writer`]); an exporter of
//!   your own may format on another thread through a [`Renderer`]. An
//!   exporter takes the records of one [`Kind`] ([`Exporter::kind`]): flow
//!   records in [`RecordBatch`]es, or rows of another kind in
//!   [`RowBatch`]es.
//!   With the `parquet` feature, `ArrowFlows` gathers flow records into
//!   Arrow record batches (the Parquet output's columns) for a program to
//!   hand on.
//! - **Models**: [`Model`] (load, save, classify), the [`Classifier`] trait
//!   a model of your own implements.
//! - **Train and evaluate** (feature `tools`): [`train()`] on a
//!   [`Dataset`], [`evaluate()`] on another ([`EvalReport`]); [`workflow`]
//!   does it from capture files and ground-truth CSVs ([`LabelSet`]).
//! - **Synthetic traffic** (feature `tools`): [`generate`] writes a capture
//!   ([`GenOptions`]); [`replay`] sends captures out of an interface.
//! - **Metrics** (feature `metrics`): [`Metrics`] takes a run's seconds
//!   ([`RunOptions::metrics`]), [`MetricsServer`] serves them to Prometheus.
//! - For the command line: [`mod@bench`] (the `earlybird bench` harness;
//!   feature `tools`) and [`outpath`] (output paths checked before a run).
//!
//! # Features
//!
//! The data path needs none of them: `cargo build -p earlybird
//! --no-default-features` builds decoding, the flow table, features,
//! inline classification (models load and classify), the exporters (CSV,
//! JSON lines, IPFIX, …), capture files, live rings, the pipeline and
//! VoIP call tracking. The defaults are the first four, so a plain build
//! has everything it had before they existed.
//!
//! - `tools`: training and evaluation, the traffic generators, the bench
//!   harness, replay out of an interface, a call's WAV file
//!   ([`voip::audio::write_wav`]).
//! - `compress`: gzip, zstd and xz captures read as streams; without it
//!   such an input is an error naming the feature.
//! - `metrics`: [`Metrics`] and [`MetricsServer`] (Prometheus, HTTP).
//! - `chart`: the PNG chart of an evaluation (with `tools`).
//! - Off by default: `parquet` (the Parquet exporter, `ArrowFlows`),
//!   `sqlite` and `postgres` (the call store), `ndpi` (the nDPI analyzer,
//!   through the system's libndpi).
//!
//! # Example
//!
//! Flows of a capture, in memory and as CSV:
//!
//! ```
//! use earlybird::{
//!     collect, open_all, run, to_writer, ExportOptions, Format, ModelRef, RunControl,
//!     RunOptions,
//! };
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/pcap/arkime__v6-http.pcap");
//! let files = open_all(&[path.into()])?;
//! let opts = RunOptions::default();
//!
//! let (flows, report) = collect(&files, &opts, &ModelRef::default())?;
//! assert_eq!(flows.len(), 16);
//! assert_eq!(report.summary.records, 16);
//! let first = &flows[0].record;
//! println!("{} packets client to server", first.packets[0]);
//!
//! let csv = ExportOptions {
//!     early_packets: opts.flow.early_packets,
//!     ..ExportOptions::default()
//! };
//! let stdout = to_writer(Format::Csv, Box::new(std::io::stdout()), "csv:stdout", &csv);
//! let report = run(&files, &opts, &ModelRef::default(), vec![stdout], &RunControl::default())?;
//! assert_eq!(report.counters.packets_read, report.counters.packets_flowed);
//! # Ok::<(), earlybird::Error>(())
//! ```
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
// Dead code is judged in the unit-test build, where the helpers that only
// the tests use (and, with the `testing` feature, the items `testing`
// re-exports for the integration tests and benches) count as used.
#![cfg_attr(not(test), allow(dead_code))]

pub mod analyze;
#[cfg(feature = "tools")]
pub mod bench;
pub(crate) mod classify;
pub(crate) mod config;
pub(crate) mod decode;
pub(crate) mod dump;
pub(crate) mod error;
pub(crate) mod exchange;
pub(crate) mod export;
pub(crate) mod features;
pub(crate) mod flow;
#[cfg(feature = "tools")]
pub(crate) mod gen;
#[cfg(feature = "tools")]
pub(crate) mod learn;
pub(crate) mod mark;
pub mod outpath;
pub(crate) mod pipeline;
pub(crate) mod prefetch;
pub(crate) mod probe;
pub mod sample;
pub(crate) mod schema;
pub(crate) mod shard;
pub(crate) mod source;
pub(crate) mod telemetry;
pub(crate) mod time;
pub mod voip;

pub use classify::cascade::Cascade;
pub use classify::payload_label;
pub use classify::provenance::{FileDigest, HeldOut};
pub use classify::services;
pub use classify::{
    Classifier, Dataset, FlowFeatures, LabelLevel, Model, ModelInfo, ModelKind, Sample, Verdict,
};
pub use config::{FlowConfig, FlowHash};
pub use decode::icmp::Icmp;
pub use decode::{LinkType, Skip, TunnelKind};
pub use dump::ForensicConfig;
pub use dump::{DumpConfig, DumpCounters, DumpFormat};
pub use error::{Error, Result};
/// The error types of the engine's layers, one per value or file they
/// read, each with its context as fields; where a run meets one it becomes
/// an [`Error`] with the same message.
pub mod errors {
    pub use crate::analyze::media::ConfigError as MediaConfigError;
    pub use crate::analyze::NameError as AnalyzerNameError;
    pub use crate::classify::model::{Invalid as InvalidModel, ModelError};
    pub use crate::dump::FormatError as DumpFormatError;
    pub use crate::export::OutputNameError;
    #[cfg(feature = "tools")]
    pub use crate::learn::dataset::LabelFileError;
    pub use crate::outpath::ExtensionError;
    pub use crate::sample::SpecError as SampleSpecError;
    pub use crate::source::retime::ModeError as TimestampsError;
    pub use crate::telemetry::alarms::SpecError as AlarmSpecError;
    #[cfg(feature = "metrics")]
    pub use crate::telemetry::metrics::AddressError;
}
#[cfg(feature = "parquet")]
pub use export::arrow::{ArrowFlows, ArrowSink};
/// IPFIX export (RFC 7011): options, collector names, the exporter.
pub use export::ipfix;
#[cfg(feature = "parquet")]
pub use export::parquet::{ParquetExporter, ParquetOptions};
pub use export::{
    open as open_exporter, open_rows as open_row_exporter, rows_to_writer, to_writer,
    ExportOptions, Exporter, Format, Renderer,
};
pub use features::early::EarlyPkt;
pub use features::stats::Stat;
pub use features::Dir;
pub use flow::events::VERDICTS;
pub use flow::record::{EndReason, FlowRecord, RecordBatch, RecordKey, TCP_FLAG_NAMES};
#[cfg(feature = "tools")]
pub use gen::voip::{generate_voip, GenCall, VoipGenOptions, VoipGenSummary};
#[cfg(feature = "tools")]
pub use gen::{generate, GenKind, GenOptions, GenSummary};
#[cfg(feature = "tools")]
pub use learn::evaluate::{ClassStats, Report as EvalReport};
#[cfg(feature = "tools")]
pub use learn::label;
#[cfg(feature = "tools")]
pub use learn::media as media_intervals;
#[cfg(feature = "tools")]
pub use learn::online as learn_online;
#[cfg(feature = "tools")]
pub use learn::self_label;
#[cfg(feature = "tools")]
pub use learn::workflow;
#[cfg(feature = "tools")]
pub use learn::{evaluate, train, Algo, LabelOptions, LabelSet, TrainOptions};
pub use mark::MarkCounters;
pub use pipeline::{
    collect, collect_inputs, open_all, open_live, run, run_inputs, run_live, CallStage, CallWriter,
    CollectedFlow, ExportPolicy, LiveInput, ModelRef, Placement, RunControl, RunOptions,
};
pub use probe::{
    AlarmPcapSection, CallOutputs, Config, DumpSection, IpfixSection, LearnSection, Plan, Probe,
    DEFAULT_MODEL, DEFAULT_MODEL_NAME,
};
pub use schema::{Cells, Field, FieldType, Kind, OwnedValue, RowBatch, Rows, Value};
pub use source::af_packet::{Capture, LiveConfig};
#[cfg(feature = "tools")]
pub use source::af_xdp_tx::Spread;
pub use source::capfilter::{CaptureFilter, Program as FilterProgram};
pub use source::fanout::Fanout;
pub use source::inputs::{InputOrder, Inputs, SkipReason};
#[cfg(feature = "tools")]
pub use source::replay::{replay, ReplayOptions, ReplayReport};
pub use source::retime::Timestamps;
#[cfg(feature = "tools")]
pub use source::xdp_live::replay_live;
pub use source::{CaptureFile, CaptureReader, PacketRef, Warning, BATCH};
pub use telemetry::alarms::{
    AlarmSpec, Direction as AlarmDirection, Method as AlarmMethod, ALARMS,
};
#[cfg(feature = "metrics")]
pub use telemetry::metrics::{listen_address as metrics_address, Metrics, MetricsServer};
pub use telemetry::series::{APP_STATS, STATS};
pub use telemetry::summary::{Report, Totals};
pub use telemetry::{Counters, Summary};
pub use time::{Nanos, SECOND};

/// Internals that the integration tests, the benches and the fuzz targets
/// drive directly. Not part of the API: only with the `testing` feature,
/// which the crate's own dev-dependency and the fuzz crate turn on.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::analyze::media::clear::Clear as MediaClear;
    pub use crate::analyze::media::clear::TcpFraming as MediaTcpFraming;
    pub use crate::analyze::media::demux::{classify as demux_classify, unwrap_turn};
    pub use crate::analyze::media::dtls::Record as DtlsRecord;
    pub use crate::analyze::media::stun::Stun;
    pub use crate::analyze::media::turn::ChannelData;
    pub use crate::analyze::media::wireguard::Message as WireGuardMessage;
    pub use crate::classify::dataset::SplitMix64;
    pub use crate::classify::tree::{Tree, LEAF};
    pub use crate::classify::vector;
    pub use crate::decode::fast::ethernet_ipv4;
    pub use crate::decode::{decode, fmt_addr, map_v4, Decoded};
    pub use crate::export::fields;
    pub use crate::flow::key::{shard_hash_v4, Key};
    pub use crate::flow::packet::Pkt;
    pub use crate::flow::table::FlowTable;
    pub use crate::mark::dscp::read_dscp;
    pub use crate::source::af_packet::{Frames, Walked};
    pub use crate::source::populate::BACKGROUND_FROM;
    pub use crate::source::retime::Retimer;
    pub use crate::source::stream::Chunker;
    pub use crate::source::{btf, snaprule};
}
