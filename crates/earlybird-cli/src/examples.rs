//! The examples that end `earlybird --help`, every subcommand's help and
//! the man pages: one table, laid onto the clap command by [`add`]. A
//! test parses every example with that same command, so an example that
//! names an option that no longer exists fails the build's tests.
//!
//! An example is a command, optionally followed by a shell redirection
//! (`> FILE`) and a comment (`# …`); neither is part of what is parsed. A
//! line ending in ` \` goes on on the next line. Lines stay short enough
//! for an 80-column terminal, where clap would otherwise wrap them.

use clap::Command;

/// (subcommand path, example lines); "" is `earlybird` itself.
const EXAMPLES: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "earlybird flows capture.pcap -o flows.csv   # the flows of a capture",
            "earlybird flows -i eth0 -o flows.jsonl      # live, until Ctrl-C",
            "earlybird flows --config probe.toml --check-config",
            "earlybird voip calls.pcap --db calls.sqlite # SIP calls, their RTP",
            "earlybird help flows                        # every option",
        ],
    ),
    (
        "flows",
        &[
            "earlybird flows capture.pcap -o flows.csv",
            "earlybird flows captures/ --shards 2 -o flows.parquet",
            "earlybird flows x.pcap -o ipfix+udp://127.0.0.1:4739",
            "earlybird flows -i eth0 --duration 60 -o flows.jsonl",
            "earlybird flows --config /etc/earlybird/probe.toml --check-config",
        ],
    ),
    (
        "gen",
        &[
            "earlybird gen worst -n 1000000 -o worst.pcap",
            "earlybird gen handshakes -n 300000 -o handshakes.pcap",
            "earlybird gen voip --calls 20 --truth calls-truth.csv -o calls.pcap",
        ],
    ),
    (
        "bench",
        &["earlybird bench -n 1000000 --shards 1,2 --outputs null --repeat 1"],
    ),
    (
        "label",
        &["earlybird label captures/ -o truth.csv        # needs the ndpi feature"],
    ),
    (
        "train",
        &[
            "earlybird train --algo forest --split 0.3 --target-precision 0.9 \\",
            "    --labels truth.csv captures/ -o mine.ebm",
            "earlybird train --labels truth.csv captures/ -o mine.ebm",
        ],
    ),
    (
        "train-media",
        &["earlybird train-media --labels media_flows.csv captures/ -o media.toml"],
    ),
    (
        "evaluate",
        &[
            "earlybird evaluate --algos nb,c45,forest,ports --split 0.3 \\",
            "    --labels truth.csv captures/",
            "earlybird evaluate --model mine.ebm --labels truth.csv captures/",
        ],
    ),
    (
        "replay",
        &["earlybird replay -i veth0 --pps 10000 capture.pcap"],
    ),
    (
        "model",
        &[
            "earlybird model info                            # the built-in model",
            "earlybird model info mine.ebm",
        ],
    ),
    ("model info", &["earlybird model info mine.ebm --captures"]),
    (
        "voip",
        &[
            "earlybird voip calls.pcap --db calls.sqlite",
            "earlybird voip -i eth0 --db postgres://voip@localhost/calls",
            "earlybird voip -i eth0 --db calls.sqlite --rtp-dir rtp/",
        ],
    ),
    (
        "calls",
        &[
            "earlybird calls search --db calls.sqlite --status 4xx --json",
            "earlybird calls show CALL-ID --db calls.sqlite",
        ],
    ),
    (
        "calls search",
        &["earlybird calls search --db calls.sqlite --since 2026-11-01T00:00:00Z"],
    ),
    (
        "calls show",
        &["earlybird calls show CALL-ID --db calls.sqlite --json"],
    ),
    (
        "calls wav",
        &["earlybird calls wav CALL-ID --db calls.sqlite --rtp-dir rtp -o call.wav"],
    ),
    (
        "completions",
        &[
            "earlybird completions bash > ~/.bash_completion.d/earlybird",
            "earlybird completions zsh > ~/.zfunc/_earlybird",
            "earlybird completions fish > ~/.config/fish/completions/earlybird.fish",
        ],
    ),
];

/// The example lines of the command at `path` ("" for `earlybird`,
/// "calls search"), if it has any.
pub(crate) fn lines(path: &str) -> Option<&'static [&'static str]> {
    EXAMPLES.iter().find(|(p, _)| *p == path).map(|(_, l)| *l)
}

/// `cmd` with each command's examples appended to its `after_help` (after
/// the text it already has). Subcommands the build leaves out (`calls`
/// without a database feature) are skipped.
pub(crate) fn add(mut cmd: Command) -> Command {
    for (path, lines) in EXAMPLES {
        let words: Vec<&str> = path.split_whitespace().collect();
        cmd = add_at(cmd, &words, lines);
    }
    cmd
}

fn add_at(cmd: Command, path: &[&str], lines: &[&str]) -> Command {
    match path.split_first() {
        None => {
            let mut text = String::new();
            if let Some(before) = cmd.get_after_help() {
                text = format!("{before}\n\n");
            }
            text.push_str("Examples:");
            for line in lines {
                text.push_str("\n  ");
                text.push_str(line);
            }
            cmd.after_help(text)
        }
        Some((first, rest)) => {
            if cmd.find_subcommand(first).is_none() {
                return cmd;
            }
            cmd.mut_subcommand(*first, |sub| add_at(sub, rest, lines))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands of the lines (continuation lines joined), each as the
    /// words the shell would pass (the examples use no quotes), without a
    /// redirection or comment.
    fn commands(lines: &[&str]) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut cur = String::new();
        for line in lines {
            assert!(line.len() <= 76, "too long for 80 columns: {line}");
            match line.strip_suffix(" \\") {
                Some(head) => cur.push_str(head),
                None => {
                    cur.push_str(line);
                    let words = cur
                        .split_whitespace()
                        .take_while(|w| *w != "#" && *w != ">")
                        .map(str::to_string)
                        .collect();
                    out.push(words);
                    cur.clear();
                }
            }
        }
        assert!(cur.is_empty(), "a continuation line ends the examples");
        out
    }

    #[test]
    fn every_example_parses_with_the_command() {
        let cmd = crate::cli_command();
        let mut n = 0;
        for (path, lines) in EXAMPLES {
            for words in commands(lines) {
                let line = words.join(" ");
                assert_eq!(words[0], "earlybird", "{line}");
                if !path.is_empty() {
                    // The example is of its own command.
                    let sub = path.split_whitespace().collect::<Vec<_>>();
                    assert_eq!(&words[1..=sub.len()], &sub[..], "{line}");
                }
                #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
                if path.starts_with("calls") {
                    continue;
                }
                match cmd.clone().try_get_matches_from(&words) {
                    Ok(_) => {}
                    Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {}
                    Err(e) => panic!("example `{line}` of `{path}` does not parse:\n{e}"),
                }
                n += 1;
            }
        }
        assert!(n >= 25, "{n} examples");
    }

    /// `earlybird` alone: the help with the examples, as a usage error
    /// (exit code 2, on standard error).
    #[test]
    fn no_arguments_print_the_examples() {
        let err = crate::cli_command()
            .try_get_matches_from(["earlybird"])
            .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        assert_eq!(err.exit_code(), 2);
        assert!(err.use_stderr());
        let text = err.render().to_string();
        assert!(
            text.contains("Examples:\n  earlybird flows capture.pcap -o flows.csv"),
            "{text}"
        );
        assert!(text.contains("completions"), "{text}");
    }

    /// Every command and subcommand a user can ask `--help` of ends its
    /// help with an example.
    #[test]
    fn every_help_ends_with_an_example() {
        fn walk(cmd: &mut Command, path: String, seen: &mut Vec<String>) {
            let help = cmd.render_long_help().to_string();
            let last = help.trim_end().lines().last().unwrap_or("").trim_start();
            assert!(
                last.starts_with("earlybird "),
                "`{path} --help` ends with {last:?}, not an example"
            );
            seen.push(path.clone());
            for sub in cmd.get_subcommands_mut() {
                if sub.get_name() == "help" || sub.is_hide_set() {
                    continue;
                }
                let name = format!("{path} {}", sub.get_name());
                walk(sub, name, seen);
            }
        }
        let mut cmd = crate::cli_command();
        cmd.build();
        let mut seen = Vec::new();
        walk(&mut cmd, "earlybird".into(), &mut seen);
        assert!(seen.contains(&"earlybird flows".to_string()), "{seen:?}");
        assert!(
            seen.contains(&"earlybird model info".to_string()),
            "{seen:?}"
        );
    }
}
