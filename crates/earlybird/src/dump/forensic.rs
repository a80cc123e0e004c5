//! Forensic pcaps: when an alarm is raised, the packets of the seconds
//! before it, taken from the shards' packet rings.
//!
//! Contract: the alarms run on the exporter thread, the rings in the shard
//! threads. [`Forensics::ask`] (exporter thread) appends a [`Request`] —
//! the window of packet time and the file for each shard — and returns the
//! files it will hold: `DIR/alarm-TIME-LABEL.pcap` with one shard,
//! `DIR/alarm-TIME-LABEL-sK.pcap` (shard K's packets) with several.
//! Requests are numbered in the order asked; each shard serves every
//! request once, in order: between batches while it runs
//! ([`Forensics::serve`], one atomic load per call when nothing is asked),
//! and at its end it hands its ring over ([`Forensics::hand_over`]) so
//! that the requests of the run's last seconds, decided after the shards
//! stopped, are served by the exporter thread from the same ring
//! ([`Forensics::serve_rest`]). A ring keeps the window plus a margin of
//! packet time (the shards run ahead of the exporter thread's merged
//! seconds) within its byte bound; a file holds what the ring still had of
//! the window (`Served::packets`). Write errors name the file and are
//! returned for the run's report; they stop nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::ring::PacketRing;
use crate::error::Error;
use crate::time::Nanos;

/// What `--alarm-pcap-dir` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForensicConfig {
    /// Directory of the pcaps (created if missing).
    pub dir: PathBuf,
    /// Seconds of packets before (and including) the alarm's second.
    pub window: Nanos,
    /// Packet time a ring keeps beyond the window (the shards run ahead of
    /// the merged seconds).
    pub margin: Nanos,
    /// Captured bytes the rings keep, all shards together.
    pub max_bytes: usize,
}

/// One alarm's pcap(s).
#[derive(Debug, Clone)]
struct Request {
    from: Nanos,
    to: Nanos,
    /// One file per shard.
    files: Vec<PathBuf>,
}

/// What a shard wrote for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The file.
    pub file: PathBuf,
    /// Packets written (0: the ring no longer held the window, or had no
    /// packet in it).
    pub packets: u64,
}

/// The requests of a run (see the module docs).
pub struct Forensics {
    cfg: ForensicConfig,
    shards: usize,
    asked: AtomicUsize,
    requests: Mutex<Vec<Request>>,
    /// Rings handed over at the end, with how many requests each had served.
    rings: Mutex<Vec<(usize, usize, PacketRing)>>,
}

impl std::fmt::Debug for Forensics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forensics")
            .field("cfg", &self.cfg)
            .field("asked", &self.asked)
            .finish_non_exhaustive()
    }
}

impl Forensics {
    /// The requests of a run of `shards` shards (the directory is created).
    pub fn new(cfg: ForensicConfig, shards: usize) -> crate::Result<Forensics> {
        std::fs::create_dir_all(&cfg.dir).map_err(|e| crate::Error::Output {
            name: format!("alarm pcap directory {}", cfg.dir.display()),
            reason: format!("cannot create: {e}"),
        })?;
        Ok(Forensics {
            cfg,
            shards: shards.max(1),
            asked: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            rings: Mutex::new(Vec::new()),
        })
    }

    /// A shard's ring: the window and the margin, its share of the bytes.
    pub fn ring(&self) -> PacketRing {
        PacketRing::new(
            self.cfg.window.saturating_add(self.cfg.margin),
            self.cfg.max_bytes / self.shards,
        )
    }

    /// Asks for the packets of the window ending with second `second`
    /// (Unix seconds of packet time) for the alarm `label`; returns the
    /// files that will hold them.
    pub fn ask(&self, second: u64, label: &str) -> Vec<PathBuf> {
        let to = (second + 1).saturating_mul(crate::time::SECOND) - 1;
        let from = (to + 1).saturating_sub(self.cfg.window);
        let stem: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let name = |suffix: String| {
            self.cfg
                .dir
                .join(format!("alarm-{second}-{stem}{suffix}.pcap"))
        };
        let files: Vec<PathBuf> = if self.shards == 1 {
            vec![name(String::new())]
        } else {
            (0..self.shards).map(|k| name(format!("-s{k}"))).collect()
        };
        let mut r = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        r.push(Request {
            from,
            to,
            files: files.clone(),
        });
        self.asked.store(r.len(), Ordering::Release);
        files
    }

    /// Shard `shard`, whose ring is `ring` and which has served `done`
    /// requests, serves the ones asked since.
    #[inline]
    pub fn serve(
        &self,
        shard: usize,
        ring: &PacketRing,
        done: &mut usize,
    ) -> Vec<Result<Served, Error>> {
        if self.asked.load(Ordering::Acquire) == *done {
            return Vec::new();
        }
        self.serve_from(shard, ring, done)
    }

    #[cold]
    fn serve_from(
        &self,
        shard: usize,
        ring: &PacketRing,
        done: &mut usize,
    ) -> Vec<Result<Served, Error>> {
        let pending: Vec<Request> = {
            let r = self.requests.lock().unwrap_or_else(|p| p.into_inner());
            r[(*done).min(r.len())..].to_vec()
        };
        *done += pending.len();
        pending
            .iter()
            .filter_map(|q| q.files.get(shard).map(|f| write(ring, f, q.from, q.to)))
            .collect()
    }

    /// Shard `shard` ends: its ring and the requests it served go to the
    /// exporter thread.
    pub fn hand_over(&self, shard: usize, ring: PacketRing, done: usize) {
        let mut rings = self.rings.lock().unwrap_or_else(|p| p.into_inner());
        rings.push((shard, done, ring));
    }

    /// At the end of the run: the requests no shard served yet, from the
    /// rings handed over.
    pub fn serve_rest(&self) -> Vec<Result<Served, Error>> {
        let mut rings = std::mem::take(&mut *self.rings.lock().unwrap_or_else(|p| p.into_inner()));
        let mut out = Vec::new();
        for (shard, done, ring) in &mut rings {
            out.extend(self.serve(*shard, ring, done));
        }
        out
    }
}

/// Writes the window `[from, to]` of `ring` to `file`.
fn write(ring: &PacketRing, file: &Path, from: Nanos, to: Nanos) -> Result<Served, Error> {
    ring.write_window(file, from, to).map(|w| Served {
        file: file.to_path_buf(),
        packets: w.packets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::LinkType;
    use crate::time::SECOND;

    fn cfg(dir: &Path) -> ForensicConfig {
        ForensicConfig {
            dir: dir.to_path_buf(),
            window: 2 * SECOND,
            margin: 10 * SECOND,
            max_bytes: 1 << 20,
        }
    }

    #[test]
    fn each_shard_serves_each_request_once_and_the_rest_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let f = Forensics::new(cfg(dir.path()), 2).unwrap();
        let mut rings = [f.ring(), f.ring()];
        for t in 0..10u64 {
            for (k, r) in rings.iter_mut().enumerate() {
                r.push(
                    100 * SECOND + t * SECOND / 2,
                    &[k as u8; 60],
                    60,
                    LinkType::Ethernet,
                );
            }
        }
        let mut done = [0, 0];
        assert!(f.serve(0, &rings[0], &mut done[0]).is_empty());
        // Seconds 102 and 103: packets at 102.0, 102.5, 103.0, 103.5.
        let files = f.ask(103, "packets:cusum");
        assert_eq!(files.len(), 2);
        assert!(
            files[1].ends_with("alarm-103-packets-cusum-s1.pcap"),
            "{files:?}"
        );
        let got = f.serve(0, &rings[0], &mut done[0]);
        assert_eq!(
            got.into_iter()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect::<Vec<_>>(),
            vec![Ok(Served {
                file: files[0].clone(),
                packets: 4
            })]
        );
        assert!(
            f.serve(0, &rings[0], &mut done[0]).is_empty(),
            "served once"
        );
        // Shard 1 ended before it served: the exporter thread does.
        let [r0, r1] = rings;
        f.hand_over(1, r1, done[1]);
        f.hand_over(0, r0, done[0]);
        let rest = f.serve_rest();
        assert_eq!(
            rest.into_iter()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect::<Vec<_>>(),
            vec![Ok(Served {
                file: files[1].clone(),
                packets: 4
            })]
        );
        assert!(files.iter().all(|p| p.exists()));
    }
}
