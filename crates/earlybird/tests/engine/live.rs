//! Live capture end to end: a real capture is sent out of one end of a
//! veth pair (both ends in network namespaces of their own) and captured
//! on the other end with one
//! and with two shards (two sockets in a kernel fanout group); every flow
//! of the file must come out with the packets and bytes the file run gives
//! it. Needs root (skipped otherwise, and says so).

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use earlybird::{
    replay, CaptureFile, EndReason, Exporter, FlowConfig, FlowRecord, LiveConfig, ModelRef,
    RecordBatch, ReplayOptions, RunControl, RunOptions, SECOND,
};

/// Keeps every record (and when it arrived) in memory.
struct Keep(Arc<Mutex<Vec<(FlowRecord, Instant)>>>);

impl Exporter for Keep {
    fn write_batch(&mut self, batch: &RecordBatch) -> earlybird::Result<()> {
        let now = Instant::now();
        let mut v = self.0.lock().unwrap();
        v.extend(batch.iter().map(|(r, _)| (*r, now)));
        Ok(())
    }
    fn finish(&mut self) -> earlybird::Result<()> {
        Ok(())
    }
    fn name(&self) -> &str {
        "keep"
    }
}

/// A flow's endpoints in a fixed order, its protocol, VLAN and tunnel id.
type Endpoints = ([u8; 16], u16, [u8; 16], u16, u8, u16, u32);

fn endpoints(r: &FlowRecord) -> Endpoints {
    let k = &r.key;
    let (a, b) = ((k.src, k.sport), (k.dst, k.dport));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    (lo.0, lo.1, hi.0, hi.1, k.proto, k.vlan, k.tunnel_id)
}

/// Packets, bytes and records per flow, summed over the records of the
/// flow (a replay at full speed may join records the file's timing split,
/// never split one).
fn totals<'a>(
    records: impl Iterator<Item = &'a FlowRecord>,
) -> HashMap<Endpoints, (u64, u64, usize)> {
    let mut m = HashMap::new();
    for r in records {
        let e = m.entry(endpoints(r)).or_insert((0, 0, 0));
        e.0 += r.packets[0] + r.packets[1];
        e.1 += r.bytes[0] + r.bytes[1];
        e.2 += 1;
    }
    m
}

fn options(shards: usize, idle_secs: u64) -> RunOptions {
    RunOptions {
        flow: FlowConfig {
            idle_timeout: idle_secs * SECOND,
            max_flows: 65_536,
            ..FlowConfig::default()
        },
        shards,
        ..RunOptions::default()
    }
}

/// Captures on `capture` (an interface list, in the capture namespace)
/// with `shards` shards while `file` is replayed (at full speed)
/// out of each of the `senders` (in the peer namespace) in turn; once the capture
/// has taken every packet sent, `then` ends the run (raises the stop flag,
/// removes the interface …). Returns the records with their arrival
/// times, the report and the number of packets sent.
fn capture_replay(
    net: &common::Veth,
    capture: &str,
    senders: &[&str],
    file: &CaptureFile,
    shards: usize,
    idle_secs: u64,
    then: impl FnOnce(&RunControl),
) -> (Vec<(FlowRecord, Instant)>, earlybird::Report, u64) {
    let input = net
        .in_capture(|| earlybird::open_live(&LiveConfig::new(capture), shards))
        .expect("open the sockets");
    let send = || {
        let mut sent = 0;
        for b in senders {
            let ropts = ReplayOptions::new(b);
            sent += net
                .in_peer(|| replay(std::slice::from_ref(file), &ropts, &AtomicBool::new(false)))
                .expect("replay")
                .packets_sent;
        }
        sent
    };
    live_run(input, options(shards, idle_secs), send, then)
}

/// Runs a live capture of `input` into memory while `send` makes traffic
/// (returning how many packets it sent); once the capture has taken that
/// many, `then` ends the run. Returns the records with their arrival
/// times, the report and the packets sent.
fn live_run(
    input: earlybird::LiveInput,
    opts: RunOptions,
    send: impl FnOnce() -> u64,
    then: impl FnOnce(&RunControl),
) -> (Vec<(FlowRecord, Instant)>, earlybird::Report, u64) {
    let store = Arc::new(Mutex::new(Vec::new()));
    let ctl = RunControl::default();
    let (report, sent) = std::thread::scope(|s| {
        let run = s.spawn(|| {
            earlybird::run_live(
                input,
                Some(Duration::from_secs(60)),
                &opts,
                &ModelRef::default(),
                vec![Box::new(Keep(store.clone()))],
                &ctl,
            )
        });
        let sent = send();
        let waited = Instant::now();
        while ctl.progress.load(Ordering::Relaxed) < sent
            && waited.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        then(&ctl);
        let report = run.join().expect("live run").expect("live run result");
        (report, sent)
    });
    let records = std::mem::take(&mut *store.lock().unwrap());
    (records, report, sent)
}

/// Waits `linger`, then raises the stop flag; sets `stopped` to when.
fn stop_after(linger: Duration, stopped: &mut Instant) -> impl FnOnce(&RunControl) + '_ {
    move |ctl: &RunControl| {
        std::thread::sleep(linger);
        *stopped = Instant::now();
        ctl.stop.store(true, Ordering::Relaxed);
    }
}

/// A capture of testdata/pcap and the packets, bytes and records of each
/// of its flows in a file run.
fn file_totals(name: &str) -> (CaptureFile, HashMap<Endpoints, (u64, u64, usize)>) {
    let file = CaptureFile::open(&common::testdata().join("pcap").join(name)).unwrap();
    let (flows, _) = earlybird::collect(
        std::slice::from_ref(&file),
        &options(1, 3600),
        &ModelRef::default(),
    )
    .unwrap();
    let want = totals(flows.iter().map(|f| &f.record));
    assert!(want.len() >= 4, "{name}: the capture has flows");
    (file, want)
}

/// Replays `name` (from testdata/pcap) through `net` into captures with
/// each of `shard_counts` and checks every flow of the file run against
/// what was captured. With `spread`, every shard must have had packets
/// (the capture has many host pairs).
fn check_against_file(net: &common::Veth, name: &str, shard_counts: &[usize], spread: bool) {
    let (file, want) = file_totals(name);
    for &shards in shard_counts {
        let mut stopped = Instant::now();
        let (records, report, sent) = capture_replay(
            net,
            &net.a,
            &[&net.b],
            &file,
            shards,
            3600,
            stop_after(Duration::from_millis(200), &mut stopped),
        );
        let c = &report.counters;
        assert!(sent > 0);
        assert_eq!(
            c.live_dropped, 0,
            "{name}, {shards} shards: the ring dropped packets"
        );
        assert!(
            c.packets_read >= sent,
            "{name}, {shards} shards: {} read of {sent} sent",
            c.packets_read
        );
        assert!(c.live_offered >= c.packets_read);
        let got = totals(records.iter().map(|(r, _)| r));
        for (k, w) in &want {
            let g = got.get(k).copied().unwrap_or_default();
            assert_eq!(
                (g.0, g.1),
                (w.0, w.1),
                "{name}, {shards} shards: flow {k:?}"
            );
            // Both directions of a session met in one shard: no more
            // records than the file run (where the kernel's fanout hash
            // split a session, its directions would be two records).
            assert!(
                g.2 <= w.2,
                "{name}, {shards} shards: flow {k:?} in {} records, {} from the file",
                g.2,
                w.2
            );
        }
        assert_eq!(report.flowed_per_shard.len(), shards);
        if spread {
            // The host-pair fanout gave every shard a share.
            assert!(
                report.flowed_per_shard.iter().all(|&n| n > 0),
                "{name}: {:?}",
                report.flowed_per_shard
            );
        }
        // Every open flow was flushed at the stop.
        assert!(records.iter().all(|(r, _)| r.end != EndReason::Evicted));
        assert!(report.interrupted);
    }
}

#[test]
fn live_capture_gives_the_files_flows_with_one_and_two_shards() {
    let Some(net) = common::Veth::create("ebl") else {
        return;
    };
    check_against_file(&net, "ndpi__iphone.pcap", &[1, 2], true);
}

#[test]
fn vlan_tags_taken_off_by_the_kernel_are_put_back() {
    let Some(net) = common::Veth::create("ebv") else {
        return;
    };
    // VXLAN over 802.1Q: the kernel delivers every frame untagged, with
    // the tag beside it; the flows must still carry their VLAN.
    check_against_file(&net, "ndpi__vxlan.pcap", &[1, 2], false);
}

#[test]
fn idle_flows_end_while_the_capture_runs() {
    let Some(net) = common::Veth::create("ebi") else {
        return;
    };
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    let file = CaptureFile::open(&path).unwrap();
    // Idle timeout 1 s (TCP close 2 s): with the interface quiet for 5 s
    // afterwards, every flow must have ended on the table clock that
    // follows the system clock and reached the output before the capture
    // is stopped; none is left for the flush at the stop. (A flow ends at
    // most ~3.1 s after the last packet: 1 s of idle timeout behind a
    // clock held 1 s back, or 2 s of TCP close, plus a 100 ms sweep tick.)
    let mut stopped = Instant::now();
    let (records, _, _) = capture_replay(
        &net,
        &net.a,
        &[&net.b],
        &file,
        2,
        1,
        stop_after(Duration::from_millis(5000), &mut stopped),
    );
    assert!(records.len() > 20);
    let late: Vec<_> = records.iter().filter(|(_, at)| *at >= stopped).collect();
    assert!(
        late.is_empty(),
        "{} of {} records came at the stop",
        late.len(),
        records.len()
    );
    assert!(records.iter().any(|(r, _)| r.end == EndReason::Idle));
    assert!(records.iter().all(|(r, _)| r.end != EndReason::EndOfInput));
}

#[test]
fn an_interface_that_disappears_ends_the_run_with_every_flow() {
    let Some(net) = common::Veth::create("ebd") else {
        return;
    };
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    let file = CaptureFile::open(&path).unwrap();
    let (records, report, _) =
        capture_replay(&net, &net.a, &[&net.b], &file, 2, 3600, |_| net.remove());
    // Ended by the lost interface (one warning naming it), not the stop
    // flag or the 60 s, with every packet in a flushed flow.
    assert!(!report.interrupted);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    let w = report.warnings[0].to_string();
    assert!(w.contains(&net.a), "{w}");
    let packets: u64 = records
        .iter()
        .map(|(r, _)| r.packets[0] + r.packets[1])
        .sum();
    assert_eq!(packets, report.counters.packets_flowed);
    assert!(packets >= 480, "{packets} packets in flows");
}

#[test]
fn loopback_packets_are_counted_once() {
    let Some(net) = common::Veth::create("ebo") else {
        return;
    };
    net.peer_loopback_up();
    // Loopback hands every packet to packet sockets twice (leaving, and
    // coming back in); the capture must count it once, on `lo` itself and
    // on "any". Everything runs in the peer namespace: its loopback, the
    // socket that sends.
    for capture in ["lo", "any"] {
        let (records, report, _) = net.in_peer(|| {
            let input = earlybird::open_live(&LiveConfig::new(capture), 1).expect("open");
            let send = || {
                let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                for _ in 0..10 {
                    sock.send_to(b"earlybird", "127.0.0.1:9").unwrap();
                }
                10
            };
            let mut stopped = Instant::now();
            live_run(
                input,
                options(1, 3600),
                send,
                stop_after(Duration::from_millis(300), &mut stopped),
            )
        });
        let udp: Vec<_> = records
            .iter()
            .filter(|(r, _)| r.key.proto == 17 && (r.key.dport == 9 || r.key.sport == 9))
            .collect();
        assert_eq!(udp.len(), 1, "{capture}: {records:?}");
        assert_eq!(udp[0].0.packets[0] + udp[0].0.packets[1], 10, "{capture}");
        assert_eq!(udp[0].0.bytes[0] + udp[0].0.bytes[1], 10 * (20 + 8 + 9));
        let read = report.counters.packets_read;
        assert!(read < 40, "{capture}: {read}");
    }
}

#[test]
fn two_interfaces_share_one_capture() {
    let Some(net) = common::Veth::create("ebt") else {
        return;
    };
    let (a2, b2) = net.add_pair();
    let (file, want) = file_totals("ndpi__iphone.pcap");
    // The capture replayed out of both pairs (as a tap delivers a link on
    // two ports), captured on the two interfaces listed and on "any" (every
    // interface of the namespace, its loopback included): every flow has
    // twice the file's packets, whole, with one and two shards.
    let both = format!("{},{a2}", net.a);
    for (capture, shards) in [(both.as_str(), 1), (&both, 2), ("any", 1), ("any", 2)] {
        let mut stopped = Instant::now();
        let (records, report, sent) = capture_replay(
            &net,
            capture,
            &[&net.b, &b2],
            &file,
            shards,
            3600,
            stop_after(Duration::from_millis(200), &mut stopped),
        );
        assert_eq!(report.counters.live_dropped, 0);
        assert!(report.counters.packets_read >= sent);
        let got = totals(records.iter().map(|(r, _)| r));
        for (k, w) in &want {
            let g = got.get(k).copied().unwrap_or_default();
            assert_eq!(
                (g.0, g.1),
                (2 * w.0, 2 * w.1),
                "{shards} shards: flow {k:?}"
            );
            assert!(g.2 <= w.2, "{shards} shards: flow {k:?} split");
        }
    }
}
