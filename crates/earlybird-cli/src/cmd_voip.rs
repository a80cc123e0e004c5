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
use earlybird::voip::record::{push_call, push_stream, CALLS, STREAMS};
use earlybird::voip::tracker::TrackerConfig;
use earlybird::{workflow, Exporter, Format, RowBatch};

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
    /// A call without SIP or RTP for this many seconds ends (timeout).
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub call_timeout: f64,
    /// Calls held at once (more INVITEs are counted and dropped).
    #[arg(long, default_value_t = 200_000, value_name = "N")]
    pub max_calls: usize,
    /// RTP streams held at once.
    #[arg(long, default_value_t = 400_000, value_name = "N")]
    pub max_streams: usize,
    /// Keep the RTP of every call in this folder, for `calls wav`.
    #[arg(long, value_name = "DIR")]
    pub rtp_dir: Option<PathBuf>,
    /// With --rtp-dir: at most this many MiB of RTP per call.
    #[arg(long, value_name = "MIB", default_value_t = 64, requires = "rtp_dir")]
    pub rtp_max_mib: u64,
    /// With --rtp-dir: first remove the calls kept longer than this many
    /// days (by file time).
    #[arg(long, value_name = "DAYS", requires = "rtp_dir")]
    pub rtp_keep_days: Option<f64>,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

fn open(kind: &'static earlybird::Kind, p: &std::path::Path) -> Result<Box<dyn Exporter>, String> {
    let f = Format::for_output(p, None)?;
    earlybird::open_row_exporter(kind, f, p).map_err(|e| e.to_string())
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
    let cfg = TrackerConfig {
        call_timeout_ns: (a.call_timeout.max(0.0) * 1e9) as u64,
        max_calls: a.max_calls,
        max_streams: a.max_streams,
        audio: a
            .rtp_dir
            .clone()
            .map(|d| (d, a.rtp_max_mib.saturating_mul(1 << 20))),
        ..TrackerConfig::default()
    };
    if let (Some(dir), Some(days)) = (&a.rtp_dir, a.rtp_keep_days) {
        let age = std::time::Duration::from_secs_f64(days.max(0.0) * 86_400.0);
        let n = earlybird::voip::audio::Archive::prune(dir, age);
        if n > 0 && !a.quiet {
            eprintln!(
                "earlybird: removed {n} calls older than {days} days from {}",
                dir.display()
            );
        }
    }
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    let mut db = match a.db.as_deref().map(earlybird::voip::store::CallStore::open) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => return crate::fail(e),
        None => None,
    };
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    if a.db.is_some() {
        return crate::fail("--db needs the `sqlite` or `postgres` feature (on by default)");
    }
    let mut calls_out = match a.output.as_deref().map(|p| open(&CALLS, p)).transpose() {
        Ok(o) => o,
        Err(e) => return crate::fail(e),
    };
    let mut streams_out = match a
        .streams_out
        .as_ref()
        .map(|p| open(&STREAMS, p))
        .transpose()
    {
        Ok(o) => o,
        Err(e) => return crate::fail(e),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            return crate::fail(format!("cannot install signal handler: {e}"));
        }
    }
    let mut rows = RowBatch::new(&CALLS);
    let mut srows = RowBatch::new(&STREAMS);
    let write = |calls: &[earlybird::voip::record::CallRecord],
                 alone: &[earlybird::voip::record::StreamRecord]|
     -> earlybird::Result<()> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(db) = db.as_mut() {
            db.insert(calls, alone)?;
        }
        if let Some(out) = calls_out.as_mut() {
            rows.clear();
            for c in calls {
                push_call(&mut rows, c);
            }
            out.write_rows(&rows)?;
        }
        if let Some(out) = streams_out.as_mut() {
            srows.clear();
            for s in calls.iter().flat_map(|c| c.streams.iter()).chain(alone) {
                push_stream(&mut srows, s);
            }
            out.write_rows(&srows)?;
        }
        Ok(())
    };
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
    for out in calls_out.iter_mut().chain(streams_out.iter_mut()) {
        if let Err(e) = out.finish() {
            eprintln!("earlybird: {e}");
            code = 3;
        }
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
        let c = &s.counters;
        println!(
            "{} packets, {} to the call tracker; {} calls, {} RTP streams written (peak {} calls open)",
            s.packets, s.voip_packets, s.calls, s.streams, s.peak_calls
        );
        println!(
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
        if a.rtp_dir.is_some() {
            let r = &s.audio;
            println!(
                "rtp kept: {} packets; not kept: {} over the size bound, {} write errors",
                r.packets, r.over_size, r.errors
            );
        }
        let f = &c.defrag;
        println!(
            "ip fragments: {} taken, {} datagrams reassembled, {} timed out, {} dropped",
            f.fragments, f.reassembled, f.timed_out, f.dropped
        );
    }
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        return 130;
    }
    code
}
