//! Self-labels: the payload labellers (`tls`, `http`, `dns`, `ssh`) name
//! flows whose payload is in clear, and those names become the training
//! labels of the early statistical model, with no ground-truth file.
//! Behind `earlybird train --self-labels`.
//!
//! Contract:
//! - [`PayloadFields`] finds the labellers' fields among a run's analyzer
//!   fields; [`PayloadFields::label`] gives a flow's payload label with
//!   [`crate::payload_label::combine`] (no statistical verdict: a flow
//!   without a payload name has no self-label).
//! - The class of a labelled flow depends on the [`LabelLevel`]:
//!   `category` (default) the category of the service map (or of the
//!   protocol for a name no map knows), `app` the application (or the
//!   protocol: `TLS`, `QUIC`, `HTTP`, `DNS`, `SSH`), `proto` the protocol
//!   the name was read from (as nDPI's master protocol names them).
//! - [`Reservoir`] keeps at most `per_class` flows of every class, each
//!   class a uniform sample of the flows offered to it (reservoir
//!   sampling, algorithm R, one seeded generator): the same flows offered
//!   in the same order with the same seed keep the same samples. Its
//!   memory is bounded by classes × `per_class` × (one sample and its
//!   early packets) and reported by [`Reservoir::bytes`]; flows not kept
//!   are counted.
//! - [`dataset_from_captures`] reads each capture once with the labellers
//!   turned on, offers every payload-labelled flow to one reservoir (files
//!   in the given order, flows in [`pipeline::collect`]'s order) and
//!   returns the reservoir's samples as a data set whose groups are the
//!   capture file names, so the split by file of `train --split` applies.
//!
//! Runs offline; memory is the reservoir plus one capture's flows at a
//! time. Never panics on input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::workflow::CaptureStats;
use crate::classify::dataset::{Dataset, LabelLevel, Sample, SplitMix64};
use crate::classify::payload_label::{combine, Label, Names, Source};
use crate::classify::services::Services;
use crate::error::{Error, Result};
use crate::features::early::EarlyPkt;
use crate::pipeline::{self, ModelRef, RunOptions};
use crate::schema::OwnedValue;
use crate::source::CaptureFile;

/// The analyzers whose fields give payload labels.
pub const ANALYZERS: [&str; 4] = ["tls", "http", "dns", "ssh"];

/// Default number of flows kept per class.
pub const DEFAULT_PER_CLASS: usize = 2000;

/// How flows are self-labelled.
#[derive(Clone)]
pub struct SelfLabels {
    /// The service map (names → application and category).
    pub services: Arc<Services>,
    /// Which part of the payload label is the class.
    pub level: LabelLevel,
    /// Reservoir capacity per class (≥ 1).
    pub per_class: usize,
    /// The user's map files layered on the built-in one (provenance).
    pub map_files: Vec<PathBuf>,
}

impl std::fmt::Debug for SelfLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfLabels")
            .field("services", &self.services)
            .field("level", &self.level)
            .field("per_class", &self.per_class)
            .field("map_files", &self.map_files)
            .finish()
    }
}

impl SelfLabels {
    /// The built-in map with `maps` layered on top, in order.
    pub fn new(maps: &[PathBuf], level: LabelLevel, per_class: usize) -> Result<SelfLabels> {
        if per_class == 0 {
            return Err(Error::Config(
                "the reservoir must keep at least one flow per class".into(),
            ));
        }
        let mut s = Services::builtin().map_err(|e| Error::Config(e.to_string()))?;
        for m in maps {
            s.add_file(m).map_err(|e| Error::Config(e.to_string()))?;
        }
        Ok(SelfLabels {
            services: Arc::new(s),
            level,
            per_class,
            map_files: maps.to_vec(),
        })
    }

    /// The class of a payload label at this level.
    pub fn class<'a>(&self, label: &'a Label) -> &'a str {
        match self.level {
            LabelLevel::App => &label.app,
            LabelLevel::Category => &label.category,
            LabelLevel::Proto => match label.source {
                Source::Sni => "TLS",
                Source::Quic => "QUIC",
                Source::Http => "HTTP",
                Source::Dns => "DNS",
                Source::Ssh => "SSH",
                _ => "",
            },
        }
    }

    /// One line for the model file's `trained_on`.
    pub fn describe(&self) -> String {
        let mut maps = String::from("built-in service map");
        for m in &self.map_files {
            maps.push_str(" + ");
            maps.push_str(&m.display().to_string());
        }
        format!(
            "self-labels ({} of the payload label: tls/quic sni, http host, dns query, ssh banners; {maps}; reservoir of {} flows per class)",
            self.level.name(),
            self.per_class
        )
    }
}

/// Where the labellers' fields sit in a record's analyzer values.
#[derive(Debug, Clone, Copy, Default)]
pub struct PayloadFields {
    sni: Option<usize>,
    quic_version: Option<usize>,
    http_host: Option<usize>,
    ssh_client: Option<usize>,
    ssh_server: Option<usize>,
    dns_query: Option<usize>,
    dns_name: Option<usize>,
}

fn text(values: &[OwnedValue], at: Option<usize>) -> Option<&str> {
    match values.get(at?)? {
        OwnedValue::Text(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

impl PayloadFields {
    /// Finds the fields by name (`names` in the order of the values).
    pub fn new<S: AsRef<str>>(names: &[S]) -> PayloadFields {
        let at = |n: &str| names.iter().position(|x| x.as_ref() == n);
        PayloadFields {
            sni: at("sni"),
            quic_version: at("quic_version"),
            http_host: at("http_host"),
            ssh_client: at("ssh_client"),
            ssh_server: at("ssh_server"),
            dns_query: at("dns_query"),
            dns_name: at("dns_name"),
        }
    }

    /// The flow's payload names.
    pub fn names<'a>(&self, values: &'a [OwnedValue]) -> Names<'a> {
        let sni = text(values, self.sni);
        let quic = text(values, self.quic_version).is_some();
        Names {
            sni: if quic { None } else { sni },
            quic_sni: if quic { sni } else { None },
            http_host: text(values, self.http_host),
            ssh: text(values, self.ssh_client).is_some() || text(values, self.ssh_server).is_some(),
            dns_query: text(values, self.dns_query),
            dns_name: text(values, self.dns_name),
        }
    }

    /// The flow's payload label, `None` when its payload names nothing.
    pub fn label(&self, values: &[OwnedValue], services: &Services) -> Option<Label> {
        let l = combine(&self.names(values), None, services, 1.0);
        (l.source != Source::None).then_some(l)
    }
}

/// Bounded per-class uniform samples of flows (see the module docs).
#[derive(Debug, Clone)]
pub struct Reservoir {
    per_class: usize,
    rng: SplitMix64,
    classes: Vec<String>,
    index: HashMap<String, u16>,
    kept: Vec<Vec<Sample>>,
    seen: Vec<u64>,
    bytes: usize,
}

/// Memory of one sample outside the reservoir's vectors.
fn sample_bytes(s: &Sample) -> usize {
    std::mem::size_of::<Sample>()
        + s.early.capacity() * std::mem::size_of::<EarlyPkt>()
        + s.group.capacity()
}

impl Reservoir {
    /// An empty reservoir keeping at most `per_class` flows per class.
    pub fn new(per_class: usize, seed: u64) -> Reservoir {
        Reservoir {
            per_class: per_class.max(1),
            rng: SplitMix64::new(seed),
            classes: Vec::new(),
            index: HashMap::new(),
            kept: Vec::new(),
            seen: Vec::new(),
            bytes: 0,
        }
    }

    /// Offers one flow of `class`; `make` builds its sample (with the
    /// class id it is given) only when it is kept. Returns true when kept.
    /// Classes beyond `u16::MAX - 1` are refused (counted as seen only by
    /// the caller).
    pub fn offer(&mut self, class: &str, make: impl FnOnce(u16) -> Sample) -> bool {
        let id = match self.index.get(class) {
            Some(&id) => id,
            None => {
                if self.classes.len() >= (u16::MAX - 1) as usize {
                    return false;
                }
                let id = self.classes.len() as u16;
                self.classes.push(class.to_string());
                self.index.insert(class.to_string(), id);
                self.kept.push(Vec::new());
                self.seen.push(0);
                id
            }
        };
        let c = id as usize;
        self.seen[c] += 1;
        let n = self.seen[c];
        let slot = if self.kept[c].len() < self.per_class {
            None
        } else {
            let j = self.rng.below(n);
            if j >= self.per_class as u64 {
                return false;
            }
            Some(j as usize)
        };
        let s = make(id);
        self.bytes += sample_bytes(&s);
        match slot {
            None => self.kept[c].push(s),
            Some(j) => {
                let old = std::mem::replace(&mut self.kept[c][j], s);
                self.bytes -= sample_bytes(&old);
            }
        }
        true
    }

    /// Flows offered, per class (in [`Reservoir::classes`] order).
    pub fn seen(&self) -> &[u64] {
        &self.seen
    }

    /// Class names, in the order they were first offered.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Flows kept.
    pub fn kept(&self) -> usize {
        self.kept.iter().map(Vec::len).sum()
    }

    /// Flows offered and not kept (or replaced).
    pub fn dropped(&self) -> u64 {
        self.seen.iter().sum::<u64>() - self.kept() as u64
    }

    /// Bytes held by the kept samples.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The kept samples as a data set (class by class, slot order).
    pub fn dataset(&self) -> Dataset {
        Dataset {
            classes: self.classes.clone(),
            samples: self.kept.iter().flatten().cloned().collect(),
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// What self-labelling the captures gave, beside [`CaptureStats`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReservoirStats {
    /// Flows kept in the reservoir (the data set).
    pub kept: usize,
    /// Payload-labelled flows the reservoir did not keep.
    pub dropped: u64,
    /// Bytes the kept samples held.
    pub bytes: usize,
}

/// Reads the captures with the payload labellers and builds the data set
/// of self-labelled flows (see the module docs). `opts.flow.analyzers`
/// gets the labellers added.
pub fn dataset_from_captures(
    files: &[PathBuf],
    sl: &SelfLabels,
    opts: &RunOptions,
    seed: u64,
) -> Result<(Dataset, CaptureStats, ReservoirStats)> {
    let mut run = opts.clone();
    for a in ANALYZERS {
        if !run.flow.analyzers.iter().any(|x| x == a) {
            run.flow.analyzers.push(a.to_string());
        }
    }
    let names: Vec<String> = crate::analyze::fields_of(&run.flow.analyzers)
        .iter()
        .map(|f| f.name.to_string())
        .collect();
    let fields = PayloadFields::new(&names);
    let mut res = Reservoir::new(sl.per_class, seed);
    let mut stats = CaptureStats::default();
    for path in files {
        let cap = match CaptureFile::open(path) {
            Ok(c) => c,
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(e) => {
                stats.skipped.push(e.to_string());
                continue;
            }
        };
        let (flows, _) = pipeline::collect(std::slice::from_ref(&cap), &run, &ModelRef::default())
            .map_err(|e| Error::file(path, None, e))?;
        let group = file_name(path);
        let before = stats.labelled;
        for f in &flows {
            let class = fields
                .label(&f.analyzed, &sl.services)
                .map(|l| sl.class(&l).to_string())
                .filter(|c| !c.is_empty());
            let Some(class) = class else {
                stats.unlabelled += 1;
                continue;
            };
            stats.labelled += 1;
            let k = &f.record.key;
            res.offer(&class, |label| Sample {
                early: f.early.clone(),
                proto: k.proto,
                sport: k.sport,
                dport: k.dport,
                label,
                group: group.clone(),
            });
        }
        stats.files += 1;
        stats.flows += flows.len();
        if stats.labelled > before {
            stats.files_labelled += 1;
        }
    }
    let r = ReservoirStats {
        kept: res.kept(),
        dropped: res.dropped(),
        bytes: res.bytes(),
    };
    Ok((res.dataset(), stats, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Dir;

    fn sample(label: u16, i: u16) -> Sample {
        Sample {
            early: vec![EarlyPkt {
                size: i,
                dir: Dir::Fwd,
                flags: 0,
                iat_us: 0,
            }],
            proto: 6,
            sport: 1000,
            dport: 443,
            label,
            group: "g".into(),
        }
    }

    #[test]
    fn reservoir_is_bounded_uniform_and_reproducible() {
        let run = |seed| {
            let mut r = Reservoir::new(10, seed);
            for i in 0..1000u16 {
                r.offer("a", |l| sample(l, i));
                if i % 100 == 0 {
                    r.offer("b", |l| sample(l, i));
                }
            }
            r
        };
        let r = run(7);
        assert_eq!(r.classes(), ["a", "b"]);
        assert_eq!(r.seen(), [1000, 10]);
        assert_eq!(r.kept(), 20);
        assert_eq!(r.dropped(), 990);
        let d = r.dataset();
        assert_eq!(d.samples.iter().filter(|s| s.label == 0).count(), 10);
        // Class b had exactly its capacity: all kept.
        let b: Vec<u16> = d
            .samples
            .iter()
            .filter(|s| s.label == 1)
            .map(|s| s.early[0].size)
            .collect();
        assert_eq!(b, (0..10).map(|i| i * 100).collect::<Vec<_>>());
        // Uniform: class a's sample is not the first ten offered.
        let a: Vec<u16> = d
            .samples
            .iter()
            .filter(|s| s.label == 0)
            .map(|s| s.early[0].size)
            .collect();
        assert!(a.iter().any(|&x| x >= 100), "{a:?}");
        assert_eq!(run(7).dataset(), d);
        assert_ne!(run(8).dataset(), d);
        assert_eq!(r.bytes(), d.samples.iter().map(sample_bytes).sum::<usize>());
    }

    #[test]
    fn reservoir_keeps_each_flow_with_equal_chance() {
        // 100 flows into 10 slots, 2,000 seeds: every flow is kept about
        // 200 times (binomial, sd ≈ 13.4); 5 sd either side.
        let mut kept = [0u32; 100];
        for seed in 0..2000 {
            let mut r = Reservoir::new(10, seed);
            for i in 0..100u16 {
                r.offer("a", |l| sample(l, i));
            }
            for s in r.dataset().samples {
                kept[s.early[0].size as usize] += 1;
            }
        }
        assert!(kept.iter().all(|&k| (133..=267).contains(&k)), "{kept:?}");
    }

    fn text(s: &str) -> OwnedValue {
        OwnedValue::Text(s.into())
    }

    #[test]
    fn payload_fields_give_the_label_and_its_class() {
        let names = [
            "sni",
            "quic_version",
            "http_host",
            "dns_query",
            "ssh_client",
        ];
        let f = PayloadFields::new(&names);
        let mut s = Services::new();
        s.add("*.nflxvideo.net Netflix Video\n", "t").unwrap();
        let sl = |level| SelfLabels {
            services: Arc::new(Services::new()),
            level,
            per_class: 1,
            map_files: Vec::new(),
        };
        let tls = [
            text("a.nflxvideo.net"),
            text(""),
            text(""),
            OwnedValue::Null,
            text(""),
        ];
        let l = f.label(&tls, &s).unwrap();
        assert_eq!(sl(LabelLevel::Category).class(&l), "Video");
        assert_eq!(sl(LabelLevel::App).class(&l), "Netflix");
        assert_eq!(sl(LabelLevel::Proto).class(&l), "TLS");
        let quic = [
            text("www.example.org"),
            text("1"),
            text(""),
            text(""),
            text(""),
        ];
        let l = f.label(&quic, &s).unwrap();
        assert_eq!(
            (l.source, l.app.as_str(), l.category.as_str()),
            (Source::Quic, "QUIC", "Web")
        );
        assert_eq!(sl(LabelLevel::Proto).class(&l), "QUIC");
        let ssh = [text(""), text(""), text(""), text(""), text("SSH-2.0-x")];
        assert_eq!(
            sl(LabelLevel::Category).class(&f.label(&ssh, &s).unwrap()),
            "RemoteAccess"
        );
        let none = [text(""), text(""), text(""), text(""), text("")];
        assert_eq!(f.label(&none, &s), None);
        // Missing fields (labellers off) label nothing.
        assert_eq!(PayloadFields::new::<&str>(&[]).label(&tls, &s), None);
    }
}
