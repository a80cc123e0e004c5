//! A trained model of any algorithm, its verdicts and its file format.
//!
//! Contract: [`Model`] implements [`Classifier`]: it uses the first
//! `min(len, N)` early packets (`at_packet` is that number), and answers
//! [`Verdict::UNKNOWN`] when the flow has no packet, when the algorithm has
//! no answer (port table: protocol never seen) or when the confidence is
//! below [`ModelInfo::threshold`] (the confidence is still reported).
//! Classifying never allocates and never panics on any flow; a loaded model
//! is validated first so that lookups stay in bounds.
//! [`Model::save`] / [`Model::load`] use the file described in
//! `docs/MODEL_FORMAT.md`: one JSON header line (format, version, algorithm,
//! classes, N, label level, training set, body length and FNV-1a 64 checksum)
//! then the JSON body. Every failure to load is an [`Error::Model`] (or
//! [`Error::Io`]) naming the file and saying what is wrong: not a model,
//! another version, truncated, corrupt (checksum), or inconsistent contents.

use std::path::Path;

use super::cascade::{Cascade, InlineCascade};
use super::compiled_tree::FastTree;
use super::dataset::LabelLevel;
use super::forest::Forest;
use super::gaussian_nb::GaussianNb;
use super::naive_bayes::NaiveBayes;
use super::ports::PortTable;
use super::provenance::{FileDigest, HeldOut};
use super::svm::Svm;
use super::tree::Tree;
use super::{Classifier, FlowFeatures};
use crate::classify::Verdict;
use crate::error::{Error, Result};
use crate::features::early::MAX_EARLY;

/// Value of the header's `format` field.
pub const FORMAT: &str = "earlybird-model";
/// Version written and read by this build.
pub const VERSION: u32 = 1;

/// What every model carries besides its algorithm.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    /// Class names, indexed by [`Verdict::class`].
    pub classes: Vec<String>,
    /// N: early packets the model was trained on.
    pub packets: usize,
    /// Ground-truth level of the classes, when known.
    pub level: Option<LabelLevel>,
    /// Free text: which data the model was trained on.
    pub trained_on: String,
    /// Verdicts with a lower confidence become unknown.
    pub threshold: f32,
    /// The capture files of the training side, by content (empty when not
    /// recorded, as in models trained from data sets in memory).
    pub captures: Vec<FileDigest>,
    /// The ground-truth files the labels came from.
    pub labels: Vec<FileDigest>,
    /// Scores on held-out captures measured when the model was trained.
    pub held_out: Option<HeldOut>,
}

/// The algorithm-specific part.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelKind {
    /// Per-position size/direction likelihood tables.
    NaiveBayes(NaiveBayes),
    /// A C4.5 tree.
    Tree(Tree),
    /// Bagged C4.5 trees with random attribute subsets.
    Forest(Forest),
    /// One-vs-one RBF SVM.
    Svm(Svm),
    /// Majority class per (protocol, port).
    Ports(PortTable),
    /// Gaussian naive Bayes over the numeric features.
    GaussianNb(GaussianNb),
    /// One model per early packet K1..=N (`cascade.rs`).
    Cascade(Cascade),
}

impl ModelKind {
    /// Short name used in files and on the command line.
    pub fn algo(&self) -> &'static str {
        match self {
            ModelKind::NaiveBayes(_) => "nb",
            ModelKind::Tree(_) => "c45",
            ModelKind::Forest(_) => "forest",
            ModelKind::Svm(_) => "svm",
            ModelKind::Ports(_) => "ports",
            ModelKind::GaussianNb(_) => "gnb",
            ModelKind::Cascade(_) => "cascade",
        }
    }
}

/// A trained classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Classes, N, provenance and threshold.
    pub info: ModelInfo,
    /// The algorithm and its parameters.
    pub kind: ModelKind,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    format: String,
    version: u32,
    algo: String,
    classes: Vec<String>,
    packets: usize,
    level: Option<LabelLevel>,
    trained_on: String,
    threshold: f32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    captures: Vec<FileDigest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    labels: Vec<FileDigest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held_out: Option<HeldOut>,
    body_bytes: usize,
    body_fnv1a64: String,
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Parts of a model that disagree (class counts, sizes, indices); the
/// text says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// What is wrong with a model file or a model's parts (the caller names
/// the file: [`Model::load`] makes it an [`Error::Model`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// An empty file.
    #[error("empty file, not an earlybird model")]
    Empty,
    /// No header line.
    #[error("no header line: truncated, or not an earlybird model")]
    NoHeader,
    /// A header line that is not JSON.
    #[error("not an earlybird model: header is not JSON ({0})")]
    HeaderJson(String),
    /// A header of another format.
    #[error("not an earlybird model: format {0:?}")]
    Format(String),
    /// A header without its format.
    #[error("not an earlybird model: header has no \"format\"")]
    NoFormat,
    /// A model file of another version.
    #[error("model file version {0}, this build reads version {VERSION}")]
    Version(u64),
    /// A header without its version.
    #[error("header has no numeric \"version\"")]
    NoVersion,
    /// A header that cannot be read.
    #[error("bad header: {0}")]
    Header(String),
    /// A body shorter than the header says.
    #[error("truncated: body has {have} of {want} bytes")]
    Truncated {
        /// Bytes in the file.
        have: usize,
        /// Bytes the header says.
        want: usize,
    },
    /// Bytes after the body.
    #[error("{0} bytes of unexpected data after the body")]
    Trailing(usize),
    /// A body whose checksum is not the header's.
    #[error("checksum mismatch (body {body}, header {header}): file is corrupt")]
    Checksum {
        /// The body's checksum.
        body: String,
        /// The header's.
        header: String,
    },
    /// A body that is not the algorithm's JSON.
    #[error("bad {algo} body: {reason}")]
    Body {
        /// The algorithm.
        algo: String,
        /// What the JSON reader said.
        reason: String,
    },
    /// An algorithm this build does not know.
    #[error("unknown algorithm {0:?}")]
    Algorithm(String),
    /// A cascade stage that is a cascade.
    #[error("a cascade stage cannot be a cascade")]
    NestedCascade,
    /// A cascade stage that cannot be read.
    #[error("cascade stage {packets}: {source}")]
    Stage {
        /// The stage's N.
        packets: usize,
        /// What is wrong with it.
        source: Box<ModelError>,
    },
    /// Parts that disagree.
    #[error("inconsistent model: {0}")]
    Inconsistent(#[from] Invalid),
    /// A body that cannot be written as JSON.
    #[error("cannot encode body: {0}")]
    Encode(String),
    /// A cascade stage that cannot be written as JSON.
    #[error("cannot encode stage: {0}")]
    EncodeStage(String),
    /// A header that cannot be written as JSON.
    #[error("cannot encode header: {0}")]
    EncodeHeader(String),
}

impl Model {
    /// Checks that the parts agree (class counts, sizes, indices).
    pub fn validate(&self) -> std::result::Result<(), Invalid> {
        let c = self.info.classes.len();
        if c == 0 {
            return Err(Invalid("model has no class".into()));
        }
        if c >= Verdict::UNKNOWN as usize {
            return Err(Invalid(format!("{c} classes is too many")));
        }
        if self.info.packets == 0 || self.info.packets > MAX_EARLY {
            return Err(Invalid(format!(
                "packets = {}, expected 1..={MAX_EARLY}",
                self.info.packets
            )));
        }
        if !(0.0..=1.0).contains(&self.info.threshold) {
            return Err(Invalid(format!(
                "threshold {} outside [0, 1]",
                self.info.threshold
            )));
        }
        let packets_agree = |p: usize| {
            if p == self.info.packets {
                Ok(())
            } else {
                Err(Invalid(format!(
                    "header says {} packets, body {p}",
                    self.info.packets
                )))
            }
        };
        match &self.kind {
            ModelKind::NaiveBayes(m) => {
                packets_agree(m.packets)?;
                if m.classes != c {
                    return Err(Invalid(format!(
                        "header has {c} classes, body {}",
                        m.classes
                    )));
                }
                m.validate()
            }
            ModelKind::Tree(t) => {
                packets_agree(t.packets())?;
                t.validate(c)
            }
            ModelKind::Forest(f) => {
                packets_agree(f.packets)?;
                f.validate(c)
            }
            ModelKind::Svm(s) => {
                packets_agree(s.packets)?;
                if s.classes != c {
                    return Err(Invalid(format!(
                        "header has {c} classes, body {}",
                        s.classes
                    )));
                }
                s.validate()
            }
            ModelKind::Ports(p) => p.validate(c),
            ModelKind::GaussianNb(g) => {
                packets_agree(g.packets)?;
                g.validate(c)
            }
            ModelKind::Cascade(k) => k.validate(&self.info),
        }
    }

    /// Writes the model file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let err = |e: ModelError| Error::Model {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let body = self.body_json().map_err(err)?;
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            algo: self.kind.algo().into(),
            classes: self.info.classes.clone(),
            packets: self.info.packets,
            level: self.info.level,
            trained_on: self.info.trained_on.clone(),
            threshold: self.info.threshold,
            captures: self.info.captures.clone(),
            labels: self.info.labels.clone(),
            held_out: self.info.held_out.clone(),
            body_bytes: body.len(),
            body_fnv1a64: format!("{:016x}", fnv1a64(&body)),
        };
        let mut out = serde_json::to_vec(&header)
            .map_err(|e| err(ModelError::EncodeHeader(e.to_string())))?;
        out.push(b'\n');
        out.extend_from_slice(&body);
        out.push(b'\n');
        std::fs::write(path, out).map_err(|e| Error::io(path, e))
    }

    /// Reads and checks a model file.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_bytes(&bytes).map_err(|e| Error::Model {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// The header line, read straight into its fields: a header that does
    /// not read so is read again as a JSON value, which says what is wrong
    /// in the order the format is checked (JSON, format, version, fields).
    /// Both reads give the same header (a test compares them); the direct
    /// one costs a run about half as much as the JSON value's.
    fn header(line: &[u8]) -> std::result::Result<Header, ModelError> {
        if let Ok(h) = serde_json::from_slice::<Header>(line) {
            if h.format != FORMAT {
                return Err(ModelError::Format(h.format));
            }
            if h.version != VERSION {
                return Err(ModelError::Version(u64::from(h.version)));
            }
            return Ok(h);
        }
        Self::header_from_value(line)
    }

    /// The header line read as a JSON value first, naming what is wrong.
    fn header_from_value(line: &[u8]) -> std::result::Result<Header, ModelError> {
        let value: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| ModelError::HeaderJson(e.to_string()))?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => return Err(ModelError::Format(other.to_string())),
            None => return Err(ModelError::NoFormat),
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == VERSION as u64 => {}
            Some(v) => return Err(ModelError::Version(v)),
            None => return Err(ModelError::NoVersion),
        }
        serde_json::from_value(value).map_err(|e| ModelError::Header(e.to_string()))
    }

    /// Parses the contents of a model file (see [`Model::load`]).
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Model, ModelError> {
        let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
            return Err(if bytes.is_empty() {
                ModelError::Empty
            } else {
                ModelError::NoHeader
            });
        };
        let h = Self::header(&bytes[..nl])?;
        let mut body = &bytes[nl + 1..];
        if body.len() == h.body_bytes + 1 && body.last() == Some(&b'\n') {
            body = &body[..h.body_bytes];
        }
        if body.len() < h.body_bytes {
            return Err(ModelError::Truncated {
                have: body.len(),
                want: h.body_bytes,
            });
        }
        if body.len() > h.body_bytes {
            return Err(ModelError::Trailing(body.len() - h.body_bytes));
        }
        let sum = format!("{:016x}", fnv1a64(body));
        if sum != h.body_fnv1a64 {
            return Err(ModelError::Checksum {
                body: sum,
                header: h.body_fnv1a64,
            });
        }
        let info = ModelInfo {
            classes: h.classes,
            packets: h.packets,
            level: h.level,
            trained_on: h.trained_on,
            threshold: h.threshold,
            captures: h.captures,
            labels: h.labels,
            held_out: h.held_out,
        };
        Self::from_body(info, &h.algo, body)
    }

    /// A model from the parts of its file: `algo` (the header's
    /// algorithm name) and the body's JSON (`docs/MODEL_FORMAT.md`), for a
    /// model built elsewhere (the Python package's scikit-learn import).
    /// Checked as a loaded model is; the error says what is wrong.
    pub fn from_body(
        info: ModelInfo,
        algo: &str,
        body: &[u8],
    ) -> std::result::Result<Model, ModelError> {
        fn body_as<T: serde::de::DeserializeOwned>(
            b: &[u8],
            algo: &str,
        ) -> std::result::Result<T, ModelError> {
            serde_json::from_slice(b).map_err(|e| ModelError::Body {
                algo: algo.into(),
                reason: e.to_string(),
            })
        }
        let kind = match algo {
            "nb" => ModelKind::NaiveBayes(body_as(body, "nb")?),
            "c45" => ModelKind::Tree(body_as(body, "c45")?),
            "forest" => ModelKind::Forest(body_as(body, "forest")?),
            "svm" => ModelKind::Svm(body_as(body, "svm")?),
            "ports" => ModelKind::Ports(body_as(body, "ports")?),
            "gnb" => ModelKind::GaussianNb(body_as(body, "gnb")?),
            "cascade" => ModelKind::Cascade(Cascade::from_json(&info, body)?),
            other => return Err(ModelError::Algorithm(other.to_string())),
        };
        let model = Model { info, kind };
        model.validate()?;
        Ok(model)
    }

    /// The body of the model file as JSON (what [`Model::save`] writes
    /// after the header line).
    pub fn body_json(&self) -> std::result::Result<Vec<u8>, ModelError> {
        match &self.kind {
            ModelKind::NaiveBayes(m) => serde_json::to_vec(m),
            ModelKind::Tree(m) => serde_json::to_vec(m),
            ModelKind::Forest(m) => serde_json::to_vec(m),
            ModelKind::Svm(m) => serde_json::to_vec(m),
            ModelKind::Ports(m) => serde_json::to_vec(m),
            ModelKind::GaussianNb(m) => serde_json::to_vec(m),
            ModelKind::Cascade(m) => return m.body_json(),
        }
        .map_err(|e| ModelError::Encode(e.to_string()))
    }

    /// Class and confidence before thresholding, from the first
    /// `min(len, N)` packets; `None` when the algorithm has no answer, and
    /// always for a cascade, whose stages have thresholds of their own
    /// (see [`Model::raw_decision`]).
    #[inline]
    pub fn raw_predict(&self, f: &FlowFeatures<'_>) -> Option<(u16, f32)> {
        match &self.kind {
            ModelKind::NaiveBayes(m) => m.predict(f.early),
            ModelKind::Tree(t) => Some(t.predict(f)),
            ModelKind::Forest(t) => Some(t.predict(f)),
            ModelKind::Svm(s) => s.predict(f),
            ModelKind::Ports(p) => p.predict(f.proto, f.sport, f.dport),
            ModelKind::GaussianNb(g) => Some(g.predict(f)),
            ModelKind::Cascade(_) => None,
        }
    }

    /// Class and confidence of the verdict before the threshold of the
    /// model (of a cascade: of the stage that decides,
    /// [`Cascade::raw_predict`]); `None` when the algorithm has no answer.
    pub fn raw_decision(&self, f: &FlowFeatures<'_>) -> Option<(u16, f32)> {
        match &self.kind {
            ModelKind::Cascade(c) => c.raw_predict(f),
            _ => self.raw_predict(f),
        }
    }

    /// The verdict when `raw_predict` has no answer: `unknown`, or the
    /// cascade's (whose `raw_predict` never answers).
    #[cold]
    #[inline(never)]
    fn no_answer(&self, f: &FlowFeatures<'_>, unknown: Verdict) -> Verdict {
        match &self.kind {
            ModelKind::Cascade(c) => c.classify(f),
            _ => unknown,
        }
    }

    /// The cascade's stages, when this model is a cascade.
    pub fn cascade(&self) -> Option<&Cascade> {
        match &self.kind {
            ModelKind::Cascade(c) => Some(c),
            _ => None,
        }
    }
}

impl std::fmt::Display for Model {
    /// One line: algorithm, size, classes, N, level, threshold.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = match &self.kind {
            ModelKind::NaiveBayes(m) => format!("{} table entries", m.table.len()),
            ModelKind::Tree(t) => format!(
                "{} nodes, {} leaves, depth {}",
                t.nodes().len(),
                t.leaves(),
                t.depth()
            ),
            ModelKind::Forest(m) => format!(
                "{} trees, {} nodes",
                m.trees.len(),
                m.trees.iter().map(|t| t.nodes().len()).sum::<usize>()
            ),
            ModelKind::Svm(m) => format!(
                "{} machines, {} support vectors",
                m.pairs.len(),
                m.support_vectors()
            ),
            ModelKind::Ports(p) => {
                format!("{} ports, {} protocols", p.ports().len(), p.protos().len())
            }
            ModelKind::GaussianNb(g) => format!(
                "{} features{}",
                g.features(),
                if g.use_ports { " with ports" } else { "" }
            ),
            ModelKind::Cascade(c) => format!(
                "{} stages: {}",
                c.stages.len(),
                c.stages
                    .iter()
                    .map(|s| format!(
                        "k = {} {} threshold {}",
                        s.info.packets,
                        s.kind.algo(),
                        s.info.threshold
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        write!(
            f,
            "{} model ({size}): {} classes, N = {}, level {}, threshold {}",
            self.kind.algo(),
            self.info.classes.len(),
            self.info.packets,
            self.info.level.map_or("unspecified", |l| l.name()),
            self.info.threshold
        )?;
        if !self.info.trained_on.is_empty() {
            write!(f, ", trained on {}", self.info.trained_on)?;
        }
        Ok(())
    }
}

impl Classifier for Model {
    fn packets_needed(&self) -> usize {
        self.info.packets
    }

    fn costly(&self) -> bool {
        matches!(self.kind, ModelKind::Svm(_))
    }

    fn cascade(&self) -> Option<InlineCascade> {
        self.cascade().map(Cascade::inline)
    }

    fn fast_tree(&self) -> Option<FastTree> {
        match &self.kind {
            ModelKind::Tree(t) => Some(FastTree::new(
                t.flat(),
                self.info.packets,
                self.info.threshold,
            )),
            _ => None,
        }
    }

    #[inline]
    fn classify(&self, f: &FlowFeatures<'_>) -> Verdict {
        let used = f.early.len().min(self.info.packets);
        let unknown = Verdict {
            class: Verdict::UNKNOWN,
            confidence: 0.0,
            at_packet: used as u8,
        };
        if used == 0 {
            return unknown;
        }
        match self.raw_predict(f) {
            Some((class, confidence)) if confidence >= self.info.threshold => Verdict {
                class,
                confidence,
                at_packet: used as u8,
            },
            Some((_, confidence)) => Verdict {
                confidence,
                ..unknown
            },
            // A cascade's `raw_predict` is always `None`: its stages decide
            // (here, out of line, so that no other model pays for it).
            None => self.no_answer(f, unknown),
        }
    }

    fn classes(&self) -> &[String] {
        &self.info.classes
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::patterns;
    use super::*;
    use crate::learn::train::{train, Algo, TrainOptions};

    #[test]
    fn the_header_reads_the_same_straight_or_through_a_json_value() {
        let model = crate::DEFAULT_MODEL;
        let nl = model.iter().position(|&b| b == b'\n').unwrap();
        let line = &model[..nl];
        let straight = serde_json::from_slice::<Header>(line).unwrap();
        let through = Model::header_from_value(line).ok().unwrap();
        assert_eq!(
            serde_json::to_value(&straight).unwrap(),
            serde_json::to_value(&through).unwrap()
        );
        assert!(!straight.classes.is_empty() && straight.body_bytes > 0);
        // A header that does not read straight is refused as before.
        let text = std::str::from_utf8(line).unwrap();
        let cases = [
            text.replacen("\"earlybird-model\"", "\"other\"", 1),
            text.replacen("\"version\":1", "\"version\":7", 1),
            text.replacen("\"version\":1", "\"version\":1e0", 1),
            text.replacen("\"algo\":", "\"algo\":1,\"x\":", 1),
            text[..text.len() - 1].to_string(),
        ];
        for case in cases {
            let want = Model::header_from_value(case.as_bytes()).err().unwrap();
            let got = Model::header(case.as_bytes()).err().unwrap();
            assert_eq!(got.to_string(), want.to_string(), "{}", &case[..80]);
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("earlybird-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn verdicts(m: &Model, d: &super::super::dataset::Dataset) -> Vec<Verdict> {
        d.samples
            .iter()
            .map(|s| {
                m.classify(&FlowFeatures {
                    early: &s.early,
                    proto: s.proto,
                    sport: s.sport,
                    dport: s.dport,
                })
            })
            .collect()
    }

    #[test]
    fn round_trip_gives_identical_verdicts() {
        let train_set = patterns(40, 100, 1);
        let test_set = patterns(20, 150, 2);
        for algo in [
            Algo::NaiveBayes,
            Algo::C45,
            Algo::Forest,
            Algo::Svm,
            Algo::Ports,
            Algo::GaussianNb,
        ] {
            let opt = TrainOptions {
                algo,
                trained_on: "synthetic".into(),
                ..TrainOptions::default()
            };
            let m = train(&train_set, &opt).unwrap();
            let p = tmp(&format!("{algo:?}.ebm"));
            m.save(&p).unwrap();
            let back = Model::load(&p).unwrap();
            assert_eq!(back, m, "{algo:?}");
            assert_eq!(
                verdicts(&back, &test_set),
                verdicts(&m, &test_set),
                "{algo:?}"
            );
        }
    }

    #[test]
    fn any_flow_gets_a_verdict_without_panic() {
        use super::super::dataset::SplitMix64;
        use crate::features::early::EarlyPkt;
        use crate::features::Dir;
        let d = patterns(20, 100, 1);
        let mut rng = SplitMix64::new(99);
        let flows: Vec<(Vec<EarlyPkt>, u8, u16, u16)> = (0..300)
            .map(|_| {
                let n = rng.below(MAX_EARLY as u64 + 1) as usize;
                let early = (0..n)
                    .map(|_| EarlyPkt {
                        size: rng.next_u64() as u16,
                        dir: if rng.below(2) == 0 {
                            Dir::Fwd
                        } else {
                            Dir::Bwd
                        },
                        flags: rng.next_u64() as u8,
                        iat_us: rng.next_u64() as u32,
                    })
                    .collect();
                (
                    early,
                    rng.next_u64() as u8,
                    rng.next_u64() as u16,
                    rng.next_u64() as u16,
                )
            })
            .collect();
        for algo in Algo::ALL {
            for use_ports in [false, true] {
                let opt = TrainOptions {
                    algo,
                    use_ports,
                    packets: 6,
                    ..TrainOptions::default()
                };
                let m = train(&d, &opt).unwrap();
                assert!(m.to_string().starts_with(algo.name()));
                for (early, proto, sport, dport) in &flows {
                    let v = m.classify(&FlowFeatures {
                        early,
                        proto: *proto,
                        sport: *sport,
                        dport: *dport,
                    });
                    assert!(v.class == Verdict::UNKNOWN || (v.class as usize) < 3);
                    assert!(
                        (0.0..=1.0 + 1e-6).contains(&v.confidence),
                        "{algo:?} {}",
                        v.confidence
                    );
                    assert!(v.at_packet as usize <= early.len().min(m.info.packets));
                }
            }
        }
    }

    #[test]
    fn bad_files_are_rejected_with_the_file_name() {
        let m = train(&patterns(10, 0, 1), &TrainOptions::default()).unwrap();
        let p = tmp("good.ebm");
        m.save(&p).unwrap();
        let good = std::fs::read(&p).unwrap();
        let nl = good.iter().position(|&b| b == b'\n').unwrap();
        let header = String::from_utf8(good[..nl].to_vec()).unwrap();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("truncated", good[..good.len() / 2].to_vec(), "truncated"),
            ("header-only", good[..nl - 10].to_vec(), "no header line"),
            ("empty", Vec::new(), "empty file"),
            (
                "corrupt",
                {
                    let mut b = good.clone();
                    let i = nl + 1 + (b.len() - nl) / 2;
                    b[i] = if b[i] == b'1' { b'2' } else { b'1' };
                    b
                },
                "checksum",
            ),
            (
                "version",
                {
                    let h = header.replace("\"version\":1", "\"version\":2");
                    [h.as_bytes(), &good[nl..]].concat()
                },
                "version 2",
            ),
            (
                "format",
                {
                    let h = header.replace("earlybird-model", "other-model");
                    [h.as_bytes(), &good[nl..]].concat()
                },
                "not an earlybird model",
            ),
            (
                "pcap",
                b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00\n\x00".to_vec(),
                "not an earlybird model",
            ),
        ];
        for (name, bytes, want) in cases {
            let p = tmp(&format!("{name}.ebm"));
            std::fs::write(&p, &bytes).unwrap();
            let e = Model::load(&p).unwrap_err().to_string();
            assert!(e.contains(&p.display().to_string()), "{name}: {e}");
            assert!(e.contains(want), "{name}: {e}");
        }
        let e = Model::load(tmp("missing.ebm")).unwrap_err().to_string();
        assert!(e.contains("missing.ebm"), "{e}");
    }

    #[test]
    fn threshold_and_empty_flows_give_unknown() {
        // One packet of heavily overlapping classes: a doubtful verdict.
        let d = patterns(30, 300, 1);
        let mut m = train(&d, &TrainOptions::default()).unwrap();
        let s = &d.samples[0];
        let f = FlowFeatures {
            early: &s.early[..1],
            proto: s.proto,
            sport: s.sport,
            dport: s.dport,
        };
        let v = m.classify(&f);
        assert!(v.class != Verdict::UNKNOWN && v.at_packet == 1);
        assert!(v.confidence < 0.99, "{}", v.confidence);
        m.info.threshold = v.confidence;
        assert_eq!(m.classify(&f).class, v.class);
        m.info.threshold = (v.confidence + 0.01).min(1.0);
        let u = m.classify(&f);
        assert_eq!(u.class, Verdict::UNKNOWN);
        assert_eq!(u.confidence, v.confidence);
        let v = m.classify(&FlowFeatures { early: &[], ..f });
        assert_eq!((v.class, v.at_packet), (Verdict::UNKNOWN, 0));
        // More packets than N: only N are used.
        let v = m.classify(&FlowFeatures {
            early: &s.early,
            ..f
        });
        assert_eq!(v.at_packet, 4);
    }
}
