//! The `earlybird` command line: argument parsing only; every subcommand is
//! one call into the engine's public API (the crate root of `earlybird`),
//! but `completions` and the hidden `manpages`, which describe the command
//! line itself.
//!
//! Exit codes: 0 success (also when the reader of standard output went
//! away: `earlybird flows … | head`); 1 an input or the configuration is
//! unusable, or an output is an input (message names the file); 2 usage
//! error (from clap, or an output name that does not say its format); 3 the
//! run finished but an output failed (the other outputs are complete); 4 a
//! live capture ended early because its interface went away (deleted; the
//! flows were flushed; a link that goes down and up does not end it); 130
//! interrupted by SIGINT/SIGTERM (open flows were flushed). SIGHUP reopens
//! the record files of `flows` (log rotation).

// The arguments' doc comments are their `--help` text, which names TOML
// tables and metavariables in brackets ("[dump]", "SERIES[:METHOD]"):
// not links.
#![allow(rustdoc::broken_intra_doc_links)]

/// `println!` for the commands that print a report (model info, train,
/// evaluate…): `println!` panics when the reader of standard output went
/// away (`earlybird model info | head`); this drops the rest of the report
/// instead and lets the command finish its work (exit code as without the
/// pipe). Another write error is said once on stderr.
macro_rules! outln {
    () => {
        $crate::out(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out(format_args!($($arg)*))
    };
}

mod cmd_bench;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod cmd_calls;
mod cmd_completions;
mod cmd_evaluate;
mod cmd_flows;
mod cmd_gen;
mod cmd_label;
mod cmd_man;
mod cmd_model;
mod cmd_replay;
mod cmd_train;
mod cmd_voip;
mod examples;
mod flows_args;
mod ipfix_args;
mod model_arg;
mod notify;
mod out_args;
mod progress;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// earlybird: wire-speed flow meter that labels each flow's application
/// from its first packets.
///
/// With no arguments it prints its help with a few examples, exit code 2
/// (a usage error, as a missing subcommand always was).
#[derive(Parser)]
#[command(
    name = "earlybird",
    version,
    about = "Flow meter that labels each flow's application from its first packets",
    long_about = None,
    arg_required_else_help = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Turn capture files (pcap/pcapng) into flow records.
    #[command(after_help = FLOWS_AFTER_HELP, args_override_self = true)]
    Flows(Box<cmd_flows::FlowsArgs>),
    /// Write a synthetic capture (HPTRAC worst case, a CAIDA-like mix,
    /// application handshakes or VoIP calls).
    Gen(cmd_gen::GenArgs),
    /// Measure end-to-end throughput (Mpps, Gbit/s) and memory per flow.
    Bench(cmd_bench::BenchArgs),
    /// Label the flows of captures with nDPI (deep packet inspection) and
    /// write a truth CSV for `train --labels` (needs the `ndpi` feature).
    Label(cmd_label::LabelArgs),
    /// Train a classifier on labelled captures and write the model file.
    Train(cmd_train::TrainArgs),
    /// Learn the media analyzer's intervals from labelled media flows and
    /// write a --media-config TOML (with its leave-one-capture-out score).
    TrainMedia(cmd_train::TrainMediaArgs),
    /// Score a model (or compare algorithms) on labelled captures: accuracy,
    /// macro F1, per-class precision/recall, confusion matrix, accuracy vs N.
    Evaluate(cmd_evaluate::EvaluateArgs),
    /// Send the packets of capture files out of a network interface
    /// (AF_PACKET TX ring), at full speed or a given rate.
    Replay(cmd_replay::ReplayArgs),
    /// What a model file holds: classes, threshold, training captures and
    /// its measured precision and coverage on held-out captures.
    Model(cmd_model::ModelArgs),
    /// Track VoIP calls (SIP over UDP/TCP, RTP/RTCP) in capture files or
    /// live into a call database (--db: SQLite or PostgreSQL) and/or call
    /// and stream records.
    Voip(cmd_voip::VoipArgs),
    /// Search the call database `voip --db` wrote, show one call, or
    /// write its audio as WAV.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    Calls(cmd_calls::CallsArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// PowerShell on standard output.
    Completions(cmd_completions::CompletionsArgs),
}

/// Signals and exit codes, under `earlybird flows --help`.
const FLOWS_AFTER_HELP: &str = "Signals: SIGINT and SIGTERM stop the run: every open flow is \
ended and written, outputs are flushed, exit code 130. SIGHUP reopens the record files (-o) at \
their paths, for log rotation (mv out.csv out.csv.1; kill -HUP PID: out.csv.1 is complete and \
flushed, the next records go to a fresh out.csv with its header); standard output and the -w \
pcap are not reopened.

Exit codes: 0 success (also when the reader of standard output went away, as with | head); 1 an \
input, the configuration or an output path is unusable (an output that is an input, a \
directory, in a missing directory); 2 usage (options, output names); 3 an output failed (the \
others are complete); 4 a live capture ended because its interface was deleted (flows flushed; \
a link down and up does not end it); 130 interrupted.";

/// The command line as users see it: the clap definition with each
/// command's examples at the end of its help (examples.rs). The help, the
/// man pages and the completion scripts are made from it.
pub(crate) fn cli_command() -> clap::Command {
    examples::add(Cli::command())
}

fn main() {
    // `manpages` (hidden) is added here only, so that no completion script
    // offers it (clap_complete's bash script lists hidden commands too).
    // The command is kept to the end and never freed (`process::exit`
    // drops nothing): freeing its arguments is work a run need not do.
    let mut cmd = cli_command().subcommand(cmd_man::command());
    let mut matches = cmd.get_matches_mut();
    if let Some(("manpages", m)) = matches.subcommand() {
        std::process::exit(cmd_man::run(m));
    }
    // Which options of `flows` were given, before parsing takes the
    // values out of the matches.
    let given = match (matches.subcommand(), cmd.find_subcommand("flows")) {
        (Some(("flows", m)), Some(flows)) => cmd_flows::given_keys(flows, m),
        _ => Vec::new(),
    };
    let cli = Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.exit());
    let code = match cli.cmd {
        Command::Flows(a) => cmd_flows::run(*a, &given),
        Command::Gen(a) => cmd_gen::run(a),
        Command::Bench(a) => cmd_bench::run(a),
        Command::Label(a) => cmd_label::run(a),
        Command::Train(a) => cmd_train::run(a),
        Command::TrainMedia(a) => cmd_train::run_media(a),
        Command::Evaluate(a) => cmd_evaluate::run(a),
        Command::Replay(a) => cmd_replay::run(a),
        Command::Model(a) => cmd_model::run(a),
        Command::Voip(a) => cmd_voip::run(a),
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        Command::Calls(a) => cmd_calls::run(a),
        Command::Completions(a) => cmd_completions::run(a),
    };
    std::process::exit(code);
}

/// Writes one line of a report on standard output (see `outln!`).
pub(crate) fn out(line: std::fmt::Arguments) {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    static FAILED: AtomicBool = AtomicBool::new(false);
    if FAILED.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        FAILED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            say(&format!("earlybird: error: standard output: {e}"));
        }
    }
}

/// Prints an error the way every subcommand does and returns exit code 1.
pub(crate) fn fail(e: impl std::fmt::Display) -> i32 {
    say(&format!("earlybird: error: {e}"));
    1
}

/// Writes a line on stderr; a closed stderr (`2>&1 | head`) is not a
/// reason to panic.
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
