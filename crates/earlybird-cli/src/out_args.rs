//! Output arguments shared by the subcommands: names that must say what is
//! written (`--png CHART.png`, `-w OUT.pcap`), checked by clap before any
//! work (exit 2), and the check that no output is an input
//! (`earlybird::outpath`), run before any output is created (exit 1).

use std::path::{Path, PathBuf};

use earlybird::outpath;

/// `--png`: a path ending in `.png` (the chart is a PNG whatever the name).
pub fn png_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    outpath::require_extension(&p, "png")
        .map(|()| p)
        .map_err(|e| e.to_string())
}

/// `-w`: a path ending in `.pcap` (a classic pcap is written, not pcapng).
pub fn pcap_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    outpath::require_extension(&p, "pcap")
        .map(|()| p)
        .map_err(|e| e.to_string())
}

/// Prints a usage error the way every subcommand does and returns exit
/// code 2.
pub fn usage(e: impl std::fmt::Display) -> i32 {
    crate::say(&format!("earlybird: error: {e}"));
    2
}

/// Refuses outputs that are inputs, directories, in missing directories or
/// named twice (see `earlybird::outpath::check`); exit code 1 with the
/// message, or `None` when every output may be written.
pub fn refuse(outputs: &[&Path], inputs: &[&Path]) -> Option<i32> {
    outpath::check(outputs, inputs).err().map(crate::fail)
}
