//! `earlybird manpages DIR` (hidden): writes the man pages of `earlybird`
//! and of every subcommand (`earlybird-flows.1`, `earlybird-calls-search.1`,
//! …) from the clap definition, with each command's examples
//! (examples.rs) in an EXAMPLES section. scripts/build-deb.sh runs it; it
//! is a subcommand so that the pages come from the very binary packaged.

use clap::{Args, FromArgMatches};
use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;
use std::path::{Path, PathBuf};

/// `earlybird manpages` options.
#[derive(Args)]
pub struct ManArgs {
    /// Folder to write the pages into (created if missing).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// The hidden `manpages` subcommand main.rs adds to the command line.
pub(crate) fn command() -> clap::Command {
    let cmd = clap::Command::new("manpages")
        .hide(true)
        .about("Write the man pages of earlybird and every subcommand into a folder");
    <ManArgs as Args>::augment_args(cmd)
}

pub(crate) fn run(m: &clap::ArgMatches) -> i32 {
    let a = match ManArgs::from_arg_matches(m) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    match write_all(&a.dir) {
        Ok(pages) => {
            for p in pages {
                outln!("{}", p.display());
            }
            0
        }
        Err(e) => crate::fail(format!("{}: {e}", a.dir.display())),
    }
}

/// Writes every page into `dir`; returns their paths, `earlybird.1` first.
pub(crate) fn write_all(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // The examples are written as their own section, not as the help's
    // trailing text: the plain definition, then crate::examples's table.
    let mut cmd = <crate::Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    write_tree(&cmd, "", dir, &mut pages)?;
    Ok(pages)
}

fn write_tree(
    cmd: &clap::Command,
    path: &str,
    dir: &Path,
    pages: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let file = dir.join(format!("{}.1", page_name(cmd)));
    std::fs::write(&file, render(cmd, path)?)?;
    pages.push(file);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        write_tree(sub, &sub_path, dir, pages)?;
    }
    Ok(())
}

/// `earlybird-calls-search` for `earlybird calls search` (clap's display
/// name once built).
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

/// One page: clap_mangen's sections, the help's trailing text as NOTES
/// (a paragraph per blank-line-separated block), then EXAMPLES.
fn render(cmd: &clap::Command, path: &str) -> std::io::Result<Vec<u8>> {
    let man = Man::new(cmd.clone())
        .title(page_name(cmd).to_uppercase())
        .source(format!("earlybird {}", env!("CARGO_PKG_VERSION")))
        .manual("earlybird manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out)?;
    }
    let mut roff = Roff::new();
    if let Some(notes) = cmd.get_after_help() {
        roff.control("SH", ["NOTES"]);
        for (i, para) in notes.to_string().split("\n\n").enumerate() {
            if i > 0 {
                roff.control("PP", []);
            }
            roff.text([roman(para.replace('\n', " "))]);
        }
    }
    if let Some(lines) = crate::examples::lines(path) {
        roff.control("SH", ["EXAMPLES"]);
        roff.control("nf", []);
        for line in lines {
            roff.text([roman(*line)]);
        }
        roff.control("fi", []);
    }
    roff.to_writer(&mut out)?;
    if path.is_empty() {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// A page per visible command, each with its examples; `man` itself
    /// renders them in scripts/test-deb.sh.
    #[test]
    fn a_page_per_command_with_examples() {
        let dir = tempfile::tempdir().unwrap();
        let pages = super::write_all(dir.path()).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "earlybird.1",
            "earlybird-flows.1",
            "earlybird-model-info.1",
            "earlybird-completions.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        assert!(!names
            .iter()
            .any(|n| n.contains("manpages") || n.contains("help")));
        let flows = std::fs::read_to_string(dir.path().join("earlybird-flows.1")).unwrap();
        assert!(flows.contains(".SH EXAMPLES"), "{flows}");
        assert!(flows.contains("idle\\-timeout"), "no option in the page");
        assert!(flows.contains("SIGHUP"), "the help's notes are missing");
        let root = std::fs::read_to_string(dir.path().join("earlybird.1")).unwrap();
        assert!(root.contains("earlybird\\-flows(1)"), "{root}");
    }
}
