//! The options of `earlybird flows` as clap defines them: each is a key
//! of the engine's configuration (`earlybird::Config`) of the same long
//! name, grouped under headings for `--help`; `cmd_flows.rs` lays the ones
//! given over the `--config` file. A summary sentence opens each doc
//! comment (what `-h` shows); the rest is `--help`'s.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

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
    /// Only the packets this capture filter keeps (tcpdump's syntax).
    ///
    /// Read only the packets this capture filter keeps: an expression in
    /// tcpdump's syntax ("tcp port 443", "host 10.0.0.1 and not udp", "vlan
    /// 100"), compiled by libpcap.
    ///
    /// Files and pipes: run over every packet before the shards, as `tcpdump
    /// -r FILE -w - EXPRESSION | earlybird flows -` would. Live: run in the
    /// kernel on each socket. The packets left out are counted ("filtered" in
    /// the summary, earlybird_filtered_packets_total on /metrics).
    #[arg(help_heading = "Input", long, value_name = "EXPRESSION")]
    filter: Option<String>,
    /// Live: af-packet (default) or af-xdp.
    ///
    /// Live capture: how the interface is read. "af-packet" (default):
    /// AF_PACKET TPACKET_V3 rings, one per shard. "af-xdp": an AF_XDP socket on
    /// the interface's receive queue 0, frames read in place (zero-copy where
    /// the driver offers it, copy mode otherwise, as on veth), the redirecting
    /// XDP program attached through a BPF link the kernel removes when the
    /// process ends; one shard, batch timestamps.
    ///
    /// AF_XDP takes the packets away from the host's stack: it is for a mirror
    /// or a dedicated port, and an interface with addresses is refused unless
    /// --xdp-take-traffic.
    #[arg(help_heading = "Input", long, value_name = "HOW", default_value = "af-packet", value_parser = ["af-packet", "af-xdp"])]
    capture: String,
    /// Live, AF_XDP: capture an interface that has addresses.
    ///
    /// With --capture af-xdp: capture an interface that has addresses anyway;
    /// its packets no longer reach the host's stack while the capture runs.
    #[arg(help_heading = "Input", long)]
    xdp_take_traffic: bool,
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
    /// ipfix+tcp://HOST:PORT (docs/IPFIX.md). NetFlow: netflow9+udp://HOST:PORT
    /// or netflow5+udp://HOST:PORT (docs/NETFLOW.md). ClickHouse:
    /// clickhouse+http://HOST:PORT/TABLE (docs/OPERATIONS.md; the table's DDL
    /// is docs/clickhouse_flows.sql). An output may not be an input
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
    /// Close each Parquet file as a part every this many rows.
    ///
    /// Once a Parquet output's file holds this many rows it is finished (its
    /// footer written) and renamed to STEM.NNNNNN.parquet beside it, and a new
    /// file starts at its name: a probe killed (SIGKILL, a crash) leaves every
    /// part readable, and only the rows since the last part unreadable. Read
    /// STEM*.parquet. Pair it with --parquet-row-group of the same size or
    /// smaller. Default: one file.
    #[arg(help_heading = "Outputs", long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..))]
    parquet_part_rows: Option<u64>,
    /// Seed of the records' Community ID.
    ///
    /// Seed (0 to 65535) of the Community ID v1 in every flow record (field
    /// community_id): 0, the default, gives the IDs Zeek, Suricata and Arkime
    /// give with theirs unset; another seed keeps the IDs of one domain apart.
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "SEED",
        default_value_t = 0
    )]
    community_id_seed: u16,
    /// Leave the Community ID out of the records.
    ///
    /// Leave the Community ID out: the community_id field of flow and stream
    /// records is empty (null in JSON lines, Parquet and ClickHouse, zeros in
    /// NetFlow v9) and IPFIX's templates go without earlybirdCommunityId. It
    /// saves one SHA-1 a record, for collectors that join on nothing.
    #[arg(help_heading = "Outputs", long)]
    no_community_id: bool,
    /// Flow records held for a ClickHouse output while its server is away.
    ///
    /// A ClickHouse output (clickhouse+http://…) posts its records from a
    /// queue; while the server is stopped, unreachable or slow, up to N
    /// records wait in memory (about 1.2 KB each as JSON) and are inserted once it
    /// takes them again. Beyond N, batches are dropped and counted in the
    /// summary (exit code 3).
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "N",
        default_value_t = 100_000
    )]
    clickhouse_hold: usize,
    /// Service map laid over the shipped one (repeat for several).
    ///
    /// A map of host names to application and category (docs/SERVICES.md)
    /// laid over the shipped one: its entries win, and a later map's win
    /// over an earlier one's. A map that does not read is an error naming
    /// the file and line.
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    services: Vec<PathBuf>,
    /// What records keep of names: keep, hash or drop.
    ///
    /// The names the records carry (sni, http_host, http_user_agent,
    /// dns_query, dns_answers) kept as read (keep), replaced by a keyed hash
    /// (hash: the first 16 bytes of HMAC-SHA256 under --names-key, in hex)
    /// or left empty (drop). The label (app, category) is taken from the
    /// names first.
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "MODE",
        default_value = "keep",
        value_parser = ["keep", "hash", "drop"]
    )]
    names: String,
    /// The key of --names hash.
    ///
    /// The key of --names hash. Default "earlybird", a public key: the same
    /// name gives the same hash everywhere, but anyone can hash a list of
    /// names to find it; set your own to keep names private.
    #[arg(help_heading = "Outputs", long, value_name = "KEY")]
    names_key: Option<String>,
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
    pub(crate) config: Option<PathBuf>,
    /// Print the effective configuration and exit.
    ///
    /// Print the effective configuration (defaults, --config file and command
    /// line together) as a TOML file --config reads, and exit.
    #[arg(help_heading = "Probe", long)]
    #[serde(skip)]
    pub(crate) print_config: bool,
    /// Check the configuration and exit.
    ///
    /// Check the options (from --config and the command line) and exit: 0 and
    /// "configuration OK" when a run would start with them (the model and alarm
    /// files are read and capture files looked up; no interface, output or
    /// directory is opened).
    #[arg(help_heading = "Probe", long)]
    #[serde(skip)]
    pub(crate) check_config: bool,
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
    /// (docs/MEDIA.md). "http": Host and User-Agent of the first HTTP/1.x
    /// request. "ssh": both SSH identification strings. "dns": name and
    /// type of the first DNS query, response code and answers
    /// (docs/OPERATIONS.md, "Payload names"). "tls": SNI, ALPN, version,
    /// JA4, JA3 and ECH of TLS and QUIC handshakes (docs/OPERATIONS.md,
    /// "TLS and QUIC names").
    #[arg(
        help_heading = "Flows",
        long = "analyzer",
        value_name = "NAME",
        value_delimiter = ','
    )]
    analyzers: Vec<String>,
    /// Run the payload labellers (the default).
    ///
    /// Run the payload labellers, as by default: the tls, http, ssh and dns
    /// analyzers, whose names (SNI, Host, banners, DNS names) give the
    /// records' payload labels (docs/SERVICES.md).
    #[arg(
        help_heading = "Flows",
        long = "labellers",
        id = "labellers_on",
        conflicts_with = "labellers",
        default_value_t = true
    )]
    labellers_on: bool,
    /// Leave the payload labellers off.
    ///
    /// Leave the payload labellers (tls, http, ssh, dns) off: `app` is then
    /// the model's verdict, the records go without their names, and the
    /// run saves their cost (about a tenth on a realistic mix, a fifth on
    /// a flood of minimum-size new flows; docs/OPERATIONS.md, "Payload
    /// names"). --analyzer turns any of them on alone.
    #[arg(
        help_heading = "Flows",
        long = "no-labellers",
        action = clap::ArgAction::SetFalse
    )]
    labellers: bool,
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
    /// Learn the early model from the flows' payload labels into this directory.
    ///
    /// Self-training (docs/CLASSIFIERS.md, "Self-training"): the payload
    /// labellers run (tls, http, dns, ssh analyzers), each flow they name feeds
    /// a bounded sample per class, and a background thread trains a model from
    /// it every --learn-every-labels labels or --learn-every-seconds of packet
    /// time, and once more at the end of the run (also on SIGTERM). Each model
    /// is written to DIR (model-NNNN.ebm, with its provenance and its scores on
    /// a held-out share), listed in DIR/models.jsonl; the best so far (beside
    /// the run's own model) is DIR/best.ebm. Created if missing.
    #[arg(help_heading = "Classification", long, value_name = "DIR")]
    learn: Option<PathBuf>,
    /// Self-training: flows kept per class.
    #[arg(
        help_heading = "Classification",
        long,
        value_name = "FLOWS",
        default_value_t = 2000
    )]
    learn_reservoir: usize,
    /// Self-training: train a model every this many labelled flows (0: not by count).
    #[arg(
        help_heading = "Classification",
        long,
        value_name = "FLOWS",
        default_value_t = 10_000
    )]
    learn_every_labels: u64,
    /// Self-training: train a model every this many seconds of packet time (0: not by time).
    #[arg(
        help_heading = "Classification",
        long,
        value_name = "SECS",
        default_value_t = 300.0
    )]
    learn_every_seconds: f64,
    /// Self-training: the class of a flow, from its payload label.
    #[arg(help_heading = "Classification", long, value_name = "LEVEL", default_value = "category", value_parser = ["category", "app", "proto"])]
    learn_level: String,
    /// Self-training: algorithm of the learnt models.
    #[arg(help_heading = "Classification", long, value_name = "ALGO", default_value = "c45", value_parser = ["c45", "forest", "nb", "gnb"])]
    learn_algo: String,
    /// Self-training: share of each class held out to score a model.
    #[arg(
        help_heading = "Classification",
        long,
        value_name = "SHARE",
        default_value_t = 0.25
    )]
    learn_holdout: f64,
    /// Self-training: share of one core the training thread may use.
    ///
    /// Self-training: share of one core the training thread may use (0 to 1):
    /// after each model it rests so that training takes at most this share of
    /// its time (in a file run with swap points, only until the shards wait at
    /// the next point; not when a job waits).
    #[arg(
        help_heading = "Classification",
        long,
        value_name = "SHARE",
        default_value_t = 0.5
    )]
    learn_cpu: f64,
    /// Self-training: file runs stop every this many input packets (whole
    /// batches); a model due there trains while they go on and, if it beats
    /// the model in use, is swapped in at the next such point: the same
    /// points whatever the shard count (0: file runs never swap; live runs
    /// swap as soon as a model beats the one in use).
    #[arg(
        help_heading = "Classification",
        long,
        value_name = "PACKETS",
        default_value_t = 1_000_000
    )]
    learn_swap_packets: u64,
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
