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
    /// Short flows one after another, each a real handshake: TLS 1.3 (45%),
    /// QUIC v1 Initial (25%), DNS (20%), HTTP/1.1 (7%), SSH (3%); whole
    /// packets, for the payload labellers.
    Handshakes,
    /// SIP calls over UDP with G.711 RTP both ways (INVITE … BYE), with
    /// seeded loss and jitter; --truth writes each call's ground truth.
    Voip,
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
    /// voip: calls to write (-n is not used).
    #[arg(long, value_name = "N", default_value_t = 100)]
    calls: u64,
    /// voip: new calls per second.
    #[arg(long, value_name = "CPS", default_value_t = 10.0)]
    rate: f64,
    /// voip: talk time of each call, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    duration: f64,
    /// voip: RTP packet interval, ms.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    ptime: u32,
    /// voip: probability that an RTP packet is lost.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    loss: f64,
    /// voip: largest extra delay of an RTP packet, ms (uniform).
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    jitter: f64,
    /// voip: write each call's ground truth to this CSV.
    #[arg(long, value_name = "FILE")]
    truth: Option<PathBuf>,
}

fn gen_voip(a: &GenArgs) -> i32 {
    let o = earlybird::VoipGenOptions {
        calls: a.calls,
        rate: a.rate,
        duration: a.duration,
        ptime_ms: a.ptime,
        loss: a.loss,
        jitter_ms: a.jitter,
        seed: a.seed,
        ..Default::default()
    };
    let f = match File::create(&a.output) {
        Ok(f) => f,
        Err(e) => return crate::fail(format!("{}: {e}", a.output.display())),
    };
    let s = match earlybird::generate_voip(&o, BufWriter::with_capacity(1 << 20, f)) {
        Ok((_, s)) => s,
        Err(e) => return crate::fail(format!("{}: {e}", a.output.display())),
    };
    eprintln!(
        "{}: {} packets, {} calls, at most {} at once",
        a.output.display(),
        s.packets,
        s.calls.len(),
        s.peak_active
    );
    if let Some(t) = &a.truth {
        let mut text = String::from(
            "call_id,caller,callee,invite_ns,answer_ns,bye_ns,bye_by,caller_sent,caller_lost,\
             callee_sent,callee_lost\n",
        );
        for c in &s.calls {
            text.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{}\n",
                c.call_id,
                c.caller,
                c.callee,
                c.invite_ns,
                c.answer_ns,
                c.bye_ns,
                if c.bye_by_caller { "caller" } else { "callee" },
                c.caller_rtp.0,
                c.caller_rtp.1,
                c.callee_rtp.0,
                c.callee_rtp.1
            ));
        }
        if let Err(e) = std::fs::write(t, text) {
            return crate::fail(format!("{}: {e}", t.display()));
        }
    }
    0
}

pub fn run(a: GenArgs) -> i32 {
    let kind = match a.kind {
        Kind::Worst => GenKind::Worst,
        Kind::Realistic => GenKind::Realistic,
        Kind::Handshakes => GenKind::Handshakes,
        Kind::Voip => return gen_voip(&a),
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
