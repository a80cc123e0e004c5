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
    DumpConfig, ExportOptions, ExportPolicy, Fanout, FlowConfig, Format, InputOrder, Inputs,
    LiveConfig, RunControl, RunOptions, SECOND,
};

use crate::progress::Progress;

#[derive(Args)]
pub struct FlowsArgs {
    /// Read options from this TOML file before the command line's (which
    /// add to lists and override single values): each key is a long
    /// option (idle-timeout = 30, quiet = true, analyzer = ["payload"]), a
    /// table groups options by their first word ([dump] dir = "/srv/dump"
    /// is --dump-dir), "inputs" lists capture files, [[alarm]] tables are
    /// alarms as in --alarms. See docs/OPERATIONS.md.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Check the options (from --config and the command line) and exit:
    /// 0 and "configuration OK" when a run would start with them (the
    /// model and alarm files are read and capture files looked up; no
    /// interface, output or directory is opened).
    #[arg(long)]
    check_config: bool,
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
    /// Live capture: turn on the NIC's hardware receive timestamps
    /// (SIOCSHWTSTAMP, every packet) for the run, and back off after it.
    /// Without it, hardware stamps are used only when the NIC's stamping is
    /// already on; an interface that offers none is an error. The summary
    /// says which stamp each packet got.
    #[arg(long, requires = "interface")]
    hw_timestamps: bool,
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
    /// takes CSV). IPFIX: FILE.ipfix, or a collector as
    /// ipfix+udp://HOST:PORT or ipfix+tcp://HOST:PORT (docs/IPFIX.md). An
    /// output may not be an input (same file, even through a
    /// link) nor be named twice. SIGHUP reopens the files (log rotation);
    /// live runs flush them about once a second.
    #[arg(short, long = "output", value_name = "OUT", default_value = "-")]
    outputs: Vec<PathBuf>,
    /// Rows per row group of every Parquet output (-o and the other record
    /// outputs): a row group is written out when it holds this many rows,
    /// and the last one at the end. Smaller groups let readers skip more
    /// and, in a live run, reach the disk sooner; larger ones compress
    /// better. Default 65536.
    #[arg(long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..))]
    parquet_row_group: Option<u64>,
    /// Early-verdict events: besides each flow's final record, write one
    /// record the moment its flow is classified (key, verdict, confidence,
    /// the early packet it was taken at, and the packet time it took) to
    /// this file ("-" = standard output; the extension names the format as
    /// for -o). Needs a model.
    #[arg(long, value_name = "OUT", conflicts_with = "no_model")]
    events: Option<PathBuf>,
    /// Per-second statistics: one row per second of packet time (packets,
    /// bytes, skipped by reason, flows new/ended by reason/open,
    /// verdicts), the shards' figures merged, to this file ("-" = standard
    /// output; the extension names the format as for -o). A file gives the
    /// same rows at any speed; a live capture writes each second once
    /// every shard has passed it.
    #[arg(long, value_name = "OUT")]
    stats_out: Option<PathBuf>,
    /// Per-second statistics per application (the verdicts given, and the
    /// flows that ended with their packets and bytes), per transport
    /// (tcp, udp, icmp, other) and per port class of TCP and UDP flows
    /// (tcp/443, udp/53, ... for listed services, else tcp/system,
    /// tcp/registered, tcp/ephemeral by the server port; see
    /// docs/OPERATIONS.md): one row per second and name with anything
    /// counted, to this file. A flow's packets and bytes count in the
    /// second it ends.
    #[arg(long, value_name = "OUT")]
    app_stats_out: Option<PathBuf>,
    /// Watch a per-second series for sudden changes: SERIES[:METHOD], where
    /// SERIES is a field of --stats-out (packets, bytes, flows_new,
    /// skipped_not_ip, ...) and METHOD ewma (default: 6 standard deviations
    /// above the exponentially weighted mean), cusum (small lasting rises)
    /// or seasonal (against the same 5-minute slot of earlier days).
    /// Repeat for several. Raised and cleared alarms go to --alarms-out and
    /// the metrics.
    #[arg(long = "alarm", value_name = "SPEC", value_parser = earlybird::AlarmSpec::parse_short)]
    alarm: Vec<earlybird::AlarmSpec>,
    /// Alarms from a TOML file: [[alarm]] tables with series, method,
    /// direction (up, down, both), alpha, threshold, min_change, warmup,
    /// drift, period, bucket (docs/OPERATIONS.md).
    #[arg(long, value_name = "FILE.toml")]
    alarms: Option<PathBuf>,
    /// Alarm records (raised and cleared) to this file ("-" = standard
    /// output; the extension names the format as for -o).
    #[arg(long, value_name = "OUT")]
    alarms_out: Option<PathBuf>,
    /// When an alarm is raised, write the packets of the seconds before it
    /// (--alarm-pcap-window) to a pcap in this directory
    /// (alarm-SECOND-SERIES.pcap; one file per shard with several). Each
    /// shard keeps its recent packets in a ring of bounded size.
    #[arg(long, value_name = "DIR")]
    alarm_pcap_dir: Option<PathBuf>,
    /// Seconds of packets an alarm's pcap holds, up to and including the
    /// second of the alarm.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10,
        requires = "alarm_pcap_dir"
    )]
    alarm_pcap_window: u64,
    /// MiB of recent packets the rings keep for the alarms' pcaps, all
    /// shards together (what does not fit is not in the pcap).
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 256,
        requires = "alarm_pcap_dir"
    )]
    alarm_pcap_ring_mib: usize,
    /// Serve the per-second statistics as Prometheus metrics on
    /// http://ADDR/metrics while the run lasts: PORT or :PORT listens on
    /// 127.0.0.1 only; HOST:PORT (e.g. 0.0.0.0:9464) as given.
    #[arg(long, value_name = "ADDR", value_parser = earlybird::metrics_address)]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Record format: csv, jsonl, ipfix or null (discard; for measuring the engine
    /// alone, with no -o file). Standard output is CSV unless this says
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
    /// the first 16 payload bytes of each direction in hex. "media": audio,
    /// video or file transfer of UDP flows from packet sizes and
    /// inter-arrivals (docs/MEDIA.md).
    #[arg(long = "analyzer", value_name = "NAME", value_delimiter = ',')]
    analyzers: Vec<String>,
    /// TOML file of the media analyzer's intervals and thresholds
    /// (docs/MEDIA.md; default: thesis Table 6.2). In a --config file:
    /// `[media] config = "FILE"`.
    #[arg(long, value_name = "FILE")]
    media_config: Option<PathBuf>,
    /// Batch-timestamp correction of capture files: runs of packets with
    /// the same timestamp (engines that stamp a whole batch) get times
    /// spread over the gap since the previous stamp, uniformly (udts) or by
    /// packet size (wdts); off (default) keeps the stamps. Any number of
    /// shards (each packet gets the time one shard gives it). With udts or
    /// wdts, a file whose first packets mostly share stamps is warned about.
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = ["off", "udts", "wdts"])]
    timestamps: String,
    /// Packet sampling before the flow table, to keep up with links faster
    /// than a shard can count: POLICY:N keeps 1 packet in N by count.
    /// systematic: the first of every N; stratified: one at random in
    /// every N; random: each packet with probability 1/N. Each shard
    /// samples the batches it reads (with several shards the cycles run
    /// per reading shard; the rate is 1 in N all the same). Skipped
    /// packets are counted in the summary ("sampling:"), never decoded.
    /// Records get the fields sampling, sampling_rate, packets_estimated
    /// and bytes_estimated (seen × N); the early packets' inter-arrivals,
    /// the classifier's and the media analyzer's are divided by N (thesis
    /// Ch. 6.5). Not with -w. See docs/SAMPLING.md.
    #[arg(long, value_name = "POLICY:N")]
    sample: Option<String>,
    /// Seed of the stratified and random draws of --sample (default 1):
    /// the same seed, inputs and number of shards keep the same packets.
    #[arg(long, value_name = "SEED", requires = "sample")]
    sample_seed: Option<u64>,
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
    /// Dump packets to rotating classic pcap files (nanosecond stamps; or
    /// pcapng, see --dump-format) in this directory, created if missing;
    /// files and live. Each shard writes the packets it runs to its own
    /// files, named eb-SECONDS.NANOS-sSHARD-SEQ.pcap (.pcapng) after their
    /// first packet (names sort by time; merge shards with mergecap). A
    /// write failure (disk full) is counted and reported; the flows go on.
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// Format of the dump files: pcap (classic pcap; a packet of another
    /// link type than the file's starts a new file) or pcapng (one
    /// interface per link type in the same file, nanosecond timestamps).
    /// Default pcap.
    #[arg(long, value_name = "FORMAT", value_parser = earlybird::DumpFormat::parse, requires = "dump_dir")]
    dump_format: Option<earlybird::DumpFormat>,
    /// Write the dump files past the page cache (O_DIRECT): the disk reads
    /// the dumper's buffer, the kernel copies nothing and the page cache
    /// keeps what it held. Classic pcap on a file system that takes direct
    /// writes (ext4, XFS, btrfs; checked before the run starts).
    #[arg(long, requires = "dump_dir")]
    dump_direct: bool,
    /// Start a new dump file before one would exceed this size.
    #[arg(long, value_name = "MIB", requires = "dump_dir")]
    dump_max_mib: Option<f64>,
    /// Start a new dump file at each multiple of this many seconds of
    /// packet time.
    #[arg(long, value_name = "SECONDS", requires = "dump_dir")]
    dump_seconds: Option<f64>,
    /// Dump only the packets of flows whose verdict is one of these
    /// classes (as the model names them; "unknown" = flows the model could
    /// not label). A flow's packets from before its verdict are held (see
    /// --dump-hold-mib) and written once the verdict matches.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        requires = "dump_dir"
    )]
    dump_app: Vec<String>,
    /// With --dump-app: memory for the packets of flows without a verdict
    /// yet, all shards together; what does not fit is counted and not
    /// dumped. 0: hold none, dump from the packet after the verdict on.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 64.0,
        requires = "dump_app"
    )]
    dump_hold_mib: f64,
    /// Dump only the packets of flows with one of these ports (either
    /// side). With --dump-app too, a flow must match both.
    #[arg(
        long,
        value_name = "N,...",
        value_delimiter = ',',
        requires = "dump_dir"
    )]
    dump_port: Vec<u16>,
    /// Do not print the summary on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// Do not show the progress bar (files) or the packet counter (live).
    #[arg(long)]
    no_progress: bool,
    /// Label flows with this model file instead of the built-in default
    /// model (see `earlybird train`); `default` names the built-in model.
    #[arg(long, value_name = "MODEL", conflicts_with = "no_model")]
    model: Option<PathBuf>,
    /// Verdicts with a lower confidence are reported as unknown (0 to 1;
    /// replaces the threshold stored in the model, see `earlybird model info`).
    #[arg(long, value_name = "CONFIDENCE", conflicts_with = "no_model")]
    threshold: Option<f32>,
    /// Do not label flows (no classifier runs).
    #[arg(long)]
    no_model: bool,
    #[command(flatten)]
    ipfix: Box<crate::ipfix_args::IpfixArgs>,
    /// Track calls beside the flows (docs/VOIP.md): add the calls to this
    /// call database, as `earlybird voip --db` does (a SQLite file,
    /// created if missing, or postgres://user@host:port/db). With this,
    /// --calls-out or --streams-out each shard passes its SIP, RTP and
    /// RTCP packets to one call stage thread; a live capture then keeps
    /// whole frames (snaplen 65535).
    #[arg(long, value_name = "DB")]
    voip_db: Option<String>,
    /// Call records to this file (.csv, .jsonl/.json, .parquet), as
    /// `earlybird voip -o`.
    #[arg(long, value_name = "FILE")]
    calls_out: Option<PathBuf>,
    /// RTP stream records (every stream, with or without a call), as
    /// `earlybird voip --streams-out`.
    #[arg(long, value_name = "FILE")]
    streams_out: Option<PathBuf>,
    #[command(flatten)]
    tracker: crate::cmd_voip::TrackerArgs,
}

impl FlowsArgs {
    /// Whether the run tracks calls (a call output is given).
    fn tracks_calls(&self) -> bool {
        self.voip_db.is_some() || self.calls_out.is_some() || self.streams_out.is_some()
    }
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
/// Whether `fmt` is Parquet (never without the `parquet` feature, which
/// has the variant).
fn is_parquet(fmt: Format) -> bool {
    fmt.name() == "parquet"
}

/// A Parquet output of flow records (`kind` `None`) or of records of
/// `kind` at `path` ("-" = standard output) with `rows` rows per row group
/// (`--parquet-row-group`); otherwise as `open_exporter` opens it.
#[cfg(feature = "parquet")]
fn open_parquet(
    kind: Option<&'static earlybird::Kind>,
    path: &Path,
    eopts: &ExportOptions,
    rows: u64,
) -> earlybird::Result<Box<dyn earlybird::Exporter>> {
    use earlybird::{ParquetExporter as P, ParquetOptions};
    let popts = ParquetOptions {
        row_group_rows: usize::try_from(rows).unwrap_or(usize::MAX),
        ..ParquetOptions::default()
    };
    let stdout = || Box::new(std::io::stdout()) as Box<dyn std::io::Write + Send>;
    let name = "parquet:stdout";
    let ex = match (kind, path.as_os_str() == "-") {
        (None, false) => P::create_flows(path, eopts, &popts),
        (None, true) => P::flows_to_writer(stdout(), name, eopts, &popts),
        (Some(k), false) => P::create_rows(k, path, &popts),
        (Some(k), true) => P::rows_to_writer(k, stdout(), name, &popts),
    }?;
    Ok(Box::new(ex))
}

#[cfg(not(feature = "parquet"))]
fn open_parquet(
    _: Option<&'static earlybird::Kind>,
    _: &Path,
    _: &ExportOptions,
    _: u64,
) -> earlybird::Result<Box<dyn earlybird::Exporter>> {
    unreachable!("no Parquet format without the parquet feature")
}

/// The packet dumper's options (`--dump-*`).
fn dump_config(a: &FlowsArgs) -> Result<Option<DumpConfig>, String> {
    let Some(dir) = &a.dump_dir else {
        return Ok(None);
    };
    let max_bytes = match a.dump_max_mib {
        Some(m) if m > 0.0 && m.is_finite() => Some((m * 1_048_576.0) as u64),
        Some(_) => return Err("--dump-max-mib must be a positive number".into()),
        None => None,
    };
    let period = match a.dump_seconds {
        Some(s) => Some(secs(s, "dump-seconds")?),
        None => None,
    };
    Ok(Some(DumpConfig {
        dir: dir.clone(),
        format: a.dump_format.unwrap_or_default(),
        direct: a.dump_direct,
        max_bytes,
        period,
        ports: a.dump_port.clone(),
        apps: a.dump_app.clone(),
        hold_bytes: match a.dump_hold_mib {
            m if m >= 0.0 && m.is_finite() => (m * 1_048_576.0) as u64,
            _ => return Err("--dump-hold-mib must be a number ≥ 0".into()),
        },
    }))
}

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
        // SIP messages and RTP payloads are read whole.
        snaplen: if a.tracks_calls() { 65_535 } else { a.snaplen },
        promiscuous: !a.no_promisc,
        fanout: Fanout::parse(&a.fanout).unwrap_or_default(),
        hw_timestamps: a.hw_timestamps,
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
    if !a.tracks_calls() && a.tracker.rtp_dir.is_some() {
        return crate::out_args::usage(
            "--rtp-dir keeps the RTP of tracked calls: give --voip-db, --calls-out or --streams-out",
        );
    }
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
            media: match &a.media_config {
                Some(p) => {
                    let text =
                        std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                    earlybird::analyze::media::MediaConfig::from_toml(
                        &text,
                        &p.display().to_string(),
                    )?
                }
                None => Default::default(),
            },
            sample: match &a.sample {
                Some(spec) => Some(earlybird::sample::Sampling::parse(
                    spec,
                    a.sample_seed.unwrap_or(1),
                )?),
                None => None,
            },
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
        timestamps: match earlybird::Timestamps::parse(&a.timestamps) {
            Ok(t) => t,
            Err(e) => return crate::fail(e),
        },
        dump: match dump_config(&a) {
            Ok(d) => d,
            Err(e) => return crate::fail(e),
        },
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
                true => "csv, jsonl, ipfix, parquet, null",
                false => "csv, jsonl, ipfix, null",
            };
            return crate::out_args::usage(format!("unknown format {f:?} ({known})"));
        }
        Some((_, Some(f))) => Some(f),
        None => None,
    };
    let model = match crate::model_arg::model_ref(a.model.as_deref(), a.no_model, a.threshold) {
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
    // (Standard output given to -f null is written nothing.)
    let discarded = |p: &&Path| forced == Some(Format::Null) && p.as_os_str() == "-";
    let outputs: Vec<&Path> = (a.outputs.iter().map(PathBuf::as_path))
        .filter(|p| !discarded(p))
        .chain(a.write.as_deref())
        .chain(a.events.as_deref())
        .chain(a.stats_out.as_deref())
        .chain(a.app_stats_out.as_deref())
        .chain(a.alarms_out.as_deref())
        .chain(a.calls_out.as_deref())
        .chain(a.streams_out.as_deref())
        .chain(
            (a.voip_db.as_deref())
                .filter(|d| !d.starts_with("postgres"))
                .map(Path::new),
        )
        .filter(|o| !earlybird::ipfix::is_network(o))
        .collect();
    let planned: Vec<&Path> = inputs.iter().flat_map(|i| i.paths()).collect();
    let read: Vec<&Path> = (a.files.iter().map(PathBuf::as_path))
        .chain(planned)
        .chain(
            a.model
                .as_deref()
                .filter(|m| m.as_os_str() != crate::model_arg::DEFAULT_NAME),
        )
        .chain(a.mark.as_deref())
        .chain(a.alarms.as_deref())
        .collect();
    if !a.check_config {
        if let Some(code) = crate::out_args::refuse(&outputs, &read) {
            return code;
        }
    }
    let mut formats = Vec::new();
    for out in &a.outputs {
        match Format::for_output(out, forced) {
            Ok(f) => formats.push(f),
            Err(e) => return crate::out_args::usage(e),
        }
    }
    // Outputs of the other record kinds: (kind, path, format).
    let mut row_outputs = Vec::new();
    for (kind, path) in [
        (&earlybird::VERDICTS, &a.events),
        (&earlybird::STATS, &a.stats_out),
        (&earlybird::APP_STATS, &a.app_stats_out),
        (&earlybird::ALARMS, &a.alarms_out),
    ] {
        if let Some(p) = path {
            match Format::for_output(p, None) {
                Ok(f) => row_outputs.push((kind, p, f)),
                Err(e) => return crate::out_args::usage(e),
            }
        }
    }
    let eopts = ExportOptions {
        early_packets: opts.flow.early_packets,
        class_names: model.classes.clone(),
        analyzed: {
            let mut f = earlybird::analyze::fields_of(&opts.flow.analyzers);
            if opts.flow.sample.is_some() {
                f.extend_from_slice(earlybird::sample::FIELDS);
            }
            f.into()
        },
    };
    let live = match live_config(&a) {
        Ok(l) => l,
        Err(e) => return crate::fail(e),
    };
    let ipfix = match a.ipfix.options(!a.unidirectional) {
        Ok(o) => o,
        Err(e) => return crate::out_args::usage(e),
    };
    let mut opts = opts;
    opts.alarms = a.alarm.clone();
    if let Some(path) = &a.alarms {
        let read = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| earlybird::AlarmSpec::parse_file(&t));
        match read {
            Ok(specs) => opts.alarms.extend(specs),
            Err(e) => return crate::fail(format!("{}: {e}", path.display())),
        }
    }
    if let Some(e) = opts.alarms.iter().find_map(|s| s.check().err()) {
        return crate::out_args::usage(e);
    }
    if let Some(dir) = &a.alarm_pcap_dir {
        if opts.alarms.is_empty() {
            return crate::out_args::usage("--alarm-pcap-dir needs an alarm (--alarm or --alarms)");
        }
        if a.alarm_pcap_window == 0 || a.alarm_pcap_ring_mib == 0 {
            return crate::out_args::usage(
                "--alarm-pcap-window and --alarm-pcap-ring-mib must be at least 1",
            );
        }
        opts.forensics = Some(earlybird::ForensicConfig {
            dir: dir.clone(),
            window: a.alarm_pcap_window.saturating_mul(SECOND),
            // The shards run ahead of the merged seconds the alarms see.
            margin: 60 * SECOND,
            max_bytes: a.alarm_pcap_ring_mib.saturating_mul(1 << 20),
        });
    }
    if a.check_config {
        crate::say("earlybird: configuration OK");
        return 0;
    }
    // The call stage's outputs, shared with its writer thread (finished
    // after the run).
    let call_outputs = match a.tracks_calls() {
        true => {
            a.tracker.prune(a.quiet);
            match crate::cmd_voip::CallOutputs::open(
                a.voip_db.as_deref(),
                a.calls_out.as_deref(),
                a.streams_out.as_deref(),
            ) {
                Ok(o) => Some(Arc::new(std::sync::Mutex::new(o))),
                Err(e) => return crate::fail(e),
            }
        }
        false => None,
    };
    if let Some(outs) = &call_outputs {
        let outs = outs.clone();
        opts.calls = Some(earlybird::CallStage::new(
            a.tracker.config(),
            Box::new(move |calls, alone| {
                outs.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .write(calls, alone)
            }),
        ));
    }
    let mut exporters = Vec::new();
    for (out, fmt) in a.outputs.iter().zip(formats) {
        let opened = if fmt == Format::Ipfix {
            earlybird::ipfix::open(out, &eopts, &ipfix)
        } else if let Some(rows) = a.parquet_row_group.filter(|_| is_parquet(fmt)) {
            open_parquet(None, out, &eopts, rows)
        } else {
            earlybird::open_exporter(fmt, out, &eopts)
        };
        match opened {
            Ok(e) => exporters.push(e),
            Err(e) => return crate::fail(e),
        }
    }
    for (kind, path, fmt) in row_outputs {
        let opened = match fmt {
            Format::Ipfix if kind.is(&earlybird::VERDICTS) => {
                earlybird::ipfix::open_events(path, &ipfix)
            }
            _ => match a.parquet_row_group.filter(|_| is_parquet(fmt)) {
                Some(rows) => open_parquet(Some(kind), path, &eopts, rows),
                None => earlybird::open_row_exporter(kind, fmt, path),
            },
        };
        match opened {
            Ok(e) => exporters.push(e),
            Err(e) => return crate::fail(e),
        }
    }
    // The metrics endpoint, serving from before the first packet to the
    // end of the run.
    let _server = match a.metrics_listen {
        Some(addr) => {
            let metrics = std::sync::Arc::new(earlybird::Metrics::new());
            opts.metrics = Some(metrics.clone());
            match earlybird::MetricsServer::start(addr, metrics) {
                Ok(s) => {
                    if !a.quiet {
                        crate::say(&format!(
                            "earlybird: metrics on http://{}/metrics",
                            s.addr()
                        ));
                    }
                    Some(s)
                }
                Err(e) => return crate::fail(e),
            }
        }
        None => None,
    };
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
    let call_errors = call_outputs
        .map(|o| o.lock().unwrap_or_else(|p| p.into_inner()).finish())
        .unwrap_or_default();
    let mut report = match report {
        Ok(r) => r,
        Err(e) => return crate::fail(e),
    };
    report.output_errors.extend(call_errors);
    if let (Some(s), false) = (&report.calls, a.quiet) {
        crate::cmd_voip::print_summary(std::io::stderr(), s, a.tracker.rtp_dir.is_some());
    }
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
        for e in &report.dump_errors {
            crate::say(&format!("earlybird: dump error: {e}"));
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
