//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A `Write` that appends into a shared buffer (an exporter owns its
/// writer; the test keeps a clone to read what was written).
#[derive(Clone, Default)]
pub struct Shared(pub Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `../shared/corpus` beside the project root, if present.
pub fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: corpus not found at {} (the test needs ../shared/corpus beside the project)",
            p.display()
        );
        None
    }
}

/// The project's `testdata/` directory.
pub fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every capture-like file under `dir`, recursively, sorted.
pub fn captures(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let skip = [".out", ".txt", ".md", ".json", ".csv", ".py", ".sh", ".log"]
                    .iter()
                    .any(|s| name.ends_with(s));
                if !skip {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Protocol name as nDPI prints it → IP protocol number.
pub fn proto_number(name: &str) -> Option<u8> {
    Some(match name {
        "TCP" => 6,
        "UDP" => 17,
        "ICMP" => 1,
        "ICMPV6" => 58,
        "IGMP" => 2,
        "ESP" => 50,
        "OSPF" => 89,
        "PGM" => 113,
        "SCTP" => 132,
        "GRE" => 47,
        n => return n.parse().ok(),
    })
}

/// Minimal CSV line splitter (the truth files have no quoted commas in the
/// columns we read; quoted fields are unquoted).
pub fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut q = false;
    for ch in line.chars() {
        match ch {
            '"' => q = !q,
            ',' if !q => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// A model seen only through the three required `Classifier` methods: no
/// fast form (the flow table then calls `classify`) and not costly (it runs
/// inline, never on the classifier pool).
pub struct ClassifyOnly(pub std::sync::Arc<dyn earlybird::classify::Classifier>);

impl earlybird::classify::Classifier for ClassifyOnly {
    fn packets_needed(&self) -> usize {
        self.0.packets_needed()
    }
    fn classify(
        &self,
        f: &earlybird::classify::FlowFeatures<'_>,
    ) -> earlybird::flow::record::Verdict {
        self.0.classify(f)
    }
    fn classes(&self) -> &[String] {
        self.0.classes()
    }
}
