//! `flows --learn DIR`: the early model learns the network it runs on from
//! the flows' own payload labels, while the run goes on.
//!
//! Contract: a [`Learner`] is an output of flow records (an
//! [`Exporter`]) that sees every labelled record on the exporter thread.
//! A record whose `label_source` is a payload name (`sni`, `quic`, `http`,
//! `dns`, `ssh`) is offered, with its early packets, protocol and ports,
//! to a [`Keep`]: at most `reservoir` flows per class, the flows of
//! smallest hash of their key and first packet time (a uniform sample
//! whose content does not depend on the order records arrive in, so not
//! on the shard count either). Every `every_labels` offered flows or
//! `every_seconds` of packet time (the records' last packets), the kept
//! flows go to one background thread, which trains a model on all but a
//! held-out share (`holdout`, spread evenly over each class), scores it
//! there beside the best model so far (the run's own model at first),
//! and writes it to `DIR/model-NNNN.ebm` with its provenance and held-out
//! scores; a line per model goes to `DIR/models.jsonl` and the best one
//! is also written to `DIR/best.ebm`. While the thread trains, a trigger
//! waits for it (never the exporter thread): the kept flows are copied
//! into a job only once the thread is idle, so a trigger that waits costs
//! the exporter thread one atomic load a record batch, not a copy of the
//! reservoir (a copy made a batch while a forest trained slowed the
//! exporter thread, BENCHMARKS.md). At the end of the run
//! ([`Exporter::finish`], also after SIGTERM, which flushes every flow
//! first) a last model is trained from everything kept, so one pass over
//! a capture leaves a model in DIR. What was learnt is in [`Status`].
//!
//! With a `Swap` (`LearnOptions::swap`), a model that beats the best so
//! far is published to the shards (`classify/swap.rs`). In a file run
//! that stops at points, the triggers are not looked at per record batch:
//! at each point the training thread waits until every record handed over
//! before it has been offered here, publishes the model it trained since
//! the point before (if that one beat the best), lets the shards go on,
//! and then trains a model from the flows kept at the point if one is due,
//! while the shards run; that model is published at the next point. So
//! which models are trained and swapped in, and where, does not depend on
//! the shard count nor on how fast the thread trains, and the shards wait
//! at a point only when a model took longer to train than they took to
//! run from the point before.
//!
//! Memory is bounded by classes × `reservoir` samples ([`Status::bytes`]);
//! the thread's share of a core is bounded by `cpu` (it rests after each
//! model for as long as that share asks, except after the last one of
//! the run, and in a file run with swap points only until every shard
//! waits at the next point: a rest then would stall them); the seconds it
//! trained and rested are in [`Status::busy`] and [`Status::rested`].
//! Errors writing a model are kept in [`Status::errors`], never fatal to
//! the run.

use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::classify::dataset::{Dataset, LabelLevel, Sample};
use crate::classify::provenance::HeldOut;
use crate::classify::swap::{Installed, Point, Swap};
use crate::classify::{Model, Verdict};
use crate::error::{Error, Result};
use crate::export::Exporter;
use crate::features::early::EarlyPkt;
use crate::flow::record::{FlowRecord, RecordBatch};
use crate::schema::{Field, Value};

use super::evaluate::evaluate;
use super::train::{train, TrainOptions};

/// The payload sources of `label_source` (a flow labelled by its payload).
const PAYLOAD: [&str; 5] = ["sni", "quic", "http", "dns", "ssh"];

/// The classes of `--learn-level proto`, one per payload source.
pub const PROTOCOLS: [&str; 5] = ["TLS", "QUIC", "HTTP", "DNS", "SSH"];

/// How a run learns (from `[learn]`).
#[derive(Debug, Clone)]
pub struct LearnOptions {
    /// Where models are written.
    pub dir: PathBuf,
    /// Flows kept per class (≥ 1).
    pub reservoir: usize,
    /// Train every this many labelled flows (0: not by count).
    pub every_labels: u64,
    /// Train every this many nanoseconds of packet time (0: not by time).
    pub every_ns: u64,
    /// The class of a labelled flow.
    pub level: LabelLevel,
    /// How each model is trained (algorithm, N, seed).
    pub train: TrainOptions,
    /// Share of each class held out for scoring, in [0, 1).
    pub holdout: f64,
    /// Share of one core the training thread may use, in (0, 1].
    pub cpu: f64,
    /// Where a model that beats the one in use is published for the
    /// shards (`None`: models are written, never swapped in).
    pub swap: Option<Arc<Swap>>,
}

/// One model the run wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Written {
    /// Its number in the run (1, 2, …).
    pub id: u32,
    /// The model file.
    pub path: PathBuf,
    /// Flows it was trained on.
    pub trained: usize,
    /// Classes it knows.
    pub classes: usize,
    /// Flows it was scored on (held out).
    pub held_out: usize,
    /// Its accuracy on them (unknown counts as wrong).
    pub accuracy: f64,
    /// Its coverage on them.
    pub coverage: f64,
    /// Accuracy of the best model before it (the run's own model for the
    /// first) on the same flows.
    pub best_before: f64,
    /// It beat that model: it is now `best.ebm`.
    pub best: bool,
    /// Packet time of the last record offered before it was trained (ns).
    pub packet_time: u64,
    /// Seconds the training took (wall clock, reported only).
    pub seconds: f64,
}

/// What a run has learnt so far (shared with the probe).
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Payload-labelled flows offered.
    pub offered: u64,
    /// Flows kept now.
    pub kept: usize,
    /// Bytes the kept flows hold.
    pub bytes: usize,
    /// Triggers that came while the thread was still training (the
    /// training waited for the next record batch).
    pub deferred: u64,
    /// Seconds of wall time the training thread spent training (all
    /// models, failed ones too).
    pub busy: f64,
    /// Seconds it rested after them to keep to its share of a core
    /// (`cpu`).
    pub rested: f64,
    /// Models written, in order.
    pub models: Vec<Written>,
    /// Models that could not be trained or written (the reason).
    pub errors: Vec<String>,
    /// The first learnt model the shards took in (`None` while the run's
    /// own model decides), and how many times a shard installed a model.
    pub in_use: Option<Installed>,
    /// Installations of a learnt model, all shards.
    pub installs: u64,
}

impl Status {
    /// The models written, as a JSON array of the lines of `models.jsonl`.
    pub fn models_json(&self) -> Result<String> {
        serde_json::to_string(&self.models).map_err(|e| Error::Training(e.to_string()))
    }
}

/// A bounded sample of flows per class: the `per_class` of smallest hash.
#[derive(Debug, Default)]
pub struct Keep {
    per_class: usize,
    classes: Vec<String>,
    index: HashMap<String, u16>,
    /// Per class, a max-heap by hash of the kept flows.
    kept: Vec<BinaryHeap<Kept>>,
    bytes: usize,
}

/// One kept flow, ordered by its hash (then its content, for ties).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Kept {
    hash: u64,
    proto: u8,
    sport: u16,
    dport: u16,
    early: Vec<(u16, u8, u8, u32)>,
}

impl Kept {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Kept>()
            + self.early.capacity() * std::mem::size_of::<(u16, u8, u8, u32)>()
    }
}

/// A 64-bit mix (SplitMix64's finaliser).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The hash that orders a flow in [`Keep`]: of its key and first packet
/// time, the same whichever shard or batch brought it.
fn flow_hash(r: &FlowRecord) -> u64 {
    let k = &r.key;
    let mut h = mix(r.first_ts);
    for chunk in k.src.chunks(8).chain(k.dst.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(b));
    }
    let ports = u64::from(k.sport) << 32 | u64::from(k.dport) << 16 | u64::from(k.proto);
    mix(h ^ ports ^ u64::from(k.vlan) << 48 ^ u64::from(k.tunnel_id).rotate_left(20))
}

impl Keep {
    /// Keeps at most `per_class` flows of each class.
    pub fn new(per_class: usize) -> Keep {
        Keep {
            per_class: per_class.max(1),
            ..Keep::default()
        }
    }

    /// Offers a flow of `class`; true when it is kept.
    pub fn offer(&mut self, class: &str, r: &FlowRecord, early: &[EarlyPkt]) -> bool {
        let c = match self.index.get(class) {
            Some(&c) => c,
            None => {
                if self.classes.len() >= usize::from(Verdict::UNKNOWN) - 1 {
                    return false;
                }
                let c = self.classes.len() as u16;
                self.classes.push(class.to_string());
                self.index.insert(class.to_string(), c);
                self.kept.push(BinaryHeap::new());
                c
            }
        };
        let heap = &mut self.kept[usize::from(c)];
        let hash = flow_hash(r);
        if heap.len() >= self.per_class && heap.peek().is_some_and(|top| top.hash <= hash) {
            return false;
        }
        let k = Kept {
            hash,
            proto: r.key.proto,
            sport: r.key.sport,
            dport: r.key.dport,
            early: early
                .iter()
                .map(|e| (e.size, e.dir as u8, e.flags, e.iat_us))
                .collect(),
        };
        self.bytes += k.bytes();
        heap.push(k);
        if heap.len() > self.per_class {
            if let Some(old) = heap.pop() {
                self.bytes -= old.bytes();
            }
        }
        true
    }

    /// Flows kept.
    pub fn len(&self) -> usize {
        self.kept.iter().map(BinaryHeap::len).sum()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the kept flows hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The kept flows as two data sets, training and held-out: within each
    /// class, in order of hash, every flow that brings the held-out count
    /// to the next whole number of `holdout` × flows is held out.
    /// Classes are in name order (not the order flows came in).
    pub fn split(&self, holdout: f64) -> (Dataset, Dataset) {
        let mut order: Vec<usize> = (0..self.classes.len()).collect();
        order.sort_by(|&a, &b| self.classes[a].cmp(&self.classes[b]));
        let mut fit = Dataset {
            classes: order.iter().map(|&c| self.classes[c].clone()).collect(),
            samples: Vec::new(),
        };
        let mut test = fit.clone();
        for (c, heap) in order.iter().map(|&c| &self.kept[c]).enumerate() {
            let mut flows: Vec<&Kept> = heap.iter().collect();
            flows.sort();
            for (i, k) in flows.into_iter().enumerate() {
                let s = Sample {
                    early: k
                        .early
                        .iter()
                        .map(|&(size, dir, flags, iat_us)| EarlyPkt {
                            size,
                            dir: if dir == 0 {
                                crate::features::Dir::Fwd
                            } else {
                                crate::features::Dir::Bwd
                            },
                            flags,
                            iat_us,
                        })
                        .collect(),
                    proto: k.proto,
                    sport: k.sport,
                    dport: k.dport,
                    label: c as u16,
                    group: String::new(),
                };
                let held = ((i + 1) as f64 * holdout).floor() > (i as f64 * holdout).floor();
                match held {
                    true => test.samples.push(s),
                    false => fit.samples.push(s),
                }
            }
        }
        (fit, test)
    }
}

/// A training job: the data, the provenance, the packet time.
struct Job {
    fit: Dataset,
    test: Dataset,
    offered: u64,
    packet_time: (u64, u64),
}

/// What the exporter thread has sampled, shared with the training thread
/// (which takes it at the points of a file run).
#[derive(Debug, Default)]
struct Sampled {
    keep: Keep,
    offered: u64,
    /// Flows offered since the last model.
    since: u64,
    first_ts: Option<u64>,
    last_train_ts: Option<u64>,
    latest_ts: u64,
    /// Jobs made from the kept flows (each a copy of them).
    jobs: u64,
}

impl Sampled {
    /// A model is due: `every_labels` flows offered or `every_ns` of
    /// packet time since the last one.
    fn due(&self, opts: &LearnOptions) -> bool {
        let Some(start) = self.last_train_ts else {
            return false;
        };
        (opts.every_labels > 0 && self.since >= opts.every_labels)
            || (opts.every_ns > 0 && self.latest_ts.saturating_sub(start) >= opts.every_ns)
    }

    /// The kept flows as a training job (`None`: nothing kept).
    fn job(&mut self, holdout: f64) -> Option<Job> {
        if self.keep.is_empty() {
            return None;
        }
        self.jobs += 1;
        let (fit, test) = self.keep.split(holdout);
        Some(Job {
            fit,
            test,
            offered: self.offered,
            packet_time: (self.first_ts.unwrap_or(0), self.latest_ts),
        })
    }

    /// A model was trained from what is kept now.
    fn trained(&mut self) {
        self.since = 0;
        self.last_train_ts = Some(self.latest_ts);
    }
}

/// How a rest of the training thread ended.
enum Rest {
    /// It rested as long as its share asks.
    Done,
    /// The end of the run handed over the last job.
    Job(Job),
    /// The run ended with no job left.
    Closed,
}

/// The training thread's side.
struct Trainer {
    opts: LearnOptions,
    status: Arc<Mutex<Status>>,
    sampled: Arc<Mutex<Sampled>>,
    /// The model to beat and its name.
    best: Option<Arc<Model>>,
    next_id: u32,
    /// Raised while the thread waits for a job.
    idle: Arc<AtomicBool>,
}

impl Trainer {
    fn run(mut self, jobs: Receiver<Job>) {
        // A file run whose models are swapped: the shards stop at points
        // of the input. A model due at one point is trained from what the
        // records before it brought while the shards run on, and is
        // published at the next point (if it beat the best), so the
        // shards wait only for what is left of a training longer than
        // the stretch between two points.
        if let Some(sw) = self.opts.swap.clone().filter(|s| s.at_points()) {
            let mut ready: Option<(u16, Arc<Model>)> = None;
            let mut point = sw.next_point();
            while let Some(b) = point {
                if let Some((id, model)) = ready.take() {
                    sw.publish(id, model);
                }
                let job = {
                    let mut sampled = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
                    match sampled.due(&self.opts) {
                        true => {
                            sampled.trained();
                            sampled.job(self.opts.holdout)
                        }
                        false => None,
                    }
                };
                sw.release(b);
                point = match job {
                    Some(job) => {
                        let started = Instant::now();
                        ready = self.train_one(job, started);
                        self.rest_before_point(started, &sw)
                    }
                    None => sw.next_point(),
                };
            }
        }
        let mut next = None;
        loop {
            let job = match next.take() {
                Some(job) => job,
                None => {
                    self.idle.store(true, Ordering::Release);
                    let Ok(job) = jobs.recv() else {
                        break;
                    };
                    self.idle.store(false, Ordering::Release);
                    job
                }
            };
            let started = Instant::now();
            if let (Some((id, model)), Some(sw)) = (self.train_one(job, started), &self.opts.swap) {
                sw.publish(id, model);
            }
            match self.rest(started, &jobs) {
                Rest::Done => {}
                Rest::Job(job) => next = Some(job),
                Rest::Closed => break,
            }
        }
    }

    /// Trains, scores and writes one model; an error is kept in the status.
    /// The model with its number when it beat the best so far (for the
    /// shards, when models are swapped).
    fn train_one(&mut self, job: Job, started: Instant) -> Option<(u16, Arc<Model>)> {
        let done = self.one(job, started);
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        status.busy += started.elapsed().as_secs_f64();
        match done {
            Ok(best) => best,
            Err(e) => {
                status.errors.push(e.to_string());
                None
            }
        }
    }

    /// In a file run with swap points: rests after a model trained from
    /// `started` as [`Trainer::rest`] does, but ends the rest as soon as
    /// every shard waits at the next point (a rest then would stall
    /// them); that point, or `None` once the run is done.
    fn rest_before_point(&self, started: Instant, sw: &Swap) -> Option<u64> {
        let cpu = self.opts.cpu.clamp(0.01, 1.0);
        if cpu >= 1.0 {
            return sw.next_point();
        }
        let busy = started.elapsed().as_secs_f64();
        // Wall time: the thread's share of a core, not a flow's timing.
        let resting = Instant::now();
        let until = resting + Duration::from_secs_f64(busy * (1.0 - cpu) / cpu);
        let point = match sw.wait_point(Some(until)) {
            Point::Reached(b) => Some(b),
            Point::Closed => None,
            Point::NotYet => sw.next_point(),
        };
        self.status.lock().unwrap_or_else(|p| p.into_inner()).rested +=
            (Instant::now().min(until) - resting).as_secs_f64();
        point
    }

    /// Rests so that training takes at most `cpu` of a core. The end of
    /// the run cuts a rest short: its last job is trained at once, and
    /// the thread ends without resting after it.
    fn rest(&self, started: Instant, jobs: &Receiver<Job>) -> Rest {
        let busy = started.elapsed().as_secs_f64();
        let cpu = self.opts.cpu.clamp(0.01, 1.0);
        if cpu >= 1.0 || busy <= 0.0 {
            return Rest::Done;
        }
        let resting = Instant::now();
        let rest = match jobs.recv_timeout(Duration::from_secs_f64(busy * (1.0 - cpu) / cpu)) {
            Ok(job) => Rest::Job(job),
            Err(RecvTimeoutError::Timeout) => Rest::Done,
            Err(RecvTimeoutError::Disconnected) => Rest::Closed,
        };
        self.status.lock().unwrap_or_else(|p| p.into_inner()).rested +=
            resting.elapsed().as_secs_f64();
        rest
    }

    fn one(&mut self, job: Job, started: Instant) -> Result<Option<(u16, Arc<Model>)>> {
        let id = self.next_id;
        self.next_id += 1;
        let mut opts = self.opts.train.clone();
        opts.level = Some(self.opts.level);
        opts.trained_on = format!(
            "self-labels online (earlybird flows --learn): {} of the payload label; {} flows of {} classes, \
             of {} payload-labelled flows offered, at most {} per class kept (smallest hash of key and first packet); \
             packet time {} to {} ns",
            self.opts.level.name(),
            job.fit.samples.len(),
            job.fit.classes.len(),
            job.offered,
            self.opts.reservoir,
            job.packet_time.0,
            job.packet_time.1,
        );
        let mut model = train(&job.fit, &opts)?;
        let scored = (!job.test.samples.is_empty()).then(|| evaluate(&model, &job.test));
        let majority = {
            let top = job.test.support().into_iter().max().unwrap_or(0);
            match job.test.samples.len() {
                0 => 0.0,
                n => top as f64 / n as f64,
            }
        };
        model.info.held_out = scored.as_ref().map(|r| HeldOut {
            flows: r.total,
            captures: 0,
            threshold: r.threshold,
            coverage: r.coverage,
            precision: r.precision,
            accuracy: r.accuracy,
            majority,
        });
        let accuracy = scored.as_ref().map_or(0.0, |r| r.accuracy);
        let before = match (&self.best, job.test.samples.is_empty()) {
            (Some(b), false) => evaluate(b, &job.test).accuracy,
            _ => 0.0,
        };
        let best = scored.is_some() && (self.best.is_none() || accuracy > before);
        let path = self.opts.dir.join(format!("model-{id:04}.ebm"));
        model.save(&path)?;
        let mut publish = None;
        if best {
            model.save(self.opts.dir.join("best.ebm"))?;
            let m = Arc::new(model.clone());
            publish = u16::try_from(id).ok().map(|n| (n, m.clone()));
            self.best = Some(m);
        }
        let w = Written {
            id,
            path,
            trained: job.fit.samples.len(),
            classes: model.info.classes.len(),
            held_out: job.test.samples.len(),
            accuracy,
            coverage: scored.as_ref().map_or(0.0, |r| r.coverage),
            best_before: before,
            best,
            packet_time: job.packet_time.1,
            seconds: started.elapsed().as_secs_f64(),
        };
        let index = self.opts.dir.join("models.jsonl");
        let line = serde_json::to_string(&w).map_err(|e| Error::Training(e.to_string()))?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&index)
            .and_then(|mut f| writeln!(f, "{line}"))
            .map_err(|e| Error::io(&index, e))?;
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .models
            .push(w);
        Ok(publish)
    }
}

/// The output that learns (see the module docs).
pub struct Learner {
    opts: LearnOptions,
    name: String,
    class_names: Arc<[String]>,
    source_col: Option<usize>,
    category_col: Option<usize>,
    sampled: Arc<Mutex<Sampled>>,
    due: bool,
    /// Triggers that waited for the training thread.
    deferred: u64,
    /// The training thread waits for a job.
    idle: Arc<AtomicBool>,
    status: Arc<Mutex<Status>>,
    jobs: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Learner {
    /// A learner over records whose analyzer cells are `analyzed` (the
    /// labeller's fields among them) and whose labelled class indexes
    /// `class_names`; `start` is the run's own model (the first to beat),
    /// if any. Creates `opts.dir` and starts the training thread.
    pub fn start(
        opts: LearnOptions,
        analyzed: &[Field],
        class_names: Arc<[String]>,
        start: Option<Arc<Model>>,
    ) -> Result<(Learner, Arc<Mutex<Status>>)> {
        std::fs::create_dir_all(&opts.dir).map_err(|e| Error::io(&opts.dir, e))?;
        let status = Arc::new(Mutex::new(Status::default()));
        let sampled = Arc::new(Mutex::new(Sampled {
            keep: Keep::new(opts.reservoir),
            ..Sampled::default()
        }));
        let (tx, rx) = sync_channel(0);
        let idle = Arc::new(AtomicBool::new(false));
        let trainer = Trainer {
            opts: opts.clone(),
            status: status.clone(),
            sampled: sampled.clone(),
            best: start,
            next_id: 1,
            idle: idle.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("eb-learn".into())
            .spawn(move || trainer.run(rx))
            .map_err(|e| Error::Training(format!("cannot start the training thread: {e}")))?;
        let at = |n: &str| analyzed.iter().position(|f| f.name == n);
        Ok((
            Learner {
                name: format!("learn:{}", opts.dir.display()),
                opts,
                class_names,
                source_col: at("label_source"),
                category_col: at("category"),
                sampled,
                due: false,
                deferred: 0,
                idle,
                status: status.clone(),
                jobs: Some(tx),
                thread: Some(thread),
            },
            status,
        ))
    }

    /// The class of record `i` of `batch` at the run's level, when its
    /// label came from its payload.
    fn class_of<'a>(&'a self, batch: &'a RecordBatch, i: usize) -> Option<&'a str> {
        let source = match batch.analyzed.get(i, self.source_col?) {
            Value::Text(t) => t,
            _ => return None,
        };
        if !PAYLOAD.contains(&source) {
            return None;
        }
        let class = match self.opts.level {
            LabelLevel::App => {
                let c = batch.records[i].verdict.class;
                self.class_names.get(usize::from(c))?.as_str()
            }
            LabelLevel::Category => match batch.analyzed.get(i, self.category_col?) {
                Value::Text(t) => t,
                _ => return None,
            },
            LabelLevel::Proto => match source {
                "sni" => "TLS",
                "quic" => "QUIC",
                "http" => "HTTP",
                "dns" => "DNS",
                _ => "SSH",
            },
        };
        (!class.is_empty()).then_some(class)
    }

    /// Hands the kept flows to the training thread; with `wait`, waits
    /// for it to take them. False when it was busy (not waiting): then
    /// the kept flows are not copied.
    fn submit(&mut self, wait: bool) -> bool {
        let Some(tx) = &self.jobs else {
            return false;
        };
        if !wait && !self.idle.load(Ordering::Acquire) {
            self.deferred += 1;
            return false;
        }
        let Some(job) = self
            .sampled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .job(self.opts.holdout)
        else {
            return true;
        };
        match wait {
            true => tx.send(job).is_ok(),
            false => match tx.try_send(job) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    self.deferred += 1;
                    false
                }
                Err(TrySendError::Disconnected(_)) => false,
            },
        }
    }

    fn publish(&self) {
        let (offered, kept, bytes) = {
            let s = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
            (s.offered, s.keep.len(), s.keep.bytes())
        };
        let installed = self.opts.swap.as_ref().map(|sw| sw.installed());
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        s.offered = offered;
        s.kept = kept;
        s.bytes = bytes;
        s.deferred = self.deferred;
        if let Some((first, installs)) = installed {
            s.in_use = first;
            s.installs = installs;
        }
    }

    /// True when the training thread decides at the points of a file run.
    fn at_points(&self) -> bool {
        self.opts.swap.as_ref().is_some_and(|s| s.at_points())
    }
}

impl Exporter for Learner {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let at_points = self.at_points();
        {
            let mut guard = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
            let sampled = &mut *guard;
            for i in 0..batch.len() {
                let r = &batch.records[i];
                sampled.latest_ts = sampled.latest_ts.max(r.last_ts);
                let Some(class) = self.class_of(batch, i) else {
                    continue;
                };
                sampled.keep.offer(class, r, batch.early_of(i));
                sampled.offered += 1;
                sampled.since += 1;
                sampled.first_ts = Some(sampled.first_ts.map_or(r.first_ts, |t| t.min(r.first_ts)));
                sampled.last_train_ts.get_or_insert(r.last_ts);
                if !at_points && sampled.due(&self.opts) {
                    self.due = true;
                }
            }
        }
        if let Some(sw) = &self.opts.swap {
            sw.seen(batch.len() as u64);
        }
        if self.due && self.submit(false) {
            self.due = false;
            self.sampled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .trained();
        }
        self.publish();
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(sw) = &self.opts.swap {
            sw.close();
        }
        let offered = self
            .sampled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .offered;
        if self.jobs.is_some() && offered > 0 {
            self.submit(true);
        }
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.publish();
        Ok(())
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn reads_moments(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Dir;

    fn rec(i: u32) -> (FlowRecord, Vec<EarlyPkt>) {
        let mut r = FlowRecord::default();
        r.key.src[12..].copy_from_slice(&i.to_be_bytes());
        r.key.sport = 1000 + (i % 5000) as u16;
        r.key.dport = 443;
        r.key.proto = 6;
        r.first_ts = u64::from(i) * 1000;
        let early = vec![EarlyPkt {
            size: (i % 1400) as u16,
            dir: Dir::Fwd,
            flags: 2,
            iat_us: i,
        }];
        (r, early)
    }

    #[test]
    fn the_kept_flows_do_not_depend_on_their_order_and_are_bounded() {
        let flows: Vec<_> = (0..500).map(rec).collect();
        let mut a = Keep::new(20);
        for (r, e) in &flows {
            a.offer(if r.key.sport % 2 == 0 { "x" } else { "y" }, r, e);
        }
        let mut b = Keep::new(20);
        for (r, e) in flows.iter().rev() {
            b.offer(if r.key.sport % 2 == 0 { "x" } else { "y" }, r, e);
        }
        assert_eq!(a.len(), 40);
        assert_eq!(a.split(0.25), b.split(0.25));
        let (fit, test) = a.split(0.25);
        assert_eq!((fit.samples.len(), test.samples.len()), (30, 10));
        assert_eq!(a.bytes(), b.bytes());
        assert!(a.bytes() > 0);
        // The sample is spread over the offered flows, not the first 20.
        let kept: Vec<u16> = fit.samples.iter().map(|s| s.early[0].size).collect();
        assert!(kept.iter().any(|&s| s > 100), "{kept:?}");
    }

    /// Offers 40 flows, DNS and HTTP in turn.
    fn offer40(sampled: &mut Sampled) {
        for i in 0..40 {
            let (r, e) = rec(i);
            sampled
                .keep
                .offer(if i % 2 == 0 { "DNS" } else { "HTTP" }, &r, &e);
            sampled.offered += 1;
        }
    }

    /// Options that train a C4.5 model at every labelled flow, on the
    /// whole of one core, into `dir`.
    fn small(dir: &std::path::Path, swap: Option<Arc<Swap>>) -> LearnOptions {
        LearnOptions {
            dir: dir.to_path_buf(),
            reservoir: 100,
            every_labels: 1,
            every_ns: 0,
            level: LabelLevel::Proto,
            train: TrainOptions {
                algo: crate::learn::Algo::C45,
                ..TrainOptions::default()
            },
            holdout: 0.25,
            cpu: 1.0,
            swap,
        }
    }

    /// A file run with swap points: the model due at a point trains while
    /// the shard runs on from it, and comes in at the next point.
    #[test]
    fn a_model_due_at_a_point_trains_while_the_shards_run_on() {
        let dir = std::env::temp_dir().join(format!("eb-learn-points-{}", std::process::id()));
        let classes: Arc<[String]> = Arc::from(vec!["DNS".to_string(), "HTTP".to_string()]);
        let sw = Arc::new(Swap::new(classes.clone(), 1, 1));
        let opts = small(&dir, Some(sw.clone()));
        let (mut learner, status) = Learner::start(opts, &[], classes, None).unwrap();
        {
            let mut sampled = learner.sampled.lock().unwrap();
            offer40(&mut sampled);
            sampled.since = 40;
            sampled.last_train_ts = Some(0);
        }
        let mut link = sw.link(0);
        // Holding the status keeps the thread in the model due at point 1
        // (it records the model there once trained).
        let held = status.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let shard = std::thread::spawn(move || {
            let first = link.between_batches(0, || 0, || false).map(|m| m.0);
            tx.send(first).unwrap();
            link.between_batches(0, || 0, || false).map(|m| m.0)
        });
        // Only a guard against a hang: the shard goes on from point 1 at
        // once when it does not wait for the training.
        let first = rx.recv_timeout(std::time::Duration::from_secs(120));
        assert_eq!(
            first,
            Ok(None),
            "the shard waited at point 1 for the model due there"
        );
        assert_eq!(learner.sampled.lock().unwrap().jobs, 1);
        drop(held);
        assert_eq!(
            shard.join().unwrap(),
            Some(1),
            "model 1 comes in at point 2"
        );
        learner.finish().unwrap();
        assert_eq!(status.lock().unwrap().models.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A trigger that comes while the training thread trains does not copy
    /// the kept flows: one job for the model in training, none for the
    /// triggers that wait, and the thread's training time is reported.
    #[test]
    fn a_trigger_that_waits_does_not_copy_the_kept_flows() {
        let dir = std::env::temp_dir().join(format!("eb-learn-wait-{}", std::process::id()));
        let opts = small(&dir, None);
        let (mut learner, status) =
            Learner::start(opts, &[], Arc::from(Vec::<String>::new()), None).unwrap();
        offer40(&mut learner.sampled.lock().unwrap());
        // Wait (no time limit) until the thread waits for a job.
        while !learner.idle.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // Holding the status keeps the thread in its first model: it
        // records the model there once trained.
        let held = status.lock().unwrap();
        assert!(learner.submit(false));
        while learner.idle.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        for _ in 0..3 {
            assert!(!learner.submit(false));
        }
        assert_eq!(learner.deferred, 3);
        assert_eq!(learner.sampled.lock().unwrap().jobs, 1);
        drop(held);
        learner.finish().unwrap();
        let s = status.lock().unwrap();
        assert_eq!(s.deferred, 3);
        assert_eq!(s.models.len(), 2, "{:?}", s.errors);
        assert_eq!(learner.sampled.lock().unwrap().jobs, 2);
        assert!(s.busy > 0.0);
        assert_eq!(s.rested, 0.0);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
