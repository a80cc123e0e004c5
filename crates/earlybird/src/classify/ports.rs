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
//! not certain and a threshold can ask for evidence. The table is kept
//! (and stored in a model file) as sorted arrays; lookup reads an index
//! built from them when the table is made or loaded ([`PortTable::new`]):
//! per protocol that has ports, the entry of each of the 65,536 ports
//! (128 KiB), and the entry of each protocol, so a flow costs at most
//! three array reads instead of three binary searches; a table of
//! 65,535 port entries or more is searched instead. Lookup does not
//! allocate or panic.

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
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(from = "Stored", into = "Stored")]
pub struct PortTable {
    /// Sorted by key.
    ports: Vec<Entry>,
    /// Sorted by key (protocol number).
    protos: Vec<Entry>,
    index: Index,
}

/// The table as a model file stores it.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Stored {
    ports: Vec<Entry>,
    protos: Vec<Entry>,
}

impl From<Stored> for PortTable {
    fn from(s: Stored) -> PortTable {
        PortTable::new(s.ports, s.protos)
    }
}

impl From<PortTable> for Stored {
    fn from(t: PortTable) -> Stored {
        Stored {
            ports: t.ports,
            protos: t.protos,
        }
    }
}

impl PartialEq for PortTable {
    /// The index is made from the arrays: they alone are compared.
    fn eq(&self, o: &PortTable) -> bool {
        self.ports == o.ports && self.protos == o.protos
    }
}

impl std::fmt::Debug for PortTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortTable")
            .field("ports", &self.ports)
            .field("protos", &self.protos)
            .finish_non_exhaustive()
    }
}

/// Where each key's entry is, by protocol: position + 1 in `ports` or
/// `protos`, 0 for none (the first entry of a key when a table that was
/// not validated repeats it).
#[derive(Clone)]
struct Index {
    /// Per protocol number, 1 + its slot in `by_port`, 0 when it has no
    /// port entries; all 0 when the table is searched instead.
    proto_ports: Box<[u16; 256]>,
    /// Per protocol with port entries, an entry position per port.
    by_port: Vec<Box<[u16; 1 << 16]>>,
    /// Per protocol number, its entry position in `protos`.
    by_proto: Box<[u16; 256]>,
    /// The table has too many entries for the index: binary search.
    search: bool,
}

impl Index {
    fn new(ports: &[Entry], protos: &[Entry]) -> Index {
        let mut ix = Index {
            proto_ports: Box::new([0; 256]),
            by_port: Vec::new(),
            by_proto: Box::new([0; 256]),
            search: ports.len() >= usize::from(u16::MAX) || protos.len() >= usize::from(u16::MAX),
        };
        if ix.search {
            return ix;
        }
        for (i, e) in ports.iter().enumerate() {
            // A key above 0xFF_FFFF names no u8 protocol: never found.
            let Ok(proto) = u8::try_from(e.key >> 16) else {
                continue;
            };
            let slot = match ix.proto_ports[usize::from(proto)] {
                0 => {
                    ix.by_port.push(Box::new([0; 1 << 16]));
                    ix.proto_ports[usize::from(proto)] = ix.by_port.len() as u16;
                    ix.by_port.len() - 1
                }
                k => usize::from(k) - 1,
            };
            let at = &mut ix.by_port[slot][(e.key & 0xffff) as usize];
            if *at == 0 {
                *at = i as u16 + 1;
            }
        }
        for (i, e) in protos.iter().enumerate() {
            if let Ok(proto) = u8::try_from(e.key) {
                let at = &mut ix.by_proto[usize::from(proto)];
                if *at == 0 {
                    *at = i as u16 + 1;
                }
            }
        }
        ix
    }
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

/// The entry at index position `i` (1-based; 0 is none).
#[inline]
fn at(v: &[Entry], i: u16) -> Option<&Entry> {
    v.get(usize::from(i).wrapping_sub(1))
}

fn find(v: &[Entry], key: u32) -> Option<&Entry> {
    v.binary_search_by_key(&key, |e| e.key).ok().map(|i| &v[i])
}

impl PortTable {
    /// A table of these entries (each array sorted by key), its index
    /// built.
    pub fn new(ports: Vec<Entry>, protos: Vec<Entry>) -> PortTable {
        let index = Index::new(&ports, &protos);
        PortTable {
            ports,
            protos,
            index,
        }
    }

    /// The (protocol, port) entries, sorted by key.
    pub fn ports(&self) -> &[Entry] {
        &self.ports
    }

    /// The per-protocol entries, sorted by key.
    pub fn protos(&self) -> &[Entry] {
        &self.protos
    }

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
        PortTable::new(majority(ports), majority(protos))
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
        let ix = &self.index;
        if ix.search {
            return self.search(proto, sport, dport);
        }
        let e = match ix.proto_ports[usize::from(proto)] {
            0 => None,
            k => ix.by_port.get(usize::from(k) - 1).and_then(|t| {
                at(&self.ports, t[usize::from(dport)])
                    .or_else(|| at(&self.ports, t[usize::from(sport.min(dport))]))
            }),
        };
        e.or_else(|| at(&self.protos, ix.by_proto[usize::from(proto)]))
            .map(|e| (e.class, e.share))
    }

    /// [`PortTable::predict`] by binary search, for a table too large to
    /// index.
    #[cold]
    #[inline(never)]
    fn search(&self, proto: u8, sport: u16, dport: u16) -> Option<(u16, f32)> {
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
        assert!(t
            .ports()
            .iter()
            .all(|e| (e.key & 0xffff) < EPHEMERAL as u32));
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

    /// The index answers what the binary search answers, for every port
    /// of the protocols with entries, others and none; a table too large
    /// for the index is searched and answers the same.
    #[test]
    fn index_answers_as_the_search() {
        let mut x: u32 = 12345;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            x >> 8
        };
        let mut ports: Vec<Entry> = (0..3000)
            .map(|_| {
                let proto = [6u32, 17, 132, 255][(next() % 4) as usize];
                Entry {
                    key: (proto << 16) | (next() % 65536),
                    class: (next() % 7) as u16,
                    share: 0.5,
                }
            })
            .collect();
        ports.sort_by_key(|e| e.key);
        ports.dedup_by_key(|e| e.key);
        let protos = vec![
            Entry {
                key: 17,
                class: 3,
                share: 0.25,
            },
            Entry {
                key: 58,
                class: 4,
                share: 0.75,
            },
        ];
        let t = PortTable::new(ports, protos);
        t.validate(7).unwrap();
        assert!(!t.index.search);
        for proto in [6u8, 17, 58, 132, 255, 1] {
            for dport in 0..=u16::MAX {
                let sport = (next() % 65536) as u16;
                assert_eq!(
                    t.predict(proto, sport, dport),
                    t.search(proto, sport, dport),
                    "{proto} {sport} {dport}"
                );
            }
        }
        let big: Vec<Entry> = (0..70_000u32)
            .map(|k| Entry {
                key: ((6 + k / 65536) << 16) | (k % 65536),
                class: 1,
                share: 1.0,
            })
            .collect();
        let t = PortTable::new(big, vec![]);
        assert!(t.index.search);
        assert_eq!(t.predict(6, 60000, 443), Some((1, 1.0)));
        assert_eq!(t.predict(17, 60000, 9000), None);
        // What a model file stores: the arrays, the index made again.
        let json = serde_json::to_string(&PortTable::new(vec![], vec![])).unwrap();
        assert_eq!(json, r#"{"ports":[],"protos":[]}"#);
    }
}
