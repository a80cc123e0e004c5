//! What a model was trained on and how it scored on data it did not see,
//! recorded in the model file so that an evaluation cannot silently score
//! a model on its own training captures.
//!
//! Contract: a [`FileDigest`] names a file by its base name, size and
//! SHA-256 of its contents ([`FileDigest::of`] reads the whole file; an
//! unreadable file is [`Error::Io`] naming it). Two files are the same
//! capture when their digests are equal, whatever their names or folders
//! ([`overlap`]). [`HeldOut`] is what `train` measured on held-out capture
//! files at the model's threshold; it is absent when the model was trained
//! on everything it was given.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A file by content.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileDigest {
    /// Base name of the file when the model was trained.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the contents, lower-case hex (as `sha256sum` prints it).
    pub sha256: String,
}

impl FileDigest {
    /// Reads `path` and hashes it.
    pub fn of(path: &Path) -> Result<FileDigest> {
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut bytes = 0u64;
        loop {
            let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            bytes += n as u64;
        }
        let sha256 = h
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        Ok(FileDigest {
            name,
            bytes,
            sha256,
        })
    }
}

/// Scores measured by `train` on held-out capture files.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HeldOut {
    /// Labelled flows evaluated.
    pub flows: usize,
    /// Capture files they came from.
    pub captures: usize,
    /// Threshold the scores were measured at.
    pub threshold: f32,
    /// Share of the flows the model answered (not unknown).
    pub coverage: f64,
    /// Share of the answered flows answered right.
    pub precision: f64,
    /// Share of all flows answered right (unknown counts as wrong).
    pub accuracy: f64,
    /// Accuracy of always answering the most frequent class.
    pub majority: f64,
}

impl std::fmt::Display for HeldOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "on {} held-out flows of {} captures at threshold {}: precision {:.1} % where it answers, coverage {:.1} %, accuracy {:.1} % (majority class {:.1} %)",
            self.flows,
            self.captures,
            self.threshold,
            100.0 * self.precision,
            100.0 * self.coverage,
            100.0 * self.accuracy,
            100.0 * self.majority
        )
    }
}

/// The `candidates` whose contents are one of the `trained` files, as
/// (candidate name, training name) pairs in the order of `candidates`.
pub fn overlap<'a>(
    trained: &'a [FileDigest],
    candidates: &'a [FileDigest],
) -> Vec<(&'a str, &'a str)> {
    let by_hash: std::collections::HashMap<&str, &str> = trained
        .iter()
        .map(|d| (d.sha256.as_str(), d.name.as_str()))
        .collect();
    candidates
        .iter()
        .filter_map(|c| {
            by_hash
                .get(c.sha256.as_str())
                .map(|t| (c.name.as_str(), *t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_name_contents_not_paths() {
        let dir = std::env::temp_dir().join(format!("eb-provenance-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b, c) = (
            dir.join("a.pcap"),
            dir.join("copy.pcap"),
            dir.join("c.pcap"),
        );
        std::fs::write(&a, b"abc").unwrap();
        std::fs::write(&b, b"abc").unwrap();
        std::fs::write(&c, b"abd").unwrap();
        let da = FileDigest::of(&a).unwrap();
        // sha256("abc"), as sha256sum prints it.
        assert_eq!(
            da.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!((da.name.as_str(), da.bytes), ("a.pcap", 3));
        let (db, dc) = (FileDigest::of(&b).unwrap(), FileDigest::of(&c).unwrap());
        let trained = [da];
        assert_eq!(
            overlap(&trained, &[dc.clone(), db.clone()]),
            vec![("copy.pcap", "a.pcap")]
        );
        assert!(overlap(&trained, &[dc]).is_empty());
        let e = FileDigest::of(&dir.join("missing.pcap")).unwrap_err();
        assert!(e.to_string().contains("missing.pcap"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
