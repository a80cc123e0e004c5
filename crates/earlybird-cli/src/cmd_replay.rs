//! `earlybird replay`: send the packets of capture files out of a network
//! interface (AF_PACKET transmit ring, AF_XDP sockets or, with `--capture
//! xdp-live`, from the kernel), at full speed or a given rate.
//!
//! Prints one summary line on stderr. Exit codes: 0 done, 1 a file or the
//! interface is unusable (the message names it), 130 interrupted by
//! SIGINT/SIGTERM (the frames already queued were still sent and counted).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use earlybird::{CaptureFile, ReplayOptions};

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
    /// How frames are sent: "af-packet" (a transmit ring, default),
    /// "af-xdp" (XDP sockets, one per transmit queue: faster, and the
    /// queue of each frame is chosen, see --queues and --spread) or
    /// "xdp-live" (from the kernel: an XDP program run in live-frame mode
    /// writes each frame and redirects it out, kernel 5.18 or later; the
    /// fastest; on veth the peer must run XDP or have GRO on to receive).
    #[arg(long, value_name = "HOW", default_value = "af-packet")]
    capture: String,
    /// AF_XDP: transmit queues to send on (the interface must have them;
    /// on veth each is a receive queue of the peer).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    queues: u32,
    /// AF_XDP: how frames are spread over the queues: "hosts" (by the two
    /// IP addresses: both directions of a session on one queue) or
    /// "sources" (by the source address: the directions apart, as a NIC's
    /// default RSS does).
    #[arg(long, value_name = "HOW", default_value = "hosts")]
    spread: String,
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
    let live = a.capture == "xdp-live";
    let capture = match earlybird::Capture::parse(&a.capture) {
        Some(c) => c,
        None if live => earlybird::Capture::AfPacket,
        None => {
            return crate::fail(format!(
                "--capture {:?}: \"af-packet\", \"af-xdp\" or \"xdp-live\"",
                a.capture
            ))
        }
    };
    let Some(spread) = earlybird::Spread::parse(&a.spread) else {
        return crate::fail(format!("--spread {:?}: \"hosts\" or \"sources\"", a.spread));
    };
    let opts = ReplayOptions {
        pps: a.pps,
        loops: a.loops,
        capture,
        queues: a.queues,
        spread,
        ..ReplayOptions::new(&a.interface)
    };
    let sent = if live {
        earlybird::replay_live(&files, &opts, &stop)
    } else {
        earlybird::replay(&files, &opts, &stop)
    };
    let report = match sent {
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
