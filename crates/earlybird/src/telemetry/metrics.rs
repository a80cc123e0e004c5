//! The per-second statistics as Prometheus metrics, and the HTTP endpoint
//! that serves them (`--metrics-listen`).
//!
//! Contract: [`Metrics`] holds one registry of counters and gauges (the
//! `prometheus` crate); the exporter thread adds each complete second of
//! the run to it ([`Metrics::observe`]), so every counter is the sum of
//! the seconds merged so far, in packet time, and `earlybird_packet_time_seconds`
//! says which second that is (the series every second adds to are looked
//! up once, so a second costs atomic additions, not label lookups). The one exception, `earlybird_filtered_packets_total`
//! (packets the capture filter left out, which no shard sees), is read at
//! each scrape from the filter's own count ([`Metrics::watch_filtered`]),
//! and so are the call database's records held and not written
//! ([`Metrics::watch_call_db`]) and the ClickHouse outputs' records held
//! and dropped beyond their hold ([`Metrics::watch_clickhouse`]).
//! The drops of a live run are not per-second figures either: each live
//! shard adds what its socket's kernel counters and its hand-over to the
//! exporter dropped since its last tick ([`Metrics::live_drops`], every
//! 100 ms of wall time), so `earlybird_kernel_dropped_packets_total` and
//! `earlybird_export_dropped_records_total` follow the run while it
//! goes, not only in the summary at its end; so do the AF_XDP sockets'
//! statistics and the exchange's counts ([`Metrics::live_xdp`],
//! `earlybird_xdp_*`). [`MetricsServer::start`] binds the address
//! (a bare port, or `:PORT`, means the loopback address 127.0.0.1: the
//! endpoint is not offered to the network unless an address says so) and
//! answers `GET /metrics` with the Prometheus text format (0.0.4) from a
//! thread of its own, until it is dropped; any other path is a 404. A
//! failure to bind is an error naming the address. Scrapes never touch
//! the shards: they read the registry the exporter thread writes. The
//! listening socket has `TCP_NODELAY`, which Linux hands on to every
//! connection it accepts: the HTTP server writes an answer's head and
//! body apart, and without it the body of a scrape on a kept-alive
//! connection waited for the client's delayed acknowledgement (about 40
//! ms).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

use super::series::Figures;
use crate::decode::Skip;
use crate::flow::record::EndReason;
use crate::flow::tally::{MEDIA_KINDS, PORT_CLASSES, TRANSPORTS};
use crate::{Error, Result};

/// The metrics of a run (see the module docs).
pub struct Metrics {
    registry: Registry,
    packets: IntCounter,
    bytes: IntCounter,
    packets_flowed: IntCounter,
    bytes_flowed: IntCounter,
    skipped: IntCounterVec,
    flows_created: IntCounter,
    flows_ended: IntCounterVec,
    flows_active: IntGauge,
    classified: IntCounter,
    app_classified: IntCounterVec,
    app_ended: IntCounterVec,
    app_packets: IntCounterVec,
    app_bytes: IntCounterVec,
    transport_ended: IntCounterVec,
    transport_packets: IntCounterVec,
    transport_bytes: IntCounterVec,
    port_ended: IntCounterVec,
    port_packets: IntCounterVec,
    port_bytes: IntCounterVec,
    media_decided: IntCounterVec,
    media_ended: IntCounterVec,
    media_packets: IntCounterVec,
    media_bytes: IntCounterVec,
    packet_time: IntGauge,
    seconds: IntCounter,
    alarms: IntCounterVec,
    alarm_active: prometheus::IntGaugeVec,
    filtered: IntCounter,
    kernel_offered: IntCounter,
    kernel_dropped: IntCounter,
    export_dropped: IntCounter,
    /// AF_XDP sockets' statistics and the exchange between shards.
    xdp_rx_dropped: IntCounter,
    xdp_rx_ring_full: IntCounter,
    xdp_fill_ring_empty: IntCounter,
    xdp_invalid_descs: IntCounter,
    xdp_handed: IntCounter,
    xdp_exchange_dropped: IntCounter,
    xdp_waiting: IntGauge,
    /// The capture filter's count of packets left out, when one runs.
    filtered_source: std::sync::OnceLock<FilteredCount>,
    call_db_held: IntGauge,
    call_db_not_written: IntCounter,
    /// The call database's hold, when there is a database.
    call_db_source: std::sync::OnceLock<CallDbCount>,
    clickhouse_held: IntGauge,
    clickhouse_dropped: IntCounter,
    /// The ClickHouse outputs' holds, when there are some.
    clickhouse_source: std::sync::OnceLock<ClickHouseCount>,
    /// The series of the labelled counters every second adds to, looked
    /// up at the first second (a lookup hashes its labels: about 50 a
    /// second otherwise).
    each_second: std::sync::OnceLock<EachSecond>,
}

/// The series [`Metrics::observe`] adds to every second, in the order of
/// [`Skip::ALL`], [`EndReason::ALL`], [`TRANSPORTS`] and [`PORT_CLASSES`]
/// (flows ended, packets, IP bytes for the last two).
struct EachSecond {
    skipped: Vec<IntCounter>,
    ended: Vec<IntCounter>,
    transports: Vec<[IntCounter; 3]>,
    ports: Vec<[IntCounter; 3]>,
}

/// Reads the ClickHouse outputs' records held now and records dropped
/// beyond the hold so far (`export/clickhouse.rs`), summed over them.
pub type ClickHouseCount = Box<dyn Fn() -> (u64, u64) + Send + Sync>;

/// Reads the call database's records held now and records not written
/// so far (`voip/store/hold.rs`).
pub type CallDbCount = Box<dyn Fn() -> (u64, u64) + Send + Sync>;

/// Reads a capture filter's count of packets left out.
pub type FilteredCount = Box<dyn Fn() -> u64 + Send + Sync>;

/// Registers one metric, whose name and help are fixed here (never fails
/// for them).
fn reg<M: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: M) -> M {
    r.register(Box::new(m.clone()))
        .expect("metric names are unique and valid");
    m
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    reg(r, IntCounter::new(name, help).expect("valid metric"))
}

fn counters(r: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    reg(
        r,
        IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric"),
    )
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// The metrics, all zero.
    pub fn new() -> Metrics {
        let r = Registry::new();
        let m = Metrics {
            packets: counter(&r, "earlybird_packets_total", "Packets read."),
            filtered: counter(
                &r,
                "earlybird_filtered_packets_total",
                "Packets the capture filter (--filter) left out (not read).",
            ),
            filtered_source: std::sync::OnceLock::new(),
            call_db_held: reg(
                &r,
                IntGauge::new(
                    "earlybird_call_db_held_records",
                    "Call records held in memory while the call database fails (--voip-db-hold).",
                )
                .expect("valid metric"),
            ),
            call_db_not_written: counter(
                &r,
                "earlybird_call_db_unwritten_records_total",
                "Call records the call database could not take and the hold could not keep.",
            ),
            call_db_source: std::sync::OnceLock::new(),
            clickhouse_held: reg(
                &r,
                IntGauge::new(
                    "earlybird_clickhouse_held_records",
                    "Records the ClickHouse outputs hold in memory, waiting for the server or being posted (--clickhouse-hold).",
                )
                .expect("valid metric"),
            ),
            clickhouse_dropped: counter(
                &r,
                "earlybird_clickhouse_dropped_records_total",
                "Records the ClickHouse outputs dropped because their hold was full.",
            ),
            clickhouse_source: std::sync::OnceLock::new(),
            each_second: std::sync::OnceLock::new(),
            kernel_offered: counter(
                &r,
                "earlybird_kernel_packets_total",
                "Packets the kernel offered to the live capture sockets, dropped ones included.",
            ),
            kernel_dropped: counter(
                &r,
                "earlybird_kernel_dropped_packets_total",
                "Packets the kernel dropped because the capture ring was full.",
            ),
            export_dropped: counter(
                &r,
                "earlybird_export_dropped_records_total",
                "Records dropped because the outputs fell behind (live runs, --drop-after).",
            ),
            xdp_rx_dropped: counter(
                &r,
                "earlybird_xdp_rx_dropped_total",
                "AF_XDP: frames the sockets dropped for other reasons than a full ring.",
            ),
            xdp_rx_ring_full: counter(
                &r,
                "earlybird_xdp_rx_ring_full_total",
                "AF_XDP: frames dropped because a socket's receive ring was full.",
            ),
            xdp_fill_ring_empty: counter(
                &r,
                "earlybird_xdp_fill_ring_empty_total",
                "AF_XDP: times a socket's fill ring had no free chunk (in copy mode those frames are in earlybird_xdp_rx_dropped_total too).",
            ),
            xdp_invalid_descs: counter(
                &r,
                "earlybird_xdp_invalid_descs_total",
                "AF_XDP: descriptors the kernel found invalid.",
            ),
            xdp_handed: counter(
                &r,
                "earlybird_xdp_exchange_handed_packets_total",
                "AF_XDP: frames a shard handed to the shard of their host pair.",
            ),
            xdp_exchange_dropped: counter(
                &r,
                "earlybird_xdp_exchange_dropped_packets_total",
                "AF_XDP: frames the exchange between shards had no room for (dropped).",
            ),
            xdp_waiting: reg(
                &r,
                IntGauge::new(
                    "earlybird_xdp_exchange_waiting_packets",
                    "AF_XDP: frames handed to another shard and not yet run by it.",
                )
                .expect("valid metric"),
            ),
            bytes: counter(
                &r,
                "earlybird_bytes_total",
                "Bytes of the packets read, as on the wire.",
            ),
            packets_flowed: counter(
                &r,
                "earlybird_flowed_packets_total",
                "Packets accounted to flows.",
            ),
            bytes_flowed: counter(
                &r,
                "earlybird_flowed_ip_bytes_total",
                "IP bytes accounted to flows.",
            ),
            skipped: counters(
                &r,
                "earlybird_skipped_packets_total",
                "Packets that belong to no flow, by reason.",
                "reason",
            ),
            flows_created: counter(&r, "earlybird_flows_created_total", "Flows started."),
            flows_ended: counters(
                &r,
                "earlybird_flows_ended_total",
                "Flows ended, by reason.",
                "reason",
            ),
            flows_active: reg(
                &r,
                IntGauge::new(
                    "earlybird_flows_active",
                    "Flows open at the end of the latest complete second.",
                )
                .expect("valid metric"),
            ),
            classified: counter(&r, "earlybird_flows_classified_total", "Verdicts given."),
            app_classified: counters(
                &r,
                "earlybird_app_flows_classified_total",
                "Flows that got this verdict.",
                "app",
            ),
            app_ended: counters(
                &r,
                "earlybird_app_flows_ended_total",
                "Flows with this verdict that ended.",
                "app",
            ),
            app_packets: counters(
                &r,
                "earlybird_app_packets_total",
                "Packets of the ended flows with this verdict.",
                "app",
            ),
            app_bytes: counters(
                &r,
                "earlybird_app_ip_bytes_total",
                "IP bytes of the ended flows with this verdict.",
                "app",
            ),
            transport_ended: counters(
                &r,
                "earlybird_transport_flows_ended_total",
                "Flows of this transport that ended.",
                "transport",
            ),
            transport_packets: counters(
                &r,
                "earlybird_transport_packets_total",
                "Packets of the ended flows of this transport.",
                "transport",
            ),
            transport_bytes: counters(
                &r,
                "earlybird_transport_ip_bytes_total",
                "IP bytes of the ended flows of this transport.",
                "transport",
            ),
            port_ended: counters(
                &r,
                "earlybird_port_flows_ended_total",
                "TCP and UDP flows of this port class that ended.",
                "port",
            ),
            port_packets: counters(
                &r,
                "earlybird_port_packets_total",
                "Packets of the ended flows of this port class.",
                "port",
            ),
            port_bytes: counters(
                &r,
                "earlybird_port_ip_bytes_total",
                "IP bytes of the ended flows of this port class.",
                "port",
            ),
            media_decided: counters(
                &r,
                "earlybird_media_flows_decided_total",
                "UDP flows the media analyzer decided are of this kind (--analyzer media).",
                "kind",
            ),
            media_ended: counters(
                &r,
                "earlybird_media_flows_ended_total",
                "Flows of this media kind that ended.",
                "kind",
            ),
            media_packets: counters(
                &r,
                "earlybird_media_packets_total",
                "Packets of flows of this media kind, from the packet that decided the kind on.",
                "kind",
            ),
            media_bytes: counters(
                &r,
                "earlybird_media_ip_bytes_total",
                "IP bytes of flows of this media kind, from the packet that decided the kind on.",
                "kind",
            ),
            packet_time: reg(
                &r,
                IntGauge::new(
                    "earlybird_packet_time_seconds",
                    "The latest complete second of packet time (Unix time).",
                )
                .expect("valid metric"),
            ),
            seconds: counter(
                &r,
                "earlybird_seconds_total",
                "Complete seconds of packet time merged.",
            ),
            alarms: counters(
                &r,
                "earlybird_alarms_total",
                "Alarms raised, by series.",
                "series",
            ),
            alarm_active: reg(
                &r,
                prometheus::IntGaugeVec::new(
                    Opts::new(
                        "earlybird_alarm_active",
                        "1 while the series is in alarm, else 0.",
                    ),
                    &["series"],
                )
                .expect("valid metric"),
            ),
            registry: r,
        };
        // Every reason, transport and port class is shown from the start,
        // at 0.
        for s in Skip::ALL {
            m.skipped.with_label_values(&[s.name()]);
        }
        for e in EndReason::ALL {
            m.flows_ended.with_label_values(&[e.name()]);
        }
        for t in TRANSPORTS {
            m.transport_ended.with_label_values(&[t]);
        }
        for p in PORT_CLASSES {
            m.port_ended.with_label_values(&[p]);
        }
        m
    }

    /// Adds the `n` complete seconds from `first` on, whose figures (all
    /// shards, all `n` seconds together) are `f`: one second, or the empty
    /// seconds of a gap at once (`super::series::Merger`); `app` names
    /// the application of a tally index.
    pub fn observe<'a>(&self, first: u64, n: u64, f: &Figures, app: impl Fn(usize) -> &'a str) {
        let c = &f.counters;
        let each = self.each_second.get_or_init(|| {
            let three = |l: &str, v: [&IntCounterVec; 3]| v.map(|v| v.with_label_values(&[l]));
            let transport = [
                &self.transport_ended,
                &self.transport_packets,
                &self.transport_bytes,
            ];
            let port = [&self.port_ended, &self.port_packets, &self.port_bytes];
            EachSecond {
                skipped: (Skip::ALL.iter())
                    .map(|s| self.skipped.with_label_values(&[s.name()]))
                    .collect(),
                ended: (EndReason::ALL.iter())
                    .map(|e| self.flows_ended.with_label_values(&[e.name()]))
                    .collect(),
                transports: TRANSPORTS.iter().map(|t| three(t, transport)).collect(),
                ports: PORT_CLASSES.iter().map(|p| three(p, port)).collect(),
            }
        });
        self.packets.inc_by(c.packets_read);
        self.bytes.inc_by(c.bytes_read);
        self.packets_flowed.inc_by(c.packets_flowed);
        self.bytes_flowed.inc_by(c.ip_bytes_flowed);
        for (s, m) in Skip::ALL.iter().zip(&each.skipped) {
            m.inc_by(c.skipped[*s as usize]);
        }
        self.flows_created.inc_by(c.flows.created);
        for (e, m) in EndReason::ALL.iter().zip(&each.ended) {
            m.inc_by(c.flows.ended[*e as usize]);
        }
        self.flows_active.set(f.active as i64);
        self.classified.inc_by(c.flows.classified);
        for (i, s) in f
            .tally
            .apps
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_zero())
        {
            let l = [app(i)];
            self.app_classified
                .with_label_values(&l)
                .inc_by(s.classified);
            self.app_ended.with_label_values(&l).inc_by(s.ended);
            self.app_packets.with_label_values(&l).inc_by(s.packets);
            self.app_bytes.with_label_values(&l).inc_by(s.bytes);
        }
        let sums = (f.tally.transports.iter().zip(&each.transports))
            .chain(f.tally.ports.iter().zip(&each.ports));
        for (s, [ended, packets, bytes]) in sums {
            ended.inc_by(s.ended);
            packets.inc_by(s.packets);
            bytes.inc_by(s.bytes);
        }
        // Media kinds appear once the media analyzer counted one.
        for (s, k) in f.tally.media.iter().zip(MEDIA_KINDS) {
            if s.is_zero() {
                continue;
            }
            let l = [k];
            self.media_decided
                .with_label_values(&l)
                .inc_by(s.classified);
            self.media_ended.with_label_values(&l).inc_by(s.ended);
            self.media_packets.with_label_values(&l).inc_by(s.packets);
            self.media_bytes.with_label_values(&l).inc_by(s.bytes);
        }
        self.packet_time.set((first + n.max(1) - 1) as i64);
        self.seconds.inc_by(n);
    }

    /// An alarm on `series` was raised (`active`) or cleared.
    pub fn alarm(&self, series: &str, active: bool) {
        if active {
            self.alarms.with_label_values(&[series]).inc();
        }
        self.alarm_active
            .with_label_values(&[series])
            .set(i64::from(active));
    }

    /// Adds a live shard's drops since its last call: packets its socket
    /// was offered and dropped by the kernel, records it dropped because
    /// the outputs fell behind.
    pub fn live_drops(&self, offered: u64, dropped: u64, export_dropped: u64) {
        self.kernel_offered.inc_by(offered);
        self.kernel_dropped.inc_by(dropped);
        self.export_dropped.inc_by(export_dropped);
    }

    /// Adds a live AF_XDP shard's counts since its last call, in the order
    /// of [`crate::telemetry::Counters::live_xdp`]: the sockets'
    /// statistics, frames handed to another shard, frames the exchange
    /// dropped, frames of other shards run here (which leave the waiting
    /// gauge).
    pub fn live_xdp(&self, since: [u64; 7]) {
        let [dropped, full, fill, invalid, handed, lost, run] = since;
        self.xdp_rx_dropped.inc_by(dropped);
        self.xdp_rx_ring_full.inc_by(full);
        self.xdp_fill_ring_empty.inc_by(fill);
        self.xdp_invalid_descs.inc_by(invalid);
        self.xdp_handed.inc_by(handed);
        self.xdp_exchange_dropped.inc_by(lost);
        self.xdp_waiting.add(handed as i64 - run as i64);
    }

    /// Makes `earlybird_filtered_packets_total` follow `count`, the
    /// capture filter's count of packets left out (read at each scrape).
    pub fn watch_filtered(&self, count: FilteredCount) {
        let _ = self.filtered_source.set(count);
    }

    /// Makes `earlybird_call_db_held_records` and
    /// `earlybird_call_db_unwritten_records_total` follow `count` (read at
    /// each scrape).
    pub fn watch_call_db(&self, count: CallDbCount) {
        let _ = self.call_db_source.set(count);
    }

    /// Adds metrics that a part of the run keeps itself and brings up to
    /// date at each scrape (self-training's, `classify/drift.rs`).
    pub fn register(&self, c: Box<dyn prometheus::core::Collector>) -> Result<()> {
        self.registry
            .register(c)
            .map_err(|e| Error::Config(format!("metrics: {e}")))
    }

    /// Makes `earlybird_clickhouse_held_records` and
    /// `earlybird_clickhouse_dropped_records_total` follow `count` (read
    /// at each scrape).
    pub fn watch_clickhouse(&self, count: ClickHouseCount) {
        let _ = self.clickhouse_source.set(count);
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        if let Some(c) = self.clickhouse_source.get() {
            let (held, dropped) = c();
            self.clickhouse_held
                .set(i64::try_from(held).unwrap_or(i64::MAX));
            (self.clickhouse_dropped).inc_by(dropped.saturating_sub(self.clickhouse_dropped.get()));
        }
        if let Some(c) = self.call_db_source.get() {
            let (held, lost) = c();
            self.call_db_held
                .set(i64::try_from(held).unwrap_or(i64::MAX));
            (self.call_db_not_written).inc_by(lost.saturating_sub(self.call_db_not_written.get()));
        }
        if let Some(c) = self.filtered_source.get() {
            let now = c();
            self.filtered
                .inc_by(now.saturating_sub(self.filtered.get()));
        }
        let mut buf = Vec::new();
        // Encoding into memory cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// The HTTP endpoint serving [`Metrics`] (see the module docs); stops
/// when dropped.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

/// A `--metrics-listen` value that is not an address to listen on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given:?} is not an address to listen on (PORT, :PORT or HOST:PORT)")]
pub struct AddressError {
    /// The value given.
    pub given: String,
}

/// The address `--metrics-listen` names: `PORT` and `:PORT` are the
/// loopback address 127.0.0.1; `HOST:PORT` and `[V6]:PORT` as given.
pub fn listen_address(s: &str) -> std::result::Result<SocketAddr, AddressError> {
    let t = s.trim();
    let full = if t.parse::<u16>().is_ok() {
        format!("127.0.0.1:{t}")
    } else if let Some(port) = t.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        t.to_string()
    };
    full.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| AddressError {
            given: s.to_string(),
        })
}

impl MetricsServer {
    /// Serves `metrics` on `addr` (port 0: any free port, see
    /// [`MetricsServer::addr`]).
    pub fn start(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<MetricsServer> {
        let listen_error = |reason: String| Error::Listen {
            addr: addr.to_string(),
            what: "metrics".into(),
            reason,
        };
        let listener = nodelay_listener(addr).map_err(|e| listen_error(e.to_string()))?;
        let server = tiny_http::Server::from_listener(listener, None)
            .map_err(|e| listen_error(e.to_string()))?;
        let bound = server.server_addr().to_ip().ok_or_else(|| Error::Listen {
            addr: addr.to_string(),
            what: "metrics".into(),
            reason: "not an IP address".into(),
        })?;
        let server = Arc::new(server);
        let s = server.clone();
        let thread = std::thread::Builder::new()
            .name("eb-metrics".into())
            .spawn(move || serve(&s, &metrics))
            .map_err(Error::spawn("metrics"))?;
        Ok(MetricsServer {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// The address the endpoint listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A socket listening on `addr` with `TCP_NODELAY` set, which the
/// connections it accepts inherit (Linux copies the option to them).
fn nodelay_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::AsRawFd;
    let listener = std::net::TcpListener::bind(addr)?;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the listener's own, open for this call;
    // the value is a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(listener)
}

/// Answers requests until the server is unblocked.
fn serve(server: &tiny_http::Server, metrics: &Metrics) {
    let text_format = tiny_http::Header::from_bytes(
        &b"Content-Type"[..],
        &b"text/plain; version=0.0.4; charset=utf-8"[..],
    )
    .expect("a valid header");
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        // A client that went away is no error of the run.
        let _ = if path == "/metrics" && *req.method() == tiny_http::Method::Get {
            let body = metrics.render();
            req.respond(tiny_http::Response::from_string(body).with_header(text_format.clone()))
        } else {
            req.respond(tiny_http::Response::from_string("not found\n").with_status_code(404))
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_to_the_endpoint_send_without_delay() {
        let listener = nodelay_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(accepted.nodelay().unwrap());
    }

    #[test]
    fn the_endpoint_answers_two_scrapes_on_one_connection() {
        use std::io::{BufRead, BufReader, Read, Write};
        let server =
            MetricsServer::start("127.0.0.1:0".parse().unwrap(), Arc::new(Metrics::new())).unwrap();
        let conn = std::net::TcpStream::connect(server.addr()).unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        for _ in 0..2 {
            (&conn)
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut length = None;
            let mut line = String::new();
            loop {
                line.clear();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = Some(v.trim().parse::<usize>().unwrap());
                }
            }
            let mut body = vec![0; length.expect("a length")];
            reader.read_exact(&mut body).unwrap();
            assert!(String::from_utf8_lossy(&body).contains("earlybird_filtered_packets_total 0"));
        }
    }

    #[test]
    fn the_filtered_count_is_read_at_each_scrape() {
        let m = Metrics::new();
        assert!(m.render().contains("earlybird_filtered_packets_total 0"));
        let n = Arc::new(std::sync::atomic::AtomicU64::new(7));
        let seen = n.clone();
        m.watch_filtered(Box::new(move || {
            seen.load(std::sync::atomic::Ordering::Relaxed)
        }));
        assert!(m.render().contains("earlybird_filtered_packets_total 7"));
        n.store(12, std::sync::atomic::Ordering::Relaxed);
        assert!(m.render().contains("earlybird_filtered_packets_total 12"));
    }
    use crate::flow::tally::Tally;
    use std::io::{Read, Write};

    #[test]
    fn seconds_add_up_and_are_served() {
        let m = Arc::new(Metrics::new());
        let mut f = Figures {
            tally: Tally::new(1),
            ..Figures::default()
        };
        f.counters.packets_read = 5;
        f.counters.flows.ended[EndReason::Fin as usize] = 2;
        f.tally.ended(0, 6, (50000, 443), 3, 300);
        m.observe(1000, 1, &f, |i| ["web", "unknown"][i]);
        m.observe(1001, 1, &f, |i| ["web", "unknown"][i]);
        let text = m.render();
        assert!(text.contains("earlybird_packets_total 10\n"), "{text}");
        assert!(
            text.contains("earlybird_flows_ended_total{reason=\"fin\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("earlybird_app_ip_bytes_total{app=\"web\"} 600\n"),
            "{text}"
        );
        assert!(
            text.contains("earlybird_port_ip_bytes_total{port=\"tcp/443\"} 600\n"),
            "{text}"
        );
        assert!(
            text.contains("earlybird_port_flows_ended_total{port=\"udp/53\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("earlybird_packet_time_seconds 1001\n"),
            "{text}"
        );
        // The empty seconds of a gap at once: the same as one by one.
        let empty = Figures {
            active: 7,
            tally: Tally::new(1),
            ..Figures::default()
        };
        m.observe(1002, 500, &empty, |i| ["web", "unknown"][i]);
        let text = m.render();
        for line in [
            "earlybird_packet_time_seconds 1501\n",
            "earlybird_seconds_total 502\n",
            "earlybird_flows_active 7\n",
            "earlybird_packets_total 10\n",
        ] {
            assert!(text.contains(line), "{line}{text}");
        }
        let server = MetricsServer::start(listen_address(":0").unwrap(), m).unwrap();
        assert!(server.addr().ip().is_loopback());
        let get = |path: &str| {
            let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
            write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
            let mut r = String::new();
            s.read_to_string(&mut r).unwrap();
            r
        };
        let r = get("/metrics");
        assert!(
            r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200"),
            "{r}"
        );
        assert!(r.contains("earlybird_packets_total 10"), "{r}");
        assert!(get("/other").contains(" 404 "));
    }

    #[test]
    fn listen_addresses_default_to_loopback() {
        assert_eq!(
            listen_address("9464").unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            listen_address(":9464").unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            listen_address("[::1]:9464").unwrap(),
            "[::1]:9464".parse().unwrap()
        );
        assert!(listen_address("nonsense").is_err());
    }
}
