//! A cascade: one model per early packet k = K1..=N, so that a flow is
//! decided at the earliest packet whose model is confident enough.
//!
//! Contract: [`Cascade`] holds stages at increasing packets k (each a
//! [`Model`] trained on the first k packets, with its own threshold; all
//! share the cascade's classes; none is itself a cascade or a costly
//! model); the first is at K1, the last at N. Packets between may have no
//! stage (training leaves out a k whose threshold reaches the precision
//! target nowhere). A flow with `len` early packets is decided as the flow
//! table decides it ([`Cascade::classify`]): for each stage k ≤
//! min(len, N) in turn, its verdict is taken as soon as it is not unknown;
//! stage N's verdict is taken whatever it is (unknown under its threshold,
//! as a single model); a flow that ended before N undecided gets the
//! verdict of the last stage at or below `len` (of the first stage when
//! `len` < K1; unknown when that stage was already tried). `at_packet` is
//! the number of packets the deciding stage used.
//! [`InlineCascade`] is the flow table's form of the same rule (one stage
//! per call, [`InlineCascade::decide`]), with C4.5 stages as [`FastTree`]s.
//! The body of a cascade model file is described in `docs/MODEL_FORMAT.md`;
//! classifying never allocates and never panics on a validated cascade.

use std::sync::Arc;

use super::compiled_tree::{EntryVerdict, FastTree};
use super::model::{Invalid, Model, ModelError, ModelInfo, ModelKind};
use super::{conf_u16, Classifier, FlowFeatures, Verdict};
use crate::features::early::{EarlyPkt, MAX_EARLY};

/// No stage at this packet.
const NONE: u8 = u8::MAX;

/// Models at increasing early packets, the last at N.
#[derive(Debug, Clone, PartialEq)]
pub struct Cascade {
    /// Stage models in order of their packet count (`info.packets`): the
    /// first decides from packet K1, the last at N.
    pub stages: Vec<Model>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StageFile {
    packets: usize,
    algo: String,
    threshold: f32,
    body: serde_json::Value,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CascadeFile {
    stages: Vec<StageFile>,
}

impl Cascade {
    /// K1: the packet of the first stage.
    pub fn first(&self) -> usize {
        self.stages.first().map_or(0, |s| s.info.packets)
    }

    /// N: the packet of the last stage.
    pub fn last(&self) -> usize {
        self.stages.last().map_or(0, |s| s.info.packets)
    }

    /// The last stage at or below `len` packets (the first when none).
    fn stage_at_end(&self, len: usize) -> &Model {
        self.stages
            .iter()
            .rev()
            .find(|s| s.info.packets <= len)
            .unwrap_or(&self.stages[0])
    }

    /// Checks the stages against the cascade's header (`info`).
    pub fn validate(&self, info: &ModelInfo) -> Result<(), Invalid> {
        if self.stages.is_empty() {
            return Err(Invalid("cascade without stages".into()));
        }
        if self.last() != info.packets {
            return Err(Invalid(format!(
                "cascade stages end at packet {}, header says {}",
                self.last(),
                info.packets
            )));
        }
        let mut prev = 0;
        for s in &self.stages {
            let k = s.info.packets;
            if k <= prev {
                return Err(Invalid(format!(
                    "cascade stage of {k} packets after one of {prev}: stages must use more packets in turn"
                )));
            }
            prev = k;
            if matches!(s.kind, ModelKind::Cascade(_) | ModelKind::Svm(_)) {
                return Err(Invalid(format!(
                    "cascade stage {k} is {}: not allowed in a cascade",
                    s.kind.algo()
                )));
            }
            if s.info.classes != info.classes {
                return Err(Invalid(format!("cascade stage {k} has other classes")));
            }
            s.validate()
                .map_err(|e| Invalid(format!("cascade stage {k}: {e}")))?;
        }
        Ok(())
    }

    /// The body as written in the model file.
    pub(crate) fn body_json(&self) -> Result<Vec<u8>, ModelError> {
        let stages = self
            .stages
            .iter()
            .map(|s| {
                let body = serde_json::from_slice(&s.body_json()?)
                    .map_err(|e| ModelError::EncodeStage(e.to_string()))?;
                Ok(StageFile {
                    packets: s.info.packets,
                    algo: s.kind.algo().into(),
                    threshold: s.info.threshold,
                    body,
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        serde_json::to_vec(&CascadeFile { stages }).map_err(|e| ModelError::Encode(e.to_string()))
    }

    /// Parses a cascade body; each stage gets the header's classes and
    /// level, its own N and threshold.
    pub(crate) fn from_json(info: &ModelInfo, body: &[u8]) -> Result<Cascade, ModelError> {
        let file: CascadeFile = serde_json::from_slice(body).map_err(|e| ModelError::Body {
            algo: "cascade".into(),
            reason: e.to_string(),
        })?;
        let mut stages = Vec::with_capacity(file.stages.len());
        for s in file.stages {
            if s.algo == "cascade" {
                return Err(ModelError::NestedCascade);
            }
            let stage_info = ModelInfo {
                classes: info.classes.clone(),
                packets: s.packets,
                level: info.level,
                threshold: s.threshold,
                ..ModelInfo::default()
            };
            let stage = |source| ModelError::Stage {
                packets: s.packets,
                source: Box::new(source),
            };
            let body = serde_json::to_vec(&s.body)
                .map_err(|e| stage(ModelError::Encode(e.to_string())))?;
            stages.push(Model::from_body(stage_info, &s.algo, &body).map_err(stage)?);
        }
        Ok(Cascade { stages })
    }

    /// The verdict the flow table gives a flow with these early packets
    /// (see the module docs).
    pub fn classify(&self, f: &FlowFeatures<'_>) -> Verdict {
        let len = f.early.len();
        if len == 0 {
            return Verdict {
                class: Verdict::UNKNOWN,
                confidence: 0.0,
                at_packet: 0,
            };
        }
        let last = self.last();
        for s in self.stages.iter().take_while(|s| s.info.packets <= len) {
            let v = s.classify(f);
            if v.class != Verdict::UNKNOWN || s.info.packets == last {
                return v;
            }
        }
        self.stage_at_end(len).classify(f)
    }

    /// Class and confidence before the deciding stage's threshold: the
    /// first stage (at most min(len, N) packets) whose confidence passes
    /// its threshold, else the stage that gives the final verdict.
    pub fn raw_predict(&self, f: &FlowFeatures<'_>) -> Option<(u16, f32)> {
        let len = f.early.len();
        let last = self.last();
        for s in self.stages.iter().take_while(|s| s.info.packets <= len) {
            match s.raw_predict(f) {
                Some((c, p)) if p >= s.info.threshold => return Some((c, p)),
                r if s.info.packets == last => return r,
                _ => {}
            }
        }
        self.stage_at_end(len).raw_predict(f)
    }

    /// The flow table's form.
    pub fn inline(&self) -> InlineCascade {
        // by_len[n]: the stage asked at packet n (NONE: wait), end[n]: the
        // stage of a flow ending with n packets.
        let mut by_len = [NONE; MAX_EARLY + 1];
        let mut end = [0u8; MAX_EARLY + 1];
        for (i, s) in self.stages.iter().enumerate() {
            let k = s.info.packets.min(MAX_EARLY);
            by_len[k] = i as u8;
            for e in &mut end[k..] {
                *e = i as u8;
            }
        }
        InlineCascade {
            classes: self.stages[0].info.classes.clone(),
            first: self.first(),
            last: self.last(),
            by_len,
            end,
            stages: self
                .stages
                .iter()
                .map(|s| match s.fast_tree() {
                    Some(t) => Stage::Tree(t),
                    None => Stage::Model(Arc::new(s.clone())),
                })
                .collect(),
        }
    }
}

enum Stage {
    Tree(FastTree),
    Model(Arc<Model>),
}

/// A cascade as the flow table runs it (see the module docs).
pub struct InlineCascade {
    classes: Vec<String>,
    first: usize,
    last: usize,
    by_len: [u8; MAX_EARLY + 1],
    end: [u8; MAX_EARLY + 1],
    stages: Vec<Stage>,
}

impl InlineCascade {
    /// K1: the first packet at which the table asks.
    pub fn first(&self) -> usize {
        self.first
    }

    /// N: the packet of the last stage.
    pub fn last(&self) -> usize {
        self.last
    }

    /// Class names, indexed by a verdict's class.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The verdict on a flow with these early packets, or `None` when the
    /// flow should wait for its next packet: the stage at `len` packets
    /// answers (none: wait), its verdict is final when it is not unknown
    /// or when `len` has reached N; at the flow's end (`end`) the last
    /// stage at or below `len` (the first when none) gives the verdict as
    /// it is.
    #[inline]
    pub fn decide(
        &self,
        early: &[EarlyPkt],
        proto: u8,
        sport: u16,
        dport: u16,
        end: bool,
    ) -> Option<EntryVerdict> {
        let len = early.len().min(self.last);
        let i = if end { self.end[len] } else { self.by_len[len] };
        let v = match self.stages.get(i as usize)? {
            Stage::Tree(t) => t.decide(early, proto, dport),
            Stage::Model(m) => {
                let v = m.classify(&FlowFeatures {
                    early,
                    proto,
                    sport,
                    dport,
                });
                EntryVerdict {
                    app: v.class,
                    conf: conf_u16(v.confidence),
                    at: v.at_packet,
                }
            }
        };
        (end || len >= self.last || v.app != Verdict::UNKNOWN).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ff, patterns};
    use super::*;
    use crate::learn::train::{train, Algo, TrainOptions};

    /// A cascade of `algo` stages at packets `ks` (the last 4) with
    /// threshold `t`.
    fn cascade(algo: Algo, ks: &[usize], t: f32) -> Model {
        let d = patterns(40, 60, 3);
        let stages: Vec<Model> = ks
            .iter()
            .map(|&k| {
                let opt = TrainOptions {
                    algo,
                    packets: k,
                    threshold: t,
                    ..TrainOptions::default()
                };
                train(&d, &opt).unwrap()
            })
            .collect();
        let m = Model {
            info: ModelInfo {
                classes: stages[0].info.classes.clone(),
                packets: 4,
                threshold: t,
                ..ModelInfo::default()
            },
            kind: ModelKind::Cascade(Cascade { stages }),
        };
        m.validate().unwrap();
        m
    }

    /// The flow table's rule, packet by packet: ask from K1 on, take the
    /// first answer; at the flow's end take what the last ask gives.
    fn as_the_table_decides(c: &InlineCascade, f: &FlowFeatures<'_>) -> Option<EntryVerdict> {
        let len = f.early.len();
        for n in c.first()..=len {
            if let Some(v) = c.decide(&f.early[..n], f.proto, f.sport, f.dport, false) {
                return Some(v);
            }
        }
        (len > 0).then(|| c.decide(f.early, f.proto, f.sport, f.dport, true))?
    }

    #[test]
    fn the_table_and_classify_agree_and_early_packets_decide() {
        let d = patterns(30, 80, 9);
        for (algo, ks) in [
            (Algo::C45, &[1, 2, 3, 4][..]),
            (Algo::NaiveBayes, &[1, 2, 3, 4]),
            (Algo::Forest, &[1, 2, 3, 4]),
            (Algo::C45, &[2, 4]),
            (Algo::C45, &[4]),
        ] {
            let m = cascade(algo, ks, 0.9);
            let c = m.cascade().unwrap();
            let ic = c.inline();
            let mut at = [0usize; 5];
            for s in &d.samples {
                for len in 0..=s.early.len() {
                    let f = FlowFeatures {
                        early: &s.early[..len],
                        ..ff(s)
                    };
                    let v = m.classify(&f);
                    let e = as_the_table_decides(&ic, &f);
                    let want = (len > 0).then_some(EntryVerdict {
                        app: v.class,
                        conf: conf_u16(v.confidence),
                        at: v.at_packet,
                    });
                    assert_eq!(e, want, "{algo} len {len} {f:?}");
                    if len == s.early.len() {
                        at[v.at_packet as usize] += 1;
                    }
                }
            }
            // These patterns differ from their first packet: most flows are
            // decided at the first stage; a one-stage cascade at 4.
            if ks.len() > 1 {
                assert!(at[ks[0]] > at[4], "{algo} {ks:?}: {at:?}");
            } else {
                assert_eq!(at[4], d.samples.len(), "{at:?}");
            }
            assert_eq!(at[1..].iter().sum::<usize>(), d.samples.len());
            for (k, &n) in at.iter().enumerate() {
                assert!(n == 0 || ks.contains(&k), "{ks:?}: {at:?}");
            }
        }
    }

    #[test]
    fn a_stage_decides_only_above_its_threshold() {
        let m = cascade(Algo::C45, &[2, 3, 4], 0.999);
        let c = m.cascade().unwrap();
        for s in &patterns(10, 80, 4).samples {
            let v = c.classify(&ff(s));
            if (v.at_packet as usize) < 4 && v.class != Verdict::UNKNOWN {
                let stage = &c.stages[v.at_packet as usize - 2];
                let (_, p) = stage.raw_predict(&ff(s)).unwrap();
                assert!(p >= 0.999);
            }
        }
    }

    #[test]
    fn files_round_trip_and_bad_cascades_are_refused() {
        let m = cascade(Algo::C45, &[2, 3, 4], 0.8);
        let path = std::env::temp_dir().join(format!("eb-cascade-{}.ebm", std::process::id()));
        m.save(&path).unwrap();
        let back = Model::load(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(back, m);
        assert_eq!(back.kind.algo(), "cascade");
        let d = patterns(10, 80, 5);
        for s in &d.samples {
            assert_eq!(back.classify(&ff(s)), m.classify(&ff(s)));
        }
        // Stages that do not end at N, or of another N, are refused.
        let mut bad = m.clone();
        bad.info.packets = 5;
        assert!(bad.validate().unwrap_err().0.contains("end at packet"));
        let mut bad = m.clone();
        if let ModelKind::Cascade(c) = &mut bad.kind {
            c.stages.swap(0, 1);
        }
        assert!(bad.validate().is_err());
        let mut bad = m.clone();
        if let ModelKind::Cascade(c) = &mut bad.kind {
            c.stages[2] = m.clone();
            c.stages[2].info.packets = 4;
        }
        assert!(bad.validate().unwrap_err().0.contains("not allowed"));
    }
}
