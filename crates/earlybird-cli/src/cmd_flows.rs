//! `earlybird flows`: capture files or a live interface → flow records.
//!
//! The front over [`earlybird::Config`]: the options given on the command
//! line are laid over the `--config` file's (or the defaults), and the
//! engine plans, opens and runs from that one configuration. This file
//! adds what only a process has: signals, the progress bar, the summary
//! on stderr and the exit code. Exit 2 for an option or combination that
//! cannot run (and an output name that does not say its format), 1 for an
//! input, model or output that cannot be used (an output that is an
//! input), 3 when an output failed, 130 on SIGINT/SIGTERM (open flows
//! flushed). SIGHUP reopens the record files.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use clap::{ArgMatches, Args, CommandFactory};
use earlybird::{Config, Error, RunControl};
use serde::Serialize;

use crate::progress::Progress;

/// The options that only the command line has (not configuration keys).
pub const FRONT_ONLY: [&str; 4] = ["help", "config", "print-config", "check-config"];

#[derive(Args, Serialize)]
pub struct FlowsArgs {
    /// Capture files (pcap or pcapng; gzip, zstd or xz compressed too),
    /// directories of them (searched recursively), "-" for standard input or a
    /// FIFO (read as the packets arrive).
    ///
    /// Several inputs are read as one stream in time order (see --input-order):
    /// pieces of one capture join up; an input that starts before the latest
    /// packet read so far is a separate time domain (open flows end first). An
    /// input that is not a capture is skipped with a warning when there are
    /// others.
    #[arg(help_heading = "Input", value_name = "INPUT")]
    files: Vec<PathBuf>,
    /// Order of several inputs.
    ///
    /// Order of several inputs: "time" (default: by each file's first packet,
    /// ties in natural name order; the order given when a stream is among them)
    /// or "given" (as listed, directories in natural name order).
    #[arg(help_heading = "Input", long, value_name = "ORDER", default_value = "time", value_parser = ["time", "given"])]
    input_order: String,
    /// Capture live from this interface instead of files.
    ///
    /// Capture live from this Linux interface instead of files, from several at
    /// once given as a comma-separated list (eth0,eth1: the two ports of a tap,
    /// one direction each, merged in arrival order), or from every interface
    /// with "any" (AF_PACKET TPACKET_V3 rings; one socket per shard in a kernel
    /// fanout group that keeps both directions of a session on one shard, see
    /// --fanout; VLAN tags the kernel took off are put back).
    ///
    /// Needs root or CAP_NET_RAW. Runs until SIGINT/SIGTERM or --duration, then
    /// flushes every flow.
    #[arg(help_heading = "Input", short, long, value_name = "IFACE")]
    interface: Option<String>,
    /// Live capture: stop after this many seconds.
    #[arg(help_heading = "Input", long, value_name = "SECS")]
    duration: Option<f64>,
    /// Live: bytes kept of each frame.
    ///
    /// Live capture: bytes kept of each frame (headers are what flows need; the
    /// original length is always counted).
    #[arg(
        help_heading = "Input",
        long,
        value_name = "BYTES",
        default_value_t = 256
    )]
    snaplen: u32,
    /// Live: MiB of receive ring per shard.
    ///
    /// Live capture: MiB of receive ring per shard (1 MiB blocks).
    #[arg(help_heading = "Input", long, value_name = "MIB", default_value_t = 64)]
    ring_mib: u32,
    /// Live capture: do not put the interface in promiscuous mode.
    #[arg(help_heading = "Input", long)]
    no_promisc: bool,
    /// Live: turn on the NIC's hardware timestamps.
    ///
    /// Live capture: turn on the NIC's hardware receive timestamps
    /// (SIOCSHWTSTAMP, every packet) for the run, and back off after it.
    ///
    /// Without it, hardware stamps are used only when the NIC's stamping is
    /// already on; an interface that offers none is an error. The summary says
    /// which stamp each packet got.
    #[arg(help_heading = "Input", long)]
    hw_timestamps: bool,
    /// Live, several shards: how the kernel spreads packets.
    ///
    /// Live capture with several shards: how the kernel spreads packets over
    /// their sockets.
    ///
    /// "hosts" (default): by the outer IP address pair, so every flow stays
    /// whole in one shard, tunnelled flows and fragments included. "flows": by
    /// the kernel's hash of outer addresses and ports (spreads few busy hosts
    /// better, but may split the directions of a tunnelled flow or a datagram's
    /// fragments).
    #[arg(help_heading = "Input", long, value_name = "HOW", default_value = "hosts", value_parser = ["hosts", "flows"])]
    fanout: String,
    /// Flow record output (repeat for several).
    ///
    /// Output file for the flow records ("-" = standard output).
    ///
    /// Repeat to write several outputs. The extension names the format: .csv,
    /// .jsonl or .ndjson (JSON lines: one object per line; .json is refused, it
    /// would not be one JSON document), .parquet (typed columns, zstd; the file
    /// is readable once the run ends, or once rotated with SIGHUP after being
    /// moved). Any other extension is an error; a name without one needs
    /// --format (a device or FIFO such as /dev/null takes CSV). IPFIX:
    /// FILE.ipfix, or a collector as ipfix+udp://HOST:PORT or
    /// ipfix+tcp://HOST:PORT (docs/IPFIX.md). An output may not be an input
    /// (same file, even through a link) nor be named twice. SIGHUP reopens the
    /// files (log rotation); live runs flush them about once a second.
    #[arg(
        help_heading = "Outputs",
        short,
        long = "output",
        value_name = "OUT",
        default_value = "-"
    )]
    outputs: Vec<PathBuf>,
    /// Rows per Parquet row group.
    ///
    /// Rows per row group of every Parquet output (-o and the other record
    /// outputs): a row group is written out when it holds this many rows, and
    /// the last one at the end.
    ///
    /// Smaller groups let readers skip more and, in a live run, reach the disk
    /// sooner; larger ones compress better. Default 65536.
    #[arg(help_heading = "Outputs", long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..))]
    parquet_row_group: Option<u64>,
    /// Early-verdict event records to this file.
    ///
    /// Early-verdict events: besides each flow's final record, write one record
    /// the moment its flow is classified (key, verdict, confidence, the early
    /// packet it was taken at, and the packet time it took) to this file ("-" =
    /// standard output; the extension names the format as for -o).
    ///
    /// Needs a model.
    #[arg(help_heading = "Outputs", long, value_name = "OUT")]
    events: Option<PathBuf>,
    /// Per-second statistics to this file.
    ///
    /// Per-second statistics: one row per second of packet time (packets,
    /// bytes, skipped by reason, flows new/ended by reason/open, verdicts), the
    /// shards' figures merged, to this file ("-" = standard output; the
    /// extension names the format as for -o).
    ///
    /// A file gives the same rows at any speed; a live capture writes each
    /// second once every shard has passed it.
    #[arg(help_heading = "Outputs", long, value_name = "OUT")]
    stats_out: Option<PathBuf>,
    /// Per-second statistics per application.
    ///
    /// Per-second statistics per application (the verdicts given, and the flows
    /// that ended with their packets and bytes), per transport (tcp, udp, icmp,
    /// other) and per port class of TCP and UDP flows (tcp/443, udp/53, ... for
    /// listed services, else tcp/system, tcp/registered, tcp/ephemeral by the
    /// server port; see docs/OPERATIONS.md): one row per second and name with
    /// anything counted, to this file.
    ///
    /// A flow's packets and bytes count in the second it ends.
    #[arg(help_heading = "Outputs", long, value_name = "OUT")]
    app_stats_out: Option<PathBuf>,
    /// Read the configuration from this TOML file.
    ///
    /// Read the configuration from this TOML file; the command line's options
    /// are laid over it (they add to lists and replace single values).
    ///
    /// Each key is a long option (idle-timeout = 30, quiet = true, analyzer =
    /// ["payload"]); the options of the dumper, IPFIX and the alarms' pcaps are
    /// in the tables [dump], [ipfix] and [alarm-pcap] ([dump] dir = "/srv/dump"
    /// is --dump-dir); "inputs" lists capture files; [[alarm]] tables are
    /// alarms. An unknown key is an error naming its line. See --print-config
    /// and docs/OPERATIONS.md.
    #[arg(help_heading = "Probe", long, value_name = "FILE.toml")]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Print the effective configuration and exit.
    ///
    /// Print the effective configuration (defaults, --config file and command
    /// line together) as a TOML file --config reads, and exit.
    #[arg(help_heading = "Probe", long)]
    #[serde(skip)]
    print_config: bool,
    /// Check the configuration and exit.
    ///
    /// Check the options (from --config and the command line) and exit: 0 and
    /// "configuration OK" when a run would start with them (the model and alarm
    /// files are read and capture files looked up; no interface, output or
    /// directory is opened).
    #[arg(help_heading = "Probe", long)]
    #[serde(skip)]
    check_config: bool,
    /// Watch a per-second series for changes.
    ///
    /// Watch a per-second series for sudden changes: SERIES[:METHOD], where
    /// SERIES is a field of --stats-out (packets, bytes, flows_new,
    /// skipped_not_ip, ...) and METHOD ewma (default: 6 standard deviations
    /// above the exponentially weighted mean), cusum (small lasting rises) or
    /// seasonal (against the same 5-minute slot of earlier days).
    ///
    /// Repeat for several. Raised and cleared alarms go to --alarms-out and the
    /// metrics.
    #[arg(help_heading = "Probe", long = "alarm", value_name = "SPEC", value_parser = earlybird::AlarmSpec::parse_short)]
    alarm: Vec<earlybird::AlarmSpec>,
    /// Alarms from a TOML file.
    ///
    /// Alarms from a TOML file: [[alarm]] tables with series, method, direction
    /// (up, down, both), alpha, threshold, min_change, warmup, drift, period,
    /// bucket (docs/OPERATIONS.md).
    #[arg(help_heading = "Probe", long, value_name = "FILE.toml")]
    alarms: Option<PathBuf>,
    /// Alarm records to this file.
    ///
    /// Alarm records (raised and cleared) to this file ("-" = standard output;
    /// the extension names the format as for -o).
    #[arg(help_heading = "Probe", long, value_name = "OUT")]
    alarms_out: Option<PathBuf>,
    /// Pcaps of the packets before each alarm.
    ///
    /// When an alarm is raised, write the packets of the seconds before it
    /// (--alarm-pcap-window) to a pcap in this directory (alarm-SECOND-
    /// SERIES.pcap; one file per shard with several).
    ///
    /// Each shard keeps its recent packets in a ring of bounded size.
    #[arg(help_heading = "Probe", long, value_name = "DIR")]
    alarm_pcap_dir: Option<PathBuf>,
    /// Seconds of packets in an alarm's pcap.
    ///
    /// Seconds of packets an alarm's pcap holds, up to and including the second
    /// of the alarm.
    #[arg(
        help_heading = "Probe",
        long,
        value_name = "SECS",
        default_value_t = 10
    )]
    alarm_pcap_window: u64,
    /// MiB of recent packets kept for alarms.
    ///
    /// MiB of recent packets the rings keep for the alarms' pcaps, all shards
    /// together (what does not fit is not in the pcap).
    #[arg(
        help_heading = "Probe",
        long,
        value_name = "MIB",
        default_value_t = 256
    )]
    alarm_pcap_ring_mib: usize,
    /// Serve Prometheus metrics on this address.
    ///
    /// Serve the per-second statistics as Prometheus metrics on
    /// http://ADDR/metrics while the run lasts: PORT or :PORT listens on
    /// 127.0.0.1 only; HOST:PORT (e.g. 0.0.0.0:9464) as given.
    #[arg(help_heading = "Probe", long, value_name = "ADDR", value_parser = earlybird::metrics_address)]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Record format where a name does not say it.
    ///
    /// Record format: csv, jsonl, ipfix, parquet or null (discard; for measuring the
    /// engine alone, with no -o file).
    ///
    /// Standard output is CSV unless this says otherwise; a file's extension
    /// must agree with it.
    #[arg(help_heading = "Outputs", short, long, value_name = "FORMAT")]
    format: Option<String>,
    /// Unidirectional flows (one per direction) instead of sessions.
    #[arg(help_heading = "Flows", long)]
    unidirectional: bool,
    /// Seconds of silence that end a flow.
    ///
    /// Seconds without a packet after which a flow ends (reason "idle").
    #[arg(
        help_heading = "Flows",
        long,
        value_name = "SECS",
        default_value_t = 15.0
    )]
    idle_timeout: f64,
    /// Seconds after which a long flow is cut.
    ///
    /// Seconds after which a long flow is cut (reason "active") and continues
    /// as a new flow.
    #[arg(
        help_heading = "Flows",
        long,
        value_name = "SECS",
        default_value_t = 1800.0
    )]
    active_timeout: f64,
    /// Seconds late packets join a closed TCP flow.
    ///
    /// Seconds late packets (final ACKs) still join a TCP connection after FINs
    /// in both directions or a RST.
    #[arg(
        help_heading = "Flows",
        long,
        value_name = "SECS",
        default_value_t = 2.0
    )]
    tcp_close_timeout: f64,
    /// Early packets kept per flow.
    ///
    /// N: size, direction and inter-arrival of the first N packets of each flow
    /// are kept in its record (1..=32).
    #[arg(
        help_heading = "Flows",
        short = 'n',
        long,
        value_name = "N",
        default_value_t = 4
    )]
    early_packets: usize,
    /// Flow table capacity per shard.
    ///
    /// Flow table capacity per shard; when full, the least recently seen of a
    /// few candidate flows is ended with reason "evicted" (counted).
    #[arg(
        help_heading = "Flows",
        long,
        value_name = "FLOWS",
        default_value_t = 1_000_000
    )]
    max_flows: usize,
    /// Per-flow statistics: full or basic.
    ///
    /// Per-flow statistics: "full" keeps size and inter-arrival
    /// min/max/mean/std and TCP flag counts per direction; "basic" keeps only
    /// packets, bytes, times and early packets (less memory per flow: those
    /// record fields are empty in CSV, null in JSON lines).
    #[arg(help_heading = "Flows", long, value_name = "LEVEL", default_value = "full", value_parser = ["full", "basic"])]
    stats: String,
    /// Per-flow analyzer to run.
    ///
    /// Per-flow analyzer to run (repeat, or comma-separate several); each adds
    /// its fields after the record's own (docs/RECORD_FIELDS.md).
    ///
    /// "payload": transport payload packets and bytes per direction, and the
    /// first 16 payload bytes of each direction in hex. "media": audio, video
    /// or file transfer of UDP flows from packet sizes and inter-arrivals
    /// (docs/MEDIA.md).
    #[arg(
        help_heading = "Flows",
        long = "analyzer",
        value_name = "NAME",
        value_delimiter = ','
    )]
    analyzers: Vec<String>,
    /// The media analyzer's TOML of intervals.
    ///
    /// TOML file of the media analyzer's intervals and thresholds
    /// (docs/MEDIA.md; default: thesis Table 6.2).
    #[arg(help_heading = "Flows", long, value_name = "FILE")]
    media_config: Option<PathBuf>,
    /// Batch-timestamp correction of capture files.
    ///
    /// Batch-timestamp correction of capture files: runs of packets with the
    /// same timestamp (engines that stamp a whole batch) get times spread over
    /// the gap since the previous stamp, uniformly (udts) or by packet size
    /// (wdts); off (default) keeps the stamps.
    ///
    /// Any number of shards (each packet gets the time one shard gives it).
    /// With udts or wdts, a file whose first packets mostly share stamps is
    /// warned about.
    #[arg(help_heading = "Input", long, value_name = "MODE", default_value = "off", value_parser = ["off", "udts", "wdts"])]
    timestamps: String,
    /// Packet sampling: keep 1 packet in N.
    ///
    /// Packet sampling before the flow table, to keep up with links faster than
    /// a shard can count: POLICY:N keeps 1 packet in N by count.
    ///
    /// systematic: the first of every N; stratified: one at random in every N;
    /// random: each packet with probability 1/N. Each shard samples the batches
    /// it reads (with several shards the cycles run per reading shard; the rate
    /// is 1 in N all the same). Skipped packets are counted in the summary
    /// ("sampling:"), never decoded. Records get the fields sampling,
    /// sampling_rate, packets_estimated and bytes_estimated (seen × N); the
    /// early packets' inter-arrivals, the classifier's and the media analyzer's
    /// are divided by N (thesis Ch. 6.5). Not with -w. See docs/SAMPLING.md.
    #[arg(help_heading = "Input", long, value_name = "POLICY:N")]
    sample: Option<String>,
    /// Seed of the --sample draws.
    ///
    /// Seed of the stratified and random draws of --sample (default 1): the
    /// same seed, inputs and number of shards keep the same packets.
    #[arg(help_heading = "Input", long, value_name = "SEED")]
    sample_seed: Option<u64>,
    /// Flow-table hash.
    ///
    /// Flow hash for the flow-table index: fold (default: the symmetric
    /// multiply-fold hash that also picks the shard, one hash per packet) or
    /// toeplitz (RSS Toeplitz with the symmetric 0x6d5a key).
    ///
    /// Shards are always chosen by the symmetric shard hash (each endpoint
    /// hashed, then added).
    #[arg(help_heading = "Flows", long, value_name = "HASH", default_value = "fold", value_parser = ["fold", "toeplitz"])]
    hash: String,
    /// Number of shards (threads).
    ///
    /// Number of shards (threads), each owning the flows whose symmetric hash
    /// selects it.
    ///
    /// The shards take turns reading the input: each batch is decoded once and
    /// its packets handed to their shards.
    #[arg(
        help_heading = "Flows",
        short,
        long,
        value_name = "N",
        default_value_t = 1
    )]
    shards: usize,
    /// Pin shard i to CPU core i.
    #[arg(help_heading = "Flows", long)]
    pin: bool,
    /// Batches queued for a slow output, then drop.
    ///
    /// Never let a slow output stall the shards: queue up to this many record
    /// batches per shard, then drop and count (default for files: wait, so a
    /// file run loses nothing; for a live interface: 64).
    #[arg(help_heading = "Flows", long, value_name = "BATCHES")]
    drop_after: Option<usize>,
    /// DSCP marking map for the -w copy.
    ///
    /// DSCP marking map for the packets written with -w: packets of a flow
    /// after its verdict carry its class's DSCP in their innermost IP header
    /// (IPv4 checksum updated).
    ///
    /// Needs one shard. TOML: an optional `default = DSCP` (classes not listed,
    /// and "unknown" verdicts), then a [classes] table of class name (as the
    /// model names it, quoted if it has a dot; "unknown" = no verdict) = DSCP,
    /// where a DSCP is a number 0-63 or a PHB name (CS0-CS7, AF11-AF43, EF, LE,
    /// DF). Classes neither listed nor covered by default are left unchanged.
    /// Example: default = "CS0" / [classes] / "TLS.YouTube" = "AF41" / DNS =
    /// 46.
    #[arg(help_heading = "Outputs", long, value_name = "FILE.toml")]
    mark: Option<PathBuf>,
    /// Copy every packet read to this pcap.
    ///
    /// Write a copy of every packet read, in input order, to this classic pcap
    /// file (nanosecond timestamps, the input's link type; packets of another
    /// link type in a pcapng input are counted and left out), DSCP-marked per
    /// --mark.
    ///
    /// Capture files only.
    #[arg(help_heading = "Outputs", short = 'w', long = "write", value_name = "OUT.pcap", value_parser = crate::out_args::pcap_path)]
    write: Option<PathBuf>,
    /// Dump packets to rotating pcaps here.
    ///
    /// Dump packets to rotating classic pcap files (nanosecond stamps; or
    /// pcapng, see --dump-format) in this directory, created if missing; files
    /// and live.
    ///
    /// Each shard writes the packets it runs to its own files, named eb-
    /// SECONDS.NANOS-sSHARD-SEQ.pcap (.pcapng) after their first packet (names
    /// sort by time; merge shards with mergecap). A write failure (disk full)
    /// is counted and reported; the flows go on.
    #[arg(help_heading = "Outputs", long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// Dump file format.
    ///
    /// Format of the dump files: pcap (classic pcap; a packet of another link
    /// type than the file's starts a new file) or pcapng (one interface per
    /// link type in the same file, nanosecond timestamps).
    ///
    /// Default pcap.
    #[arg(help_heading = "Outputs", long, value_name = "FORMAT", value_parser = dump_format)]
    dump_format: Option<String>,
    /// Write the dump files past the page cache.
    ///
    /// Write the dump files past the page cache (O_DIRECT): the disk reads the
    /// dumper's buffer, the kernel copies nothing and the page cache keeps what
    /// it held.
    ///
    /// Classic pcap on a file system that takes direct writes (ext4, XFS,
    /// btrfs; checked before the run starts).
    #[arg(help_heading = "Outputs", long)]
    dump_direct: bool,
    /// Start a new dump file before one would exceed this size.
    #[arg(help_heading = "Outputs", long, value_name = "MIB")]
    dump_max_mib: Option<f64>,
    /// New dump file every N seconds.
    ///
    /// Start a new dump file at each multiple of this many seconds of packet
    /// time.
    #[arg(help_heading = "Outputs", long, value_name = "SECONDS")]
    dump_seconds: Option<f64>,
    /// Dump only flows with these verdicts.
    ///
    /// Dump only the packets of flows whose verdict is one of these classes (as
    /// the model names them; "unknown" = flows the model could not label).
    ///
    /// A flow's packets from before its verdict are held (see --dump-hold-mib)
    /// and written once the verdict matches.
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "NAME,...",
        value_delimiter = ','
    )]
    dump_app: Vec<String>,
    /// Memory for packets awaiting a verdict.
    ///
    /// With --dump-app: memory for the packets of flows without a verdict yet,
    /// all shards together; what does not fit is counted and not dumped.
    ///
    /// 0: hold none, dump from the packet after the verdict on.
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "MIB",
        default_value_t = 64.0
    )]
    dump_hold_mib: f64,
    /// Dump only flows with these ports.
    ///
    /// Dump only the packets of flows with one of these ports (either side).
    ///
    /// With --dump-app too, a flow must match both.
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "N,...",
        value_delimiter = ','
    )]
    dump_port: Vec<u16>,
    /// Do not print the summary on stderr.
    #[arg(help_heading = "Probe", short, long)]
    quiet: bool,
    /// Do not show the progress bar (files) or the packet counter (live).
    #[arg(help_heading = "Probe", long)]
    no_progress: bool,
    /// Label flows with this model file.
    ///
    /// Label flows with this model file instead of the built-in default model
    /// (see `earlybird train`); `default` names the built-in model.
    #[arg(help_heading = "Classification", long, value_name = "MODEL")]
    model: Option<PathBuf>,
    /// Confidence below which a verdict is unknown.
    ///
    /// Verdicts with a lower confidence are reported as unknown (0 to 1;
    /// replaces the threshold stored in the model, see `earlybird model info`).
    #[arg(help_heading = "Classification", long, value_name = "CONFIDENCE")]
    threshold: Option<f32>,
    /// Do not label flows (no classifier runs).
    #[arg(help_heading = "Classification", long)]
    no_model: bool,
    #[command(flatten)]
    #[serde(flatten)]
    ipfix: Box<crate::ipfix_args::IpfixArgs>,
    /// Track calls into this call database.
    ///
    /// Track calls beside the flows (docs/VOIP.md): add the calls to this call
    /// database, as `earlybird voip --db` does (a SQLite file, created if
    /// missing, or postgres://user@host:port/db).
    ///
    /// With this, --calls-out or --streams-out each shard passes its SIP, RTP
    /// and RTCP packets to one call stage thread; a live capture then keeps
    /// whole frames (snaplen 65535).
    #[arg(help_heading = "VoIP", long, value_name = "DB")]
    voip_db: Option<String>,
    /// Call records to this file.
    ///
    /// Call records to this file (.csv, .jsonl/.json, .parquet), as `earlybird
    /// voip -o`.
    #[arg(help_heading = "VoIP", long, value_name = "FILE")]
    calls_out: Option<PathBuf>,
    /// RTP stream records to this file.
    ///
    /// RTP stream records (every stream, with or without a call), as `earlybird
    /// voip --streams-out`.
    #[arg(help_heading = "VoIP", long, value_name = "FILE")]
    streams_out: Option<PathBuf>,
    #[command(flatten)]
    #[serde(flatten)]
    tracker: crate::cmd_voip::TrackerArgs,
}

/// `--dump-format`: a dump format's name.
fn dump_format(s: &str) -> Result<String, String> {
    earlybird::DumpFormat::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// The command's arguments as clap defines them (for the option walk).
pub fn command() -> clap::Command {
    crate::Cli::command()
        .find_subcommand("flows")
        .cloned()
        .unwrap_or_else(|| clap::Command::new("flows"))
}

/// The options given on the command line, as configuration keys (long
/// option names; `inputs` for the capture files).
pub fn given_options(a: &FlowsArgs, m: &ArgMatches) -> Result<toml::Table, String> {
    let typed = toml::Table::try_from(a).map_err(|e| e.to_string())?;
    let mut out = toml::Table::new();
    for arg in command().get_arguments() {
        let id = arg.get_id().as_str();
        if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let key = match (id, arg.get_long()) {
            ("files", _) => "inputs",
            (_, Some(long)) if FRONT_ONLY.contains(&long) => continue,
            (_, Some(long)) => long,
            (_, None) => continue,
        };
        if let Some(v) = typed.get(id) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Ok(out)
}

/// The run's configuration: the defaults, the `--config` file, then the
/// command line's options.
fn configuration(a: &FlowsArgs, m: &ArgMatches) -> earlybird::Result<Config> {
    let mut config = match &a.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    let given = given_options(a, m).map_err(Error::Usage)?;
    config.overlay(given, "command line")?;
    Ok(config)
}

/// Prints `e` and returns its exit code: 2 for usage, 1 otherwise.
fn exit(e: Error) -> i32 {
    match e {
        Error::Usage(_) | Error::Setting { .. } => crate::out_args::usage(e),
        e => crate::fail(e),
    }
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

pub fn run(a: FlowsArgs, m: &ArgMatches) -> i32 {
    let config = match configuration(&a, m) {
        Ok(c) => c,
        Err(e) => return exit(e),
    };
    for w in &config.warnings {
        crate::say(&format!("earlybird: warning: {w}"));
    }
    if a.print_config {
        print!("{}", config.to_toml());
        return 0;
    }
    if a.check_config {
        if let Err(e) = config.check() {
            return exit(e);
        }
        crate::say("earlybird: configuration OK");
        return 0;
    }
    let plan = match config.plan() {
        Ok(p) => p,
        Err(e) => return exit(e),
    };
    let quiet = config.quiet;
    let removed = config.prune_rtp();
    if let (true, false, Some(dir)) = (removed > 0, quiet, &config.rtp_dir) {
        crate::say(&format!(
            "earlybird: removed {removed} calls older than {} days from {}",
            config.rtp_keep_days.unwrap_or_default(),
            dir.display()
        ));
    }
    let total = plan.total_bytes();
    let live = plan.live().map(|l| l.interface.clone());
    let probe = match plan.open() {
        Ok(p) => p,
        Err(e) => return crate::fail(e),
    };
    if let (Some(addr), false) = (probe.metrics_addr(), quiet) {
        crate::say(&format!("earlybird: metrics on http://{addr}/metrics"));
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
    let show = !config.no_progress && !quiet;
    let _bar = match (&live, total) {
        (Some(iface), _) => {
            if !quiet {
                let n = config.shards;
                crate::say(&format!(
                    "earlybird: capturing on {iface} with {n} shard{} (SIGINT or SIGTERM to stop)",
                    if n == 1 { "" } else { "s" }
                ));
            }
            Progress::live(show, ctl.progress.clone())
        }
        (None, Some(total)) => Progress::start(show, total, ctl.progress.clone()),
        (None, None) => Progress::bytes(show, ctl.progress.clone()),
    };
    let report = match probe.run(&ctl) {
        Ok(r) => r,
        Err(e) => return crate::fail(e),
    };
    drop(_bar);
    if let (Some(s), false) = (&report.calls, quiet) {
        crate::cmd_voip::print_summary(std::io::stderr(), s, config.rtp_dir.is_some());
    }
    if !quiet {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration key of long option `long` (`dump-dir` is `[dump]
    /// dir`), as a TOML line setting it to `value`.
    fn line(long: &str, value: &str) -> String {
        for table in ["alarm-pcap", "dump", "ipfix"] {
            if let Some(k) = long.strip_prefix(table).and_then(|k| k.strip_prefix('-')) {
                return format!("[{table}]\n{k} = {value}\n");
            }
        }
        format!("{long} = {value}\n")
    }

    #[test]
    fn every_long_option_is_a_configuration_key() {
        let mut walked = 0;
        for arg in command().get_arguments() {
            let key = match (arg.get_id().as_str(), arg.get_long()) {
                ("files", _) => "inputs",
                (_, Some(l)) if FRONT_ONLY.contains(&l) => continue,
                (_, Some(l)) => l,
                (id, None) => panic!("--{id} has no long name"),
            };
            // A date is a value of no key's type: a key that exists says
            // so ("invalid type"); one that does not is refused as unknown.
            let text = line(key, "1979-05-27");
            let e = Config::from_toml(&text, "walk").unwrap_err().to_string();
            assert!(!e.contains("unknown field"), "--{key}: {e}");
            walked += 1;
        }
        assert!(walked > 60, "{walked} options walked");
    }

    #[test]
    fn the_command_lines_defaults_are_the_configurations() {
        let defaults = toml::Table::try_from(Config::default()).unwrap();
        let lookup = |key: &str| -> Option<toml::Value> {
            let text = line(key, "0");
            let (table, k) = match text.strip_prefix('[') {
                Some(t) => {
                    let (table, rest) = t.split_once("]\n").unwrap();
                    (Some(table), rest.split(" = ").next().unwrap().to_string())
                }
                None => (None, key.to_string()),
            };
            match table {
                Some(t) => defaults.get(t)?.get(&k).cloned(),
                None => defaults.get(&k).cloned(),
            }
        };
        let mut compared = 0;
        for arg in command().get_arguments() {
            let (Some(long), [default]) = (arg.get_long(), arg.get_default_values()) else {
                continue;
            };
            if FRONT_ONLY.contains(&long) || long == "output" {
                continue;
            }
            let default = default.to_str().unwrap();
            let ours = lookup(long).unwrap_or_else(|| panic!("--{long}: no default"));
            let same = match &ours {
                toml::Value::String(s) => s == default,
                toml::Value::Integer(i) => default.parse::<i64>().ok() == Some(*i),
                toml::Value::Float(f) => default.parse::<f64>().ok() == Some(*f),
                toml::Value::Boolean(b) => default.parse::<bool>().ok() == Some(*b),
                _ => false,
            };
            assert!(
                same,
                "--{long}: clap says {default}, the configuration {ours}"
            );
            compared += 1;
        }
        assert!(compared > 20, "{compared} defaults compared");
    }

    #[test]
    fn the_command_line_lays_its_options_over_the_file() {
        use clap::FromArgMatches;
        let m = command().get_matches_from([
            "flows",
            "a.pcap",
            "--idle-timeout",
            "30",
            "--dump-dir",
            "/d",
            "--alarm",
            "packets:cusum",
            "-o",
            "x.csv",
            "--ipfix-mtu",
            "1200",
            "--voip-db",
            "calls.db",
            "--max-calls",
            "7",
        ]);
        let a = FlowsArgs::from_arg_matches(&m).unwrap();
        let mut c = Config::from_toml("output = [\"a.jsonl\"]\nshards = 2\n", "f").unwrap();
        c.overlay(given_options(&a, &m).unwrap(), "command line")
            .unwrap();
        assert_eq!(c.inputs, [PathBuf::from("a.pcap")]);
        assert_eq!(c.idle_timeout, 30.0);
        assert_eq!(c.shards, 2, "not given: the file's");
        assert_eq!(c.output, [PathBuf::from("a.jsonl"), PathBuf::from("x.csv")]);
        assert_eq!(c.dump.dir, Some(PathBuf::from("/d")));
        assert_eq!(c.alarm[0].series, "packets");
        assert_eq!(c.ipfix.mtu, 1200);
        assert_eq!(c.voip_db.as_deref(), Some("calls.db"));
        assert_eq!(c.max_calls, 7);
        assert_eq!(c.snaplen, 256, "clap's default is not a given option");
    }
}
