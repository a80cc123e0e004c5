//! `earlybird gen`: write a synthetic capture.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use earlybird::{GenKind, GenOptions};

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    /// HPTRAC worst case: 64-byte TCP frames, incremental addresses and
    /// ports, 5 packets per flow, 10,000 flows active at once, 10 Gbit/s.
    Worst,
    /// CAIDA-like mix: ~744-byte mean IP size, ~49 packets per flow
    /// (heavy-tailed), both directions, 1 Gbit/s at 50% load, snaplen 128.
    Realistic,
}

#[derive(Args)]
pub struct GenArgs {
    /// Traffic model.
    #[arg(value_enum)]
    kind: Kind,
    /// Number of packets to write.
    #[arg(short = 'n', long, value_name = "PACKETS", default_value_t = 1_000_000)]
    packets: u64,
    /// Output pcap file.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Random seed; the same seed and options give a byte-identical file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// worst: flows active at once (interleaved round-robin).
    #[arg(long, value_name = "FLOWS")]
    window: Option<u64>,
    /// worst: packets per flow.
    #[arg(long, value_name = "P")]
    packets_per_flow: Option<u32>,
    /// Link speed in Gbit/s that paces the timestamps (worst 10, realistic 1).
    #[arg(long, value_name = "GBPS")]
    gbps: Option<f64>,
    /// realistic: link utilisation in (0, 1].
    #[arg(long)]
    load: Option<f64>,
    /// realistic: bytes captured per packet (like anonymised CAIDA traces).
    #[arg(long)]
    snaplen: Option<u32>,
    /// Write nanosecond timestamps (pcap magic 0xa1b23c4d).
    #[arg(long)]
    nanos: bool,
}

pub fn run(a: GenArgs) -> i32 {
    let kind = match a.kind {
        Kind::Worst => GenKind::Worst,
        Kind::Realistic => GenKind::Realistic,
    };
    let mut o = GenOptions::new(kind, a.packets);
    o.seed = a.seed;
    o.nanos = a.nanos;
    if let Some(v) = a.window {
        o.window = v;
    }
    if let Some(v) = a.packets_per_flow {
        o.packets_per_flow = v;
    }
    if let Some(v) = a.gbps {
        o.gbps = v;
    }
    if let Some(v) = a.load {
        o.load = v;
    }
    if let Some(v) = a.snaplen {
        o.snaplen = v;
    }
    let f = match File::create(&a.output) {
        Ok(f) => f,
        Err(e) => return crate::fail(format!("{}: {e}", a.output.display())),
    };
    match earlybird::generate(&o, BufWriter::with_capacity(1 << 20, f)) {
        Ok(s) => {
            eprintln!("{}: {s}", a.output.display());
            0
        }
        Err(e) => crate::fail(format!("{}: {e}", a.output.display())),
    }
}
