//! The label of every record: [`super::payload_label::combine`] run on each
//! ended flow, on the thread that builds the records.
//!
//! Contract: a [`Labeller`] is built once per run from the service map, the
//! model's class names and the fields the run's analyzers add. For each
//! record it reads the flow's names from its analyzer cells (`sni` with
//! `quic_version` for QUIC, `http_host`, `ssh_client`/`ssh_server`,
//! `dns_query`, `dns_name`; a field whose analyzer is off is never
//! present), takes the model's verdict as the statistical label (a verdict
//! the model left `unknown` is not confident), and then:
//! - replaces the record's verdict class with the index of the combined
//!   application in [`Labeller::names`] (the model's classes first, in
//!   their order, then the protocols' names and every application of the
//!   service map), so every output's `app` is the combined label while
//!   `app_confidence` and `decided_at_packet` stay the model's;
//! - appends [`FIELDS`] to the record's row of cells: `category`,
//!   `label_source`, `stat_app`, `stat_confidence` (the model's verdict
//!   as it was), `model_id` (the number of the model that took it,
//!   [`Labeller::apply_with_models`]).
//!
//! - keeps, hashes or drops the names of [`NAME_FIELDS`] ([`Privacy`]),
//!   after the label was taken from them;
//! - counts, with a [`Drift`] ([`Labeller::with_drift`]), the flows whose
//!   payload label and model verdict agree (`classify/drift.rs`);
//! - counts the handshakes the capture's snap length cut short (records
//!   whose `tls_status` is `cut-snap`, TLS and QUIC apart:
//!   [`Labeller::cut_by_snap`]) and those stopped because the table's
//!   handshake bytes were at their bound (`cut-memory`:
//!   [`Labeller::cut_by_memory`]), for the run's summary.
//!
//! It allocates the new rows once per batch (none when the run's outputs
//! read no cells: [`Labeller::label`] then labels the verdicts alone) and
//! per record only the lower-case copy of a name it looks up in the map;
//! it never fails and never panics on any cell.

// Built in every run before its first packet from the names of the model
// and the service maps, never from the traffic: FxHash, not SipHash.
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::drift::Drift;
use super::payload_label::{
    combine_ref, protocol_category, LabelRef, Names, Source, Verdict as StatVerdict,
};
use super::services::{Services, CATEGORIES};
use super::Verdict;
use crate::schema::{Field, FieldType, Rows, Value};

/// The fields every labelled record gets after the analyzers' (and the
/// sampling) fields.
pub const FIELDS: &[Field] = &[
    Field::new(
        "category",
        FieldType::Str,
        "",
        "Category of `app` (Web, Video, VPN, …: docs/SERVICES.md); empty when the label has none (unknown, or a model class of no known category)",
    ),
    Field::new(
        "label_source",
        FieldType::Str,
        "",
        "Where `app` came from: sni, quic, http, dns, ssh (a payload name, by the service map, else the protocol's name), stat (the model), port (the port-table model), none (unknown)",
    ),
    Field::new(
        "stat_app",
        FieldType::Str,
        "",
        "The model's early verdict (the record's `app` before the payload label): its class, unknown when undecided",
    ),
    Field::new(
        "stat_confidence",
        FieldType::F64,
        "",
        "Confidence of the model's early verdict in [0, 1] (the same value as `app_confidence`)",
    ),
    Field::new(
        "model_id",
        FieldType::U64,
        "",
        "Number of the model that decided the flow: 0 the run's own, then the models a `--learn` run swapped in (their number in DIR/models.jsonl); empty when no model decided it",
    ),
];

/// The analyzer fields that hold names, which [`Privacy`] applies to.
pub const NAME_FIELDS: &[&str] = &[
    "sni",
    "http_host",
    "http_user_agent",
    "dns_query",
    "dns_answers",
    "dns_name",
];

/// The key of [`Privacy::Hash`] when none is given: public (the same name
/// gives the same hash everywhere; anyone can hash a list of names).
pub const DEFAULT_NAMES_KEY: &str = "earlybird";

/// What records keep of the names in [`NAME_FIELDS`] (after the label was
/// taken from them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Privacy {
    /// As read.
    #[default]
    Keep,
    /// The first 16 bytes of HMAC-SHA256 under this key, in lower-case hex.
    Hash(Vec<u8>),
    /// Null.
    Drop,
}

/// The keyed hash of `name` ([`Privacy::Hash`]): 32 hex digits.
pub fn hash_name(key: &[u8], name: &str) -> String {
    use hmac::{Hmac, Mac};
    // HMAC takes a key of any length.
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(name.as_bytes());
    let tag = mac.finalize().into_bytes();
    let mut s = String::with_capacity(32);
    for b in &tag[..16] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The protocols' own labels (a name no map knows).
const PROTOCOLS: [&str; 5] = ["TLS", "QUIC", "HTTP", "DNS", "SSH"];

/// Positions of the name fields among the analyzer cells.
#[derive(Debug, Clone, Copy, Default)]
struct Columns {
    sni: Option<usize>,
    quic_version: Option<usize>,
    http_host: Option<usize>,
    ssh_client: Option<usize>,
    ssh_server: Option<usize>,
    dns_query: Option<usize>,
    dns_name: Option<usize>,
    tls_status: Option<usize>,
}

/// Labels records (see the module docs).
pub struct Labeller {
    services: Arc<Services>,
    names: Arc<[String]>,
    index: HashMap<String, u16>,
    /// The index in `names` of each model class's name.
    class_index: Vec<u16>,
    classes: usize,
    /// Category of each model class (empty when it has none).
    class_category: Vec<&'static str>,
    by_port: bool,
    cols: Columns,
    /// The columns of `cols` that are present.
    read: Vec<usize>,
    width: usize,
    privacy: Privacy,
    /// Which analyzer cells hold names.
    named: Vec<bool>,
    /// Handshakes cut short by the snap length: TLS, QUIC.
    cut_snap: [AtomicU64; 2],
    /// Handshakes stopped by the reassembly budget (`cut-memory`).
    cut_memory: AtomicU64,
    /// Agreement of the model with the payload labels, when counted.
    drift: Option<Arc<Drift>>,
}

impl std::fmt::Debug for Labeller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Labeller")
            .field("services", &self.services)
            .field("names", &self.names.len())
            .field("by_port", &self.by_port)
            .finish()
    }
}

/// A labeller's names would not fit a verdict's class index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} application names: more than a record's label can index")]
pub struct TooMany(pub usize);

impl Labeller {
    /// A labeller for a model of `classes` (empty: no model; `by_port`:
    /// the model is the port table) whose records carry the analyzer
    /// cells `analyzed` (in order), labelling names with `services`.
    pub fn new(
        services: Arc<Services>,
        classes: &[String],
        by_port: bool,
        analyzed: &[Field],
    ) -> Result<Labeller, TooMany> {
        let mut names: Vec<String> = classes.to_vec();
        let apps = services.apps();
        // One map, sized once: a run builds it before its first packet.
        // An index past u16 is never used: too many names are refused.
        let mut index: HashMap<String, u16> = HashMap::default();
        index.reserve(classes.len() + PROTOCOLS.len() + apps.len());
        // A class named twice takes the index of its first place.
        let mut class_index = Vec::with_capacity(classes.len());
        for (i, c) in classes.iter().enumerate() {
            class_index.push(*index.entry(c.clone()).or_insert(i as u16));
        }
        let extra = PROTOCOLS
            .iter()
            .copied()
            .chain(apps.iter().map(|(a, _)| *a));
        for a in extra {
            if !index.contains_key(a) {
                index.insert(a.to_string(), names.len() as u16);
                names.push(a.to_string());
            }
        }
        if names.len() >= usize::from(Verdict::UNKNOWN) {
            return Err(TooMany(names.len()));
        }
        let class_category = classes.iter().map(|c| category_of_class(c)).collect();
        let at = |name: &str| analyzed.iter().position(|f| f.name == name);
        let cols = Columns {
            sni: at("sni"),
            quic_version: at("quic_version"),
            http_host: at("http_host"),
            ssh_client: at("ssh_client"),
            ssh_server: at("ssh_server"),
            dns_query: at("dns_query"),
            dns_name: at("dns_name"),
            tls_status: at("tls_status"),
        };
        let read = [
            cols.sni,
            cols.quic_version,
            cols.http_host,
            cols.ssh_client,
            cols.ssh_server,
            cols.dns_query,
            cols.dns_name,
            cols.tls_status,
        ]
        .into_iter()
        .flatten()
        .collect();
        Ok(Labeller {
            services,
            names: names.into(),
            index,
            class_index,
            classes: classes.len(),
            class_category,
            by_port,
            cols,
            read,
            width: analyzed.len(),
            privacy: Privacy::Keep,
            named: analyzed
                .iter()
                .map(|f| NAME_FIELDS.contains(&f.name))
                .collect(),
            cut_snap: Default::default(),
            cut_memory: AtomicU64::new(0),
            drift: None,
        })
    }

    /// The same labeller, keeping names as `privacy` says.
    pub fn with_privacy(mut self, privacy: Privacy) -> Labeller {
        self.privacy = privacy;
        self
    }

    /// The same labeller, counting in `drift` how often the model agrees
    /// with the payload labels.
    pub fn with_drift(mut self, drift: Arc<Drift>) -> Labeller {
        self.drift = Some(drift);
        self
    }

    /// The agreement counts, when kept ([`Labeller::with_drift`]).
    pub fn drift(&self) -> Option<Arc<Drift>> {
        self.drift.clone()
    }

    /// The handshakes of the records labelled so far that the capture's
    /// snap length cut short (`tls_status` `cut-snap`): (TLS, QUIC).
    pub fn cut_by_snap(&self) -> (u64, u64) {
        (
            self.cut_snap[0].load(Ordering::Relaxed),
            self.cut_snap[1].load(Ordering::Relaxed),
        )
    }

    /// The handshakes of the records labelled so far that stopped because
    /// their flow table's handshake bytes were at their bound
    /// (`tls_status` `cut-memory`, `analyze/tls.rs`).
    pub fn cut_by_memory(&self) -> u64 {
        self.cut_memory.load(Ordering::Relaxed)
    }

    /// The application names a labelled record's class indexes: the
    /// model's classes, then the labels' own.
    pub fn names(&self) -> Arc<[String]> {
        self.names.clone()
    }

    /// Labels the records whose verdicts are `verdicts`, in order, whose
    /// analyzer cells are the rows of `rows` (none when no analyzer is on):
    /// each verdict becomes the combined label and each row gets
    /// [`FIELDS`] (see the module docs).
    pub fn apply<'a>(&self, verdicts: impl Iterator<Item = &'a mut Verdict>, rows: &mut Rows) {
        self.apply_with_models(verdicts.map(|v| (v, None)), rows, |_, _| {});
    }

    /// [`Labeller::apply`] to verdicts with the number of the model that
    /// took each (the `model_id` cell; `None`: no model decided it);
    /// `counted(i, agree)` is called for each record `i` the [`Drift`]
    /// counted, with whether the model agreed.
    pub fn apply_with_models<'a>(
        &self,
        verdicts: impl Iterator<Item = (&'a mut Verdict, Option<u16>)>,
        rows: &mut Rows,
        counted: impl FnMut(usize, bool),
    ) {
        self.label(verdicts, rows, true, counted);
    }

    /// [`Labeller::apply_with_models`], the rows left as they are when not
    /// `cells` (no output of the run reads them: the verdicts are
    /// labelled, and the counts kept, all the same).
    pub(crate) fn label<'a>(
        &self,
        verdicts: impl Iterator<Item = (&'a mut Verdict, Option<u16>)>,
        rows: &mut Rows,
        cells: bool,
        mut counted: impl FnMut(usize, bool),
    ) {
        if !cells {
            let plain = matches!(
                self.cols,
                Columns {
                    sni: None,
                    quic_version: None,
                    http_host: None,
                    ssh_client: None,
                    ssh_server: None,
                    dns_query: None,
                    dns_name: None,
                    tls_status: None,
                }
            );
            for (i, (v, _)) in verdicts.enumerate() {
                if plain || self.nameless(rows, i) {
                    // No name to read, nothing to count: the label is the
                    // verdict's, as `label_one` would take it.
                    v.class = self.stat_class(v);
                } else {
                    self.label_one(v, rows, i, &mut counted);
                }
            }
            return;
        }
        let width = self.width + FIELDS.len();
        // Room for every row at once: the text of the names, and the
        // category, source and statistical application of each row.
        let (n, text) = (rows.len(), rows.text_len());
        // A row is copied as it is unless names are hashed or dropped: its
        // cells in one copy, their text read from a copy of the whole
        // text.
        let verbatim = matches!(self.privacy, Privacy::Keep) || !self.named.contains(&true);
        let mut out = if verbatim {
            Rows::sharing_text(rows, n, width, n * 32)
        } else {
            Rows::with_capacity(n, width, text + n * 32)
        };
        for (i, (v, model_id)) in verdicts.enumerate() {
            let (label, stat_app, stat_confidence) = self.label_one(v, rows, i, &mut counted);
            out.push_row(width, |c| {
                if verbatim {
                    // As many cells as the loop below writes: nulls past
                    // the row's, none past `self.width`.
                    c.section(self.width, |c| c.row_as_is(rows, i));
                } else {
                    for j in 0..self.width {
                        match rows.get(i, j) {
                            Value::Null => c.null(),
                            Value::U64(x) => c.u64(x),
                            Value::I64(x) => c.i64(x),
                            Value::F64(x) => c.f64(x),
                            Value::Text(t) if self.named[j] => match &self.privacy {
                                Privacy::Keep => c.text(t),
                                Privacy::Hash(key) => c.text(&hash_name(key, t)),
                                Privacy::Drop => c.null(),
                            },
                            Value::Text(t) => c.text(t),
                        }
                    }
                }
                if label.category.is_empty() {
                    c.null();
                } else {
                    c.text(label.category);
                }
                c.text(label.source.name());
                c.text(stat_app);
                c.f64(stat_confidence);
                match model_id {
                    Some(m) => c.u64(u64::from(m)),
                    None => c.null(),
                }
            });
        }
        *rows = out;
    }

    /// True when row `i` of `rows` holds nothing `label_one` reads: every
    /// column it looks at is null (most flows: the analyzers write no
    /// cell for a flow they found nothing in).
    #[inline]
    fn nameless(&self, rows: &Rows, i: usize) -> bool {
        rows.nulls(i, &self.read)
    }

    /// The class of the label of verdict `v` when the flow has no payload
    /// name ([`combine_ref`] of no names: the model's class when it
    /// decided, else unknown).
    fn stat_class(&self, v: &Verdict) -> u16 {
        let c = usize::from(v.class);
        let decided = v.class != Verdict::UNKNOWN && c < self.classes;
        if decided && f64::from(v.confidence) >= 0.0 && !self.names[c].is_empty() {
            self.class_index[c]
        } else {
            Verdict::UNKNOWN
        }
    }

    /// Labels the verdict `v` of row `i` of `rows` (its class becomes the
    /// combined label's), counting its cut handshakes and its agreement:
    /// the label, the model's application and its confidence.
    fn label_one<'r>(
        &'r self,
        v: &mut Verdict,
        rows: &'r Rows,
        i: usize,
        counted: &mut impl FnMut(usize, bool),
    ) -> (LabelRef<'r>, &'r str, f64) {
        let text = |col: Option<usize>| match col.map(|j| rows.get(i, j)) {
            Some(Value::Text(t)) if !t.is_empty() => Some(t),
            _ => None,
        };
        let sni = text(self.cols.sni);
        let quic = text(self.cols.quic_version).is_some();
        match text(self.cols.tls_status) {
            Some("cut-snap") => {
                self.cut_snap[usize::from(quic)].fetch_add(1, Ordering::Relaxed);
            }
            Some("cut-memory") => {
                self.cut_memory.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        let names = Names {
            sni: if quic { None } else { sni },
            quic_sni: if quic { sni } else { None },
            http_host: text(self.cols.http_host),
            ssh: text(self.cols.ssh_client).is_some() || text(self.cols.ssh_server).is_some(),
            dns_query: text(self.cols.dns_query),
            dns_name: text(self.cols.dns_name),
        };
        let decided = v.class != Verdict::UNKNOWN && usize::from(v.class) < self.classes;
        let stat_app = if decided {
            self.names[usize::from(v.class)].as_str()
        } else {
            "unknown"
        };
        let stat = StatVerdict {
            app: stat_app,
            category: if decided {
                self.class_category[usize::from(v.class)]
            } else {
                ""
            },
            confidence: f64::from(v.confidence),
            by_port: self.by_port,
        };
        // The model already left below its threshold `unknown`.
        let label = combine_ref(&names, decided.then_some(&stat), &self.services, 0.0);
        let stat_confidence = f64::from(v.confidence);
        if let Some(d) = &self.drift {
            let stat = decided.then_some((stat.app, stat.category));
            if let Some(agree) = d.count(label.source, label.app, label.category, stat) {
                counted(i, agree);
            }
        }
        v.class = match label.source {
            Source::None => Verdict::UNKNOWN,
            // The model's own class: its label is the class's name.
            Source::Stat | Source::Port if decided => self.class_index[usize::from(v.class)],
            _ => self
                .index
                .get(label.app)
                .copied()
                .unwrap_or(Verdict::UNKNOWN),
        };
        (label, stat_app, stat_confidence)
    }
}

/// The category of a model class: the class itself when the model was
/// trained on categories, else the category the shipped table gives the
/// protocol it names ([`super::class_category`]), else a protocol's own
/// category for the protocols the payload labels name, else none.
fn category_of_class(class: &str) -> &'static str {
    if let Some(c) = CATEGORIES.iter().find(|c| **c == class) {
        return c;
    }
    if let Some(c) = super::class_category::of(class) {
        return c;
    }
    if PROTOCOLS.contains(&class) {
        return protocol_category(class);
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::*;

    fn services() -> Arc<Services> {
        let mut s = Services::new();
        s.add("*.nflxvideo.net Netflix Video\n", "t").unwrap();
        Arc::new(s)
    }

    const TLS_FIELDS: &[Field] = &[
        Field::new("sni", FieldType::Str, "", ""),
        Field::new("quic_version", FieldType::Str, "", ""),
        Field::new("http_host", FieldType::Str, "", ""),
    ];

    fn row(rows: &mut Rows, sni: Option<&str>, quic: Option<&str>) {
        rows.push_row(3, |c| {
            match sni {
                Some(s) => c.text(s),
                None => c.null(),
            }
            match quic {
                Some(s) => c.text(s),
                None => c.null(),
            }
        });
    }

    fn v(class: u16, confidence: f32) -> Verdict {
        Verdict {
            class,
            confidence,
            at_packet: 4,
        }
    }

    #[test]
    fn payload_names_win_and_the_verdict_is_kept_beside() {
        let classes = ["TLS".to_string(), "DNS".to_string()];
        let l = Labeller::new(services(), &classes, true, TLS_FIELDS).unwrap();
        let names = l.names();
        assert_eq!(&names[..2], &classes);
        let mut rows = Rows::default();
        row(&mut rows, Some("ipv4-c1.1.nflxvideo.net"), None);
        row(&mut rows, Some("www.example.org"), Some("1"));
        row(&mut rows, None, None);
        row(&mut rows, None, None);
        let mut vs = [v(1, 0.5), v(1, 0.6), v(0, 0.9), v(Verdict::UNKNOWN, 0.2)];
        l.apply(vs.iter_mut(), &mut rows);
        assert_eq!(rows.width(), 3 + FIELDS.len());
        let app = |v: &Verdict| match v.class {
            Verdict::UNKNOWN => "unknown",
            c => names[usize::from(c)].as_str(),
        };
        let tail = |i: usize| -> Vec<Value<'_>> { (3..7).map(|j| rows.get(i, j)).collect() };
        assert_eq!(app(&vs[0]), "Netflix");
        assert_eq!(
            tail(0),
            [
                Value::Text("Video"),
                Value::Text("sni"),
                Value::Text("DNS"),
                Value::F64(0.5)
            ]
        );
        assert_eq!(app(&vs[1]), "QUIC");
        assert_eq!(tail(1)[..2], [Value::Text("Web"), Value::Text("quic")]);
        assert_eq!(app(&vs[2]), "TLS");
        assert_eq!(
            tail(2)[..3],
            [Value::Text("Web"), Value::Text("port"), Value::Text("TLS")]
        );
        assert_eq!(app(&vs[3]), "unknown");
        assert_eq!(
            tail(3),
            [
                Value::Null,
                Value::Text("none"),
                Value::Text("unknown"),
                Value::F64(f64::from(0.2f32))
            ]
        );
        // The analyzer cells are kept as they were.
        assert_eq!(rows.get(1, 0), Value::Text("www.example.org"));
        assert_eq!(rows.get(1, 1), Value::Text("1"));
        // The verdict keeps its confidence and packet.
        assert_eq!((vs[0].confidence, vs[0].at_packet), (0.5, 4));
    }

    #[test]
    fn without_cells_the_verdicts_are_labelled_the_same() {
        let classes = ["TLS".to_string(), "DNS".to_string()];
        let mut rows = Rows::default();
        row(&mut rows, Some("ipv4-c1.1.nflxvideo.net"), None);
        row(&mut rows, Some("www.example.org"), Some("1"));
        row(&mut rows, None, None);
        row(&mut rows, None, None);
        // A name in the last column only: not a row without names.
        rows.push_row(3, |c| {
            c.null();
            c.null();
            c.text("a.nflxvideo.net");
        });
        let verdicts = [
            v(1, 0.5),
            v(1, 0.6),
            v(0, 0.9),
            v(Verdict::UNKNOWN, 0.2),
            v(1, 0.7),
        ];
        let labelled = |cells: bool| {
            let l = Labeller::new(services(), &classes, false, TLS_FIELDS).unwrap();
            let drift = Arc::new(Drift::new(crate::classify::LabelLevel::App, &l.names()));
            let l = l.with_drift(drift.clone());
            let (mut r, mut vs) = (rows.clone(), verdicts);
            let mut counted = (0, 0);
            l.label(
                vs.iter_mut().map(|v| (v, Some(3))),
                &mut r,
                cells,
                |_, agree| {
                    counted.0 += 1;
                    counted.1 += u64::from(agree);
                },
            );
            assert_eq!(counted, drift.totals());
            (vs, r, counted)
        };
        let (with, with_rows, with_drift) = labelled(true);
        let (without, without_rows, without_drift) = labelled(false);
        assert_eq!(with, without);
        assert_eq!(with_drift, without_drift);
        assert_eq!(with_drift.0, 3, "the three flows labelled by their names");
        assert_eq!(without[4].class, without[0].class, "Netflix by its Host");
        assert_eq!(with_rows.width(), 3 + FIELDS.len());
        // Without cells, the rows are as the analyzers left them.
        assert_eq!(without_rows.width(), 3);
        for i in 0..rows.len() {
            assert!(rows.row(i).eq(without_rows.row(i)));
        }
    }

    #[test]
    fn without_analyzer_cells_the_label_is_the_verdicts() {
        let classes = ["TLS".to_string(), String::new(), "DNS".to_string()];
        let verdicts = [
            v(0, 0.5),
            v(1, 0.9),
            v(2, f32::NAN),
            v(2, 0.0),
            v(7, 0.9),
            v(Verdict::UNKNOWN, 0.2),
        ];
        for by_port in [false, true] {
            let l = Labeller::new(services(), &classes, by_port, &[]).unwrap();
            let labelled = |cells: bool| {
                let mut rows = Rows::default();
                let mut vs = verdicts;
                l.label(
                    vs.iter_mut().map(|v| (v, None)),
                    &mut rows,
                    cells,
                    |_, _| {},
                );
                vs.map(|v| v.class)
            };
            let with = labelled(true);
            assert_eq!(with, labelled(false));
            let names = l.names();
            assert_eq!(names[usize::from(with[0])], "TLS");
            assert_eq!(names[usize::from(with[3])], "DNS");
            assert_eq!(with[1..3], [Verdict::UNKNOWN; 2]);
            assert_eq!(with[4..], [Verdict::UNKNOWN; 2]);
        }
    }

    #[test]
    fn names_are_hashed_or_dropped_after_labelling() {
        let mut rows = Rows::default();
        row(&mut rows, Some("a.nflxvideo.net"), None);
        let hashed = Labeller::new(services(), &[], false, TLS_FIELDS)
            .unwrap()
            .with_privacy(Privacy::Hash(b"k".to_vec()));
        let mut vs = [v(Verdict::UNKNOWN, 0.0)];
        let mut r = rows.clone();
        hashed.apply(vs.iter_mut(), &mut r);
        assert_eq!(hashed.names()[usize::from(vs[0].class)], "Netflix");
        let h = hash_name(b"k", "a.nflxvideo.net");
        assert_eq!(r.get(0, 0), Value::Text(h.as_str()));
        assert_eq!(h.len(), 32);
        assert_ne!(h, hash_name(b"other", "a.nflxvideo.net"));
        // RFC 4231 test case 2: key "Jefe", its tag's first 16 bytes.
        assert_eq!(
            hash_name(b"Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c7"
        );
        let dropped = Labeller::new(services(), &[], false, TLS_FIELDS)
            .unwrap()
            .with_privacy(Privacy::Drop);
        let mut r = rows.clone();
        dropped.apply(vs.iter_mut(), &mut r);
        assert_eq!(r.get(0, 0), Value::Null);
        assert_eq!(r.get(0, 4), Value::Text("sni"));
    }

    #[test]
    fn handshakes_cut_by_the_snap_length_are_counted() {
        const F: &[Field] = &[
            Field::new("sni", FieldType::Str, "", ""),
            Field::new("quic_version", FieldType::Str, "", ""),
            Field::new("tls_status", FieldType::Str, "", ""),
        ];
        let l = Labeller::new(services(), &[], false, F).unwrap();
        let mut rows = Rows::default();
        for (quic, status) in [
            (None, Some("cut-snap")),
            (Some("1"), Some("cut-snap")),
            (Some("1"), Some("cut-snap")),
            (None, Some("cut-gap")),
            (None, Some("cut-memory")),
            (None, None),
        ] {
            rows.push_row(3, |c| {
                c.null();
                match quic {
                    Some(q) => c.text(q),
                    None => c.null(),
                }
                match status {
                    Some(s) => c.text(s),
                    None => c.null(),
                }
            });
        }
        let mut vs = [v(Verdict::UNKNOWN, 0.0); 6];
        l.apply(vs.iter_mut(), &mut rows);
        assert_eq!(l.cut_by_snap(), (1, 2));
        assert_eq!(l.cut_by_memory(), 1);
    }

    /// What a flow-table slot costs with the four labellers on: an index
    /// into each one's states (`analyze/mod.rs`: a state is made only for
    /// a flow it reads, and returned at the flow's record), the done words
    /// and where the TCP streams start; and what a state costs where one
    /// is made. Names and handshake bytes are allocated apart, only for
    /// the flows that have them.
    #[test]
    fn labeller_states_per_slot() {
        use crate::analyze::{dns, http, ssh, tls, TcpStarts};
        use std::mem::size_of;
        let per_slot = 4 * size_of::<u32>() + size_of::<[u16; 3]>() + size_of::<TcpStarts>();
        let states = [
            size_of::<tls::State>(),
            size_of::<http::State>(),
            size_of::<ssh::State>(),
            size_of::<dns::State>(),
        ];
        let made: usize = states.iter().sum();
        eprintln!("labellers per slot: {per_slot} bytes; per state made {states:?} = {made} bytes");
        assert!(per_slot <= 40, "{per_slot}");
        assert!(made <= 128, "{states:?}");
    }

    #[test]
    fn without_analyzers_or_model_the_rows_are_the_label_alone() {
        let l = Labeller::new(services(), &[], false, &[]).unwrap();
        let mut rows = Rows::default();
        let mut vs = [v(Verdict::UNKNOWN, 0.0); 2];
        l.apply(vs.iter_mut(), &mut rows);
        assert_eq!((rows.len(), rows.width()), (2, FIELDS.len()));
        assert_eq!(rows.get(1, 1), Value::Text("none"));
        assert_eq!(vs[1].class, Verdict::UNKNOWN);
    }
}
