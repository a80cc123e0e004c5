//! Output paths, checked before anything is created or truncated.
//!
//! Contract: [`check`] is given every output a command will write (record
//! files, `-w` pcap, model file, chart) and every file it reads, and fails
//! — before the caller opens any output — when an output
//! - is one of the inputs: the same device and inode, so a hard link or a
//!   symlink to an input is seen through (writing would truncate a file
//!   that is being read, memory-mapped: the run would die and the input
//!   would be lost);
//! - is a directory, or lies in a directory that does not exist;
//! - is named twice (two outputs would truncate and interleave one file;
//!   character devices such as `/dev/null` may be repeated).
//!
//! Standard output (`-`) is checked against the inputs through its
//! descriptor (`earlybird flows x.pcap >> x.pcap`), and may be named once.
//! Inputs that do not exist are skipped (opening them reports that). Errors
//! are [`Error::OutputPath`] naming the output (and the input it is). Only
//! metadata is read; nothing is opened for writing.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What an output path designates.
#[derive(Debug, PartialEq, Eq)]
enum Id {
    /// An existing file (device, inode); `shared` when it may be named
    /// twice (a character device).
    Inode { dev: u64, ino: u64, shared: bool },
    /// A file still to be created: its directory (canonical) and name.
    New(PathBuf, OsString),
    /// Standard output.
    Stdout,
}

/// The path that means standard output.
pub const STDOUT: &str = "-";

fn refuse(path: &Path, reason: String) -> Error {
    Error::OutputPath {
        path: path.to_path_buf(),
        reason,
    }
}

/// The identity of an existing file, following symlinks.
fn inode(m: &std::fs::Metadata) -> Id {
    Id::Inode {
        dev: m.dev(),
        ino: m.ino(),
        shared: m.file_type().is_char_device(),
    }
}

/// What `out` designates, or why it cannot be written.
fn id_of(out: &Path) -> Result<Id> {
    if out.as_os_str() == STDOUT {
        return Ok(Id::Stdout);
    }
    match std::fs::metadata(out) {
        Ok(m) if m.is_dir() => Err(refuse(out, "is a directory".into())),
        Ok(m) => Ok(inode(&m)),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            let Some(name) = out.file_name() else {
                return Err(refuse(out, "names a directory, not a file".into()));
            };
            let dir = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            match std::fs::canonicalize(dir) {
                Ok(d) if d.is_dir() => Ok(Id::New(d, name.to_os_string())),
                Ok(_) => Err(refuse(out, format!("{} is not a directory", dir.display()))),
                Err(_) => Err(refuse(
                    out,
                    format!("directory {} does not exist", dir.display()),
                )),
            }
        }
        Err(e) => Err(refuse(out, e.to_string())),
    }
}

/// The identity of what standard output writes to, if it can be told.
fn stdout_inode() -> Option<(u64, u64)> {
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    let m = std::fs::File::from(fd).metadata().ok()?;
    Some((m.dev(), m.ino()))
}

/// Checks every output against the inputs and the other outputs (see the
/// module docs). `outputs` may hold [`STDOUT`].
pub fn check(outputs: &[&Path], inputs: &[&Path]) -> Result<()> {
    let inputs: Vec<(&Path, u64, u64)> = inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| (*p, m.dev(), m.ino())))
        .collect();
    let mut seen: Vec<(&Path, Id)> = Vec::new();
    for &out in outputs {
        let id = id_of(out)?;
        let file = match &id {
            Id::Inode { dev, ino, .. } => Some((*dev, *ino)),
            Id::Stdout => stdout_inode(),
            Id::New(..) => None,
        };
        if let Some((dev, ino)) = file {
            if let Some((input, ..)) = inputs.iter().find(|i| (i.1, i.2) == (dev, ino)) {
                let what = if id == Id::Stdout {
                    "(standard output) "
                } else {
                    ""
                };
                return Err(refuse(
                    out,
                    format!(
                        "{what}is the input {} (the same file): refusing to overwrite an input",
                        input.display()
                    ),
                ));
            }
        }
        let shared = matches!(id, Id::Inode { shared: true, .. });
        if !shared {
            if let Some((first, _)) = seen.iter().find(|(_, s)| *s == id) {
                return Err(refuse(
                    out,
                    format!("names the same file as the output {}", first.display()),
                ));
            }
        }
        seen.push((out, id));
    }
    Ok(())
}

/// An output whose name does not end in the extension of what is written
/// (see [`require_extension`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: must end in .{ext} (the file is written as {})", path.display(), ext.to_ascii_uppercase())]
pub struct ExtensionError {
    /// The output.
    pub path: PathBuf,
    /// The extension it must have.
    pub ext: String,
}

/// Fails unless `path`'s extension is `ext` (ASCII case ignored), e.g. a
/// chart that must be a PNG; the error says what is expected.
pub fn require_extension(path: &Path, ext: &str) -> std::result::Result<(), ExtensionError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case(ext) => Ok(()),
        _ => Err(ExtensionError {
            path: path.to_path_buf(),
            ext: ext.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(outs: &[&Path], ins: &[&Path]) -> String {
        check(outs, ins).unwrap_err().to_string()
    }

    #[test]
    fn an_input_is_refused_through_links_and_other_names() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.pcap");
        std::fs::write(&input, b"capture").unwrap();
        let hard = d.path().join("hard.pcap");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = d.path().join("soft.csv");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        let dotted = d.path().join(".").join("in.pcap");
        for out in [&input, &hard, &soft, &dotted] {
            let e = err(&[out], &[&input]);
            assert!(
                e.contains(&out.display().to_string())
                    && e.contains(&format!("is the input {}", input.display())),
                "{e}"
            );
        }
        // Nothing was truncated.
        assert_eq!(std::fs::read(&input).unwrap(), b"capture");
        let other = d.path().join("other.csv");
        check(&[&other, Path::new("-")], &[&input]).unwrap();
    }

    #[test]
    fn directories_missing_directories_and_repeats_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = err(&[d.path()], &[]);
        assert!(e.contains("is a directory"), "{e}");
        let missing = d.path().join("no/such/out.csv");
        let e = err(&[&missing], &[]);
        assert!(
            e.contains(&missing.display().to_string()) && e.contains("does not exist"),
            "{e}"
        );
        let file = d.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let e = err(&[&file.join("out.csv")], &[]);
        assert!(e.contains("not a directory"), "{e}");
        let a = d.path().join("a.csv");
        let again = d.path().join("x/../a.csv");
        std::fs::create_dir(d.path().join("x")).unwrap();
        let e = err(&[&a, &again], &[]);
        assert!(e.contains("names the same file as the output"), "{e}");
        let e = err(&[Path::new("-"), Path::new("-")], &[]);
        assert!(e.contains("same file"), "{e}");
        let null = Path::new("/dev/null");
        check(&[null, null], &[]).unwrap();
    }

    #[test]
    fn extensions_are_required_case_insensitively() {
        require_extension(Path::new("a/chart.PNG"), "png").unwrap();
        for bad in ["chart", "chart.jpg", "png"] {
            let e = require_extension(Path::new(bad), "png").unwrap_err();
            assert_eq!((e.path.as_path(), e.ext.as_str()), (Path::new(bad), "png"));
            let e = e.to_string();
            assert!(e.contains(bad) && e.contains(".png"), "{e}");
        }
    }
}
