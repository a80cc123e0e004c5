//! The call tracker against calls whose truth is known: `gen voip` writes
//! calls with seeded loss and jitter; every call comes back with its
//! parties, INVITE, answer and BYE times to the nanosecond, the side that
//! hung up, and per direction the packets received and lost exactly as
//! the generator dropped them. And the tables stay bounded: with room for
//! fewer calls than are active, the INVITEs that do not fit are counted.

use earlybird::voip::record::{CallRecord, EndCause};
use earlybird::voip::run::track_files;
use earlybird::voip::tracker::TrackerConfig;
use earlybird::{generate_voip, VoipGenOptions};
use std::sync::atomic::AtomicBool;

fn run(
    o: &VoipGenOptions,
    cfg: TrackerConfig,
) -> (Vec<CallRecord>, earlybird::voip::run::VoipSummary) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.pcap");
    let (bytes, _) = generate_voip(o, Vec::new()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let mut calls = Vec::new();
    let s = track_files(&[path], cfg, &AtomicBool::new(false), |c, _| {
        calls.extend_from_slice(c);
        Ok(())
    })
    .unwrap();
    (calls, s)
}

#[test]
fn generated_calls_come_back_as_generated() {
    let o = VoipGenOptions {
        calls: 60,
        rate: 20.0,
        duration: 4.0,
        loss: 0.03,
        jitter_ms: 15.0,
        ..VoipGenOptions::default()
    };
    let (_, truth) = generate_voip(&o, std::io::sink()).unwrap();
    let (calls, s) = run(&o, TrackerConfig::default());
    assert_eq!(calls.len(), 60, "{s:?}");
    let mut lost_total = 0;
    for t in &truth.calls {
        let c = calls
            .iter()
            .find(|c| c.call_id == t.call_id)
            .unwrap_or_else(|| panic!("{} not found", t.call_id));
        assert_eq!(
            (c.caller.as_str(), c.callee.as_str()),
            (t.caller.as_str(), t.callee.as_str())
        );
        assert_eq!(c.invite_ns, t.invite_ns);
        assert_eq!(c.answer_ns, Some(t.answer_ns));
        assert_eq!(c.end_ns, t.bye_ns);
        assert_eq!(c.status, Some(200));
        let cause = if t.bye_by_caller {
            EndCause::ByeCaller
        } else {
            EndCause::ByeCallee
        };
        assert_eq!(c.end_cause, cause, "{}", t.call_id);
        assert_eq!(c.streams.len(), 2, "{}", t.call_id);
        for st in &c.streams {
            let (sent, lost) = match st.sender {
                Some("caller") => t.caller_rtp,
                Some("callee") => t.callee_rtp,
                other => panic!("{}: sender {other:?}", t.call_id),
            };
            assert_eq!(st.codec, "PCMU");
            assert_eq!(st.expected, sent, "{}", t.call_id);
            assert_eq!(st.packets, sent - lost, "{}", t.call_id);
            assert_eq!(st.lost, lost as i64, "{}", t.call_id);
            // 20 ms packets delayed by up to 15 ms: jitter is a few ms.
            let j = st.jitter_mean_ms.unwrap();
            assert!(j > 0.5 && j < 15.0, "{}: jitter {j}", t.call_id);
            assert!(st.mos.unwrap() < 4.41);
            lost_total += lost;
        }
    }
    assert!(lost_total > 50, "the generator dropped {lost_total}");
}

#[test]
fn a_flood_of_calls_stays_within_the_table() {
    // 400 calls ringing at once, room for 100.
    let o = VoipGenOptions {
        calls: 400,
        rate: 1000.0,
        duration: 0.0,
        ..VoipGenOptions::default()
    };
    let cfg = TrackerConfig {
        max_calls: 100,
        ..TrackerConfig::default()
    };
    let (calls, s) = run(&o, cfg);
    assert!(s.peak_calls <= 100, "{}", s.peak_calls);
    assert_eq!(calls.len() as u64 + s.counters.calls_dropped, 400, "{s:?}");
    assert!(s.counters.calls_dropped > 0);
    // Their other messages are counted as of unknown calls, not lost.
    assert!(s.counters.sip_unmatched > 0);
}
