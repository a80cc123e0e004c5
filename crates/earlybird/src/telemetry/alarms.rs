//! Alarms: change detection on the per-second statistics.
//!
//! Contract: an [`AlarmSpec`] names a series — any numeric field of the
//! per-second rows ([`super::series::STATS`]: `packets`, `bytes`,
//! `flows_new`, `skipped_not_ip`, …) — and how to watch it:
//!
//! - `ewma` (short term): the series' exponentially weighted mean m and
//!   variance s² (weight `alpha` for the newest second); a second whose
//!   value lies `threshold` standard deviations or more from m (in the
//!   `direction` watched) and at least `min_change` away raises the alarm;
//! - `cusum` (short term, small persistent shifts): the one-sided
//!   cumulative sums of the standardized deviations from the EWMA
//!   baseline, less `drift`, each second's deviation counted up to 4
//!   standard deviations (so one burst alone does not raise it); a sum
//!   above `threshold` raises the alarm;
//! - `seasonal` (long term): one EWMA baseline per slot of `bucket`
//!   seconds of a `period` (default: 5-minute slots of a day), learnt over
//!   the periods; a second is compared with its slot's baseline, once the
//!   slot has seen `warmup` seconds.
//!
//! The standard deviation is floored at √max(m, 1) (the spread of a Poisson
//! count of mean m), so a series that has been constant does not alarm on
//! a change of one. No alarm is raised in the first `warmup` seconds a
//! detector has seen. An alarm stays raised while the deviation stays at
//! half its threshold or more and is cleared after; each raise and each
//! clear is an [`AlarmEvent`] (records of kind [`ALARMS`]). While raised,
//! seconds do not feed the baseline (a surge does not become the norm).
//! Everything runs in packet time on the merged seconds: a file gives the
//! same alarms at any speed.

use serde::{Deserialize, Serialize};

use crate::schema::{Field, FieldType, Kind};

use FieldType::{Str, F64, U64};

/// Alarm records (`--alarms-out`).
pub const ALARMS: Kind = Kind::new(
    "alarms",
    &[
        Field::new("time", U64, "s", "The second (Unix time of packet time)"),
        Field::new("series", Str, "", "The per-second field watched"),
        Field::new("method", Str, "", "ewma, cusum or seasonal"),
        Field::new("state", Str, "", "raised or cleared"),
        Field::new("value", F64, "", "The series' value in that second"),
        Field::new("baseline", F64, "", "What the detector expected"),
        Field::new("sigma", F64, "", "The standard deviation it allowed"),
        Field::new(
            "score",
            F64,
            "",
            "Standard deviations from the baseline (cusum: the cumulative sum)",
        ),
        Field::new(
            "pcap",
            Str,
            "",
            "The forensic capture written for this alarm (empty when none)",
        ),
    ],
);

/// How a series is watched (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Exponentially weighted mean and variance.
    #[default]
    Ewma,
    /// Cumulative sum of standardized deviations.
    Cusum,
    /// One EWMA baseline per slot of a period.
    Seasonal,
}

impl Method {
    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Ewma => "ewma",
            Method::Cusum => "cusum",
            Method::Seasonal => "seasonal",
        }
    }
}

/// Which deviations raise an alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Rises only (floods, surges).
    #[default]
    Up,
    /// Falls only (an outage).
    Down,
    /// Either.
    Both,
}

/// One alarm to watch (a `[[alarm]]` table of the alarms file).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlarmSpec {
    /// A numeric field of the per-second rows.
    pub series: String,
    /// How it is watched.
    pub method: Method,
    /// Which deviations count.
    pub direction: Direction,
    /// Weight of the newest second in the baseline (0..1).
    pub alpha: f64,
    /// Standard deviations (ewma, seasonal) or cumulative sum (cusum) that
    /// raise the alarm.
    pub threshold: f64,
    /// Smallest absolute change that raises the alarm.
    pub min_change: f64,
    /// Seconds (per slot, for seasonal) seen before an alarm can be raised.
    pub warmup: u64,
    /// cusum: the standardized deviation tolerated per second.
    pub drift: f64,
    /// seasonal: the period, in seconds.
    pub period: u64,
    /// seasonal: the slot, in seconds.
    pub bucket: u64,
}

impl Default for AlarmSpec {
    fn default() -> Self {
        AlarmSpec {
            series: String::new(),
            method: Method::Ewma,
            direction: Direction::Up,
            alpha: 0.1,
            threshold: 6.0,
            min_change: 0.0,
            warmup: 30,
            drift: 0.5,
            period: 86_400,
            bucket: 300,
        }
    }
}

/// The alarms file: `[[alarm]]` tables (other keys are left to their
/// readers: the file may be a probe's whole configuration).
#[derive(Debug, Clone, Default, Deserialize)]
struct AlarmsFile {
    #[serde(default)]
    alarm: Vec<AlarmSpec>,
}

/// What is wrong with an alarm's spec or an alarms file (the caller names
/// the file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The alarms file is not TOML, or a table has a key of the wrong type.
    #[error("{0}")]
    Toml(String),
    /// The alarms file has no `[[alarm]]` table.
    #[error("no [[alarm]] table")]
    NoAlarm,
    /// `SERIES:METHOD` with a method that does not exist.
    #[error("unknown alarm method {method:?} (ewma, cusum, seasonal)")]
    Method {
        /// The method given.
        method: String,
    },
    /// A series that is not a per-second field.
    #[error("alarm series {series:?} is not a per-second field (known: {})", known.join(", "))]
    Series {
        /// The series given.
        series: String,
        /// The per-second fields an alarm can watch.
        known: Vec<&'static str>,
    },
    /// A parameter out of its range.
    #[error(
        "alarm on {series}: alpha must be in (0, 1], threshold > 0, min_change and drift \
         ≥ 0, bucket > 0 and period ≥ bucket"
    )]
    Parameters {
        /// The alarm's series.
        series: String,
    },
}

impl AlarmSpec {
    /// Reads the `[[alarm]]` tables of an alarms file's text; errors say
    /// what is wrong (the caller names the file).
    pub fn parse_file(text: &str) -> Result<Vec<AlarmSpec>, SpecError> {
        parse_file(text)
    }

    /// `SERIES[:METHOD]` (`--alarm`): that series, watched upwards with
    /// the method's defaults.
    pub fn parse_short(s: &str) -> Result<AlarmSpec, SpecError> {
        parse_short(s)
    }
}

/// Reads the `[[alarm]]` tables of an alarms file's text; errors say what
/// is wrong (the caller names the file).
pub fn parse_file(text: &str) -> Result<Vec<AlarmSpec>, SpecError> {
    let f: AlarmsFile = toml::from_str(text).map_err(|e| SpecError::Toml(e.to_string()))?;
    if f.alarm.is_empty() {
        return Err(SpecError::NoAlarm);
    }
    Ok(f.alarm)
}

/// `SERIES[:METHOD]` (`--alarm`): that series, watched upwards with the
/// method's defaults.
pub fn parse_short(s: &str) -> Result<AlarmSpec, SpecError> {
    let (series, method) = match s.split_once(':') {
        Some((a, m)) => (a, Some(m)),
        None => (s, None),
    };
    let method = match method {
        None | Some("ewma") => Method::Ewma,
        Some("cusum") => Method::Cusum,
        Some("seasonal") => Method::Seasonal,
        Some(m) => {
            return Err(SpecError::Method {
                method: m.to_string(),
            })
        }
    };
    let spec = AlarmSpec {
        series: series.to_string(),
        method,
        ..AlarmSpec::default()
    };
    Ok(match method {
        // Lasting shifts: a slow baseline, one standard deviation of
        // slack per second, a sum of 8 (at least three seconds far off, or
        // many a little off).
        Method::Cusum => AlarmSpec {
            alpha: 0.02,
            threshold: 8.0,
            drift: 1.0,
            ..spec
        },
        _ => spec,
    })
}

impl AlarmSpec {
    /// Checks the spec against the fields of the per-second rows.
    pub fn check(&self) -> Result<(), SpecError> {
        let stats = &super::series::STATS;
        match stats.position(&self.series) {
            Some(i) if self.series != "time" && stats.fields[i].ty == FieldType::U64 => {}
            _ => {
                return Err(SpecError::Series {
                    series: self.series.clone(),
                    known: stats.fields[1..].iter().map(|f| f.name).collect(),
                });
            }
        }
        let ok = self.alpha > 0.0
            && self.alpha <= 1.0
            && self.threshold > 0.0
            && self.min_change >= 0.0
            && self.drift >= 0.0
            && self.bucket > 0
            && self.period >= self.bucket;
        if !ok {
            return Err(SpecError::Parameters {
                series: self.series.clone(),
            });
        }
        Ok(())
    }

    /// A short name for file names and metrics: `series` or
    /// `series:method`.
    pub fn label(&self) -> String {
        match self.method {
            Method::Ewma => self.series.clone(),
            m => format!("{}:{}", self.series, m.name()),
        }
    }
}

/// A raise or a clear.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmEvent {
    /// The second.
    pub time: u64,
    /// Index of the alarm in the run's list.
    pub alarm: usize,
    /// Raised (true) or cleared.
    pub raised: bool,
    /// The value of the series.
    pub value: f64,
    /// The baseline.
    pub baseline: f64,
    /// The standard deviation allowed.
    pub sigma: f64,
    /// Deviation in standard deviations (cusum: the sum).
    pub score: f64,
}

/// The most standard deviations one second adds to a cumulative sum.
const CUSUM_STEP: f64 = 4.0;

/// An exponentially weighted mean and variance.
#[derive(Debug, Clone, Copy, Default)]
struct Ewma {
    mean: f64,
    var: f64,
    seen: u64,
}

impl Ewma {
    fn sigma(&self) -> f64 {
        self.var.sqrt().max(self.mean.max(1.0).sqrt())
    }

    fn update(&mut self, x: f64, alpha: f64) {
        if self.seen == 0 {
            self.mean = x;
            self.var = 0.0;
        } else {
            let d = x - self.mean;
            self.mean += alpha * d;
            self.var = (1.0 - alpha) * (self.var + alpha * d * d);
        }
        self.seen += 1;
    }
}

/// One watched series' state.
#[derive(Debug, Clone)]
struct Detector {
    spec: AlarmSpec,
    /// The field's index in the per-second rows.
    field: usize,
    base: Ewma,
    /// Seasonal: one baseline per slot.
    slots: Vec<Ewma>,
    cusum_up: f64,
    cusum_down: f64,
    raised: bool,
}

impl Detector {
    fn new(spec: AlarmSpec) -> Detector {
        let field = super::series::STATS.position(&spec.series).unwrap_or(1);
        let slots = match spec.method {
            Method::Seasonal => vec![Ewma::default(); (spec.period / spec.bucket).max(1) as usize],
            _ => Vec::new(),
        };
        Detector {
            spec,
            field,
            base: Ewma::default(),
            slots,
            cusum_up: 0.0,
            cusum_down: 0.0,
            raised: false,
        }
    }

    /// Looks at second `t` of value `x`; a raise or a clear, if any.
    fn observe(&mut self, t: u64, x: f64, alarm: usize) -> Option<AlarmEvent> {
        let s = &self.spec;
        let slot = match s.method {
            Method::Seasonal => ((t % s.period) / s.bucket) as usize % self.slots.len(),
            _ => 0,
        };
        let base = match s.method {
            Method::Seasonal => self.slots[slot],
            _ => self.base,
        };
        let sigma = base.sigma();
        let dev = x - base.mean;
        let signed = match s.direction {
            Direction::Up => dev,
            Direction::Down => -dev,
            Direction::Both => dev.abs(),
        };
        let warm = base.seen >= s.warmup;
        let (score, over, under) = match s.method {
            Method::Ewma | Method::Seasonal => {
                let z = signed / sigma;
                (
                    z,
                    z >= s.threshold && signed >= s.min_change,
                    z < s.threshold / 2.0,
                )
            }
            Method::Cusum => {
                // One second adds at most CUSUM_STEP: a lone burst does not
                // raise it, a lasting shift does.
                let z = (dev / sigma).clamp(-CUSUM_STEP, CUSUM_STEP);
                if warm {
                    self.cusum_up = (self.cusum_up + z - s.drift).max(0.0);
                    self.cusum_down = (self.cusum_down - z - s.drift).max(0.0);
                }
                let sum = match s.direction {
                    Direction::Up => self.cusum_up,
                    Direction::Down => self.cusum_down,
                    Direction::Both => self.cusum_up.max(self.cusum_down),
                };
                (
                    sum,
                    sum >= s.threshold && signed >= s.min_change,
                    sum < s.threshold / 2.0,
                )
            }
        };
        let event = |raised| AlarmEvent {
            time: t,
            alarm,
            raised,
            value: x,
            baseline: base.mean,
            sigma,
            score,
        };
        let out = if !self.raised && warm && over {
            self.raised = true;
            Some(event(true))
        } else if self.raised && under {
            self.raised = false;
            if s.method == Method::Cusum {
                (self.cusum_up, self.cusum_down) = (0.0, 0.0);
            }
            Some(event(false))
        } else {
            None
        };
        if !self.raised {
            match s.method {
                Method::Seasonal => self.slots[slot].update(x, s.alpha),
                _ => self.base.update(x, s.alpha),
            }
        }
        out
    }
}

/// The alarms of a run (see the module docs).
#[derive(Debug, Clone)]
pub struct Alarms {
    detectors: Vec<Detector>,
}

impl Alarms {
    /// Watches every spec (checked: see [`AlarmSpec::check`]).
    pub fn new(specs: &[AlarmSpec]) -> Result<Alarms, SpecError> {
        for s in specs {
            s.check()?;
        }
        Ok(Alarms {
            detectors: specs.iter().cloned().map(Detector::new).collect(),
        })
    }

    /// The spec of alarm `i` (as numbered in [`AlarmEvent::alarm`]).
    pub fn spec(&self, i: usize) -> &AlarmSpec {
        &self.detectors[i].spec
    }

    /// Looks at second `t`, whose per-second row has `value(i)` for field
    /// `i`; returns the raises and clears.
    pub fn observe(&mut self, t: u64, value: impl Fn(usize) -> f64) -> Vec<AlarmEvent> {
        let mut out = Vec::new();
        for (i, d) in self.detectors.iter_mut().enumerate() {
            let x = value(d.field);
            out.extend(d.observe(t, x, i));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spec: AlarmSpec, xs: &[f64]) -> Vec<(u64, bool)> {
        let mut a = Alarms::new(&[spec]).unwrap();
        let mut got = Vec::new();
        for (t, &x) in xs.iter().enumerate() {
            for e in a.observe(t as u64, |_| x) {
                got.push((e.time, e.raised));
            }
        }
        got
    }

    /// A steady series with Poisson-like noise around `mean`.
    fn steady(n: usize, mean: f64) -> Vec<f64> {
        (0..n)
            .map(|i| mean + ((i * 7919) % 13) as f64 - 6.0)
            .collect()
    }

    #[test]
    fn a_surge_raises_the_alarm_at_its_second_and_clears_after() {
        let mut xs = steady(60, 500.0);
        for x in &mut xs[40..43] {
            *x += 20_000.0;
        }
        let spec = parse_short("packets").unwrap();
        assert_eq!(run(spec, &xs), vec![(40, true), (43, false)]);
    }

    #[test]
    fn steady_traffic_raises_nothing() {
        for m in ["packets", "packets:cusum"] {
            assert_eq!(
                run(parse_short(m).unwrap(), &steady(600, 800.0)),
                vec![],
                "{m}"
            );
        }
    }

    #[test]
    fn cusum_finds_a_small_lasting_shift() {
        let mut xs = steady(200, 1000.0);
        for x in &mut xs[120..] {
            *x += 60.0; // about 1.9 standard deviations
        }
        let got = run(parse_short("packets:cusum").unwrap(), &xs);
        assert!(
            matches!(got.first(), Some((t, true)) if (120..140).contains(t)),
            "{got:?}"
        );
        // A plain EWMA at 6 sigma does not see it.
        assert_eq!(run(parse_short("packets").unwrap(), &xs), vec![]);
    }

    #[test]
    fn seasonal_learns_each_slot_of_the_period() {
        // A period of 10 s in slots of 5 s: busy then quiet, repeated.
        let spec = AlarmSpec {
            series: "packets".into(),
            method: Method::Seasonal,
            period: 10,
            bucket: 5,
            warmup: 20,
            ..AlarmSpec::default()
        };
        let mut xs: Vec<f64> = (0..400)
            .map(|t| if t % 10 < 5 { 5000.0 } else { 100.0 })
            .collect();
        // Busy traffic in a quiet slot: unusual for that slot only.
        xs[305] = 5000.0;
        let got = run(spec.clone(), &xs);
        assert_eq!(got.first(), Some(&(305, true)), "{got:?}");
        // An EWMA over the whole series sees the rhythm as noise.
        let plain = AlarmSpec {
            method: Method::Ewma,
            ..spec
        };
        assert!(!run(plain, &xs).contains(&(305, true)));
    }

    #[test]
    fn specs_are_checked_and_files_read() {
        assert!(parse_short("nonsense").unwrap().check().is_err());
        assert!(parse_short("time").unwrap().check().is_err());
        assert!(parse_short("packets:magic").is_err());
        let specs = parse_file(
            "[[alarm]]\nseries = \"flows_new\"\nmethod = \"cusum\"\nthreshold = 9\n\
             [[alarm]]\nseries = \"bytes\"\ndirection = \"both\"\n",
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!((specs[0].method, specs[0].threshold), (Method::Cusum, 9.0));
        assert_eq!(specs[1].direction, Direction::Both);
        assert!(specs.iter().all(|s| s.check().is_ok()));
        assert!(parse_file("[[alarm]]\nseries = \"bytes\"\ncolour = 1\n").is_err());
        assert_eq!(
            parse_file("quiet = true\n[[alarm]]\nseries = \"bytes\"\n")
                .unwrap()
                .len(),
            1
        );
        assert!(parse_file("").is_err());
    }
}
