//! `earlybird replay`: send the packets of capture files out of a network
//! interface (AF_PACKET transmit ring), at full speed or a given rate.
//!
//! Prints one summary line on stderr. Exit codes: 0 done, 1 a file or the
//! interface is unusable (the message names it), 130 interrupted by
//! SIGINT/SIGTERM (the frames already queued were still sent and counted).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use earlybird::source::replay::{self, ReplayOptions};
use earlybird::source::CaptureFile;

#[derive(Args)]
pub struct ReplayArgs {
    /// Capture files (pcap or pcapng), sent one after the other in this
    /// order; only Ethernet packets are sent.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Interface to send on (needs root or CAP_NET_RAW).
    #[arg(short, long, value_name = "IFACE")]
    interface: String,
    /// Packets per second (default: as fast as the interface takes them).
    #[arg(long, value_name = "N")]
    pps: Option<f64>,
    /// Times the whole input is sent.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    loops: u32,
}

pub fn run(a: ReplayArgs) -> i32 {
    let mut files = Vec::with_capacity(a.files.len());
    for p in &a.files {
        match CaptureFile::open(p) {
            Ok(f) => files.push(f),
            Err(e) => return crate::fail(e),
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            return crate::fail(format!("cannot install signal handler: {e}"));
        }
    }
    let opts = ReplayOptions {
        pps: a.pps,
        loops: a.loops,
        ..ReplayOptions::new(&a.interface)
    };
    let report = match replay::replay(&files, &opts, &stop) {
        Ok(r) => r,
        Err(e) => return crate::fail(e),
    };
    for w in &report.warnings {
        eprintln!("earlybird: warning: {w}");
    }
    eprintln!("replay {}: {report}", a.interface);
    if stop.load(Ordering::Relaxed) {
        130
    } else {
        0
    }
}
