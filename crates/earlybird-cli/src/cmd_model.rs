//! `earlybird model info [MODEL]`: what a model file holds and what it was
//! measured to do: algorithm, classes, N, threshold, the captures and label
//! files it was trained on (by SHA-256) and its scores on held-out captures.
//! The built-in model when no file (or `default`) is named.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    cmd: ModelCmd,
}

#[derive(Subcommand)]
enum ModelCmd {
    /// Describe a model file (default: the built-in model).
    Info {
        /// Model file, or `default` for the built-in model.
        #[arg(value_name = "MODEL")]
        model: Option<PathBuf>,
        /// List every training capture (name, bytes, SHA-256).
        #[arg(long)]
        captures: bool,
    },
}

pub fn run(a: ModelArgs) -> i32 {
    let ModelCmd::Info { model, captures } = a.cmd;
    let m = match crate::model_arg::load(model.as_deref()) {
        Ok(m) => m,
        Err(e) => return crate::fail(e),
    };
    let name = match &model {
        Some(p) if p.as_os_str() != crate::model_arg::DEFAULT_NAME => p.display().to_string(),
        _ => "built-in default model".into(),
    };
    outln!("{name}: {m}");
    outln!(
        "classes ({}): {}",
        m.info.classes.len(),
        m.info.classes.join(", ")
    );
    match &m.info.held_out {
        Some(h) => outln!("measured {h}"),
        None => outln!("no held-out scores recorded (trained without --split)"),
    }
    let bytes: u64 = m.info.captures.iter().map(|d| d.bytes).sum();
    if m.info.captures.is_empty() {
        outln!("training captures: not recorded");
    } else {
        outln!(
            "training captures: {} files, {bytes} bytes{}",
            m.info.captures.len(),
            if captures {
                ":"
            } else {
                " (--captures lists them)"
            }
        );
    }
    if captures {
        for d in &m.info.captures {
            outln!("  {}  {:>10}  {}", d.sha256, d.bytes, d.name);
        }
    }
    for d in &m.info.labels {
        outln!(
            "labels: {} ({} bytes, sha256 {})",
            d.name,
            d.bytes,
            d.sha256
        );
    }
    0
}
