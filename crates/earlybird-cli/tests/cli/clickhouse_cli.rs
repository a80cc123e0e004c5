//! ClickHouse on loopback: the test starts a real `clickhouse-server`
//! (Debian's package; a temporary data directory and configuration, free
//! ports), creates the table with the shipped DDL
//! (`docs/clickhouse_flows.sql`), runs `flows -o clickhouse+http://…` with
//! a CSV beside it, and reads the rows back over the HTTP interface: as
//! many as the CSV's, every column the CSV has equal to it (floats within
//! the CSV's rounding). Then the server is stopped.
//!
//! clickhouse-server must be installed (`.ci/run` does); without it the
//! test says SKIPPED, and fails under CI.

use crate::common;
use crate::ipfix_cli::{csv_rows, eventually, samples, Kill};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};

use common::eb;

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP request to the server: (status, body).
fn http(port: u16, method: &str, path_query: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path_query} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp
        .split_whitespace()
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    let body = resp.split_once("\r\n\r\n").map_or("", |x| x.1);
    // The server answers in chunks: keep the chunks' data only.
    let mut out = String::new();
    let mut rest = body;
    while let Some((len, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(len.trim(), 16) else {
            return (status, body.to_string());
        };
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = &tail[n + 2..];
    }
    (status, out)
}

/// A clickhouse-server of the test's own, stopped when dropped.
struct Server {
    child: Kill,
    http: u16,
}

impl Server {
    /// Stops the server with SIGTERM and waits for it to end.
    fn stop(mut self) {
        // SAFETY: signals the child process this test started.
        unsafe { libc::kill(self.child.0.id() as i32, libc::SIGTERM) };
        let _ = self.child.0.wait();
    }
}

fn start(dir: &Path) -> Option<Server> {
    start_on(dir, (free_tcp_port(), free_tcp_port()), None)
}

/// A clickhouse-server in `dir` on the ports `(http, tcp)` of 127.0.0.1,
/// in the capture namespace of `net` when given (the data directory may
/// hold a server's data from before: it is started again on it).
fn start_on(
    dir: &Path,
    (http_port, tcp): (u16, u16),
    net: Option<&crate::lib_common::Veth>,
) -> Option<Server> {
    let found = Command::new("clickhouse-server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "clickhouse-server is not installed (.ci/run installs it)"
        );
        eprintln!("SKIPPED: clickhouse-server is not installed");
        return None;
    }
    let d = dir.display();
    let users = dir.join("users.xml");
    std::fs::write(
        &users,
        "<?xml version=\"1.0\"?>\n<yandex><profiles><default></default></profiles>\
         <users><default><password></password><networks><ip>127.0.0.1</ip></networks>\
         <profile>default</profile><quota>default</quota></default></users>\
         <quotas><default></default></quotas></yandex>\n",
    )
    .unwrap();
    let config = dir.join("config.xml");
    std::fs::write(
        &config,
        format!(
            "<?xml version=\"1.0\"?>\n<yandex>\
             <logger><level>warning</level><console>1</console></logger>\
             <http_port>{http_port}</http_port><tcp_port>{tcp}</tcp_port>\
             <listen_host>127.0.0.1</listen_host>\
             <path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path>\
             <users_config>{}</users_config>\
             <default_profile>default</default_profile>\
             <default_database>default</default_database>\
             <mark_cache_size>5368709</mark_cache_size></yandex>\n",
            users.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let mut cmd = match net {
        Some(n) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &n.ns_a, "clickhouse-server"]);
            c
        }
        None => Command::new("clickhouse-server"),
    };
    let child = Kill(
        cmd.arg(format!("--config-file={}", config.display()))
            .current_dir(dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let answers = || {
        TcpStream::connect(("127.0.0.1", http_port)).is_ok()
            && http(http_port, "GET", "/?query=SELECT%201", "").0 == 200
    };
    let up = eventually(60, || match net {
        Some(n) => n.in_capture(answers),
        None => answers(),
    });
    assert!(
        up,
        "clickhouse-server did not start: {}",
        std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
    );
    Some(Server {
        child,
        http: http_port,
    })
}

#[test]
fn flows_inserted_into_a_real_server_read_back_as_the_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = start(tmp.path()) else {
        return;
    };
    let port = server.http;
    let (st, body) = http(port, "POST", "/", &flows_ddl());
    assert_eq!(st, 200, "DDL: {body}");
    let (_, version) = http(port, "GET", "/?query=SELECT%20version()", "");
    eprintln!("clickhouse-server {}", version.trim());
    let mut want_rows = Vec::new();
    for (i, input) in samples().iter().enumerate() {
        let csv = tmp.path().join(format!("out{i}.csv"));
        // (The table has no column for the labellers' fields: without
        // them, every CSV column is one of its.)
        let (code, _, err) = eb(&[
            "flows",
            input.to_str().unwrap(),
            "--no-labellers",
            "-o",
            &format!("clickhouse+http://127.0.0.1:{port}/flows"),
            "-o",
            csv.to_str().unwrap(),
            "-q",
        ]);
        assert_eq!(code, 0, "{}: {err}", input.display());
        want_rows.extend(csv_rows(&csv));
    }
    let (_, count) = http(port, "GET", "/?query=SELECT%20count()%20FROM%20flows", "");
    assert_eq!(count.trim().parse::<usize>().unwrap(), want_rows.len());
    // Every scalar column, as ClickHouse gives it back in CSV (NULL: \N).
    let cols: Vec<String> = {
        let (_, h) = http(port, "GET", "/?query=SELECT%20name%20FROM%20system.columns%20WHERE%20table%3D%27flows%27%20FORMAT%20TSV", "");
        h.lines()
            .map(String::from)
            .filter(|c| !["early_size", "early_dir", "early_iat_us"].contains(&c.as_str()))
            .collect()
    };
    assert_eq!(cols.len(), want_rows[0].len() - 3 * 4, "{cols:?}");
    let q = format!("SELECT {} FROM flows FORMAT TSV", cols.join(","));
    let (st, text) = http(port, "POST", "/", &q);
    assert_eq!(st, 200, "{text}");
    let key = |m: &Vec<(String, String)>| {
        m.iter()
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
            .join("\t")
    };
    let mut got: Vec<Vec<(String, String)>> = text
        .lines()
        .map(|l| {
            cols.iter()
                .cloned()
                .zip(l.split('\t').map(|v| {
                    if v == "\\N" {
                        String::new()
                    } else {
                        v.to_string()
                    }
                }))
                .collect()
        })
        .collect();
    let mut want: Vec<Vec<(String, String)>> = want_rows
        .iter()
        .map(|r| cols.iter().map(|c| (c.clone(), r[c].clone())).collect())
        .collect();
    got.sort_by_key(|r| {
        (
            r[13..16].iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
            key(r),
        )
    });
    want.sort_by_key(|r| {
        (
            r[13..16].iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
            key(r),
        )
    });
    for (g, w) in got.iter().zip(&want) {
        for ((c, gv), (_, wv)) in g.iter().zip(w) {
            let same = gv == wv
                || match (gv.parse::<f64>(), wv.parse::<f64>()) {
                    (Ok(a), Ok(b)) => (a - b).abs() <= 0.0005 + b.abs() * 1e-12,
                    _ => false,
                };
            assert!(same, "{c}: clickhouse {gv:?}, csv {wv:?}");
        }
    }
}

/// The shipped DDL, without its comments, as one statement.
fn flows_ddl() -> String {
    let ddl = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/clickhouse_flows.sql"),
    )
    .unwrap();
    let ddl: String = ddl
        .lines()
        .filter(|l| !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    ddl.trim_end_matches([';', '\n']).to_string()
}

/// Lines of a CSV file less its header: the records written so far (0
/// while it is missing; the header comes with the first record).
pub(crate) fn csv_records(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .count()
        .saturating_sub(1)
}

/// What a live test runs against: a namespace pair of its own (the
/// capture side's loopback up), a temporary directory and a server in the
/// capture namespace on free ports, with `table` made by the shipped DDL.
/// Fields drop in order: the server stops before its directory and its
/// namespace go.
struct Live {
    server: Option<Server>,
    tmp: tempfile::TempDir,
    ports: (u16, u16),
    net: crate::lib_common::Veth,
}

impl Live {
    /// The set-up, tagged `tag` (`None`: skipped, no namespaces or no
    /// server).
    fn start(tag: &str) -> Option<Live> {
        let net = crate::lib_common::Veth::create(tag)?;
        net.capture_loopback_up();
        let tmp = tempfile::tempdir().unwrap();
        let ports = (free_tcp_port(), free_tcp_port());
        let server = Some(start_on(tmp.path(), ports, Some(&net))?);
        Some(Live {
            server,
            tmp,
            ports,
            net,
        })
    }

    /// The server's HTTP port.
    fn port(&self) -> u16 {
        self.ports.0
    }

    /// Makes `table` with the shipped DDL.
    fn create(&self, table: &str) {
        let ddl = flows_ddl().replacen(
            "CREATE TABLE IF NOT EXISTS flows",
            &format!("CREATE TABLE IF NOT EXISTS {table}"),
            1,
        );
        let (st, body) = self.net.in_capture(|| http(self.port(), "POST", "/", &ddl));
        assert_eq!(st, 200, "DDL: {body}");
    }

    /// Rows in `table` (`None`: the server does not answer).
    fn count(&self, table: &str) -> Option<usize> {
        self.net.in_capture(|| {
            let q = format!("/?query=SELECT%20count()%20FROM%20{table}");
            let (st, n) = http(self.port(), "GET", &q, "");
            (st == 200).then(|| n.trim().parse::<usize>().unwrap_or(0))
        })
    }

    /// Stops the server (SIGTERM: it answers the inserts it took, then
    /// ends).
    fn stop(&mut self) {
        self.server.take().expect("the server runs").stop();
    }

    /// Starts the server again on its data.
    fn restart(&mut self) {
        assert!(self.server.is_none());
        self.server = Some(start_on(self.tmp.path(), self.ports, Some(&self.net)).unwrap());
    }
}

/// The server stopped and started again on its data during a live
/// capture (docs/OPERATIONS.md, "What survives what"): the batches that
/// could not reach it meanwhile are held and inserted once it is back, so
/// the table ends with every record the CSV beside it has, and the run
/// reports no loss. (A server killed while it inserts a batch may leave
/// that batch unanswered: it is counted, not sent twice.)
#[test]
fn clickhouse_stopped_and_started_again_gets_every_record_of_the_meantime() {
    use crate::faults_cli::{bin, Capture};
    let Some(mut live) = Live::start("ebch") else {
        return;
    };
    live.create("flows");
    let count = || live.count("flows");
    let csv = live.tmp.path().join("out.csv");
    let cap = Capture::start(
        &live.net,
        &[
            "--idle-timeout",
            "1",
            "-o",
            &format!("clickhouse+http://127.0.0.1:{}/flows", live.port()),
            "-o",
            csv.to_str().unwrap(),
        ],
    );
    let rows = || csv_records(&csv);
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap");
    live.net.replay(bin(), &pcap);
    assert!(
        eventually(60, || rows() > 0 && count() == Some(rows())),
        "before: {} rows, {:?} in the table",
        rows(),
        count()
    );
    let before = rows();
    live.stop();
    let gen = live.tmp.path().join("gen.pcap");
    let (code, _, e) = eb(&[
        "gen",
        "realistic",
        "-n",
        "3000",
        "-o",
        gen.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    live.net.replay(bin(), &gen);
    // The records of the replay leave while the server is away (flows end
    // after a second idle; outputs are flushed every second).
    assert!(eventually(60, || rows() > before), "no record while away");
    std::thread::sleep(std::time::Duration::from_secs(3));
    live.restart();
    let count = || live.count("flows");
    assert!(
        eventually(90, || count() == Some(rows())),
        "after: {} rows, {:?} in the table",
        rows(),
        count()
    );
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    assert_eq!(count(), Some(rows()), "{rest}");
    assert!(!rest.contains("not inserted"), "{rest}");
}

/// The server away for more than 16 batches, the queue's bound before
/// `--clickhouse-hold` (docs/OPERATIONS.md, "What survives what"): a
/// replay of 33 seconds while it is stopped makes a batch at nearly every
/// one-second flush. Two probes read the same replay on one interface,
/// each into its own table: with the default hold every record of that
/// time waits and is inserted once the server is back; with
/// `--clickhouse-hold 30` at most 30 wait, the rest are counted as not
/// inserted, and the table holds exactly the records not counted.
#[test]
fn clickhouse_away_for_more_than_sixteen_batches_keeps_what_the_hold_allows() {
    use crate::faults_cli::{replay_paced, Capture};
    let Some(mut live) = Live::start("ebcq") else {
        return;
    };
    let port = live.port();
    let gen = live.tmp.path().join("gen.pcap");
    let (code, _, e) = eb(&[
        "gen",
        "realistic",
        "-n",
        "5000",
        "-o",
        gen.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    /// One probe: its table, hold, CSV beside, metrics port and process.
    struct Probe {
        table: &'static str,
        hold: Option<usize>,
        csv: std::path::PathBuf,
        dest: String,
        mport: u16,
        cap: Capture,
    }
    let probes: Vec<Probe> = [("flows", None), ("held", Some(30))]
        .into_iter()
        .map(|(table, hold)| {
            live.create(table);
            let csv = live.tmp.path().join(format!("{table}.csv"));
            let dest = format!("clickhouse+http://127.0.0.1:{port}/{table}");
            let hold_arg = hold.map(|h: usize| h.to_string());
            let mport = free_tcp_port();
            let mport_arg = format!("127.0.0.1:{mport}");
            let mut args = vec![
                "--idle-timeout",
                "1",
                "-o",
                &dest,
                "-o",
                csv.to_str().unwrap(),
                "--metrics-listen",
                &mport_arg,
            ];
            if let Some(h) = &hold_arg {
                args.extend(["--clickhouse-hold", h.as_str()]);
            }
            let cap = Capture::start(&live.net, &args);
            Probe {
                table,
                hold,
                csv,
                dest,
                mport,
                cap,
            }
        })
        .collect();
    live.stop();
    let net = &live.net;
    // The replay (33 s at 150 packets a second; at 200 a second, 25 s,
    // a run with the metrics endpoint on saw 13 to 16 batches on a
    // loaded machine) while the server is away; every growth of a
    // probe's CSV is a flush that made a ClickHouse batch too.
    let batches = std::thread::scope(|s| {
        let r = s.spawn(|| replay_paced(net, &gen, 150));
        let mut last = vec![0; probes.len()];
        let mut batches = vec![0; probes.len()];
        while !r.is_finished() {
            for (i, p) in probes.iter().enumerate() {
                let n = csv_records(&p.csv);
                if n > last[i] {
                    batches[i] += 1;
                    last[i] = n;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        r.join().unwrap();
        batches
    });
    // The last flows end after a second idle.
    std::thread::sleep(std::time::Duration::from_secs(3));
    // The hold on /metrics while the server is away: every record
    // written is held or was dropped beyond the hold.
    let metric = |text: &str, name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing: {text}"))
    };
    for (p, &replay) in probes.iter().zip(&batches) {
        assert!(
            replay > 16,
            "{replay} batches while the server was away ({})",
            p.table
        );
        let scrape = || {
            let text = crate::metrics_cli::scrape(net, p.mport).expect("/metrics answers");
            (
                metric(&text, "earlybird_clickhouse_held_records"),
                metric(&text, "earlybird_clickhouse_dropped_records_total"),
            )
        };
        let away = csv_records(&p.csv);
        assert!(
            eventually(10, || {
                let (h, d) = scrape();
                h + d == away as u64
            }),
            "{away} records written; held and dropped on /metrics: {:?}",
            scrape()
        );
        let (held_away, dropped_away) = scrape();
        match p.hold {
            None => assert_eq!(dropped_away, 0, "held {held_away}"),
            Some(_) => assert!(
                dropped_away > 0 && held_away > 0,
                "held {held_away}, dropped {dropped_away}"
            ),
        }
    }
    live.restart();
    let count = |table: &str| live.count(table);
    // Every record of the probe without a hold goes in; what the other
    // held goes in at its next try (5 s at most).
    let unheld = &probes[0];
    let written = csv_records(&unheld.csv);
    assert!(
        eventually(90, || count(unheld.table) == Some(written)),
        "{written} rows, {:?} in the table",
        count(unheld.table)
    );
    std::thread::sleep(std::time::Duration::from_secs(8));
    for (p, replay) in probes.into_iter().zip(batches) {
        let written = csv_records(&p.csv);
        let (code, rest) = p.cap.end(Some(libc::SIGINT));
        let inserted = count(p.table).unwrap();
        let hold = p.hold;
        eprintln!(
            "hold {hold:?}: {replay} batches while away, {written} records, {inserted} inserted; {rest}"
        );
        // The summary's line of the hold.
        let summary = rest
            .lines()
            .find(|l| l.starts_with(&format!("ClickHouse {}: ", p.dest)))
            .unwrap_or_else(|| panic!("no ClickHouse line: {rest}"));
        let beyond = written as u64 - inserted as u64;
        assert!(
            summary.contains(&format!(
                ": {inserted} of {written} records inserted; at most "
            )) && summary.ends_with(&format!(
                "(--clickhouse-hold {}), {beyond} dropped beyond the hold",
                hold.unwrap_or(100_000)
            )),
            "{summary}"
        );
        match hold {
            None => {
                assert_eq!(code, Some(130), "{rest}");
                assert_eq!(inserted, written, "{rest}");
                assert!(!rest.contains("not inserted"), "{rest}");
            }
            Some(h) => {
                // "…: N of M records not inserted; …"
                let line = rest
                    .lines()
                    .find(|l| l.contains("records not inserted"))
                    .unwrap_or_else(|| panic!("{rest}"));
                let head = &line[..line.find(" records not inserted").unwrap()];
                let lost: u64 = head.rsplit(' ').nth(2).unwrap().parse().unwrap();
                assert!(line.contains(&format!("(--clickhouse-hold {h})")), "{line}");
                assert!(
                    line.contains(&format!("; {inserted} records inserted after the server")),
                    "{line}"
                );
                assert!(inserted > 0 && inserted <= h, "{inserted} inserted; {line}");
                assert_eq!(inserted as u64 + lost, written as u64, "{line}");
            }
        }
    }
}
