//! Port-based baseline: the class a (protocol, port) pair had most often in
//! training.
//!
//! Contract: training counts labels per `(proto, server port)` for server
//! ports below [`EPHEMERAL`]; a flow whose "server" port is in the
//! ephemeral range says nothing about the next flow on that port and
//! counts for its protocol instead. A flow is looked up by `(proto, dport)`,
//! then `(proto, min(sport, dport))` (the lower port is usually the service
//! when the client/server roles were guessed wrong), then by the majority
//! class of its protocol among those ephemeral-port training flows (what
//! the table knows of flows on ports it has not learnt); when there is
//! none the answer is `None` (unknown). Confidence is the majority's count over the key's
//! training flows plus one (`n / (total + 1)`), so a port seen once is
//! not certain and a threshold can ask for evidence. Lookup is a binary
//! search in sorted arrays: no allocation, no panic.

use std::collections::BTreeMap;

use super::dataset::Dataset;
use super::model::Invalid;

/// Lowest ephemeral port (Linux's default range starts here; IANA's at
/// 49152): server ports at or above it are not learnt.
pub const EPHEMERAL: u16 = 32768;

/// A (key, class, confidence) entry.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// `proto << 16 | port` for ports, `proto` for protocols.
    pub key: u32,
    /// Majority class.
    pub class: u16,
    /// The class's training flows of the key over all of them plus one.
    pub share: f32,
}

/// A trained port table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PortTable {
    /// Sorted by key.
    pub ports: Vec<Entry>,
    /// Sorted by key (protocol number).
    pub protos: Vec<Entry>,
}

fn majority(map: BTreeMap<u32, BTreeMap<u16, usize>>) -> Vec<Entry> {
    map.into_iter()
        .map(|(key, counts)| {
            let total: usize = counts.values().sum();
            let (class, n) = counts
                .iter()
                .max_by_key(|&(c, n)| (*n, std::cmp::Reverse(*c)))
                .map(|(c, n)| (*c, *n))
                .unwrap_or((0, 0));
            Entry {
                key,
                class,
                share: n as f32 / (total + 1) as f32,
            }
        })
        .collect()
}

fn find(v: &[Entry], key: u32) -> Option<&Entry> {
    v.binary_search_by_key(&key, |e| e.key).ok().map(|i| &v[i])
}

impl PortTable {
    /// Counts labels per (protocol, server port) and, for ephemeral server
    /// ports, per protocol.
    pub fn train(data: &Dataset) -> PortTable {
        let mut ports: BTreeMap<u32, BTreeMap<u16, usize>> = BTreeMap::new();
        let mut protos: BTreeMap<u32, BTreeMap<u16, usize>> = BTreeMap::new();
        for s in &data.samples {
            if s.dport < EPHEMERAL {
                let key = (s.proto as u32) << 16 | s.dport as u32;
                *ports.entry(key).or_default().entry(s.label).or_default() += 1;
            } else {
                *protos
                    .entry(s.proto as u32)
                    .or_default()
                    .entry(s.label)
                    .or_default() += 1;
            }
        }
        PortTable {
            ports: majority(ports),
            protos: majority(protos),
        }
    }

    /// Checks a loaded table: sorted keys, classes in range.
    pub fn validate(&self, classes: usize) -> Result<(), Invalid> {
        for v in [&self.ports, &self.protos] {
            if v.windows(2).any(|w| w[0].key >= w[1].key) {
                return Err(Invalid("port table keys are not sorted".into()));
            }
            if v.iter().any(|e| e.class as usize >= classes) {
                return Err(Invalid("port table class out of range".into()));
            }
        }
        Ok(())
    }

    /// Class and confidence for a flow, `None` when its protocol is unknown.
    #[inline]
    pub fn predict(&self, proto: u8, sport: u16, dport: u16) -> Option<(u16, f32)> {
        let key = |p: u16| (proto as u32) << 16 | p as u32;
        find(&self.ports, key(dport))
            .or_else(|| find(&self.ports, key(sport.min(dport))))
            .or_else(|| find(&self.protos, proto as u32))
            .map(|e| (e.class, e.share))
    }
}

#[cfg(test)]
mod tests {
    use super::super::dataset::Sample;
    use super::super::testutil::patterns;
    use super::*;

    #[test]
    fn learns_port_classes() {
        let d = patterns(20, 0, 1);
        let t = PortTable::train(&d);
        t.validate(3).unwrap();
        // 20 flows per port, all of one class: confidence 20/21.
        for s in &d.samples {
            assert_eq!(
                t.predict(s.proto, s.sport, s.dport),
                Some((s.label, 20.0 / 21.0))
            );
        }
    }

    #[test]
    fn fallbacks() {
        let mut d = Dataset {
            classes: vec!["dns".into(), "web".into(), "x".into()],
            samples: vec![],
        };
        let mut add = |proto, dport, label| {
            d.samples.push(Sample {
                early: vec![],
                proto,
                sport: 50000,
                dport,
                label,
                group: "g".into(),
            })
        };
        add(17, 53, 0);
        add(17, 53, 0);
        add(17, 53, 2);
        add(6, 80, 1);
        add(6, 8080, 1);
        add(6, 22, 2);
        // Ephemeral "server" ports count for the protocol only.
        add(17, 50001, 2);
        add(17, 50001, 2);
        let t = PortTable::train(&d);
        let (c, share) = t.predict(17, 40000, 53).unwrap();
        assert_eq!(c, 0);
        assert!((share - 2.0 / 4.0).abs() < 1e-6);
        // Reversed roles: the lower port is the service.
        assert_eq!(t.predict(6, 80, 61000), Some((1, 0.5)));
        assert!(t.ports.iter().all(|e| (e.key & 0xffff) < EPHEMERAL as u32));
        // Unseen port: the majority of the protocol's flows on ports the
        // table does not learn (both UDP ones: class 2)...
        let (c, share) = t.predict(17, 40000, 50001).unwrap();
        assert_eq!(c, 2);
        assert!((share - 2.0 / 3.0).abs() < 1e-6);
        // ... unknown when the protocol had no such flow.
        assert_eq!(t.predict(6, 60000, 61000), None);
        // Unseen protocol: unknown.
        assert_eq!(t.predict(132, 1, 2), None);
    }
}
