//! `earlybird voip`: capture files or a live interface (`-i`) → call and
//! RTP stream records, into a
//! SQLite call database (`--db`) and/or record files (`-o`, `--streams-out`:
//! CSV, JSON lines or Parquet by extension). A `flows` run of the
//! engine's one configuration with the call stage on and no classifier or
//! flow output (the same calls as `flows --calls-out`); SIGINT/SIGTERM end
//! the open calls and write them (exit 130).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

/// `earlybird voip` options.
#[derive(Args)]
pub struct VoipArgs {
    /// Capture files (pcap/pcapng, compressed too) or directories, read in
    /// order as one time line.
    #[arg(required_unless_present = "interface", value_name = "SOURCE")]
    pub files: Vec<PathBuf>,
    /// Capture live from this interface instead of files.
    ///
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
    /// RTP stream records to this file.
    ///
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
    /// Seconds after which a silent call ends.
    ///
    /// A call without SIP or RTP for this many seconds ends (timeout).
    #[arg(
        help_heading = "VoIP",
        long,
        default_value_t = 300.0,
        value_name = "SECONDS"
    )]
    pub call_timeout: f64,
    /// Calls tracked at once.
    ///
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
    /// Calls held while the call database fails.
    ///
    /// Call records (a call with its streams, or a stream without a call)
    /// held in memory while the call database fails (PostgreSQL stopped or
    /// unreachable, a full disk), written once it works again; more are
    /// counted as not written (the summary's "call database" line, exit code
    /// 3).
    #[arg(
        help_heading = "VoIP",
        long,
        default_value_t = 100_000,
        value_name = "N"
    )]
    pub voip_db_hold: usize,
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
    /// Remove kept calls older than this first.
    ///
    /// With --rtp-dir: first remove the calls kept longer than this many days
    /// (by file time).
    #[arg(help_heading = "VoIP", long, value_name = "DAYS", requires = "rtp_dir")]
    pub rtp_keep_days: Option<f64>,
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
    if let Some(d) = s.db.as_ref().filter(|d| d.outages > 0) {
        let _ = writeln!(
            out,
            "call database: failed {} time{} (last: {}); {} calls and {} streams held and \
             written after, {} calls and {} streams not written (hold bound {} records, \
             peak {})",
            d.outages,
            if d.outages == 1 { "" } else { "s" },
            d.last_error.as_deref().unwrap_or("?"),
            d.calls_written_late,
            d.streams_written_late,
            d.calls_not_written,
            d.streams_not_written,
            d.bound,
            d.peak_held
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

/// The `flows` configuration `voip` stands for: the call stage, no
/// classifier, no flow output.
fn configuration(a: &VoipArgs) -> earlybird::Config {
    let t = &a.tracker;
    earlybird::Config {
        inputs: a.files.clone(),
        // As listed (directories in name order), one time line.
        input_order: "given".into(),
        interface: a.interface.clone(),
        duration: a.duration,
        no_model: true,
        // No flow records: nothing to label.
        labellers: false,
        format: Some("null".into()),
        voip_db: a.db.clone(),
        calls_out: a.output.clone(),
        streams_out: a.streams_out.clone(),
        call_timeout: t.call_timeout,
        max_calls: t.max_calls,
        max_streams: t.max_streams,
        voip_db_hold: t.voip_db_hold,
        rtp_dir: t.rtp_dir.clone(),
        rtp_max_mib: t.rtp_max_mib,
        rtp_keep_days: t.rtp_keep_days,
        quiet: a.quiet,
        no_progress: true,
        ..earlybird::Config::default()
    }
}

pub fn run(a: VoipArgs) -> i32 {
    if a.db.is_none() && a.output.is_none() && a.streams_out.is_none() {
        return crate::out_args::usage("give --db DB, -o FILE or --streams-out FILE");
    }
    let config = configuration(&a);
    let plan = match config.plan() {
        Ok(p) => p,
        Err(earlybird::Error::Usage(e)) => return crate::out_args::usage(e),
        Err(e) => return crate::fail(e),
    };
    let removed = config.prune_rtp();
    if let (true, false, Some(dir)) = (removed > 0, a.quiet, &config.rtp_dir) {
        eprintln!(
            "earlybird: removed {removed} calls older than {} days from {}",
            config.rtp_keep_days.unwrap_or_default(),
            dir.display()
        );
    }
    let probe = match plan.open() {
        Ok(p) => p,
        Err(e) => return crate::fail(e),
    };
    let ctl = earlybird::RunControl::default();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&ctl.stop)) {
            return crate::fail(format!("cannot install signal handler: {e}"));
        }
    }
    if let (Some(iface), false) = (&a.interface, a.quiet) {
        eprintln!("earlybird: tracking calls on {iface} (SIGINT or SIGTERM to stop)");
    }
    let report = match probe.run(&ctl) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("earlybird: {e}");
            return 3;
        }
    };
    let mut code = 0;
    for e in &report.output_errors {
        eprintln!("earlybird: {e}");
        code = 3;
    }
    for w in &report.warnings {
        eprintln!("earlybird: warning: {w}");
    }
    if let (Some(s), false) = (&report.calls, a.quiet) {
        for w in &s.warnings {
            eprintln!("earlybird: warning: {w}");
        }
        print_summary(std::io::stdout(), s, a.tracker.rtp_dir.is_some());
    }
    if ctl.stop.load(std::sync::atomic::Ordering::Relaxed) {
        return 130;
    }
    code
}
