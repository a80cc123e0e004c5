//! `earlybird completions SHELL`: the shell completion script of the
//! command line (clap_complete), on standard output. The Debian package
//! installs the bash, zsh and fish scripts this prints (packaging/deb).

use clap::Args;
use clap_complete::Shell;
use std::io::Write;

/// `earlybird completions` options.
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

/// The completion script of `shell` for the whole command line.
pub(crate) fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = crate::cli_command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "earlybird", &mut out);
    out
}

pub fn run(a: CompletionsArgs) -> i32 {
    let out = script(a.shell);
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&out).and_then(|()| stdout.flush()) {
        Ok(()) => 0,
        // The reader went away (`| head`): not an error (main.rs).
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => crate::fail(format!("standard output: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each script names the subcommands and a long option of `flows`,
    /// so a shell offers them.
    #[test]
    fn scripts_name_the_subcommands_and_options() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(script(shell)).unwrap();
            for word in [
                "flows",
                "voip",
                "train-media",
                "idle-timeout",
                "check-config",
            ] {
                assert!(text.contains(word), "{shell}: no {word}");
            }
            let hidden: Vec<&str> = text.lines().filter(|l| l.contains("manpages")).collect();
            assert!(
                hidden.is_empty(),
                "{shell}: the hidden command is offered: {hidden:?}"
            );
        }
    }
}
