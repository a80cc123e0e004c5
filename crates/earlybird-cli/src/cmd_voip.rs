//! `earlybird voip`: capture files or a live interface (`-i`) → call and
//! RTP stream records, into a
//! SQLite call database (`--db`) and/or record files (`-o`, `--streams-out`:
//! CSV, JSON lines or Parquet by extension). One call to
//! `earlybird::voip::run::track_files`; SIGINT/SIGTERM end the open calls
//! and write them (exit 130).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;
use earlybird::voip::tracker::TrackerConfig;
use earlybird::workflow;

/// `earlybird voip` options.
#[derive(Args)]
pub struct VoipArgs {
    /// Capture files (pcap/pcapng, compressed too) or directories, read in
    /// order as one time line.
    #[arg(required_unless_present = "interface", value_name = "SOURCE")]
    pub files: Vec<PathBuf>,
    /// Capture live from this interface instead (AF_PACKET; root or
    /// CAP_NET_RAW), until SIGINT/SIGTERM or --duration.
    #[arg(short, long, value_name = "IFACE", conflicts_with = "files")]
    pub interface: Option<String>,
    /// With -i: stop after this many seconds.
    #[arg(long, value_name = "SECONDS", requires = "interface")]
    pub duration: Option<f64>,
    /// Call database to add the calls to: a SQLite file (created if
    /// missing) or a PostgreSQL URL (postgres://user@host:port/db).
    #[arg(long, value_name = "DB")]
    pub db: Option<String>,
    /// Call records to this file (.csv, .jsonl/.json, .parquet).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// RTP stream records (every stream, with or without a call).
    #[arg(long, value_name = "FILE")]
    pub streams_out: Option<PathBuf>,
    #[command(flatten)]
    pub tracker: TrackerArgs,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// The call tracker's options, shared by `voip` and `flows` (its call
/// stage).
#[derive(Args, Clone, serde::Serialize)]
pub struct TrackerArgs {
    /// A call without SIP or RTP for this many seconds ends (timeout).
    #[arg(
        help_heading = "VoIP",
        long,
        default_value_t = 300.0,
        value_name = "SECONDS"
    )]
    pub call_timeout: f64,
    /// Calls held at once (more INVITEs are counted and dropped).
    #[arg(
        help_heading = "VoIP",
        long,
        default_value_t = 200_000,
        value_name = "N"
    )]
    pub max_calls: usize,
    /// RTP streams held at once.
    #[arg(
        help_heading = "VoIP",
        long,
        default_value_t = 400_000,
        value_name = "N"
    )]
    pub max_streams: usize,
    /// Keep the RTP of every call in this folder, for `calls wav`.
    #[arg(help_heading = "VoIP", long, value_name = "DIR")]
    pub rtp_dir: Option<PathBuf>,
    /// With --rtp-dir: at most this many MiB of RTP per call.
    #[arg(
        help_heading = "VoIP",
        long,
        value_name = "MIB",
        default_value_t = 64,
        requires = "rtp_dir"
    )]
    pub rtp_max_mib: u64,
    /// With --rtp-dir: first remove the calls kept longer than this many days
    /// (by file time).
    #[arg(help_heading = "VoIP", long, value_name = "DAYS", requires = "rtp_dir")]
    pub rtp_keep_days: Option<f64>,
}

impl TrackerArgs {
    /// The tracker's configuration.
    pub fn config(&self) -> TrackerConfig {
        TrackerConfig {
            call_timeout_ns: (self.call_timeout.max(0.0) * 1e9) as u64,
            max_calls: self.max_calls,
            max_streams: self.max_streams,
            audio: self
                .rtp_dir
                .clone()
                .map(|d| (d, self.rtp_max_mib.saturating_mul(1 << 20))),
            ..TrackerConfig::default()
        }
    }

    /// With --rtp-dir and --rtp-keep-days: removes the calls kept longer.
    pub fn prune(&self, quiet: bool) {
        if let (Some(dir), Some(days)) = (&self.rtp_dir, self.rtp_keep_days) {
            let age = std::time::Duration::from_secs_f64(days.max(0.0) * 86_400.0);
            let n = earlybird::voip::audio::Archive::prune(dir, age);
            if n > 0 && !quiet {
                eprintln!(
                    "earlybird: removed {n} calls older than {days} days from {}",
                    dir.display()
                );
            }
        }
    }
}

/// Prints what a call tracking run saw (`voip`, and `flows` with a call
/// stage).
pub fn print_summary(
    mut out: impl std::io::Write,
    s: &earlybird::voip::run::VoipSummary,
    rtp_dir: bool,
) {
    let c = &s.counters;
    let _ = writeln!(
        out,
        "{} packets, {} to the call tracker; {} calls, {} RTP streams written (peak {} calls open)",
        s.packets, s.voip_packets, s.calls, s.streams, s.peak_calls
    );
    let _ = writeln!(
        out,
        "sip: {} messages, {} unparsable, {} of unknown calls; dropped: {} calls, {} streams \
         (tables full), {} short streams without SIP, {} media announcements, {} TCP \
         segments, {} TCP bytes",
        c.sip_messages,
        c.sip_errors,
        c.sip_unmatched,
        c.calls_dropped,
        c.streams_dropped,
        c.streams_short,
        c.media_dropped,
        c.tcp_dropped + s.tcp_not_followed,
        c.tcp_dropped_bytes
    );
    if s.stage_dropped > 0 {
        let _ = writeln!(
            out,
            "call stage: {} packets dropped (its channel was full)",
            s.stage_dropped
        );
    }
    if rtp_dir {
        let r = &s.audio;
        let _ = writeln!(
            out,
            "rtp kept: {} packets; not kept: {} over the size bound, {} write errors",
            r.packets, r.over_size, r.errors
        );
    }
    let f = &c.defrag;
    let _ = writeln!(
        out,
        "ip fragments: {} taken, {} datagrams reassembled, {} timed out, {} dropped",
        f.fragments, f.reassembled, f.timed_out, f.dropped
    );
}

pub fn run(a: VoipArgs) -> i32 {
    if a.db.is_none() && a.output.is_none() && a.streams_out.is_none() {
        return crate::out_args::usage("give --db DB, -o FILE or --streams-out FILE");
    }
    let files = match a.interface {
        Some(_) => Vec::new(),
        None => match workflow::capture_files(&a.files) {
            Ok(f) => f,
            Err(e) => return crate::fail(e),
        },
    };
    let cfg = a.tracker.config();
    a.tracker.prune(a.quiet);
    let mut outs = match earlybird::CallOutputs::open(
        a.db.as_deref(),
        a.output.as_deref(),
        a.streams_out.as_deref(),
    ) {
        Ok(o) => o,
        Err(e) => return crate::fail(e),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            return crate::fail(format!("cannot install signal handler: {e}"));
        }
    }
    let write = |calls: &[earlybird::voip::record::CallRecord],
                 alone: &[earlybird::voip::record::StreamRecord]|
     -> earlybird::Result<()> { outs.write(calls, alone) };
    let result = match &a.interface {
        Some(iface) => {
            let live = earlybird::LiveConfig::new(iface);
            let duration = a
                .duration
                .map(|d| std::time::Duration::from_secs_f64(d.max(0.0)));
            if !a.quiet {
                eprintln!("earlybird: tracking calls on {iface} (SIGINT or SIGTERM to stop)");
            }
            earlybird::voip::run::track_live(&live, duration, cfg, &stop, write)
        }
        None => earlybird::voip::run::track_files(&files, cfg, &stop, write),
    };
    let mut code = 0;
    for e in outs.finish() {
        eprintln!("earlybird: {e}");
        code = 3;
    }
    let s = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("earlybird: {e}");
            return 3;
        }
    };
    for w in &s.warnings {
        eprintln!("earlybird: warning: {w}");
    }
    if !a.quiet {
        print_summary(std::io::stdout(), &s, a.tracker.rtp_dir.is_some());
    }
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        return 130;
    }
    code
}
