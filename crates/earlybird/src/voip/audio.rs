//! Audio on demand: the RTP payloads of calls kept on disk while they are
//! tracked (`voip --rtp-dir`), and a call's conversation written as a WAV
//! file from them (`calls wav`).
//!
//! Contract:
//! - [`Archive`] appends every RTP packet of a call's streams to
//!   `DIR/<start_ns>-<call id>/<sender>-<ssrc>.rtp` (the Call-ID with every
//!   byte outside `[A-Za-z0-9._@-]` as `_`, cut at 120 bytes), one record
//!   per packet: arrival ns (u64), RTP timestamp (u32), sequence number
//!   (u16), payload type (u8), a zero byte, payload length (u16), all
//!   little-endian, then the payload. At most `max_bytes` are kept per
//!   call; what is beyond is counted, not written. At most 256 files are
//!   open at once (the least recently written are closed and reopened
//!   for appending when needed). A write error is counted and the call's
//!   archive stops; tracking goes on.
//! - [`Archive::prune`] removes call folders whose files are older than a
//!   given age (wall clock: disk housekeeping, not call timing).
//! - [`write_wav`] (feature `tools`, in `audio/wav.rs`: the offline
//!   `calls wav`, not the tracking) reads a call's folder and writes 16-bit
//!   PCM at 8 kHz: stereo (caller left, callee right) or mixed to mono.
//!   For each direction the stream with the most G.711 (PCMU/PCMA)
//!   packets is decoded; samples go where their RTP timestamp puts them (a
//!   gap is silence), the two directions aligned by arrival time. A
//!   direction whose audio is another codec is an error naming the codec.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[cfg(feature = "tools")]
mod wav;
#[cfg(feature = "tools")]
pub use wav::{alaw_to_linear, ulaw_to_linear, write_wav};

/// Files open at once.
const MAX_OPEN: usize = 256;

/// The folder of a call under `dir`.
pub fn call_dir(dir: &Path, start_ns: u64, call_id: &str) -> PathBuf {
    let safe: String = call_id
        .bytes()
        .take(120)
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"._@-".contains(&b) {
                b as char
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{start_ns}-{safe}"))
}

/// What the archive counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveCounters {
    /// Packets written.
    pub packets: u64,
    /// Packets not written: the call's size bound.
    pub over_size: u64,
    /// Packets not written: a write error.
    pub errors: u64,
}

/// The RTP payload archive (see the module docs).
pub struct Archive {
    dir: PathBuf,
    max_bytes: u64,
    open: HashMap<PathBuf, (BufWriter<File>, u64)>,
    /// Bytes written per call folder.
    sizes: HashMap<PathBuf, u64>,
    failed: HashMap<PathBuf, ()>,
    tick: u64,
    /// What was counted.
    pub counters: ArchiveCounters,
}

impl Archive {
    /// An archive in `dir` (created), keeping at most `max_bytes` per call.
    pub fn new(dir: &Path, max_bytes: u64) -> Result<Archive> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Output {
            name: format!("RTP archive {}", dir.display()),
            reason: format!("cannot create: {e}"),
        })?;
        Ok(Archive {
            dir: dir.to_path_buf(),
            max_bytes,
            open: HashMap::new(),
            sizes: HashMap::new(),
            failed: HashMap::new(),
            tick: 0,
            counters: ArchiveCounters::default(),
        })
    }

    /// Appends one packet of a stream of the call that started at
    /// `start_ns` (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        start_ns: u64,
        call_id: &str,
        sender: &str,
        ssrc: u32,
        arrival_ns: u64,
        rtp_ts: u32,
        seq: u16,
        pt: u8,
        payload: &[u8],
    ) {
        let folder = call_dir(&self.dir, start_ns, call_id);
        if self.failed.contains_key(&folder) {
            self.counters.errors += 1;
            return;
        }
        let len = 18 + payload.len().min(u16::MAX as usize);
        let size = self.sizes.entry(folder.clone()).or_insert(0);
        if *size + len as u64 > self.max_bytes {
            self.counters.over_size += 1;
            return;
        }
        *size += len as u64;
        let path = folder.join(format!("{sender}-{ssrc:08x}.rtp"));
        self.tick += 1;
        if !self.open.contains_key(&path) {
            if self.open.len() >= MAX_OPEN {
                self.close_oldest();
            }
            let f = std::fs::create_dir_all(&folder)
                .and_then(|_| OpenOptions::new().create(true).append(true).open(&path));
            match f {
                Ok(f) => {
                    self.open
                        .insert(path.clone(), (BufWriter::new(f), self.tick));
                }
                Err(_) => {
                    self.counters.errors += 1;
                    self.failed.insert(folder, ());
                    return;
                }
            }
        }
        let Some((w, used)) = self.open.get_mut(&path) else {
            return;
        };
        *used = self.tick;
        let mut head = [0u8; 18];
        head[..8].copy_from_slice(&arrival_ns.to_le_bytes());
        head[8..12].copy_from_slice(&rtp_ts.to_le_bytes());
        head[12..14].copy_from_slice(&seq.to_le_bytes());
        head[14] = pt;
        head[16..18].copy_from_slice(&(len as u16 - 18).to_le_bytes());
        let ok = w
            .write_all(&head)
            .and_then(|_| w.write_all(&payload[..len - 18]));
        if ok.is_err() {
            self.counters.errors += 1;
            self.open.remove(&path);
            self.failed.insert(folder, ());
        } else {
            self.counters.packets += 1;
        }
    }

    fn close_oldest(&mut self) {
        let mut by_age: Vec<(u64, PathBuf)> = self
            .open
            .iter()
            .map(|(p, (_, t))| (*t, p.clone()))
            .collect();
        by_age.sort_unstable();
        for (_, p) in by_age.into_iter().take(MAX_OPEN / 2) {
            if let Some((mut w, _)) = self.open.remove(&p) {
                if w.flush().is_err() {
                    self.counters.errors += 1;
                }
            }
        }
    }

    /// Closes the files of the call that started at `start_ns`.
    pub fn close_call(&mut self, start_ns: u64, call_id: &str) {
        let folder = call_dir(&self.dir, start_ns, call_id);
        let paths: Vec<PathBuf> = self
            .open
            .keys()
            .filter(|p| p.parent() == Some(folder.as_path()))
            .cloned()
            .collect();
        for p in paths {
            if let Some((mut w, _)) = self.open.remove(&p) {
                if w.flush().is_err() {
                    self.counters.errors += 1;
                }
            }
        }
        self.sizes.remove(&folder);
        self.failed.remove(&folder);
    }

    /// Flushes and closes every file.
    pub fn finish(&mut self) {
        for (_, (mut w, _)) in self.open.drain() {
            if w.flush().is_err() {
                self.counters.errors += 1;
            }
        }
    }

    /// Removes the call folders under `dir` last written more than
    /// `max_age` ago; returns how many.
    pub fn prune(dir: &Path, max_age: std::time::Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > max_age);
            if old && e.path().is_dir() && std::fs::remove_dir_all(e.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_folders_are_safe_names() {
        let d = call_dir(Path::new("/x"), 5, "a/b c@d..e");
        assert_eq!(d, Path::new("/x/5-a_b_c@d..e"));
    }
}
