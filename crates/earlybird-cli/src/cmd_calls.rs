//! `earlybird calls search|show`: the calls of a call database
//! (`earlybird::voip::store`), as a table or one JSON object per line.

use clap::{Args, Subcommand};
use earlybird::voip::record::CallRecord;
use earlybird::voip::store::{CallStore, Query};

/// `earlybird calls` options.
#[derive(Args)]
pub struct CallsArgs {
    #[command(subcommand)]
    cmd: CallsCommand,
}

#[derive(Subcommand)]
enum CallsCommand {
    /// Calls matching every condition given, newest first.
    Search(SearchArgs),
    /// One call (every call with that Call-ID), with its streams and DTMF.
    Show(ShowArgs),
    /// Write a call's conversation as a WAV file (G.711 decoded; needs
    /// the RTP kept by `voip --rtp-dir`).
    Wav(WavArgs),
}

#[derive(Args)]
struct WavArgs {
    /// The Call-ID (the most recent call with it).
    call_id: String,
    /// The call database (`earlybird voip --db`).
    #[arg(long, value_name = "DB")]
    db: String,
    /// The folder `voip --rtp-dir` kept the RTP in.
    #[arg(long, value_name = "DIR")]
    rtp_dir: std::path::PathBuf,
    /// The WAV file to write (16-bit PCM, 8 kHz).
    #[arg(short, long, value_name = "FILE")]
    output: std::path::PathBuf,
    /// Both directions mixed into one channel (default: stereo, caller
    /// left, callee right).
    #[arg(long)]
    mono: bool,
}

fn wav(w: WavArgs) -> i32 {
    let mut store = match open(&w.db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let q = Query {
        call_id: Some(w.call_id.clone()),
        limit: Some(1),
        ..Query::default()
    };
    let call = match store.search(&q) {
        Ok(mut c) if !c.is_empty() => c.remove(0),
        Ok(_) => return crate::fail(format!("no call {} in {}", w.call_id, w.db)),
        Err(e) => return crate::fail(e),
    };
    let folder = earlybird::voip::audio::call_dir(&w.rtp_dir, call.invite_ns, &call.call_id);
    let codec_of = |pt: u8| -> String {
        call.streams
            .iter()
            .find(|s| s.pt == pt)
            .map(|s| s.codec.clone())
            .unwrap_or_default()
    };
    match earlybird::voip::audio::write_wav(&folder, &codec_of, !w.mono, &w.output) {
        Ok(n) => {
            outln!(
                "wrote {} ({:.2} s, {})",
                w.output.display(),
                n as f64 / 8000.0,
                if w.mono {
                    "mono"
                } else {
                    "stereo: caller left, callee right"
                }
            );
            0
        }
        Err(e) => crate::fail(format!("call {}: {e}", w.call_id)),
    }
}

#[derive(Args)]
struct SearchArgs {
    /// The call database (`earlybird voip --db`): a SQLite file or a
    /// postgres:// URL.
    #[arg(long, value_name = "DB")]
    db: String,
    /// Caller: the user part of the From URI, or the whole URI.
    #[arg(long, value_name = "CALLER")]
    from: Option<String>,
    /// Callee: the user part of the To URI, or the whole URI.
    #[arg(long, value_name = "CALLEE")]
    to: Option<String>,
    /// Started at or after: Unix seconds, or YYYY-MM-DDTHH:MM:SS[.f]Z.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    since: Option<u64>,
    /// Started before (same forms).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    until: Option<u64>,
    /// Final status: a code (486), a class (4xx) or none.
    #[arg(long, value_name = "STATUS")]
    status: Option<String>,
    /// At most this many calls.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ShowArgs {
    /// The Call-ID.
    call_id: String,
    /// The call database (`earlybird voip --db`): a SQLite file or a
    /// postgres:// URL.
    #[arg(long, value_name = "DB")]
    db: String,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

/// Days from 1970-01-01 to a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds (with a fraction) or a UTC time `YYYY-MM-DDTHH:MM:SS[.f]Z`,
/// as Unix nanoseconds.
fn parse_time(s: &str) -> Result<u64, String> {
    let bad = || format!("time {s:?}: Unix seconds or YYYY-MM-DDTHH:MM:SS[.fraction]Z (UTC)");
    if let Ok(secs) = s.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| (secs * 1e9).round() as u64)
            .ok_or_else(bad);
    }
    let t = s.strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = t.split_once('T').ok_or_else(bad)?;
    let num = |x: &str| x.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let h: Vec<&str> = time.split(':').collect();
    if d.len() != 3 || h.len() != 3 {
        return Err(bad());
    }
    let (sec, frac) = h[2].split_once('.').unwrap_or((h[2], ""));
    let (y, mo, da, hh, mi, ss) = (
        num(d[0])?,
        num(d[1])?,
        num(d[2])?,
        num(h[0])?,
        num(h[1])?,
        num(sec)?,
    );
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&da)
        || hh > 23
        || mi > 59
        || ss > 60
        || y < 1970
    {
        return Err(bad());
    }
    let frac_ns = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
        digits.parse::<u64>().map_err(|_| bad())?
    };
    let secs = days_from_civil(y, mo, da) * 86_400 + hh * 3600 + mi * 60 + ss;
    Ok(secs as u64 * 1_000_000_000 + frac_ns)
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into())
}

fn json(c: &CallRecord) -> serde_json::Value {
    let streams: Vec<serde_json::Value> = c
        .streams
        .iter()
        .map(|s| {
            serde_json::json!({
                "sender": s.sender, "src": s.src, "sport": s.sport, "dst": s.dst,
                "dport": s.dport, "ssrc": s.ssrc, "pt": s.pt, "codec": s.codec,
                "first_ns": s.first_ns, "last_ns": s.last_ns, "packets": s.packets,
                "bytes": s.bytes, "expected": s.expected, "lost": s.lost,
                "duplicates": s.duplicates, "reordered": s.reordered,
                "jitter_mean_ms": s.jitter_mean_ms, "jitter_max_ms": s.jitter_max_ms,
                "max_delta_ms": s.max_delta_ms, "rtcp_lost": s.rtcp_lost,
                "rtcp_fraction_lost": s.rtcp_fraction_lost,
                "rtcp_jitter_ms": s.rtcp_jitter_ms, "mos": s.mos,
            })
        })
        .collect();
    let dtmf: Vec<serde_json::Value> = c
        .dtmf
        .iter()
        .map(|d| serde_json::json!({"ts_ns": d.ts, "key": d.key.to_string(), "duration_ms": d.duration_ms, "sender": d.sender}))
        .collect();
    serde_json::json!({
        "call_id": c.call_id, "caller": c.caller, "caller_name": c.caller_name,
        "caller_uri": c.caller_uri, "callee": c.callee, "callee_name": c.callee_name,
        "callee_uri": c.callee_uri, "caller_ua": c.caller_ua, "callee_ua": c.callee_ua,
        "caller_ip": c.caller_ip, "callee_ip": c.callee_ip, "transport": c.transport,
        "start_ns": c.invite_ns, "ringing_ns": c.ringing_ns, "answer_ns": c.answer_ns,
        "end_ns": c.end_ns, "setup_ms": c.setup_delay_ms(), "duration_ms": c.duration_ms(),
        "status": c.status, "reason": c.reason, "end_cause": c.end_cause.name(),
        "codecs": c.codecs, "mos": c.mos(), "dtmf": dtmf, "streams": streams,
    })
}

fn print(calls: &[CallRecord], as_json: bool) {
    if as_json {
        for c in calls {
            outln!("{}", json(c));
        }
        return;
    }
    outln!(
        "{:<19} {:<16} {:<16} {:>6} {:<10} {:>9} {:>7} {:>4} {:<16} CALL-ID",
        "START (UTC s)",
        "CALLER",
        "CALLEE",
        "STATUS",
        "END",
        "TALK ms",
        "SETUP",
        "MOS",
        "CODECS"
    );
    for c in calls {
        outln!(
            "{:<19.6} {:<16} {:<16} {:>6} {:<10} {:>9} {:>7} {:>4} {:<16} {}",
            c.invite_ns as f64 / 1e9,
            c.caller,
            c.callee,
            c.status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into()),
            c.end_cause.name(),
            ms(c.duration_ms()),
            ms(c.setup_delay_ms()),
            c.mos()
                .map(|m| format!("{m:.1}"))
                .unwrap_or_else(|| "-".into()),
            c.codecs.join(","),
            c.call_id
        );
    }
}

pub fn run(a: CallsArgs) -> i32 {
    match a.cmd {
        CallsCommand::Search(s) => {
            let (status, no_status) = match s.status.as_deref().map(Query::parse_status) {
                None => (None, false),
                Some(Ok(None)) => (None, true),
                Some(Ok(r)) => (r, false),
                Some(Err(e)) => return crate::out_args::usage(e),
            };
            let q = Query {
                from: s.from,
                to: s.to,
                since_ns: s.since,
                until_ns: s.until,
                status,
                no_status,
                call_id: None,
                limit: s.limit,
            };
            search(&s.db, &q, s.json)
        }
        CallsCommand::Wav(w) => wav(w),
        CallsCommand::Show(s) => {
            let q = Query {
                call_id: Some(s.call_id.clone()),
                ..Query::default()
            };
            if !s.json {
                // Text: every field of the call, then its streams.
                let mut store = match open(&s.db) {
                    Ok(st) => st,
                    Err(code) => return code,
                };
                let calls = match store.search(&q) {
                    Ok(c) => c,
                    Err(e) => return crate::fail(e),
                };
                if calls.is_empty() {
                    return crate::fail(format!("no call {} in {}", s.call_id, s.db));
                }
                for c in &calls {
                    let v = json(c);
                    outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
                }
                return 0;
            }
            search(&s.db, &q, true)
        }
    }
}

fn open(db: &str) -> Result<CallStore, i32> {
    if !CallStore::is_url(db) && !std::path::Path::new(db).exists() {
        return Err(crate::fail(format!("{db}: no such call database")));
    }
    CallStore::open(db).map_err(crate::fail)
}

fn search(db: &str, q: &Query, as_json: bool) -> i32 {
    let mut store = match open(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.search(q) {
        Ok(calls) => {
            print(&calls, as_json);
            0
        }
        Err(e) => crate::fail(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_unix_or_utc() {
        assert_eq!(parse_time("1526006126.5"), Ok(1_526_006_126_500_000_000));
        assert_eq!(
            parse_time("2018-05-11T02:35:26Z"),
            Ok(1_526_006_126_000_000_000)
        );
        assert_eq!(
            parse_time("2018-05-11T02:35:26.25Z"),
            Ok(1_526_006_126_250_000_000)
        );
        assert!(parse_time("2018-13-11T02:35:26Z").is_err());
        assert!(parse_time("yesterday").is_err());
    }
}
