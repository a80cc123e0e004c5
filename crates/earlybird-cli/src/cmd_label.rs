//! `earlybird label`: captures → ground-truth CSV labelled by nDPI (one
//! call to `earlybird::label::label_captures`), for `earlybird train
//! --labels`. Needs the `ndpi` feature; without it the command says how
//! to build it and exits 1.

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use clap::Args;
use earlybird::{label, workflow, RunOptions};

/// `earlybird label` options.
#[derive(Args)]
pub struct LabelArgs {
    /// Capture files (pcap/pcapng) or directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The truth CSV to write (columns as `train --labels` reads them).
    #[arg(short, long, value_name = "TRUTH.csv")]
    pub output: PathBuf,
}

pub fn run(a: LabelArgs) -> i32 {
    let files = match workflow::capture_files(&a.files) {
        Ok(f) => f,
        Err(e) => return crate::fail(e),
    };
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    if let Some(code) = crate::out_args::refuse(&[a.output.as_path()], &inputs) {
        return code;
    }
    let out = match std::fs::File::create(&a.output) {
        Ok(f) => f,
        Err(e) => return crate::fail(format!("{}: {e}", a.output.display())),
    };
    let name = a.output.display().to_string();
    let stats = match label::label_captures(
        &files,
        &RunOptions::default(),
        &mut BufWriter::new(out),
        &name,
    ) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&a.output);
            return crate::fail(e);
        }
    };
    for s in &stats.skipped {
        eprintln!("earlybird: warning: skipped {s}");
    }
    outln!("{stats}");
    outln!("wrote {name}");
    0
}
