//! `earlybird flows`: capture files or a live interface → flow records.
//!
//! Before any work: output names must say their format (exit 2), no output
//! may be an input (exit 1). Signals: SIGINT/SIGTERM stop the run (open
//! flows flushed, exit 130), SIGHUP reopens the record files.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use earlybird::{
    ExportOptions, ExportPolicy, Fanout, FlowConfig, Format, InputOrder, Inputs, LiveConfig,
    RunControl, RunOptions, SECOND,
};

use crate::progress::Progress;

#[derive(Args)]
pub struct FlowsArgs {
    /// Capture files (pcap or pcapng; gzip, zstd or xz compressed too),
    /// directories of them (searched recursively), "-" for standard input
    /// or a FIFO (read as the packets arrive). Several inputs are read as
    /// one stream in time order (see --input-order): pieces of one capture
    /// join up; an input that starts before the latest packet read so far
    /// is a separate time domain (open flows end first). An input that is
    /// not a capture is skipped with a warning when there are others.
    #[arg(value_name = "INPUT", required_unless_present = "interface")]
    files: Vec<PathBuf>,
    /// Order of several inputs: "time" (default: by each file's first
    /// packet, ties in natural name order; the order given when a stream
    /// is among them) or "given" (as listed, directories in natural name
    /// order).
    #[arg(long, value_name = "ORDER", default_value = "time", value_parser = ["time", "given"])]
    input_order: String,
    /// Capture live from this Linux interface instead of files, from
    /// several at once given as a comma-separated list (eth0,eth1: the two
    /// ports of a tap, one direction each, merged in arrival order), or
    /// from every interface with "any" (AF_PACKET
    /// TPACKET_V3 rings; one socket per shard in a kernel fanout group that
    /// keeps both directions of a session on one shard, see --fanout; VLAN
    /// tags the kernel took off are put back). Needs root or CAP_NET_RAW. Runs until SIGINT/SIGTERM or --duration, then flushes
    /// every flow.
    #[arg(short, long, value_name = "IFACE", conflicts_with = "files")]
    interface: Option<String>,
    /// Live capture: stop after this many seconds.
    #[arg(long, value_name = "SECS", requires = "interface")]
    duration: Option<f64>,
    /// Live capture: bytes kept of each frame (headers are what flows need;
    /// the original length is always counted).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 256,
        requires = "interface"
    )]
    snaplen: u32,
    /// Live capture: MiB of receive ring per shard (1 MiB blocks).
    #[arg(long, value_name = "MIB", default_value_t = 64, requires = "interface")]
    ring_mib: u32,
    /// Live capture: do not put the interface in promiscuous mode.
    #[arg(long, requires = "interface")]
    no_promisc: bool,
    /// Live capture with several shards: how the kernel spreads packets
    /// over their sockets. "hosts" (default): by the outer IP address pair,
    /// so every flow stays whole in one shard, tunnelled flows and
    /// fragments included. "flows": by the kernel's hash of outer addresses
    /// and ports (spreads few busy hosts better, but may split the
    /// directions of a tunnelled flow or a datagram's fragments).
    #[arg(long, value_name = "HOW", default_value = "hosts", value_parser = ["hosts", "flows"], requires = "interface")]
    fanout: String,
    /// Output file for the flow records ("-" = standard output). Repeat to
    /// write several outputs. The extension names the format: .csv, .jsonl
    /// or .ndjson (JSON lines: one object per line; .json is refused, it
    /// would not be one JSON document), .parquet (typed columns, zstd; the
    /// file is readable once the run ends, or once rotated with SIGHUP after
    /// being moved). Any other extension is an error; a
    /// name without one needs --format (a device or FIFO such as /dev/null
    /// takes CSV). An output may not be an input (same file, even through a
    /// link) nor be named twice. SIGHUP reopens the files (log rotation);
    /// live runs flush them about once a second.
    #[arg(short, long = "output", value_name = "OUT", default_value = "-")]
    outputs: Vec<PathBuf>,
    /// Record format: csv, jsonl, parquet or null (discard; for measuring
    /// the engine alone, with no -o file). Standard output is CSV unless this says
    /// otherwise; a file's extension must agree with it.
    #[arg(short, long, value_name = "FORMAT")]
    format: Option<String>,
    /// Unidirectional flows (one per direction) instead of sessions.
    #[arg(long)]
    unidirectional: bool,
    /// Seconds without a packet after which a flow ends (reason "idle").
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    idle_timeout: f64,
    /// Seconds after which a long flow is cut (reason "active") and continues
    /// as a new flow.
    #[arg(long, value_name = "SECS", default_value_t = 1800.0)]
    active_timeout: f64,
    /// Seconds late packets (final ACKs) still join a TCP connection after
    /// FINs in both directions or a RST.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    tcp_close_timeout: f64,
    /// N: size, direction and inter-arrival of the first N packets of each
    /// flow are kept in its record (1..=32).
    #[arg(short = 'n', long, value_name = "N", default_value_t = 4)]
    early_packets: usize,
    /// Flow table capacity per shard; when full, the least recently seen of
    /// a few candidate flows is ended with reason "evicted" (counted).
    #[arg(long, value_name = "FLOWS", default_value_t = 1_000_000)]
    max_flows: usize,
    /// Per-flow statistics: "full" keeps size and inter-arrival
    /// min/max/mean/std and TCP flag counts per direction; "basic" keeps only
    /// packets, bytes, times and early packets (less memory per flow: those
    /// record fields are empty in CSV, null in JSON lines).
    #[arg(long, value_name = "LEVEL", default_value = "full", value_parser = ["full", "basic"])]
    stats: String,
    /// Per-flow analyzer to run (repeat, or comma-separate several); each
    /// adds its fields after the record's own (docs/RECORD_FIELDS.md).
    /// "payload": transport payload packets and bytes per direction, and
    /// the first 16 payload bytes of each direction in hex.
    #[arg(long = "analyzer", value_name = "NAME", value_delimiter = ',')]
    analyzers: Vec<String>,
    /// Flow hash for the flow-table index: fold (default: the symmetric
    /// multiply-fold hash that also picks the shard, one hash per packet) or
    /// toeplitz (RSS Toeplitz with the symmetric 0x6d5a key). Shards are
    /// always chosen by the symmetric shard hash (each endpoint hashed, then added).
    #[arg(long, value_name = "HASH", default_value = "fold", value_parser = ["fold", "toeplitz"])]
    hash: String,
    /// Number of shards (threads), each owning the flows whose symmetric
    /// hash selects it. The shards take turns reading the input: each
    /// batch is decoded once and its packets handed to their shards.
    #[arg(short, long, value_name = "N", default_value_t = 1)]
    shards: usize,
    /// Pin shard i to CPU core i.
    #[arg(long)]
    pin: bool,
    /// Never let a slow output stall the shards: queue up to this many
    /// record batches per shard, then drop and count (default for files:
    /// wait, so a file run loses nothing; for a live interface: 64).
    #[arg(long, value_name = "BATCHES")]
    drop_after: Option<usize>,
    /// DSCP marking map for the packets written with -w: packets of a
    /// flow after its verdict carry its class's DSCP in their innermost IP
    /// header (IPv4 checksum updated). Needs one shard. TOML: an optional
    /// `default = DSCP` (classes not listed, and "unknown" verdicts), then
    /// a [classes] table of class name (as the model names it, quoted if
    /// it has a dot; "unknown" = no verdict) = DSCP, where a DSCP is a
    /// number 0-63 or a PHB name (CS0-CS7, AF11-AF43, EF, LE, DF). Classes
    /// neither listed nor covered by default are left unchanged. Example:
    /// default = "CS0" / [classes] / "TLS.YouTube" = "AF41" / DNS = 46.
    #[arg(long, value_name = "FILE.toml", requires = "write")]
    mark: Option<PathBuf>,
    /// Write a copy of every packet read, in input order, to this classic
    /// pcap file (nanosecond timestamps, the input's link type; packets of
    /// another link type in a pcapng input are counted and left out),
    /// DSCP-marked per --mark. Capture files only.
    #[arg(short = 'w', long = "write", value_name = "OUT.pcap", value_parser = crate::out_args::pcap_path, conflicts_with = "interface")]
    write: Option<PathBuf>,
    /// Do not print the summary on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// Do not show the progress bar (files) or the packet counter (live).
    #[arg(long)]
    no_progress: bool,
    /// Label flows with this model file instead of the built-in default
    /// model (see `earlybird train`).
    #[arg(long, value_name = "MODEL", conflicts_with = "no_model")]
    model: Option<PathBuf>,
    /// Do not label flows (no classifier runs).
    #[arg(long)]
    no_model: bool,
}

fn secs(s: f64, what: &str) -> Result<u64, String> {
    if !(s > 0.0 && s.is_finite()) {
        return Err(format!("--{what} must be a positive number of seconds"));
    }
    Ok((s * SECOND as f64).round() as u64)
}

/// Record batches a shard of a live capture keeps waiting for a slow
/// output before it drops (a live capture cannot wait).
const LIVE_PENDING: usize = 64;

/// The live capture options, when an interface was given.
fn live_config(a: &FlowsArgs) -> Result<Option<(LiveConfig, Option<Duration>)>, String> {
    let Some(iface) = &a.interface else {
        return Ok(None);
    };
    let duration = match a.duration {
        Some(d) => Some(Duration::from_nanos(secs(d, "duration")?)),
        None => None,
    };
    if a.ring_mib == 0 {
        return Err("--ring-mib must be at least 1".into());
    }
    let cfg = LiveConfig {
        blocks: a.ring_mib,
        snaplen: a.snaplen,
        promiscuous: !a.no_promisc,
        fanout: Fanout::parse(&a.fanout).unwrap_or_default(),
        ..LiveConfig::new(iface)
    };
    Ok(Some((cfg, duration)))
}

/// SIGHUP raises a reopen request (`RunControl::reopen`): the exporter
/// thread reopens the record files, as a daemon's logs are rotated. A
/// thread waits for the signal so the handler itself does nothing but wake
/// it.
fn reopen_on_hangup(ctl: &RunControl) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])?;
    let reopen = Arc::clone(&ctl.reopen);
    std::thread::Builder::new()
        .name("eb-sighup".into())
        .spawn(move || {
            for _ in signals.forever() {
                reopen.fetch_add(1, Ordering::Relaxed);
            }
        })?;
    Ok(())
}

pub fn run(a: FlowsArgs) -> i32 {
    let flow = match (|| -> Result<FlowConfig, String> {
        Ok(FlowConfig {
            bidirectional: !a.unidirectional,
            idle_timeout: secs(a.idle_timeout, "idle-timeout")?,
            active_timeout: secs(a.active_timeout, "active-timeout")?,
            tcp_close_timeout: secs(a.tcp_close_timeout, "tcp-close-timeout")?,
            early_packets: a.early_packets,
            max_flows: a.max_flows,
            full_stats: a.stats == "full",
            analyzers: a.analyzers.clone(),
            hash: if a.hash == "toeplitz" {
                earlybird::FlowHash::Toeplitz
            } else {
                earlybird::FlowHash::Fold
            },
            ..FlowConfig::default()
        })
    })() {
        Ok(f) => f,
        Err(e) => return crate::fail(e),
    };
    let opts = RunOptions {
        flow,
        shards: a.shards,
        pin: a.pin,
        export_policy: match (a.drop_after, &a.interface) {
            (Some(n), _) => ExportPolicy::Drop { max_pending: n },
            (None, Some(_)) => ExportPolicy::Drop {
                max_pending: LIVE_PENDING,
            },
            (None, None) => ExportPolicy::Block,
        },
        write: a.write.clone(),
        mark: a.mark.clone(),
        ..RunOptions::default()
    };
    if let Err(e) = opts.flow.validate() {
        return crate::fail(e);
    }
    // Output names: a name that does not say what is written is a usage
    // error, before any work.
    let forced = match a.format.as_deref().map(|f| (f, Format::parse(f))) {
        Some((f, None)) => {
            let known = match cfg!(feature = "parquet") {
                true => "csv, jsonl, parquet, null",
                false => "csv, jsonl, null",
            };
            return crate::out_args::usage(format!("unknown format {f:?} ({known})"));
        }
        Some((_, Some(f))) => Some(f),
        None => None,
    };
    let model = match crate::model_arg::model_ref(a.model.as_deref(), a.no_model) {
        Ok(m) => m,
        Err(e) => return crate::fail(e),
    };
    // The inputs, directories expanded: planned before any output exists.
    let inputs = if a.interface.is_some() {
        None
    } else {
        let order = InputOrder::parse(&a.input_order).unwrap_or_default();
        match Inputs::plan(&a.files, order) {
            Ok(i) => Some(i),
            Err(e) => return crate::fail(e),
        }
    };
    // No output may be an input: checked before any output is created.
    let outputs: Vec<&Path> = (a.outputs.iter().map(PathBuf::as_path))
        .chain(a.write.as_deref())
        .collect();
    let planned: Vec<&Path> = inputs.iter().flat_map(|i| i.paths()).collect();
    let read: Vec<&Path> = (a.files.iter().map(PathBuf::as_path))
        .chain(planned)
        .chain(a.model.as_deref())
        .chain(a.mark.as_deref())
        .collect();
    if let Some(code) = crate::out_args::refuse(&outputs, &read) {
        return code;
    }
    let mut formats = Vec::new();
    for out in &a.outputs {
        match Format::for_output(out, forced) {
            Ok(f) => formats.push(f),
            Err(e) => return crate::out_args::usage(e),
        }
    }
    let eopts = ExportOptions {
        early_packets: opts.flow.early_packets,
        class_names: model.classes.clone(),
        analyzed: earlybird::analyze::fields_of(&opts.flow.analyzers).into(),
    };
    let live = match live_config(&a) {
        Ok(l) => l,
        Err(e) => return crate::fail(e),
    };
    let mut exporters = Vec::new();
    for (out, fmt) in a.outputs.iter().zip(formats) {
        match earlybird::open_exporter(fmt, out, &eopts) {
            Ok(e) => exporters.push(e),
            Err(e) => return crate::fail(e),
        }
    }
    let ctl = RunControl::default();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&ctl.stop)) {
            return crate::fail(format!("cannot install signal handler: {e}"));
        }
    }
    if let Err(e) = reopen_on_hangup(&ctl) {
        return crate::fail(format!("cannot install signal handler: {e}"));
    }
    let report = match &live {
        Some((cfg, duration)) => {
            let input = match earlybird::open_live(cfg, opts.shards) {
                Ok(i) => i,
                Err(e) => return crate::fail(e),
            };
            if !a.quiet {
                crate::say(&format!(
                    "earlybird: capturing on {} with {} shard{} (SIGINT or SIGTERM to stop)",
                    cfg.interface,
                    opts.shards,
                    if opts.shards == 1 { "" } else { "s" }
                ));
            }
            let _bar = Progress::live(!a.no_progress && !a.quiet, ctl.progress.clone());
            earlybird::run_live(input, *duration, &opts, &model, exporters, &ctl)
        }
        None => {
            let inputs = inputs.unwrap_or_default();
            let show = !a.no_progress && !a.quiet;
            let _bar = match inputs.total_bytes() {
                Some(total) => Progress::start(show, total, ctl.progress.clone()),
                None => Progress::bytes(show, ctl.progress.clone()),
            };
            earlybird::run_inputs(inputs, &opts, &model, exporters, &ctl)
        }
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => return crate::fail(e),
    };
    if !a.quiet {
        use std::io::Write;
        let _ = write!(std::io::stderr(), "{report}");
    } else {
        for w in &report.warnings {
            crate::say(&format!("earlybird: warning: {w}"));
        }
        for e in &report.output_errors {
            crate::say(&format!("earlybird: output error: {e}"));
        }
    }
    if ctl.stop.load(Ordering::Relaxed) {
        130
    } else if !report.output_errors.is_empty() {
        3
    } else {
        0
    }
}
