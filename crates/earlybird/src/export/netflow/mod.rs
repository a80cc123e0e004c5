//! NetFlow export: flow records as NetFlow v9 (RFC 3954, `v9.rs`) or v5
//! (`v5.rs`) packets to a collector over UDP, for the collectors and
//! appliances that take no IPFIX.
//!
//! Contract: an output named `netflow9+udp://HOST:PORT` or
//! `netflow5+udp://HOST:PORT` ([`destination`]) sends each flow record as
//! one-way NetFlow records: one for client → server and, when the server
//! sent packets, one for server → client (addresses, ports, MACs, counters
//! and TCP flags of that direction; both carry the flow's first and last
//! packet times). v9 marks which is which with `biflowDirection` and
//! carries the classifier's verdict and the Community ID (`docs/NETFLOW.md`);
//! v5 carries IPv4 only, and counts the records it leaves out. Packet
//! times come from the records (packet timestamps), never the clock: a
//! packet's `unix_secs` is the latest record end in it rounded up to the
//! second, and `sysUptime` is counted from an "uptime origin" no later than
//! any flow start of the packet ([`Clock`]), so a collector's
//! `unix_secs × 1000 − sysUptime + FIRST_SWITCHED` gives each flow's start
//! in milliseconds.
//!
//! Failures: resolving or binding fails at open ([`Error::Output`] naming
//! the output). Sends never block the caller (a non-blocking socket): a
//! send that fails (ICMP port unreachable, full socket buffer, no route)
//! drops its packet, and [`Exporter::finish`] returns an [`Error::Output`]
//! stating the records not delivered. Over any other writer (tests, files)
//! the packets are written one after the other, each whole.

pub mod v5;
pub mod v9;

use std::io::{ErrorKind, Write};
use std::net::UdpSocket;
use std::path::Path;

use super::ipfix::IpfixOptions;
use super::ExportOptions;
use crate::error::{Error, Result};
use crate::export::Exporter;
use crate::sample::Sampling;

/// Prefix of a NetFlow v9 collector output.
pub const V9_PREFIX: &str = "netflow9+udp://";
/// Prefix of a NetFlow v5 collector output.
pub const V5_PREFIX: &str = "netflow5+udp://";

/// A NetFlow version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// RFC 3954: templates, IPv4 and IPv6, verdict and Community ID.
    V9,
    /// The fixed 48-byte IPv4 record.
    V5,
}

/// The version and `HOST:PORT` of a NetFlow output name, `None` for any
/// other name.
pub fn destination(out: &Path) -> Option<(Version, &str)> {
    let s = out.to_str()?;
    if let Some(rest) = s.strip_prefix(V9_PREFIX) {
        Some((Version::V9, rest))
    } else {
        s.strip_prefix(V5_PREFIX).map(|r| (Version::V5, r))
    }
}

/// Whether the output name is a NetFlow collector.
pub fn is_network(out: &Path) -> bool {
    destination(out).is_some()
}

/// Settings of NetFlow outputs: the `[ipfix]` table's MTU, observation
/// domain (v9 source id; v5 engine id, its low 8 bits), template refresh
/// (v9), and the run's sampling, if any.
#[derive(Debug, Clone, Default)]
pub struct NetflowOptions {
    /// MTU, observation domain and template refresh.
    pub ipfix: IpfixOptions,
    /// The run's packet sampling (v9: an options template and record; v5:
    /// the header's sampling interval).
    pub sampling: Option<Sampling>,
}

/// Opens the NetFlow output `out` (`netflow9+udp://HOST:PORT` or
/// `netflow5+udp://HOST:PORT`); errors name it.
pub fn open(out: &Path, opts: &ExportOptions, nf: &NetflowOptions) -> Result<Box<dyn Exporter>> {
    let name = out.display().to_string();
    let err = |reason: String| Error::Output {
        name: name.clone(),
        reason,
    };
    let Some((version, hostport)) = destination(out) else {
        return Err(err(
            "not a NetFlow collector (netflow9+udp://HOST:PORT or netflow5+udp://HOST:PORT)".into(),
        ));
    };
    let addr = super::ipfix::transport::resolve(hostport).map_err(|e| err(e.to_string()))?;
    let bind = if addr.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    };
    let sock = UdpSocket::bind(bind).map_err(|e| err(format!("bind: {e}")))?;
    sock.connect(addr)
        .map_err(|e| err(format!("connect {addr}: {e}")))?;
    sock.set_nonblocking(true)
        .map_err(|e| err(format!("non-blocking: {e}")))?;
    let sink = Sink::Udp(sock);
    Ok(make(version, sink, &name, opts, nf))
}

/// A NetFlow exporter of `version` writing its packets one after the
/// other to `w` (tests, captures of the stream).
pub fn to_writer(
    version: Version,
    w: Box<dyn Write + Send>,
    name: &str,
    opts: &ExportOptions,
    nf: &NetflowOptions,
) -> Box<dyn Exporter> {
    make(version, Sink::Writer(w), name, opts, nf)
}

fn make(
    version: Version,
    sink: Sink,
    name: &str,
    opts: &ExportOptions,
    nf: &NetflowOptions,
) -> Box<dyn Exporter> {
    let out = Packets::new(sink, name);
    match version {
        Version::V9 => Box::new(v9::V9Exporter::new(out, opts, nf)),
        Version::V5 => Box::new(v5::V5Exporter::new(out, opts, nf)),
    }
}

/// Where packets go.
pub(crate) enum Sink {
    Udp(UdpSocket),
    Writer(Box<dyn Write + Send>),
}

/// Sends whole packets and counts what was not delivered.
pub(crate) struct Packets {
    sink: Sink,
    name: String,
    /// Records handed over, records dropped, failed sends.
    records: u64,
    dropped: u64,
    failures: u64,
    last: Option<String>,
}

impl Packets {
    fn new(sink: Sink, name: &str) -> Packets {
        Packets {
            sink,
            name: name.to_string(),
            records: 0,
            dropped: 0,
            failures: 0,
            last: None,
        }
    }

    /// The output's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Sends `pkt`, which holds `records` flow records; a failure drops
    /// it (counted), never blocks.
    pub(crate) fn send(&mut self, pkt: &[u8], records: u32) -> Result<()> {
        self.records += u64::from(records);
        let (refused, res) = match &mut self.sink {
            Sink::Udp(s) => match s.send(pkt) {
                // The refusal is an earlier datagram's (ICMP port
                // unreachable comes back after it left), and reporting it
                // cleared it: the packet goes again, so that a collector
                // that came back gets it (with its templates), and its
                // records count as not delivered, standing for the lost
                // one (as the IPFIX exporter does).
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    (Some(e), s.send(pkt).map(|_| ()))
                }
                r => (None, r.map(|_| ())),
            },
            Sink::Writer(w) => (None, w.write_all(pkt)),
        };
        let counted = refused.is_some();
        if let Some(e) = refused {
            self.dropped += u64::from(records);
            self.failures += 1;
            self.last = Some(format!("collector refused (ICMP port unreachable): {e}"));
        }
        match res {
            Ok(()) => Ok(()),
            Err(e) => {
                if !counted {
                    self.dropped += u64::from(records);
                }
                self.failures += 1;
                let udp = matches!(self.sink, Sink::Udp(_));
                self.last = Some(match e.kind() {
                    ErrorKind::ConnectionRefused if udp => {
                        format!("collector refused (ICMP port unreachable): {e}")
                    }
                    ErrorKind::WouldBlock => "socket buffer full".to_string(),
                    _ => e.to_string(),
                });
                match &self.sink {
                    // A writer's failure ends the output.
                    Sink::Writer(_) => Err(self.error()),
                    Sink::Udp(_) => Ok(()),
                }
            }
        }
    }

    /// Flushes a writer.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if let Sink::Writer(w) = &mut self.sink {
            w.flush().map_err(|e| Error::Output {
                name: self.name.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    fn error(&self) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason: format!(
                "{} of {} records not delivered; {} failure{} (last: {})",
                self.dropped,
                self.records,
                self.failures,
                if self.failures == 1 { "" } else { "s" },
                self.last.as_deref().unwrap_or("none")
            ),
        }
    }

    /// `Ok` when every record was delivered, else the error stating the
    /// losses.
    pub(crate) fn result(&self) -> Result<()> {
        match self.failures {
            0 => Ok(()),
            _ => Err(self.error()),
        }
    }
}

/// Milliseconds per second.
const MS: u64 = 1000;

/// The uptime origin of the packets of one output (see the module docs),
/// in milliseconds since the Unix epoch: no later than the start of any
/// flow of the packet being filled, and less than 2^32 ms before its
/// export time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Clock {
    /// The origin; `None` before the first record.
    origin: Option<u64>,
}

/// How far before the first flow start the origin is set: flows that end
/// later but started up to this long before still fit without moving it.
const ORIGIN_LEAD: u64 = 3_600 * MS;

impl Clock {
    /// Whether a flow of `first_ms` to `last_ms` fits the current origin;
    /// when it does not, the caller sends the packet it is filling and
    /// calls [`Clock::rebase`].
    #[inline]
    pub(crate) fn fits(&self, first_ms: u64, last_ms: u64) -> bool {
        match self.origin {
            Some(o) => first_ms >= o && export_ms(last_ms) - o < (1 << 32),
            None => false,
        }
    }

    /// Moves the origin to before `first_ms`, or, for a flow of 2^32 ms
    /// (49.7 days) or more, to 2^32 − 1 ms before its export time (its
    /// start is then written as that origin).
    pub(crate) fn rebase(&mut self, first_ms: u64, last_ms: u64) {
        let earliest = export_ms(last_ms).saturating_sub(u64::from(u32::MAX));
        self.origin = Some(first_ms.saturating_sub(ORIGIN_LEAD).max(earliest));
    }

    /// Milliseconds since the origin of `ms` (which [`Clock::fits`]).
    #[inline]
    pub(crate) fn uptime(&self, ms: u64) -> u32 {
        ms.saturating_sub(self.origin.unwrap_or(0)) as u32
    }
}

/// The export time of a packet whose latest record ends at `last_ms`: that
/// time rounded up to the second, so that `unix_secs` (whole seconds) and
/// `sysUptime` give the origin back exactly.
#[inline]
pub(crate) fn export_ms(last_ms: u64) -> u64 {
    last_ms.div_ceil(MS) * MS
}

/// The latest time a packet header can say (`unix_secs` is 32 bits):
/// 2106-02-07 06:28:15 UTC, in milliseconds, less a second for the
/// rounding of [`export_ms`].
const LATEST_MS: u64 = (u32::MAX as u64 - 1) * MS;

/// The first and last packet times of a record in milliseconds
/// (truncated; a last before the first is the first; times after 2106
/// are [`LATEST_MS`]).
#[inline]
pub(crate) fn times(r: &crate::flow::record::FlowRecord) -> (u64, u64) {
    let first = (r.first_ts / 1_000_000).min(LATEST_MS);
    let last = (r.last_ts / 1_000_000).min(LATEST_MS).max(first);
    (first, last)
}

#[cfg(test)]
pub(crate) mod tests;
