//! [`Config`]: everything a run of `earlybird flows` takes, as one value
//! the command line, the TOML probe file and Python all fill in.
//!
//! Contract: a key is the long option of `earlybird flows` (`idle-timeout`,
//! `stats-out`), values in the option's units (seconds, MiB); the options
//! of the dumper, IPFIX, the alarms' pcaps and self-training sit in the
//! tables `[dump]`, `[ipfix]`, `[alarm-pcap]` and `[learn]` (`[dump] dir`
//! is `--dump-dir`, `[learn] dir` is `--learn`); `inputs`
//! are the capture files; `[[alarm]]` tables (or short `"SERIES:METHOD"`
//! strings) are alarms. Every key is optional, with the default written on
//! its field. [`Config::from_toml`] refuses an unknown key naming it and its
//! line; the spellings of earlier versions (underscores, `[media] config`
//! for `media-config`, `dump-dir` outside its table) are read with a
//! warning ([`Config::warnings`]). [`Config::to_toml`] prints every key;
//! reading that text back gives the same value. [`Config::overlay`] lays
//! options over a configuration as the command line does: lists grow,
//! single values are replaced.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::telemetry::alarms::AlarmSpec;
use crate::{Error, Result};

/// A whole run's configuration (see the module docs). Field docs give the
/// TOML key, which is the long option of `earlybird flows`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct Config {
    // ---- input
    /// Capture files (pcap, pcapng, compressed), directories of them, or
    /// `-` for standard input. Empty with `interface`.
    #[serde(deserialize_with = "one_or_many")]
    pub inputs: Vec<PathBuf>,
    /// Order of several inputs: `time` (default) or `given`.
    pub input_order: String,
    /// Live capture from this interface (comma-separated for several,
    /// `any` for all) instead of files.
    pub interface: Option<String>,
    /// Live: stop after this many seconds (default: until stopped).
    pub duration: Option<f64>,
    /// Live: bytes kept of each frame. Default 256 (65535 when calls are
    /// tracked).
    pub snaplen: u32,
    /// Live: MiB of receive ring per shard. Default 64.
    pub ring_mib: u32,
    /// Live: leave the interface out of promiscuous mode. Default false.
    pub no_promisc: bool,
    /// Live: turn the NIC's hardware receive timestamps on for the run.
    /// Default false.
    pub hw_timestamps: bool,
    /// Live, several shards: `hosts` (default) or `flows`.
    pub fanout: String,
    /// Capture filter in tcpdump's syntax, compiled by libpcap: only the
    /// packets it keeps are read (files, pipes and live). Default none.
    pub filter: Option<String>,
    /// Live: `af-packet` (default) or `af-xdp`.
    pub capture: String,
    /// Live, AF_XDP: capture an interface that has addresses (its traffic
    /// no longer reaches the host). Default false.
    pub xdp_take_traffic: bool,
    /// Batch-timestamp correction of files: `off` (default), `udts`,
    /// `wdts`.
    pub timestamps: String,
    /// Packet sampling `POLICY:N` (systematic, stratified, random).
    /// Default none.
    pub sample: Option<String>,
    /// Seed of the stratified and random draws. Default 1.
    pub sample_seed: Option<u64>,

    // ---- flows
    /// One flow per direction instead of sessions. Default false.
    pub unidirectional: bool,
    /// Seconds without a packet that end a flow. Default 15.
    pub idle_timeout: f64,
    /// Seconds after which a long flow is cut. Default 1800.
    pub active_timeout: f64,
    /// Seconds late packets still join a closed TCP connection. Default 2.
    pub tcp_close_timeout: f64,
    /// Early packets kept per flow (1..=32). Default 4.
    pub early_packets: usize,
    /// Flow table capacity per shard. Default 1,000,000.
    pub max_flows: usize,
    /// Per-flow statistics: `full` (default) or `basic`.
    pub stats: String,
    /// Per-flow analyzers by name (`payload`, `media`, …; a string may
    /// list several, comma-separated). Default none.
    #[serde(deserialize_with = "names")]
    pub analyzer: Vec<String>,
    /// Run the payload labellers: the `tls`, `http`, `ssh` and `dns`
    /// analyzers, whose names give the records' payload labels. Default
    /// true (false saves their cost: docs/OPERATIONS.md, "Payload names").
    pub labellers: bool,
    /// The media analyzer's TOML of intervals. Default: built in.
    pub media_config: Option<PathBuf>,
    /// Flow-table hash: `fold` (default) or `toeplitz`.
    pub hash: String,
    /// Shard threads. Default 1.
    pub shards: usize,
    /// Pin shard i to core i. Default false.
    pub pin: bool,
    /// Record batches queued per shard for a slow output before dropping
    /// (default: wait for files, 64 live).
    pub drop_after: Option<usize>,

    // ---- classification
    /// Model file, or `default` for the built-in model (the default).
    pub model: Option<PathBuf>,
    /// Confidence below which a verdict is `unknown` (replaces the
    /// model's).
    pub threshold: Option<f32>,
    /// Run no classifier. Default false.
    pub no_model: bool,
    /// Self-training from the payload labels (`--learn DIR`).
    pub learn: LearnSection,

    // ---- outputs
    /// Flow record outputs: files by extension, `-` for standard output,
    /// `ipfix+udp://HOST:PORT`, `ipfix+tcp://HOST:PORT`. Empty: standard
    /// output.
    #[serde(deserialize_with = "one_or_many")]
    pub output: Vec<PathBuf>,
    /// Record format (`csv`, `jsonl`, `ipfix`, `parquet`, `null`) where a
    /// name does not say it.
    pub format: Option<String>,
    /// Rows per Parquet row group. Default 65536.
    pub parquet_row_group: Option<u64>,
    /// Close each Parquet file as a part (`STEM.NNNNNN.parquet`, footer
    /// written) once it holds this many rows, so that a killed process
    /// leaves the parts readable. Default: one file.
    pub parquet_part_rows: Option<u64>,
    /// Seed of the records' Community ID (0 to 65535). Default 0.
    pub community_id_seed: u16,
    /// Leave the records' Community ID out (its field empty, IPFIX
    /// without its element): one SHA-1 a record saved. Default false.
    pub no_community_id: bool,
    /// Flow records a ClickHouse output holds in memory while its server
    /// is away or slow, posted once it takes them; more are counted as
    /// not inserted. Default 100,000.
    pub clickhouse_hold: usize,
    /// Service maps laid over the shipped one (docs/SERVICES.md), each
    /// winning over those before it. Default none.
    #[serde(deserialize_with = "one_or_many")]
    pub services: Vec<PathBuf>,
    /// What records keep of the names they carry (sni, http_host,
    /// http_user_agent, dns_query, dns_answers): `keep` (the default),
    /// `hash` (keyed HMAC-SHA256, see `names-key`) or `drop`.
    pub names: String,
    /// The key of `names = "hash"`. Default: `earlybird`, a public key
    /// (the same name gives the same hash in every run and every probe,
    /// but anyone can hash a list of names to find it: set your own).
    pub names_key: Option<String>,
    /// Early-verdict event records to this output.
    pub events: Option<PathBuf>,
    /// Per-second statistics records to this output.
    pub stats_out: Option<PathBuf>,
    /// Per-second per-application statistics to this output.
    pub app_stats_out: Option<PathBuf>,
    /// A classic pcap copy of every packet read (files only).
    pub write: Option<PathBuf>,
    /// DSCP marking map (TOML) for the `write` copy.
    pub mark: Option<PathBuf>,
    /// The IPFIX outputs' options.
    pub ipfix: IpfixSection,
    /// The packet dumper.
    pub dump: DumpSection,

    // ---- alarms and metrics
    /// Alarms on the per-second series: `[[alarm]]` tables, or
    /// `"SERIES[:METHOD]"` strings.
    #[serde(deserialize_with = "alarms")]
    pub alarm: Vec<AlarmSpec>,
    /// A TOML file of `[[alarm]]` tables.
    pub alarms: Option<PathBuf>,
    /// Alarm records to this output.
    pub alarms_out: Option<PathBuf>,
    /// Packets before each alarm, to pcaps.
    pub alarm_pcap: AlarmPcapSection,
    /// Serve Prometheus metrics on this address (`PORT`, `:PORT`,
    /// `HOST:PORT`).
    pub metrics_listen: Option<String>,

    // ---- VoIP
    /// Call database: a SQLite file or `postgres://…`.
    pub voip_db: Option<String>,
    /// Call records (a call with its streams, or a stream without a
    /// call) held in memory while the call database fails, written once
    /// it works again; more are counted as not written. Default 100,000.
    pub voip_db_hold: usize,
    /// Call records to this output.
    pub calls_out: Option<PathBuf>,
    /// RTP stream records to this output.
    pub streams_out: Option<PathBuf>,
    /// Seconds after which a call with no packet ends. Default 300.
    pub call_timeout: f64,
    /// Calls tracked at once. Default 200,000.
    pub max_calls: usize,
    /// RTP streams tracked at once. Default 400,000.
    pub max_streams: usize,
    /// Keep the RTP of calls in this directory (for `earlybird calls
    /// --wav`).
    pub rtp_dir: Option<PathBuf>,
    /// MiB of RTP kept per call. Default 64.
    pub rtp_max_mib: u64,
    /// Remove kept calls older than this many days first.
    pub rtp_keep_days: Option<f64>,

    // ---- the front
    /// Print no summary. Default false.
    pub quiet: bool,
    /// Show no progress bar. Default false.
    pub no_progress: bool,

    /// Warnings from reading the configuration (old spellings); not a key.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `[ipfix]`: the options of every IPFIX output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct IpfixSection {
    /// UDP: largest message, bytes of payload. Default 1400.
    pub mtu: usize,
    /// Observation domain id. Default 0.
    pub domain: u32,
    /// UDP: seconds between template resends. Default 60.
    pub template_refresh: f64,
    /// UDP: data messages between template resends. Default 100.
    pub template_messages: u32,
    /// TCP: messages queued for a slow collector. Default 256.
    pub queue: usize,
    /// TCP: seconds the end of a run waits for the queue. Default 2.
    pub linger: f64,
}

/// `[dump]`: the rotating packet dumper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct DumpSection {
    /// Directory of the dump files; no dumper without it.
    pub dir: Option<PathBuf>,
    /// `pcap` (default) or `pcapng`.
    pub format: Option<String>,
    /// Write past the page cache (O_DIRECT). Default false.
    pub direct: bool,
    /// New file before one exceeds this many MiB.
    pub max_mib: Option<f64>,
    /// New file at each multiple of this many seconds.
    pub seconds: Option<f64>,
    /// Only the flows with one of these verdicts (comma-separated in a
    /// string).
    #[serde(deserialize_with = "names")]
    pub app: Vec<String>,
    /// MiB for the packets of flows awaiting a verdict. Default 64.
    pub hold_mib: f64,
    /// Only the flows with one of these ports.
    #[serde(deserialize_with = "one_or_many")]
    pub port: Vec<u16>,
}

/// `[learn]`: self-training of the early model from the flows' payload
/// labels (`learn/online.rs`); `--learn DIR` is `dir`, the others
/// `--learn-KEY`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct LearnSection {
    /// Directory the learnt models are written to; no learning without it.
    pub dir: Option<PathBuf>,
    /// Flows kept per class in the reservoir. Default 2000.
    pub reservoir: usize,
    /// Train a model every this many payload-labelled flows (0: not by
    /// count). Default 10000.
    pub every_labels: u64,
    /// Train a model every this many seconds of packet time (0: not by
    /// time). Default 300.
    pub every_seconds: f64,
    /// Class of a flow: `category` (default), `app` or `proto` of its
    /// payload label.
    pub level: String,
    /// Algorithm of the learnt models: `c45` (default), `forest`, `nb`,
    /// `gnb`.
    pub algo: String,
    /// Share of the reservoir held out to score each model. Default 0.25.
    pub holdout: f64,
    /// Share of one core the training thread may use, in (0, 1]. Default
    /// 0.5.
    pub cpu: f64,
    /// File runs: every this many input packets (rounded to whole
    /// batches) the shards stop; a model due there trains while they go
    /// on, and if it beats the model in use it is swapped in at the next
    /// such point, so a run swaps at the same points whatever its shard
    /// count (0: file runs never swap). Live runs swap a model as soon as
    /// it beats the one in use. Default 1000000.
    pub swap_packets: u64,
}

/// `[alarm-pcap]`: the packets before each alarm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct AlarmPcapSection {
    /// Directory of the alarms' pcaps; none without it.
    pub dir: Option<PathBuf>,
    /// Seconds of packets in each. Default 10.
    pub window: u64,
    /// MiB of recent packets kept, all shards. Default 256.
    pub ring_mib: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            inputs: Vec::new(),
            input_order: "time".into(),
            interface: None,
            duration: None,
            snaplen: 256,
            ring_mib: 64,
            no_promisc: false,
            hw_timestamps: false,
            fanout: "hosts".into(),
            filter: None,
            capture: "af-packet".into(),
            xdp_take_traffic: false,
            timestamps: "off".into(),
            sample: None,
            sample_seed: None,
            unidirectional: false,
            idle_timeout: 15.0,
            active_timeout: 1800.0,
            tcp_close_timeout: 2.0,
            early_packets: 4,
            max_flows: 1_000_000,
            stats: "full".into(),
            analyzer: Vec::new(),
            labellers: true,
            media_config: None,
            hash: "fold".into(),
            shards: 1,
            pin: false,
            drop_after: None,
            model: None,
            threshold: None,
            no_model: false,
            learn: LearnSection::default(),
            output: Vec::new(),
            format: None,
            parquet_row_group: None,
            parquet_part_rows: None,
            community_id_seed: 0,
            no_community_id: false,
            clickhouse_hold: crate::export::clickhouse::HOLD,
            services: Vec::new(),
            names: "keep".into(),
            names_key: None,
            events: None,
            stats_out: None,
            app_stats_out: None,
            write: None,
            mark: None,
            ipfix: IpfixSection::default(),
            dump: DumpSection::default(),
            alarm: Vec::new(),
            alarms: None,
            alarms_out: None,
            alarm_pcap: AlarmPcapSection::default(),
            metrics_listen: None,
            voip_db: None,
            voip_db_hold: 100_000,
            calls_out: None,
            streams_out: None,
            call_timeout: 300.0,
            max_calls: 200_000,
            max_streams: 400_000,
            rtp_dir: None,
            rtp_max_mib: 64,
            rtp_keep_days: None,
            quiet: false,
            no_progress: false,
            warnings: Vec::new(),
        }
    }
}

impl Default for IpfixSection {
    fn default() -> Self {
        IpfixSection {
            mtu: 1400,
            domain: 0,
            template_refresh: 60.0,
            template_messages: 100,
            queue: 256,
            linger: 2.0,
        }
    }
}

impl Default for DumpSection {
    fn default() -> Self {
        DumpSection {
            dir: None,
            format: None,
            direct: false,
            max_mib: None,
            seconds: None,
            app: Vec::new(),
            hold_mib: 64.0,
            port: Vec::new(),
        }
    }
}

impl Default for LearnSection {
    fn default() -> Self {
        LearnSection {
            dir: None,
            reservoir: 2000,
            every_labels: 10_000,
            every_seconds: 300.0,
            level: "category".into(),
            algo: "c45".into(),
            holdout: 0.25,
            cpu: 0.5,
            swap_packets: 1_000_000,
        }
    }
}

impl Default for AlarmPcapSection {
    fn default() -> Self {
        AlarmPcapSection {
            dir: None,
            window: 10,
            ring_mib: 256,
        }
    }
}

/// The tables of the configuration: a key under one of them is written
/// `[table] key`, or `table-key` in the old flat spelling.
const TABLES: [&str; 4] = ["alarm-pcap", "dump", "ipfix", "learn"];

/// Tables whose own name as an option is one of their keys: `--learn DIR`
/// is `[learn] dir`.
const BARE: [(&str, &str); 1] = [("learn", "dir")];

/// A list, or one value standing for a list of one.
fn one_or_many<'de, D, T>(d: D) -> std::result::Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<T> {
        Many(Vec<T>),
        One(T),
    }
    Ok(match Either::<T>::deserialize(d)? {
        Either::Many(v) => v,
        Either::One(x) => vec![x],
    })
}

/// Names: a list, or a string of comma-separated names (as the command
/// line's `--analyzer a,b`); each item may hold several too.
fn names<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    let all: Vec<String> = one_or_many(d)?;
    Ok(all
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

/// `alarm`: tables, or short specs as `--alarm` takes them.
fn alarms<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<AlarmSpec>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum One {
        Short(String),
        Table(AlarmSpec),
    }
    let all = Vec::<One>::deserialize(d)?;
    all.into_iter()
        .map(|one| match one {
            One::Short(s) => AlarmSpec::parse_short(&s).map_err(serde::de::Error::custom),
            One::Table(t) => Ok(t),
        })
        .collect()
}

/// The line (1-based) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl Config {
    /// Reads a probe file (see the module docs); errors name the file, the
    /// line and the key.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text, &path.display().to_string())
    }

    /// Reads a configuration from TOML text; `origin` names it in errors
    /// (a file name).
    pub fn from_toml(text: &str, origin: &str) -> Result<Config> {
        let strict = toml::from_str::<Config>(text);
        let first = match strict {
            Ok(c) => return Ok(c),
            Err(e) => e,
        };
        let at = |e: &toml::de::Error| e.span().map(|s| line_of(text, s.start));
        let fail = |e: &toml::de::Error| Error::Setting {
            origin: origin.to_string(),
            line: at(e),
            reason: e.message().trim_end().to_string(),
        };
        // An old spelling: read the file again with its keys renamed.
        let table: toml::Table = toml::from_str(text).map_err(|e| fail(&e))?;
        let mut warnings = Vec::new();
        let renamed = normalize(table, &mut warnings);
        if warnings.is_empty() {
            return Err(fail(&first));
        }
        let mut config = Config::deserialize(renamed).map_err(|e| Error::Setting {
            origin: origin.to_string(),
            line: None,
            reason: e.message().trim_end().to_string(),
        })?;
        config.warnings = warnings
            .into_iter()
            .map(|w| format!("{origin}: {w}"))
            .collect();
        Ok(config)
    }

    /// A configuration from `(key, value)` pairs, keys as long options
    /// (`idle-timeout`, `dump-dir`) or with underscores (`idle_timeout`,
    /// as Python's keyword arguments): over the defaults, as
    /// [`Config::overlay`] does.
    pub fn from_options(options: toml::Table, origin: &str) -> Result<Config> {
        let mut c = Config::default();
        c.overlay(options, origin)?;
        Ok(c)
    }

    /// Lays `options` (long option names as keys, with or without
    /// tables) over this configuration: a list grows by the new items, a
    /// table takes its keys one by one, any other value is replaced.
    pub fn overlay(&mut self, options: toml::Table, origin: &str) -> Result<()> {
        let mut ignored = Vec::new();
        let options = normalize(options, &mut ignored);
        let mut base = toml::Table::try_from(&*self).map_err(|e| Error::Setting {
            origin: origin.to_string(),
            line: None,
            reason: e.to_string(),
        })?;
        merge(&mut base, options);
        let warnings = std::mem::take(&mut self.warnings);
        *self = Config::deserialize(base).map_err(|e| Error::Setting {
            origin: origin.to_string(),
            line: None,
            reason: e.message().trim_end().to_string(),
        })?;
        self.warnings = warnings;
        Ok(())
    }

    /// Every key with its value as TOML; [`Config::from_toml`] reads it
    /// back to the same configuration.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# earlybird flows: the effective configuration (earlybird flows --config FILE)\n",
        );
        out.push_str(&toml::to_string(self).unwrap_or_else(|e| format!("# cannot print: {e}\n")));
        out
    }

    /// Whether the run tracks calls (a call output is given).
    pub fn tracks_calls(&self) -> bool {
        self.voip_db.is_some() || self.calls_out.is_some() || self.streams_out.is_some()
    }
}

/// Renames the keys of `t` to their canonical spelling: `_` to `-`, a
/// table that is not one of [`TABLES`] folded into `table-key` keys, and a
/// `table-key` of one of [`TABLES`] moved into its table. Each rename adds
/// a warning.
fn normalize(t: toml::Table, warnings: &mut Vec<String>) -> toml::Table {
    let mut out = toml::Table::new();
    for (key, value) in t {
        let dashed = key.replace('_', "-");
        if dashed != key {
            warnings.push(format!("{key:?} is now spelled {dashed:?}"));
        }
        match value {
            toml::Value::Table(inner) if !TABLES.contains(&dashed.as_str()) => {
                for (k, v) in inner {
                    let flat = format!("{dashed}-{}", k.replace('_', "-"));
                    warnings.push(format!("[{key}] {k} is now spelled {flat}"));
                    place(&mut out, &flat, v, warnings);
                }
            }
            toml::Value::Table(inner) => {
                let inner = normalize(inner, warnings);
                merge(&mut out, toml::Table::from_iter([(dashed, inner.into())]));
            }
            v => place(&mut out, &dashed, v, warnings),
        }
    }
    out
}

/// Puts `key = value` into `out`, in its table when `key` starts with one
/// of [`TABLES`].
fn place(out: &mut toml::Table, key: &str, value: toml::Value, warnings: &mut Vec<String>) {
    if let Some((table, k)) = BARE.iter().find(|(t, _)| *t == key) {
        let one = toml::Table::from_iter([(k.to_string(), value)]);
        merge(
            out,
            toml::Table::from_iter([(table.to_string(), one.into())]),
        );
        return;
    }
    for table in TABLES {
        if let Some(k) = key.strip_prefix(table).and_then(|k| k.strip_prefix('-')) {
            warnings.push(format!("{key} is now spelled [{table}] {k}"));
            let one = toml::Table::from_iter([(k.to_string(), value)]);
            merge(
                out,
                toml::Table::from_iter([(table.to_string(), one.into())]),
            );
            return;
        }
    }
    merge(out, toml::Table::from_iter([(key.to_string(), value)]));
}

/// Lays `over` on `base`: arrays grow, tables merge key by key, anything
/// else is replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Array(a)), toml::Value::Array(b)) => a.extend(b),
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_probe_file_reads_without_warnings() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/probe.example.toml");
        let c = Config::from_file(&path).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.interface.as_deref(), Some("eth0"));
        assert_eq!(c.dump.app, ["BitTorrent"]);
        assert_eq!(c.alarm.len(), 3);
        assert_eq!(c.ipfix.template_refresh, 60.0);
    }

    #[test]
    fn printing_reading_and_printing_again_gives_the_same_text() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/probe.example.toml");
        let c = Config::from_file(&path).unwrap();
        let printed = c.to_toml();
        let back = Config::from_toml(&printed, "printed").unwrap();
        assert_eq!(back, c);
        assert_eq!(back.to_toml(), printed);
        let d = Config::default();
        assert_eq!(
            Config::from_toml(&d.to_toml(), "d").unwrap().to_toml(),
            d.to_toml()
        );
    }

    #[test]
    fn an_unknown_key_is_refused_naming_it_and_its_line() {
        let e = Config::from_toml("shards = 2\n\nidle-timout = 3\n", "probe.toml").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("probe.toml"), "{s}");
        assert!(s.contains("line 3"), "{s}");
        assert!(s.contains("idle-timout"), "{s}");
        let e = Config::from_toml("[dump]\ndri = \"x\"\n", "p.toml").unwrap_err();
        assert!(
            e.to_string().contains("line 2") && e.to_string().contains("dri"),
            "{e}"
        );
        let e = Config::from_toml("shards = \"two\"\n", "p.toml").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn old_spellings_are_read_with_a_warning() {
        let c = Config::from_toml(
            "idle_timeout = 30\ndump-dir = \"/d\"\n[media]\nconfig = \"m.toml\"\n",
            "old.toml",
        )
        .unwrap();
        assert_eq!(c.idle_timeout, 30.0);
        assert_eq!(c.dump.dir.as_deref(), Some(Path::new("/d")));
        assert_eq!(c.media_config.as_deref(), Some(Path::new("m.toml")));
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c.warnings[0].starts_with("old.toml: "), "{:?}", c.warnings);
        // An old spelling of a key that does not exist is still refused.
        assert!(Config::from_toml("idle_timout = 30\n", "x").is_err());
    }

    #[test]
    fn overlay_grows_lists_and_replaces_values() {
        let mut c = Config::from_toml("output = [\"a.csv\"]\nshards = 2\n", "f").unwrap();
        let over: toml::Table = toml::from_str(
            "output = [\"b.csv\"]\nshards = 4\ndump_dir = \"/d\"\nalarm = [\"packets:cusum\"]\n",
        )
        .unwrap();
        c.overlay(over, "command line").unwrap();
        assert_eq!(c.output, [PathBuf::from("a.csv"), PathBuf::from("b.csv")]);
        assert_eq!(c.shards, 4);
        assert_eq!(c.dump.dir.as_deref(), Some(Path::new("/d")));
        assert_eq!(c.alarm[0].series, "packets");
        let bad: toml::Table = toml::from_str("shard = 4\n").unwrap();
        let e = c.overlay(bad, "command line").unwrap_err().to_string();
        assert!(e.contains("shard"), "{e}");
    }
}
