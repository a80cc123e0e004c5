//! `earlybird flows`: capture files or a live interface → flow records.
//!
//! The front over [`earlybird::Config`]: the options given on the command
//! line are laid over the `--config` file's (or the defaults), and the
//! engine plans, opens and runs from that one configuration. This file
//! adds what only a process has: signals, the progress bar, the summary
//! on stderr and the exit code. Exit 2 for an option or combination that
//! cannot run (and an output name that does not say its format), 1 for an
//! input, model or output that cannot be used (an output that is an
//! input), 3 when an output failed, 130 on SIGINT/SIGTERM (open flows
//! flushed). SIGHUP reopens the record files.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use clap::ArgMatches;
use earlybird::{Config, Error, RunControl};

pub use crate::flows_args::FlowsArgs;
use crate::progress::Progress;

/// The options that only the command line has (not configuration keys).
pub const FRONT_ONLY: [&str; 4] = ["help", "config", "print-config", "check-config"];

/// The configuration key of the `flows` option whose clap id is `id` and
/// long name `long`: its long name, but `inputs` for the capture files
/// and `labellers` for `--labellers` and `--no-labellers` (which sets it
/// false); `None` for an option only the command line has.
pub fn key_of<'a>(id: &str, long: Option<&'a str>) -> Option<&'a str> {
    match (id, long) {
        ("files", _) => Some("inputs"),
        ("labellers" | "labellers_on", _) => Some("labellers"),
        (_, Some(long)) if FRONT_ONLY.contains(&long) => None,
        (_, long) => long,
    }
}

/// The options given on the command line of `flows` (`cmd`, as parsed
/// into `m`): each one's clap id and its configuration key (long option
/// name; `inputs` for the capture files). Read before the typed arguments
/// are taken out of `m`, which forgets where each value came from.
pub fn given_keys(cmd: &clap::Command, m: &ArgMatches) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let Some(key) = key_of(id, arg.get_long()) else {
            continue;
        };
        out.push((id.to_string(), key.to_string()));
    }
    out
}

/// The options given on the command line (`given`, from [`given_keys`]),
/// as a configuration table of their typed values.
pub fn given_options(a: &FlowsArgs, given: &[(String, String)]) -> Result<toml::Table, String> {
    let typed = toml::Table::try_from(a).map_err(|e| e.to_string())?;
    let mut out = toml::Table::new();
    for (id, key) in given {
        if let Some(v) = typed.get(id) {
            out.insert(key.clone(), v.clone());
        }
    }
    Ok(out)
}

/// The run's configuration: the defaults, the `--config` file, then the
/// command line's options.
fn configuration(a: &FlowsArgs, given: &[(String, String)]) -> earlybird::Result<Config> {
    let mut config = match &a.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    let given = given_options(a, given).map_err(Error::Usage)?;
    config.overlay(given, "command line")?;
    Ok(config)
}

/// Prints `e` and returns its exit code: 2 for usage, 1 otherwise.
fn exit(e: Error) -> i32 {
    match e {
        Error::Usage(_) | Error::Setting { .. } => crate::out_args::usage(e),
        e => crate::fail(e),
    }
}

/// SIGHUP raises a reopen request (`RunControl::reopen`): the exporter
/// thread reopens the record files, as a daemon's logs are rotated. A
/// thread waits for the signal so the handler itself does nothing but wake
/// it.
fn reopen_on_hangup(ctl: &RunControl) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])?;
    let reopen = Arc::clone(&ctl.reopen);
    std::thread::Builder::new()
        .name("eb-sighup".into())
        .spawn(move || {
            for _ in signals.forever() {
                reopen.fetch_add(1, Ordering::Relaxed);
            }
        })?;
    Ok(())
}

/// Runs `flows` with its arguments and the options given on its command
/// line ([`given_keys`]).
pub fn run(a: FlowsArgs, given: &[(String, String)]) -> i32 {
    let config = match configuration(&a, given) {
        Ok(c) => c,
        Err(e) => return exit(e),
    };
    for w in &config.warnings {
        crate::say(&format!("earlybird: warning: {w}"));
    }
    if a.print_config {
        print!("{}", config.to_toml());
        return 0;
    }
    if a.check_config {
        if let Err(e) = config.check() {
            return exit(e);
        }
        crate::say("earlybird: configuration OK");
        return 0;
    }
    let plan = match config.plan() {
        Ok(p) => p,
        Err(e) => return exit(e),
    };
    let quiet = config.quiet;
    let removed = config.prune_rtp();
    if let (true, false, Some(dir)) = (removed > 0, quiet, &config.rtp_dir) {
        crate::say(&format!(
            "earlybird: removed {removed} calls older than {} days from {}",
            config.rtp_keep_days.unwrap_or_default(),
            dir.display()
        ));
    }
    let total = plan.total_bytes();
    let live = plan.live().map(|l| l.interface.clone());
    let probe = match plan.open() {
        Ok(p) => p,
        Err(e) => return crate::fail(e),
    };
    if let (Some(addr), false) = (probe.metrics_addr(), quiet) {
        crate::say(&format!("earlybird: metrics on http://{addr}/metrics"));
    }
    let ctl = RunControl::default();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&ctl.stop)) {
            return crate::fail(format!("cannot install signal handler: {e}"));
        }
    }
    if let Err(e) = reopen_on_hangup(&ctl) {
        return crate::fail(format!("cannot install signal handler: {e}"));
    }
    let show = !config.no_progress && !quiet;
    let _bar = match (&live, total) {
        (Some(iface), _) => {
            if !quiet {
                let n = config.shards;
                crate::say(&format!(
                    "earlybird: capturing on {iface} with {n} shard{} (SIGINT or SIGTERM to stop)",
                    if n == 1 { "" } else { "s" }
                ));
            }
            Progress::live(show, ctl.progress.clone())
        }
        (None, Some(total)) => Progress::start(show, total, ctl.progress.clone()),
        (None, None) => Progress::bytes(show, ctl.progress.clone()),
    };
    let learning = probe.learning();
    let first_model = (learning.clone()).filter(|_| !quiet).map(FirstModel::watch);
    let notifier = crate::notify::Notifier::start(&ctl, live.is_some());
    let report = probe.run(&ctl);
    if let Some(w) = first_model {
        w.stop();
    }
    if let Some(n) = notifier {
        n.finish();
    }
    let report = match report {
        Ok(r) => r,
        Err(e) => return crate::fail(e),
    };
    drop(_bar);
    if let (Some(s), false) = (&report.calls, quiet) {
        crate::cmd_voip::print_summary(std::io::stderr(), s, config.rtp_dir.is_some());
    }
    if !quiet {
        use std::io::Write;
        let _ = write!(std::io::stderr(), "{report}");
    } else {
        for w in &report.warnings {
            crate::say(&format!("earlybird: warning: {w}"));
        }
        for e in &report.output_errors {
            crate::say(&format!("earlybird: output error: {e}"));
        }
        for e in &report.dump_errors {
            crate::say(&format!("earlybird: dump error: {e}"));
        }
    }
    if let Some(l) = learning {
        let l = l.lock().unwrap_or_else(|p| p.into_inner());
        print_learning(&l, &config.learn, quiet);
    }
    if ctl.stop.load(Ordering::Relaxed) {
        130
    } else if !report.output_errors.is_empty() {
        3
    } else if live.is_some() && !report.warnings.is_empty() {
        // A live capture ends early only when its socket fails (the
        // interface was deleted): every flow was flushed.
        4
    } else {
        0
    }
}

/// Says once, while the run goes on, when its first learnt model is in
/// use (a shard took it in): the model's number and the packet time of
/// the swap. The status is looked at every 100 ms of wall time; the end
/// of the run says it again with the installations' count.
struct FirstModel {
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FirstModel {
    fn watch(status: Arc<std::sync::Mutex<earlybird::learn_online::Status>>) -> FirstModel {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let end = done.clone();
        let thread = std::thread::Builder::new()
            .name("eb-first-model".into())
            .spawn(move || {
                loop {
                    // Read before the status, so that a model taken in
                    // just before the run ended is still said once.
                    let ending = end.load(Ordering::Relaxed);
                    let in_use = status.lock().unwrap_or_else(|p| p.into_inner()).in_use;
                    if let Some(u) = in_use {
                        crate::say(&format!(
                            "earlybird: first learnt model {}",
                            model_in_use(u.id, u.turn, u.packet_time)
                        ));
                        return;
                    }
                    if ending {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            })
            .ok();
        FirstModel { done, thread }
    }

    fn stop(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// "N in use from packet time T s[, after batch turn K]": the model a
/// self-training run swapped in (its number, the batch turn and the
/// packet time in ns it was taken in at).
fn model_in_use(id: u16, turn: u64, packet_time: u64) -> String {
    let turn = match turn {
        0 => String::new(),
        t => format!(", after batch turn {t}"),
    };
    let t = packet_time as f64 / 1e9;
    format!("{id} in use from packet time {t:.3} s{turn}")
}

/// What self-training learnt: its bounds as configured and what it used
/// of them, a line per model (unless `quiet`) and its errors.
fn print_learning(l: &earlybird::learn_online::Status, c: &earlybird::LearnSection, quiet: bool) {
    if !quiet {
        crate::say(&format!(
            "earlybird: learning: {} payload-labelled flows, {} kept ({} KiB; --learn-reservoir {} a class), {} models",
            l.offered,
            l.kept,
            l.bytes.div_ceil(1024),
            c.reservoir,
            l.models.len()
        ));
        crate::say(&format!(
            "earlybird: training thread: {:.3} s training, {:.3} s resting (--learn-cpu {}), {} triggers waited for it",
            l.busy, l.rested, c.cpu, l.deferred
        ));
        for m in &l.models {
            crate::say(&format!(
                "earlybird: learnt {} from {} flows of {} classes: held-out accuracy {:.1} % on {} flows, coverage {:.1} % (best before {:.1} %){}",
                m.path.display(),
                m.trained,
                m.classes,
                100.0 * m.accuracy,
                m.held_out,
                100.0 * m.coverage,
                100.0 * m.best_before,
                if m.best { ", now best.ebm" } else { "" }
            ));
        }
        if let Some(u) = &l.in_use {
            crate::say(&format!(
                "earlybird: learnt model {} ({} installations in the shards)",
                model_in_use(u.id, u.turn, u.packet_time),
                l.installs
            ));
        }
    }
    for e in &l.errors {
        crate::say(&format!("earlybird: learning error: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::PathBuf;

    /// The command's arguments as clap defines them (for the option walk).
    fn command() -> clap::Command {
        crate::Cli::command()
            .find_subcommand("flows")
            .cloned()
            .unwrap_or_else(|| clap::Command::new("flows"))
    }

    /// The configuration key of long option `long` (`dump-dir` is `[dump]
    /// dir`), as a TOML line setting it to `value`.
    fn line(long: &str, value: &str) -> String {
        if long == "learn" {
            return format!("[learn]\ndir = {value}\n");
        }
        for table in ["alarm-pcap", "dump", "ipfix", "learn"] {
            if let Some(k) = long.strip_prefix(table).and_then(|k| k.strip_prefix('-')) {
                return format!("[{table}]\n{k} = {value}\n");
            }
        }
        format!("{long} = {value}\n")
    }

    #[test]
    fn every_long_option_is_a_configuration_key() {
        let mut walked = 0;
        for arg in command().get_arguments() {
            let id = arg.get_id().as_str();
            assert!(
                arg.get_long().is_some() || id == "files",
                "--{id} has no long name"
            );
            let Some(key) = key_of(id, arg.get_long()) else {
                continue;
            };
            // A date is a value of no key's type: a key that exists says
            // so ("invalid type"); one that does not is refused as unknown.
            let text = line(key, "1979-05-27");
            let e = Config::from_toml(&text, "walk").unwrap_err().to_string();
            assert!(!e.contains("unknown field"), "--{key}: {e}");
            walked += 1;
        }
        assert!(walked > 60, "{walked} options walked");
    }

    #[test]
    fn the_command_lines_defaults_are_the_configurations() {
        let defaults = toml::Table::try_from(Config::default()).unwrap();
        let lookup = |key: &str| -> Option<toml::Value> {
            let text = line(key, "0");
            let (table, k) = match text.strip_prefix('[') {
                Some(t) => {
                    let (table, rest) = t.split_once("]\n").unwrap();
                    (Some(table), rest.split(" = ").next().unwrap().to_string())
                }
                None => (None, key.to_string()),
            };
            match table {
                Some(t) => defaults.get(t)?.get(&k).cloned(),
                None => defaults.get(&k).cloned(),
            }
        };
        let mut compared = 0;
        for arg in command().get_arguments() {
            let (Some(long), [default]) = (arg.get_long(), arg.get_default_values()) else {
                continue;
            };
            if FRONT_ONLY.contains(&long) || long == "output" {
                continue;
            }
            let default = default.to_str().unwrap();
            let key = key_of(arg.get_id().as_str(), Some(long)).unwrap();
            let ours = lookup(key).unwrap_or_else(|| panic!("--{long}: no default"));
            let same = match &ours {
                toml::Value::String(s) => s == default,
                toml::Value::Integer(i) => default.parse::<i64>().ok() == Some(*i),
                toml::Value::Float(f) => default.parse::<f64>().ok() == Some(*f),
                toml::Value::Boolean(b) => default.parse::<bool>().ok() == Some(*b),
                _ => false,
            };
            assert!(
                same,
                "--{long}: clap says {default}, the configuration {ours}"
            );
            compared += 1;
        }
        assert!(compared > 20, "{compared} defaults compared");
    }

    #[test]
    fn the_command_line_lays_its_options_over_the_file() {
        use clap::FromArgMatches;
        let m = command().get_matches_from([
            "flows",
            "a.pcap",
            "--idle-timeout",
            "30",
            "--dump-dir",
            "/d",
            "--alarm",
            "packets:cusum",
            "-o",
            "x.csv",
            "--ipfix-mtu",
            "1200",
            "--voip-db",
            "calls.db",
            "--max-calls",
            "7",
        ]);
        let given = given_keys(&command(), &m);
        let a = FlowsArgs::from_arg_matches(&m).unwrap();
        let mut c = Config::from_toml("output = [\"a.jsonl\"]\nshards = 2\n", "f").unwrap();
        c.overlay(given_options(&a, &given).unwrap(), "command line")
            .unwrap();
        assert_eq!(c.inputs, [PathBuf::from("a.pcap")]);
        assert_eq!(c.idle_timeout, 30.0);
        assert_eq!(c.shards, 2, "not given: the file's");
        assert_eq!(c.output, [PathBuf::from("a.jsonl"), PathBuf::from("x.csv")]);
        assert_eq!(c.dump.dir, Some(PathBuf::from("/d")));
        assert_eq!(c.alarm[0].series, "packets");
        assert_eq!(c.ipfix.mtu, 1200);
        assert_eq!(c.voip_db.as_deref(), Some("calls.db"));
        assert_eq!(c.max_calls, 7);
        assert_eq!(c.snaplen, 256, "clap's default is not a given option");
        assert!(c.labellers, "on by default");
        for (args, on) in [(["--no-labellers"], false), (["--labellers"], true)] {
            let m = command().get_matches_from(["flows", "a.pcap"].into_iter().chain(args));
            let given = given_keys(&command(), &m);
            let a = FlowsArgs::from_arg_matches(&m).unwrap();
            let mut c = Config::from_toml(&format!("labellers = {}\n", !on), "f").unwrap();
            c.overlay(given_options(&a, &given).unwrap(), "command line")
                .unwrap();
            assert_eq!(c.labellers, on, "{args:?}");
        }
    }
}
