//! `earlybird bench`: end-to-end throughput in Mpps and Gbit/s, and memory
//! per tracked flow.

use std::path::PathBuf;

use clap::Args;
use earlybird::bench::{self, BenchConfig};
use earlybird::{FlowConfig, Format, GenKind, ModelRef};

#[derive(Args)]
pub struct BenchArgs {
    /// Packets per generated capture (files are cached in --dir).
    #[arg(short = 'n', long, default_value_t = 10_000_000)]
    packets: u64,
    /// Shard counts to measure, comma separated.
    #[arg(short, long, value_delimiter = ',', default_value = "1,2")]
    shards: Vec<usize>,
    /// Outputs to measure, comma separated: null (engine only) and/or csv
    /// (records formatted and written to /dev/null).
    #[arg(short, long, value_delimiter = ',', default_value = "null,csv")]
    outputs: Vec<String>,
    /// Traffic models, comma separated: worst, realistic.
    #[arg(short, long, value_delimiter = ',', default_value = "worst,realistic")]
    traffic: Vec<String>,
    /// Directory for the generated captures.
    #[arg(long, default_value = "bench-data")]
    dir: PathBuf,
    /// Runs per configuration; the fastest is reported.
    #[arg(short, long, default_value_t = 3)]
    repeat: usize,
    /// Skip the in-memory source (no file I/O) measurements.
    #[arg(long)]
    no_memory: bool,
    /// Also measure flow-table memory with this many concurrent flows
    /// (e.g. 10000000); 0 skips it.
    #[arg(long, default_value_t = 0)]
    memory_flows: u64,
    /// Flow hash for the flow-table index: fold (default: the symmetric
    /// multiply-fold hash that also picks the shard, one hash per packet) or
    /// toeplitz (RSS Toeplitz with the symmetric 0x6d5a key). Shards are
    /// always chosen by the symmetric shard hash (each endpoint hashed, then added).
    #[arg(long, value_name = "HASH", default_value = "fold", value_parser = ["fold", "toeplitz"])]
    hash: String,
    /// Classifier run inline in the shards: "default" (the built-in model)
    /// or a model file; none by default (engine alone).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Flow table capacity per shard for the runs (the thesis's table-size
    /// experiment; the worst-case files need one slot per flow).
    #[arg(long, default_value_t = 1_000_000)]
    max_flows: usize,
    /// Keep per-second statistics in every run, as a probe does (rows to
    /// /dev/null, Prometheus metrics updated but not served).
    #[arg(long)]
    per_second: bool,
    /// Dump every packet of every run into rotating pcap files in this
    /// directory (as flows --dump-dir; e.g. a tmpfs such as /dev/shm/eb).
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// With --dump-dir: write the dump files past the page cache (as flows
    /// --dump-direct).
    #[arg(long, requires = "dump_dir")]
    dump_direct: bool,
    /// Flow statistics level for the runs: full or basic.
    #[arg(long, default_value = "full", value_parser = ["full", "basic"])]
    stats: String,
}

pub fn run(a: BenchArgs) -> i32 {
    let mut outputs = Vec::new();
    for o in &a.outputs {
        match Format::parse(o) {
            Some(f) => outputs.push(f),
            None => return crate::fail(format!("unknown output {o:?}")),
        }
    }
    let mut traffic = Vec::new();
    for t in &a.traffic {
        traffic.push(match t.as_str() {
            "worst" => GenKind::Worst,
            "realistic" => GenKind::Realistic,
            _ => return crate::fail(format!("unknown traffic {t:?} (worst, realistic)")),
        });
    }
    let flow = FlowConfig {
        full_stats: a.stats == "full",
        max_flows: a.max_flows,
        hash: if a.hash == "toeplitz" {
            earlybird::FlowHash::Toeplitz
        } else {
            earlybird::FlowHash::Fold
        },
        ..FlowConfig::default()
    };
    let model = match a.model.as_deref() {
        None => ModelRef::default(),
        Some(p) => match crate::model_arg::model_ref(Some(std::path::Path::new(p)), false, None) {
            Ok(m) => m,
            Err(e) => return crate::fail(e),
        },
    };
    let cfg = BenchConfig {
        packets: a.packets,
        shards: a.shards.clone(),
        dir: a.dir.clone(),
        repeat: a.repeat,
        outputs,
        traffic,
        memory: !a.no_memory,
        model,
        flow: flow.clone(),
        per_second: a.per_second,
        dump: a.dump_dir.as_ref().map(|d| earlybird::DumpConfig {
            dir: d.clone(),
            direct: a.dump_direct,
            ..earlybird::DumpConfig::default()
        }),
    };
    outln!(
        "{:<10} {:<6} {:>6} {:<6} {:>11} {:>9} {:>8} {:>8} {:>9} {:>9} {:>11} {:<5}",
        "traffic",
        "source",
        "shards",
        "output",
        "packets",
        "seconds",
        "Mpps",
        "Gbit/s",
        "wire Gb/s",
        "flows",
        "records/s",
        "pages"
    );
    let res = bench::run(&cfg, |r| {
        outln!(
            "{:<10} {:<6} {:>6} {:<6} {:>11} {:>9.3} {:>8.2} {:>8.2} {:>9.2} {:>9} {:>11.0} {:<5}",
            r.traffic,
            r.source,
            r.shards,
            r.output,
            r.packets,
            r.seconds,
            r.mpps(),
            r.gbps(),
            r.wire_gbps(),
            r.flows,
            r.records_per_s(),
            r.pages
        );
    });
    if let Err(e) = res {
        return crate::fail(e);
    }
    if a.memory_flows > 0 {
        match bench::memory_per_flow(a.memory_flows, &flow) {
            Ok((flows, table, rss, pool)) => {
                outln!(
                    "memory: {flows} concurrent flows: table {:.1} MiB = {:.0} B/flow; process anonymous RSS grew {}",
                    table as f64 / 1048576.0,
                    table as f64 / flows.max(1) as f64,
                    rss.map(|r| format!("{:.1} MiB = {:.0} B/flow", r as f64 / 1048576.0, r as f64 / flows.max(1) as f64))
                        .unwrap_or_else(|| "(unknown)".into())
                );
                if pool > 0 {
                    outln!(
                        "memory: the table is in the reserved huge-page pool, which anonymous RSS does not count; EARLYBIRD_NO_HUGETLB=1 measures it in RSS"
                    );
                }
            }
            Err(e) => return crate::fail(e),
        }
    }
    0
}
