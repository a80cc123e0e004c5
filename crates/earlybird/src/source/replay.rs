//! Replay of capture files onto a Linux network interface (`earlybird
//! replay`), for benchmarks and tests in network namespaces.
//!
//! Contract:
//! - Input: capture files ([`CaptureFile`]), [`ReplayOptions`] (interface
//!   name, optional rate in packets per second, number of loops) and a stop
//!   flag.
//! - Output: the captured bytes (`caplen`) of every Ethernet packet, file
//!   after file in the order given, `loops` times, sent out of the interface
//!   through an AF_PACKET socket with a TPACKET_V2 transmit ring
//!   (PACKET_QDISC_BYPASS: no qdisc in the way) or, with `capture`
//!   AF_XDP, through XDP sockets on `queues` transmit queues
//!   (`super::af_xdp_tx`, which spreads the frames as `spread` says), and
//!   a [`ReplayReport`].
//!   Packets that are not sent are counted by reason, every loop:
//!   another link type (`skipped_not_ethernet`, pcapng interfaces of an
//!   unsupported link type included), longer than the interface accepts
//!   (MTU + 14-byte Ethernet header, + 4 when 802.1Q-tagged on an Ethernet
//!   device) or than a ring frame (`skipped_too_big`), shorter than an
//!   Ethernet header (`skipped_too_short`), and frames the kernel refused
//!   anyway (TP_STATUS_WRONG_FORMAT: `rejected`). `packets_sent` counts the
//!   frames the kernel took from the ring; the device may still drop some
//!   (see its tx_dropped counter). A cut-off capture is sent up to the cut
//!   and its [`Warning`] is in the report (once, not per loop).
//! - Rate: with `pps`, packet k (k counts the packets sent, from 0) leaves no
//!   earlier than start + k / pps on the monotonic clock; without it, as fast
//!   as the kernel takes frames. `seconds` is the wall-clock duration from the
//!   first packet until the ring is empty.
//! - Stop: raising the flag stops before the next packet; frames already in
//!   the ring are still sent. Before returning, the ring is drained: every
//!   frame the kernel took is back to TP_STATUS_AVAILABLE (bounded wait).
//! - Failures: invalid options are [`Error::Config`]; everything about the
//!   interface is [`Error::Interface`] naming it (no such interface, not an
//!   Ethernet interface, no privilege — root or CAP_NET_RAW —, the ring cannot
//!   be set up, the interface went down, or the kernel took no frame for
//!   ten seconds). Nothing panics on any input. The ring and its socket are
//!   in `af_packet_tx.rs`.
//! - Allocation: none per packet. One batch of packet references is reused,
//!   and the ring (a few MiB) is mapped once per call.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::af_packet_tx::{Fit, Tx};
use super::af_xdp_tx::XdpTx;
use super::{CaptureFile, PacketRef, Warning, BATCH};
use crate::decode::LinkType;
use crate::error::{Error, Result};

/// What to replay onto which interface. Build with [`ReplayOptions::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    /// Interface to send on (e.g. `eth0`, `veth1`).
    pub interface: String,
    /// Packets per second; `None` sends as fast as possible.
    pub pps: Option<f64>,
    /// Times the whole input is sent (at least 1).
    pub loops: u32,
    /// An AF_PACKET transmit ring (the default) or AF_XDP sockets.
    pub capture: super::af_packet::Capture,
    /// AF_XDP: transmit queues used, one socket each (at least 1).
    pub queues: u32,
    /// AF_XDP: how frames are spread over the queues.
    pub spread: super::af_xdp_tx::Spread,
}

impl ReplayOptions {
    /// Send once, as fast as possible, on `interface`.
    pub fn new(interface: &str) -> Self {
        ReplayOptions {
            interface: interface.to_string(),
            pps: None,
            loops: 1,
            capture: super::af_packet::Capture::AfPacket,
            queues: 1,
            spread: super::af_xdp_tx::Spread::Hosts,
        }
    }

    /// Checks the options; the message names the offending one.
    pub(super) fn validate(&self) -> Result<()> {
        if self.loops == 0 {
            return Err(Error::Config("replay: loops must be at least 1".into()));
        }
        if self.queues == 0 {
            return Err(Error::Config("replay: queues must be at least 1".into()));
        }
        if self.queues > 1 && self.capture != super::af_packet::Capture::AfXdp {
            return Err(Error::Config(
                "replay: --queues chooses AF_XDP transmit queues (--capture af-xdp)".into(),
            ));
        }
        if let Some(pps) = self.pps {
            if !(pps.is_finite() && pps > 0.0) {
                return Err(Error::Config(format!(
                    "replay: pps must be a positive number, got {pps}"
                )));
            }
        }
        Ok(())
    }
}

/// What a replay sent and what it left out.
///
/// Not `Eq`: `seconds` is a float.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayReport {
    /// Frames the kernel took from the ring.
    pub packets_sent: u64,
    /// Their bytes (Ethernet header included, no FCS).
    pub bytes_sent: u64,
    /// Packets of another link type than Ethernet.
    pub skipped_not_ethernet: u64,
    /// Frames longer than the interface MTU allows or than a ring frame.
    pub skipped_too_big: u64,
    /// Frames shorter than an Ethernet header (14 bytes).
    pub skipped_too_short: u64,
    /// Frames the kernel refused (TP_STATUS_WRONG_FORMAT) although they
    /// passed the checks above.
    pub rejected: u64,
    /// Wall-clock seconds from the first packet until the ring was empty.
    pub seconds: f64,
    /// Files that ended early (cut off or damaged), once each.
    pub warnings: Vec<Warning>,
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mpps, gbps) = if self.seconds > 0.0 {
            (
                self.packets_sent as f64 / self.seconds / 1e6,
                self.bytes_sent as f64 * 8.0 / self.seconds / 1e9,
            )
        } else {
            (0.0, 0.0)
        };
        write!(
            f,
            "{} packets, {} bytes sent in {:.3} s ({:.3} Mpps, {:.3} Gbit/s)",
            self.packets_sent, self.bytes_sent, self.seconds, mpps, gbps
        )?;
        let unsent = [
            (self.skipped_not_ethernet, "not Ethernet"),
            (self.skipped_too_big, "too big for the interface"),
            (self.skipped_too_short, "shorter than an Ethernet header"),
            (self.rejected, "refused by the kernel"),
        ];
        let mut sep = "; not sent: ";
        for (n, why) in unsent {
            if n > 0 {
                write!(f, "{sep}{n} {why}")?;
                sep = ", ";
            }
        }
        Ok(())
    }
}

/// Sends the Ethernet packets of `files` out of `opts.interface`, `loops`
/// times, at `opts.pps` or as fast as possible, until done or `stop` is
/// raised. See the module documentation for the counts and errors.
pub fn replay(
    files: &[CaptureFile],
    opts: &ReplayOptions,
    stop: &AtomicBool,
) -> Result<ReplayReport> {
    opts.validate()?;
    let mut tx = match opts.capture {
        super::af_packet::Capture::AfPacket => Sender::Packet(Tx::open(&opts.interface)?),
        super::af_packet::Capture::AfXdp => {
            Sender::Xdp(XdpTx::open(&opts.interface, opts.queues, opts.spread)?)
        }
    };
    let mut run = Run {
        tx: &mut tx,
        pps: opts.pps,
        stop,
        start: Instant::now(),
        next_k: 0,
        report: ReplayReport::default(),
    };
    run.all(files, opts.loops)?;
    let (start, mut report) = (run.start, run.report);
    // Whether finished or stopped, the frames already queued are sent and
    // waited for, so the counts say what left.
    match &mut tx {
        Sender::Packet(tx) => {
            tx.drain()?;
            report.packets_sent = tx.queue.packets;
            report.bytes_sent = tx.queue.bytes;
            report.rejected = tx.queue.rejected;
        }
        Sender::Xdp(tx) => {
            tx.drain()?;
            report.packets_sent = tx.packets;
            report.bytes_sent = tx.bytes;
            report.rejected = tx.refused();
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Where a replay's frames go.
enum Sender {
    Packet(Tx),
    Xdp(XdpTx),
}

impl Sender {
    fn fit(&self, frame: &[u8]) -> Fit {
        match self {
            Sender::Packet(t) => t.limits.fit(frame),
            Sender::Xdp(t) => t.fit(frame),
        }
    }

    fn push(&mut self, frame: &[u8], stop: &AtomicBool) -> Result<bool> {
        match self {
            Sender::Packet(t) => t.push(frame, stop),
            Sender::Xdp(t) => t.push(frame, stop),
        }
    }

    fn kick(&mut self) -> Result<()> {
        match self {
            Sender::Packet(t) => t.kick().map(|_| ()),
            Sender::Xdp(t) => t.kick(),
        }
    }
}

/// Nanoseconds after the start at which packet `k` may leave at `pps`
/// (saturates for absurd values instead of wrapping).
pub(super) fn due_ns(k: u64, pps: f64) -> u64 {
    (k as f64 * 1e9 / pps) as u64
}

/// Closer than this to a packet's time, spin; farther, sleep (a sleep can
/// overshoot by tens of microseconds, so it ends this much early).
const SPIN_BELOW_NS: u64 = 200_000;
/// Longest single sleep, so that a raised stop flag is seen quickly.
const MAX_SLEEP_NS: u64 = 50_000_000;

/// One step of waiting for a packet's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    Go,
    Spin,
    Sleep(Duration),
}

pub(super) fn wait_step(now_ns: u64, due_ns: u64) -> Wait {
    let ahead = due_ns.saturating_sub(now_ns);
    if ahead == 0 {
        Wait::Go
    } else if ahead <= SPIN_BELOW_NS {
        Wait::Spin
    } else {
        Wait::Sleep(Duration::from_nanos(
            (ahead - SPIN_BELOW_NS / 2).min(MAX_SLEEP_NS),
        ))
    }
}

pub(super) fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One replay in progress: walks the files and feeds the ring.
struct Run<'a> {
    tx: &'a mut Sender,
    pps: Option<f64>,
    stop: &'a AtomicBool,
    start: Instant,
    /// Index of the next packet to send (for pacing).
    next_k: u64,
    report: ReplayReport,
}

impl Run<'_> {
    /// Sends every file `loops` times; stops early (with `Ok`) on `stop`.
    fn all(&mut self, files: &[CaptureFile], loops: u32) -> Result<()> {
        let mut refs = Vec::with_capacity(BATCH);
        for lap in 0..loops {
            for file in files {
                if !self.file(file, &mut refs, lap == 0)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Sends one file; `false` when stopped.
    fn file(
        &mut self,
        file: &CaptureFile,
        refs: &mut Vec<PacketRef>,
        first_lap: bool,
    ) -> Result<bool> {
        let mut reader = file.reader();
        let data = reader.data();
        while reader.next_batch(refs, BATCH) > 0 {
            for r in refs.iter() {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
                if r.link != LinkType::Ethernet {
                    self.report.skipped_not_ethernet += 1;
                } else if !self.packet(r.bytes(data))? {
                    return Ok(false);
                }
            }
        }
        self.report.skipped_not_ethernet += reader.skipped_unsupported_link();
        if first_lap {
            self.report.warnings.extend(reader.warnings().cloned());
        }
        Ok(true)
    }

    /// Sends one Ethernet frame (or counts why not); `false` when stopped.
    fn packet(&mut self, frame: &[u8]) -> Result<bool> {
        match self.tx.fit(frame) {
            Fit::TooShort => self.report.skipped_too_short += 1,
            Fit::TooBig => self.report.skipped_too_big += 1,
            Fit::Send => {
                if !self.pace()? || !self.tx.push(frame, self.stop)? {
                    return Ok(false);
                }
                self.next_k += 1;
            }
        }
        Ok(true)
    }

    /// Waits until packet `next_k` may leave; `false` when stopped first.
    fn pace(&mut self) -> Result<bool> {
        let Some(pps) = self.pps else {
            return Ok(true);
        };
        let due = due_ns(self.next_k, pps);
        let mut kicked = false;
        loop {
            let step = wait_step(elapsed_ns(self.start), due);
            if step == Wait::Go {
                return Ok(true);
            }
            // The frames queued so far must leave on their time, not with
            // the next batch.
            if !kicked {
                self.tx.kick()?;
                kicked = true;
            }
            if self.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            match step {
                Wait::Sleep(d) => std::thread::sleep(d),
                _ => std::hint::spin_loop(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_times_and_steps() {
        assert_eq!(due_ns(0, 20_000.0), 0);
        assert_eq!(due_ns(1, 20_000.0), 50_000);
        assert_eq!(due_ns(20_000, 20_000.0), 1_000_000_000);
        assert_eq!(due_ns(3, 0.5), 6_000_000_000);
        assert_eq!(due_ns(u64::MAX, 1e-300), u64::MAX, "saturates");
        assert_eq!(wait_step(10, 10), Wait::Go);
        assert_eq!(wait_step(11, 10), Wait::Go);
        assert_eq!(wait_step(0, 1), Wait::Spin);
        assert_eq!(wait_step(0, SPIN_BELOW_NS), Wait::Spin);
        assert_eq!(
            wait_step(0, 1_000_000),
            Wait::Sleep(Duration::from_nanos(1_000_000 - SPIN_BELOW_NS / 2))
        );
        assert_eq!(
            wait_step(5, 10_000_000_000),
            Wait::Sleep(Duration::from_nanos(MAX_SLEEP_NS)),
            "long waits are cut so that stop is seen"
        );
        // A sleep never reaches the due time: the last stretch is spun.
        for ahead in [SPIN_BELOW_NS + 1, 300_000, 49_000_000] {
            let Wait::Sleep(d) = wait_step(0, ahead) else {
                panic!("{ahead}")
            };
            assert!((d.as_nanos() as u64) < ahead);
        }
    }

    #[test]
    fn options_are_checked_first() {
        let stop = AtomicBool::new(false);
        let mut o = ReplayOptions::new("lo");
        o.loops = 0;
        let e = replay(&[], &o, &stop).unwrap_err();
        assert!(
            matches!(e, Error::Config(_)) && e.to_string().contains("loops"),
            "{e}"
        );
        for pps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let o = ReplayOptions {
                pps: Some(pps),
                ..ReplayOptions::new("lo")
            };
            let e = replay(&[], &o, &stop).unwrap_err();
            assert!(e.to_string().contains("pps"), "{e}");
        }
    }

    /// Name checks need no privilege, so these run as any user.
    #[test]
    fn bad_interface_names_are_named_in_the_error() {
        let stop = AtomicBool::new(false);
        for name in [
            "ebr-no-such0",
            "",
            "a-name-far-too-long-for-linux",
            "nul\0x",
        ] {
            let e = replay(&[], &ReplayOptions::new(name), &stop).unwrap_err();
            let Error::Interface { name: n, reason } = &e else {
                panic!("{e}");
            };
            assert_eq!(n, name);
            assert!(e.to_string().contains(&format!("interface {name}")), "{e}");
            if name == "ebr-no-such0" {
                assert_eq!(reason, "no such interface");
            }
        }
    }

    #[test]
    fn report_line() {
        let mut r = ReplayReport {
            packets_sent: 2_000_000,
            bytes_sent: 250_000_000,
            seconds: 2.0,
            ..Default::default()
        };
        assert_eq!(
            r.to_string(),
            "2000000 packets, 250000000 bytes sent in 2.000 s (1.000 Mpps, 1.000 Gbit/s)"
        );
        r.skipped_not_ethernet = 3;
        r.rejected = 1;
        assert!(
            r.to_string()
                .ends_with("; not sent: 3 not Ethernet, 1 refused by the kernel"),
            "{r}"
        );
        assert!(ReplayReport::default().to_string().contains("0.000 Mpps"));
    }
}
