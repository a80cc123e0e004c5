//! Records of a kind other than flows on the exporter path: a test kind
//! ([`TALLY`], one row per flow batch a shard hands over, built on the
//! shard thread by [`tally`]) travels from the shards through the channel
//! to its file outputs beside the flow records of real captures, nothing
//! lost, everything flushed at the end of input, on `RunControl::stop` and
//! when another output fails; the drop policy counts rows as it counts
//! flow records; emptied row batches come back through their pool.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::*;
use crate::export::{self, ExportOptions, Format};
use crate::pipeline::{open_all, run, ModelRef, RunControl, RunOptions};
use crate::schema::{Field, FieldType};
use crate::telemetry::summary::Report;

/// A record kind of the tests: one row per flow batch handed over.
pub(super) const TALLY: Kind = Kind::new(
    "test_tally",
    &[
        Field::new(
            "thread",
            FieldType::Str,
            "",
            "Thread that handed the batch over",
        ),
        Field::new(
            "records",
            FieldType::U64,
            "records",
            "Flow records in the batch",
        ),
        Field::new(
            "room",
            FieldType::I64,
            "records",
            "Batch size minus records",
        ),
        Field::new("fill", FieldType::F64, "", "Records over the batch size"),
        Field::new(
            "last",
            FieldType::U64,
            "",
            "1 at the final hand-over, else null",
        ),
        Field::new("note", FieldType::Str, "", "Text to quote and escape"),
    ],
);

/// The note of every row: needs CSV quoting and JSON escaping.
const NOTE: &str = "a \"tally\", of\nrecords ✓";

/// Called by [`Sink::send`] (tests only) before it hands over a flow batch
/// of `records`: hands a [`TALLY`] row describing it to the same sink.
pub(super) fn tally(sink: &mut Sink, records: usize, last: bool) {
    if !sink.wants(&TALLY) {
        return;
    }
    let mut rows = RowBatch::new(&TALLY);
    rows.push(|c| {
        c.text(std::thread::current().name().unwrap_or(""));
        c.u64(records as u64);
        c.i64(RECORDS_PER_BATCH as i64 - records as i64);
        c.f64(records as f64 / RECORDS_PER_BATCH as f64);
        match last {
            true => c.u64(1),
            false => c.null(),
        }
        c.text(NOTE);
    });
    sink.send_rows(&mut rows, last);
}

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

const CAPTURES: [&str; 5] = [
    "arkime__v6-http.pcap",
    "ndpi__iphone.pcap",
    "ndpi__vxlan.pcap",
    "zeek__pcapng-multi-interface.pcapng",
    "zeek__truncated-header.pcap",
];

/// Fails every write.
struct Broken;

impl std::io::Write for Broken {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("disk full"))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One tally row as read back.
#[derive(Debug, PartialEq)]
struct Row {
    thread: String,
    records: u64,
    room: i64,
    fill: f64,
    last: Option<u64>,
    note: String,
}

/// The tally rows of a CSV file, its header checked.
fn read_csv(path: &std::path::Path) -> Vec<Row> {
    let mut rd = ::csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    let names: Vec<&str> = TALLY.fields.iter().map(|f| f.name).collect();
    assert_eq!(header, names);
    rd.records()
        .map(|r| {
            let r = r.unwrap();
            Row {
                thread: r[0].to_string(),
                records: r[1].parse().unwrap(),
                room: r[2].parse().unwrap(),
                fill: r[3].parse().unwrap(),
                last: (!r[4].is_empty()).then(|| r[4].parse().unwrap()),
                note: r[5].to_string(),
            }
        })
        .collect()
}

/// The tally rows of a JSON lines file, their keys checked.
fn read_jsonl(path: &std::path::Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'));
    let names: Vec<&str> = TALLY.fields.iter().map(|f| f.name).collect();
    text.lines()
        .map(|line| {
            let o: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).unwrap();
            // Every key, in field order.
            assert_eq!(o.len(), names.len());
            let mut at = 0;
            for name in &names {
                let key = format!("\"{name}\":");
                at += line[at..].find(&key).expect("keys in field order") + key.len();
            }
            Row {
                thread: o["thread"].as_str().unwrap().to_string(),
                records: o["records"].as_u64().unwrap(),
                room: o["room"].as_i64().unwrap(),
                fill: o["fill"].as_f64().unwrap(),
                last: o["last"].as_u64(),
                note: o["note"].as_str().unwrap().to_string(),
            }
        })
        .collect()
}

/// Flow records in a CSV flow output.
fn flow_lines(path: &std::path::Path) -> u64 {
    let mut rd = ::csv::Reader::from_path(path).unwrap();
    let mut n = 0;
    for r in rd.records() {
        r.unwrap();
        n += 1;
    }
    n
}

/// Runs `paths` with a flow CSV, tally CSV and JSON lines outputs and two
/// outputs that fail (one of each kind); checks that both kinds arrived
/// whole; returns the report.
fn run_with_tally(paths: &[PathBuf], shards: usize, ctl: &RunControl) -> Report {
    run_with_tally_stopped(paths, shards, ctl, false)
}

/// Raises the run's stop flag at the first flow records it is given.
struct StopAtFirst(Arc<std::sync::atomic::AtomicBool>);

impl Exporter for StopAtFirst {
    fn write_batch(&mut self, batch: &crate::flow::record::RecordBatch) -> crate::Result<()> {
        if !batch.is_empty() {
            self.0.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    fn finish(&mut self) -> crate::Result<()> {
        Ok(())
    }

    fn name(&self) -> &str {
        "stop-at-first"
    }
}

/// [`run_with_tally`]; with `stop_at_first`, `ctl`'s stop is raised by an
/// output at the first flow records it takes, and the shards queue one
/// batch at most: a shard that runs ahead waits for the exporter thread
/// at its next batch, so the stop comes while the input is still read
/// whatever the machine's load (a thread watching the progress missed it
/// on a loaded machine).
fn run_with_tally_stopped(
    paths: &[PathBuf],
    shards: usize,
    ctl: &RunControl,
    stop_at_first: bool,
) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("flows.csv");
    let (tally_csv, tally_jsonl) = (dir.path().join("tally.csv"), dir.path().join("t.jsonl"));
    let opts = ExportOptions {
        early_packets: 4,
        ..ExportOptions::default()
    };
    let mut exporters = vec![
        export::open(Format::Csv, &flows, &opts).unwrap(),
        export::rows_to_writer(&TALLY, Format::Csv, Box::new(Broken), "csv:broken-tally"),
        export::open_rows(&TALLY, Format::Csv, &tally_csv).unwrap(),
        export::to_writer(Format::JsonLines, Box::new(Broken), "jsonl:broken", &opts),
        export::open_rows(&TALLY, Format::JsonLines, &tally_jsonl).unwrap(),
    ];
    if stop_at_first {
        exporters.push(Box::new(StopAtFirst(ctl.stop.clone())));
    }
    let files = open_all(paths).unwrap();
    let run_opts = RunOptions {
        shards,
        flow: crate::config::FlowConfig {
            early_packets: 4,
            ..Default::default()
        },
        channel_batches: if stop_at_first {
            1
        } else {
            RunOptions::default().channel_batches
        },
        ..RunOptions::default()
    };
    let report = run(&files, &run_opts, &ModelRef::default(), exporters, ctl).unwrap();
    let ctx = format!("{} inputs, {shards} shards", paths.len());
    // The failing outputs are reported; the others got everything.
    let mut errors = report.output_errors.clone();
    errors.sort();
    assert_eq!(errors.len(), 2, "{ctx}: {errors:?}");
    assert!(errors[0].contains("csv:broken-tally") && errors[0].contains("disk full"));
    assert!(errors[1].contains("jsonl:broken") && errors[1].contains("disk full"));
    let rows = read_csv(&tally_csv);
    assert_eq!(
        rows,
        read_jsonl(&tally_jsonl),
        "{ctx}: CSV and JSON lines agree"
    );
    let flowed = flow_lines(&flows);
    assert_eq!(flowed, report.summary.records, "{ctx}");
    assert_eq!(
        rows.iter().map(|r| r.records).sum::<u64>(),
        flowed,
        "{ctx}: one tally row per flow batch, none lost"
    );
    assert!(!rows.is_empty(), "{ctx}");
    for r in &rows {
        assert!(r.thread.starts_with("eb-shard"), "{ctx}: built on {r:?}");
        assert_eq!(r.room, RECORDS_PER_BATCH as i64 - r.records as i64);
        assert!((r.fill - r.records as f64 / RECORDS_PER_BATCH as f64).abs() <= 0.0005);
        assert!(matches!(r.last, None | Some(1)));
        assert_eq!(r.note, NOTE);
    }
    report
}

#[test]
fn rows_of_another_kind_travel_beside_the_flows_of_real_captures() {
    let paths: Vec<PathBuf> = CAPTURES.iter().map(|c| capture(c)).collect();
    for shards in [1, 2] {
        for p in &paths {
            let report = run_with_tally(std::slice::from_ref(p), shards, &RunControl::default());
            assert!(report.summary.records > 0, "{}", p.display());
        }
        run_with_tally(&paths, shards, &RunControl::default());
    }
}

#[test]
fn rows_are_flushed_when_the_run_is_stopped() {
    // Copies of a real capture (each a time domain of its own), stopped
    // when the first flow records reach an output.
    let copies = 400;
    let paths = vec![capture("ndpi__iphone.pcap"); copies];
    let total = std::fs::metadata(&paths[0]).unwrap().len() * copies as u64;
    let one = run(
        &open_all(&paths[..1]).unwrap(),
        &RunOptions::default(),
        &ModelRef::default(),
        vec![Box::new(export::null::NullExporter::new())],
        &RunControl::default(),
    )
    .unwrap();
    for shards in [1, 2] {
        let ctl = RunControl::default();
        let report = run_with_tally_stopped(&paths, shards, &ctl, true);
        assert!(report.interrupted);
        assert!(
            ctl.progress.load(Ordering::Relaxed) < total,
            "the input was read to its end ({shards} shards)"
        );
        assert!(
            report.counters.packets_read < one.counters.packets_read * copies as u64,
            "the run stopped early ({shards} shards)"
        );
    }
}

/// A sink over fresh channels for `exporters` (nothing runs the exporter
/// thread), with the policy given, and the exporter thread's ends.
fn sink(
    exporters: &[Box<dyn Exporter>],
    policy: ExportPolicy,
    batches: usize,
) -> (Sink, ExportEnds, ShardEnds) {
    let (ends, export) = channels(batches, exporters);
    let renderers = exporters.iter().map(|_| None).collect();
    let s = Sink::new(ends.clone(), renderers, Placement::Exporter, policy, 4);
    (s, export, ends)
}

fn tally_rows(n: usize) -> RowBatch {
    let mut rows = RowBatch::new(&TALLY);
    for i in 0..n {
        rows.push(|c| c.text(&format!("row {i}")));
    }
    rows
}

#[test]
fn the_drop_policy_counts_rows_and_rows_nobody_takes_are_not_sent() {
    let exporters: Vec<Box<dyn Exporter>> = vec![Box::new(export::null::NullExporter::of(&TALLY))];
    let policy = ExportPolicy::Drop { max_pending: 1 };
    let (mut s, export, _) = sink(&exporters, policy, 1);
    // One batch in the channel, one pending, then the oldest pending are
    // dropped.
    for _ in 0..4 {
        let mut rows = tally_rows(5);
        s.send_rows(&mut rows, false);
        assert!(rows.is_empty() && rows.kind().is(&TALLY));
    }
    assert_eq!(s.dropped, 10);
    assert_eq!(export.rx.len(), 1);
    // A kind without an output: emptied here, neither sent nor counted.
    const OTHER: Kind = Kind::new("test_other", &[]);
    assert!(!s.wants(&OTHER) && s.wants(&TALLY));
    let mut other = RowBatch::new(&OTHER);
    other.push(|_| {});
    s.send_rows(&mut other, false);
    assert!(other.is_empty());
    assert_eq!((s.dropped, s.pending.len(), export.rx.len()), (10, 1, 1));
    // The end waits for everything pending.
    let rx = export.rx.clone();
    let drain = std::thread::spawn(move || rx.iter().map(|b| b.len()).sum::<usize>());
    s.send_rows(&mut RowBatch::new(&TALLY), true);
    drop(s);
    drop(export);
    assert_eq!(drain.join().unwrap(), 10);
}

#[test]
fn row_batches_come_back_through_their_pool_and_outputs_get_only_their_kind() {
    let sink_of = || Box::new(std::io::sink());
    let exporters: Vec<Box<dyn Exporter>> = vec![
        export::to_writer(Format::Csv, sink_of(), "flows", &ExportOptions::default()),
        export::rows_to_writer(&TALLY, Format::JsonLines, sink_of(), "tally"),
    ];
    let (mut s, export, ends) = sink(&exporters, ExportPolicy::Block, 4);
    let mut rows = tally_rows(3);
    s.send_rows(&mut rows, false);
    let mut flows = RecordBatch::with_capacity(2, 4);
    flows.push(crate::flow::record::FlowRecord::default(), &[]);
    s.send(&mut flows, true);
    drop(s);
    // The exporter thread ends once every sender is gone.
    let (flows_pool, rows_pool) = (ends.flows_pool.clone(), ends.rows_pool.clone());
    drop(ends);
    let ctl = ExportControl {
        flush_every: None,
        reopen: Default::default(),
        halt: None,
        unidirectional: false,
        series: None,
        labels: None,
        cells: true,
    };
    let (summary, errors, closed) = export_loop(export, exporters, ctl);
    assert_eq!(summary.records, 1);
    // A flow output given rows (or a rows output given flows) fails with
    // an error naming both kinds.
    assert!(errors.is_empty() && closed.is_empty(), "{errors:?}");
    let back = rows_pool.try_recv().unwrap();
    assert!(back.is_empty() && back.kind().is(&TALLY));
    assert!(flows_pool.try_recv().unwrap().is_empty());
}

/// Keeps each record's statistics; says whether it reads the moments.
struct Moments {
    reads: bool,
    seen: Arc<std::sync::Mutex<Vec<crate::flow::record::FlowRecord>>>,
}

impl Exporter for Moments {
    fn write_batch(&mut self, batch: &RecordBatch) -> crate::Result<()> {
        let mut v = self.seen.lock().unwrap();
        v.extend(batch.iter().map(|(r, _)| *r));
        Ok(())
    }
    fn finish(&mut self) -> crate::Result<()> {
        Ok(())
    }
    fn name(&self) -> &str {
        "moments"
    }
    fn reads_moments(&self) -> bool {
        self.reads
    }
}

#[test]
fn records_lack_size_and_gap_statistics_only_when_no_output_reads_them() {
    let files = open_all(&[capture("ndpi__iphone.pcap")]).unwrap();
    let run_with = |reads: bool, placement: Placement| {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let exporters: Vec<Box<dyn Exporter>> = vec![
            Box::new(Moments {
                reads,
                seen: seen.clone(),
            }),
            // IPFIX and null outputs read none.
            Box::new(crate::export::null::NullExporter::new()),
        ];
        let opts = RunOptions {
            placement,
            ..RunOptions::default()
        };
        run(
            &files,
            &opts,
            &ModelRef::default(),
            exporters,
            &RunControl::default(),
        )
        .unwrap();
        let mut v = std::mem::take(&mut *seen.lock().unwrap());
        v.sort_by_key(|r| (r.first_ts, r.key.src, r.key.sport, r.key.dport));
        v
    };
    for placement in [Placement::Shard, Placement::Exporter] {
        let (full, lean) = (run_with(true, placement), run_with(false, placement));
        assert_eq!(full.len(), lean.len());
        assert!(full
            .iter()
            .any(|r| r.size[0].is_some() && r.iat[0].is_some()));
        for (a, b) in full.iter().zip(&lean) {
            assert_eq!((b.size, b.iat), ([None; 2], [None; 2]), "{placement:?}");
            let mut a = *a;
            (a.size, a.iat) = ([None; 2], [None; 2]);
            assert_eq!(
                a, *b,
                "{placement:?}: every other field, TCP flags included"
            );
        }
        assert!(lean.iter().any(|r| r.tcp_flags.is_some()));
    }
}

/// Counts the flushes of a flow output.
struct Flushes(Arc<std::sync::atomic::AtomicUsize>);

impl Exporter for Flushes {
    fn write_batch(&mut self, _: &RecordBatch) -> crate::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> crate::Result<()> {
        Ok(())
    }
    fn name(&self) -> &str {
        "flushes"
    }
    fn flush(&mut self) -> crate::Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn per_second_rows_no_output_takes_flush_nothing() {
    use crate::telemetry::second::{Part, ShardSecond};
    // The exporter thread of a live run (flushing as soon as anything was
    // written) whose statistics are kept for the metrics or the alarms
    // only: its one output takes flow records.
    let run = |flows: bool| {
        let flushes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let exporters: Vec<Box<dyn Exporter>> = vec![Box::new(Flushes(flushes.clone()))];
        let (mut s, export, ends) = sink(&exporters, ExportPolicy::Block, 8);
        // Both clocks of the one shard: second 100 of packet time, then
        // nothing more, so the second comes out while the thread runs.
        let mut closed: Vec<ShardSecond> = [Part::Read, Part::Run]
            .into_iter()
            .map(|part| ShardSecond {
                shard: 0,
                part,
                second: Some(100),
                domain: 0,
                next: u64::MAX,
                next_domain: u64::MAX,
                counters: crate::telemetry::counters::Counters {
                    packets_read: 3,
                    ..Default::default()
                },
                tally: crate::flow::tally::Tally::new(0),
            })
            .collect();
        s.send_seconds(&mut closed, false);
        if flows {
            let mut batch = RecordBatch::with_capacity(2, 4);
            batch.push(crate::flow::record::FlowRecord::default(), &[]);
            s.send(&mut batch, false);
        }
        drop((s, ends));
        let ctl = ExportControl {
            flush_every: Some(Duration::ZERO),
            reopen: Default::default(),
            halt: None,
            unidirectional: false,
            series: Some(SeriesOut {
                merger: Merger::new(1, Arc::from(Vec::new())),
                classes: Arc::from(Vec::new()),
                #[cfg(feature = "metrics")]
                metrics: None,
                alarms: None,
                forensics: None,
                stats_out: false,
                app_stats_out: false,
            }),
            labels: None,
            cells: true,
        };
        let (_, errors, _) = export_loop(export, exporters, ctl);
        assert!(errors.is_empty(), "{errors:?}");
        flushes.load(Ordering::Relaxed)
    };
    assert_eq!(run(false), 0, "a stats row marked the flow output dirty");
    // A flow record written is flushed (the test can tell).
    assert_eq!(run(true), 1);
}

/// One clock of shard 0 of a one-shard run: `second` with `packets`
/// read, the clock in `next` now (`u64::MAX`: the end).
fn read_second(second: Option<u64>, next: u64, packets: u64) -> ShardSecond {
    use crate::telemetry::second::Part;
    ShardSecond {
        shard: 0,
        part: Part::Read,
        second,
        domain: 0,
        next,
        next_domain: if next == u64::MAX { u64::MAX } else { 0 },
        counters: crate::telemetry::counters::Counters {
            packets_read: packets,
            ..Default::default()
        },
        tally: crate::flow::tally::Tally::new(0),
    }
}

/// The rows [`SeriesOut::take`] returns for second 100 (3 packets), a
/// gap of 2,999 empty seconds, second 3,100 (2 packets) and the end, with
/// `stats_out` saying whether an output takes the stats rows; and the
/// metrics after.
#[cfg(feature = "metrics")]
fn series_over_a_gap(stats_out: bool) -> ([usize; 3], String) {
    use crate::telemetry::second::Part;
    let metrics = Arc::new(Metrics::new());
    let mut series = SeriesOut {
        merger: Merger::new(1, Arc::from(Vec::new())),
        classes: Arc::from(Vec::new()),
        metrics: Some(metrics.clone()),
        alarms: None,
        forensics: None,
        stats_out,
        app_stats_out: true,
    };
    let run_done = ShardSecond {
        part: Part::Run,
        ..read_second(None, u64::MAX, 0)
    };
    let mut rows = [0; 3];
    for s in [
        Some(vec![run_done]),
        Some(vec![read_second(Some(100), 3100, 3)]),
        Some(vec![read_second(Some(3100), u64::MAX, 2)]),
        None,
    ] {
        for (n, r) in rows.iter_mut().zip(series.take(s)) {
            *n += r.len();
        }
    }
    (rows, metrics.render())
}

#[cfg(feature = "metrics")]
#[test]
fn a_gap_of_empty_seconds_builds_no_rows_nobody_reads_and_the_metrics_count_it() {
    // Only the metrics (and an app-stats output, which has no row for an
    // empty second) read the seconds: nothing is built for the gap.
    let (rows, text) = series_over_a_gap(false);
    assert_eq!(rows, [0, 0, 0]);
    for line in [
        "earlybird_seconds_total 3001\n",
        "earlybird_packet_time_seconds 3100\n",
        "earlybird_packets_total 5\n",
    ] {
        assert!(text.contains(line), "{line}{text}");
    }
    // A stats output gets its zero rows, one a second, and the metrics
    // say the same.
    let (rows, with_rows) = series_over_a_gap(true);
    assert_eq!(rows, [3001, 0, 0]);
    assert_eq!(with_rows, text);
}

#[test]
fn the_seconds_of_a_hand_over_travel_in_one_message() {
    // A batch of sparse packet time closes a second or two a packet: they
    // go to the exporter thread together (one wake-up, not one each).
    let exporters: Vec<Box<dyn Exporter>> = Vec::new();
    let policy = ExportPolicy::Drop { max_pending: 1000 };
    let (mut s, export, _ends) = sink(&exporters, policy, 8);
    let mut closed: Vec<ShardSecond> = (0..600)
        .map(|i| read_second(Some(100 + i), 101 + i, 1))
        .collect();
    s.send_seconds(&mut closed, false);
    assert!(closed.is_empty());
    assert_eq!(export.rx.len(), 1);
    match export.rx.try_recv() {
        Ok(Batch::Seconds(v)) => assert_eq!(v.len(), 600),
        _ => panic!("not the seconds"),
    }
    // Nothing closed, nothing sent.
    s.send_seconds(&mut closed, false);
    assert!(export.rx.is_empty());
    assert_eq!(s.dropped, 0);
}
