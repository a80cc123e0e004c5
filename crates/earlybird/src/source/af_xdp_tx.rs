//! The AF_XDP transmit path behind `earlybird replay --capture af-xdp`: one
//! XDP socket per transmit queue of the interface, each with a UMEM of its
//! own, a transmit ring and a completion ring.
//!
//! Contract:
//! - [`XdpTx::open`] opens `queues` sockets bound to queues `0..queues`
//!   (copy mode where the driver has no zero-copy, as on veth); every
//!   failure is [`Error::Interface`] naming the interface and
//!   `--capture af-packet`.
//! - [`XdpTx::push`] puts a frame on the queue [`Spread`] chooses: by the
//!   frame's two IP addresses in order (`hosts`: both directions of a
//!   session on one queue, as a symmetric RSS key would) or by its source
//!   address alone (`sources`: the two directions usually on different
//!   queues, as most NICs' default RSS does). Frames that are not IP go to
//!   queue 0. It waits for a free chunk when the queue has none (failing
//!   after [`super::af_packet_tx::STALL`] without progress) and asks the
//!   kernel to send every [`KICK_EVERY`] frames; [`XdpTx::kick`] asks now,
//!   [`XdpTx::drain`] waits (bounded) until every chunk is back.
//! - Speed: in copy mode (veth) the kernel sends at most a budget of
//!   frames per `sendto` (32 by default); each socket asks for a budget
//!   of its whole ring (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17 on; older
//!   kernels keep 32), so one kick sends every frame queued. Waiting for a
//!   free chunk kicks again at once while the kernel sends, and sleeps
//!   only when a kick sent nothing.
//! - Order: frames leave in the order they were pushed, across queues too.
//!   Before a frame goes onto another queue than the frame before it, the
//!   kernel must have taken every frame of that queue from its transmit
//!   ring ([`XdpTx::push`] kicks and waits, bounded). Without that, a
//!   sender behind its pace (a busy machine) queued frames on several
//!   queues and sent them queue by queue, and a reply could leave before
//!   the packet it answers. In copy mode (veth) a frame taken is a frame
//!   handed to the driver; with zero-copy, the NIC's queues may still
//!   reorder.
//! - Counts: a frame is sent when its chunk comes back on the completion
//!   ring; descriptors the kernel found invalid (`XDP_STATISTICS`) are
//!   counted as refused.
//! - Allocation: none per packet; each UMEM is mapped once.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::af_packet_tx::{Fit, STALL};
use super::af_xdp::{map_ring as ring, XRing};
use super::netdev::{hw_type, ifindex, ioctl_ifreq, packet_socket, set_opt, RingMap};
use crate::error::{Error, Result};

/// Bytes of a UMEM chunk: the largest frame sent.
const CHUNK: usize = 4096;
/// Chunks (and ring entries) of each queue.
const CHUNKS: u32 = 4096;
/// Frames queued between two kicks of the kernel.
pub const KICK_EVERY: usize = 64;
/// How long the final drain may wait for the last frames.
const DRAIN: Duration = Duration::from_secs(5);
/// `XDP_MAX_TX_SKB_BUDGET` (linux/if_xdp.h, Linux 6.17): frames one
/// `sendto` may send in copy mode, 32 up to the transmit ring's size.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// How frames are spread over the transmit queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spread {
    /// By the frame's two IP addresses in order (both directions together).
    #[default]
    Hosts,
    /// By the frame's source address (the directions apart).
    Sources,
}

impl Spread {
    /// `hosts` or `sources`.
    pub fn parse(s: &str) -> Option<Spread> {
        match s {
            "hosts" => Some(Spread::Hosts),
            "sources" => Some(Spread::Sources),
            _ => None,
        }
    }

    /// The queue of `frame` among `queues`.
    pub fn queue(self, frame: &[u8], queues: usize) -> usize {
        if queues <= 1 {
            return 0;
        }
        match self {
            Spread::Hosts => super::xdp_mesh::shard_of(frame, queues).unwrap_or(0),
            Spread::Sources => source_queue(frame, queues).unwrap_or(0),
        }
    }
}

/// The queue of an Ethernet frame's source address (untagged IPv4/IPv6).
fn source_queue(frame: &[u8], queues: usize) -> Option<usize> {
    let ether = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let src = match ether {
        0x0800 => frame.get(26..30)?,
        0x86dd => frame.get(22..38)?,
        _ => return None,
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in src {
        h = (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 29;
    Some((h % queues as u64) as usize)
}

/// One queue's socket, UMEM and rings.
struct Queue {
    fd: OwnedFd,
    umem: RingMap,
    tx: XRing,
    completion: XRing,
    /// Mapped because the kernel asks for a fill ring; never filled.
    _fill: XRing,
    /// Free chunks (their UMEM offsets).
    free: Vec<u64>,
    /// Length of the frame in each chunk.
    lens: Vec<u32>,
    /// The transmit ring's producer position, and the completion ring's
    /// consumer position.
    prod: u32,
    cons: u32,
    unkicked: usize,
}

/// The sockets of a replay over AF_XDP (see the module docs).
pub struct XdpTx {
    queues: Vec<Queue>,
    spread: Spread,
    name: String,
    mtu: usize,
    /// The queue of the frame pushed last.
    last: usize,
    /// Frames and bytes the kernel sent (their chunks came back).
    pub packets: u64,
    /// See `packets`.
    pub bytes: u64,
}

fn xdp_error(name: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Interface {
        name: name.into(),
        reason: format!("AF_XDP transmit: {what}: {e}; --capture af-packet sends without it"),
    }
}

impl XdpTx {
    /// Opens `queues` sockets on interface `name` (see the module docs).
    pub fn open(name: &str, queues: u32, spread: Spread) -> Result<XdpTx> {
        let index = ifindex(name)?;
        let probe = packet_socket(name)?;
        if hw_type(&probe, name)? != libc::ARPHRD_ETHER {
            return Err(xdp_error(name, "the interface", "not Ethernet"));
        }
        let m = ioctl_ifreq(&probe, name, libc::SIOCGIFMTU as _)
            .map_err(|e| Error::interface(name, "reading the MTU", e))?;
        // SAFETY: SIOCGIFMTU filled the mtu member of the union.
        let mtu = usize::try_from(unsafe { m.ifr_ifru.ifru_mtu }).unwrap_or(0);
        let have = super::af_xdp::rx_queues(&probe, name);
        if queues == 0 || queues > have {
            return Err(xdp_error(
                name,
                "queues",
                format!("{queues} asked for, the interface has {have}"),
            ));
        }
        let queues = (0..queues)
            .map(|q| open_queue(name, index, q))
            .collect::<Result<Vec<_>>>()?;
        Ok(XdpTx {
            queues,
            spread,
            name: name.into(),
            mtu,
            last: 0,
            packets: 0,
            bytes: 0,
        })
    }

    /// Whether `frame` can be sent: at least an Ethernet header, at most
    /// MTU + header (+ 4 when 802.1Q-tagged) and a chunk.
    pub(super) fn fit(&self, frame: &[u8]) -> Fit {
        if frame.len() < 14 {
            return Fit::TooShort;
        }
        let tagged = frame.get(12..14) == Some(&[0x81, 0x00][..]);
        let limit = self.mtu + 14 + if tagged { 4 } else { 0 };
        if frame.len() > limit.min(CHUNK) {
            Fit::TooBig
        } else {
            Fit::Send
        }
    }

    /// Queues one frame on its queue; `false` when stopped while waiting
    /// for a free chunk.
    pub fn push(&mut self, frame: &[u8], stop: &AtomicBool) -> Result<bool> {
        let q = self.spread.queue(frame, self.queues.len());
        if q != self.last {
            // The frames before this one leave first (module docs: Order).
            let last = self.last;
            if !self.queues[last].flush(&self.name, stop)? {
                return Ok(false);
            }
            self.last = q;
        }
        let mut waited = Instant::now();
        let mut taken = self.queues[q].taken();
        loop {
            let (p, b) = self.queues[q].reclaim();
            self.packets += p;
            self.bytes += b;
            if !self.queues[q].free.is_empty() {
                break;
            }
            if p > 0 {
                waited = Instant::now();
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            if waited.elapsed() > STALL {
                return Err(Error::Interface {
                    name: self.name.clone(),
                    reason: format!(
                        "AF_XDP transmit: the kernel sent nothing for {} s",
                        STALL.as_secs()
                    ),
                });
            }
            self.queues[q].kick(&self.name)?;
            // While the kernel takes frames, ask again at once; sleep only
            // when it took none (its completions are late, or the device
            // is busy).
            let now = self.queues[q].taken();
            if now == taken && p == 0 {
                std::thread::sleep(Duration::from_micros(20));
            }
            taken = now;
        }
        let queue = &mut self.queues[q];
        queue.put(frame);
        if queue.unkicked >= KICK_EVERY {
            queue.kick(&self.name)?;
        }
        Ok(true)
    }

    /// Asks the kernel to send what every queue holds.
    pub fn kick(&mut self) -> Result<()> {
        for q in &mut self.queues {
            if q.unkicked > 0 {
                q.kick(&self.name)?;
            }
        }
        Ok(())
    }

    /// Waits (bounded) until every chunk is back; the counts are final.
    pub fn drain(&mut self) -> Result<()> {
        let start = Instant::now();
        loop {
            let mut out = false;
            for q in &mut self.queues {
                let (p, b) = q.reclaim();
                self.packets += p;
                self.bytes += b;
                if q.free.len() < CHUNKS as usize {
                    out = true;
                    q.kick(&self.name)?;
                }
            }
            if !out || start.elapsed() > DRAIN {
                return Ok(());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Descriptors the kernel refused (`tx_invalid_descs`), all queues.
    pub fn refused(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| {
                // SAFETY: plain-data struct.
                let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
                // SAFETY: an xdp_statistics of the size given.
                let r = unsafe {
                    libc::getsockopt(
                        q.fd.as_raw_fd(),
                        libc::SOL_XDP,
                        libc::XDP_STATISTICS,
                        (&mut s as *mut libc::xdp_statistics).cast(),
                        &mut len,
                    )
                };
                if r == 0 {
                    s.tx_invalid_descs
                } else {
                    0
                }
            })
            .sum()
    }
}

impl Queue {
    /// The transmit ring's consumer position: frames the kernel took.
    fn taken(&self) -> u32 {
        self.tx.word(self.tx.consumer).load(Ordering::Acquire)
    }

    /// Takes the chunks the kernel is done with: (frames, bytes).
    fn reclaim(&mut self) -> (u64, u64) {
        let prod = self
            .completion
            .word(self.completion.producer)
            .load(Ordering::Acquire);
        let (mut n, mut bytes) = (0, 0);
        while self.cons != prod {
            let k = self.cons & self.completion.mask;
            // SAFETY: entry k of the completion ring, inside its mapping,
            // published by the producer's release store read above.
            let addr = unsafe {
                self.completion
                    .map
                    .ptr()
                    .add(self.completion.desc + 8 * k as usize)
                    .cast::<u64>()
                    .read()
            };
            self.cons = self.cons.wrapping_add(1);
            let chunk = (addr / CHUNK as u64).min(u64::from(CHUNKS) - 1);
            bytes += u64::from(self.lens[chunk as usize]);
            self.free.push(chunk * CHUNK as u64);
            n += 1;
        }
        self.completion
            .word(self.completion.consumer)
            .store(self.cons, Ordering::Release);
        (n, bytes)
    }

    /// Writes `frame` into a free chunk and its descriptor into the
    /// transmit ring (the caller made sure a chunk is free).
    fn put(&mut self, frame: &[u8]) {
        let Some(addr) = self.free.pop() else {
            return;
        };
        // SAFETY: a free chunk of the UMEM (the kernel gave it back or
        // never had it), `frame` no longer than a chunk (`XdpTx::fit`).
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.umem.ptr().add(addr as usize),
                frame.len().min(CHUNK),
            );
        }
        self.lens[addr as usize / CHUNK] = frame.len() as u32;
        let k = self.prod & self.tx.mask;
        let d = libc::xdp_desc {
            addr,
            len: frame.len() as u32,
            options: 0,
        };
        // SAFETY: entry k of the transmit ring: the ring has an entry for
        // every chunk, so the kernel has consumed it (its chunk is free).
        unsafe {
            self.tx
                .map
                .ptr()
                .add(self.tx.desc + 16 * k as usize)
                .cast::<libc::xdp_desc>()
                .write(d);
        }
        self.prod = self.prod.wrapping_add(1);
        self.tx
            .word(self.tx.producer)
            .store(self.prod, Ordering::Release);
        self.unkicked += 1;
    }

    /// Kicks until the kernel has taken every frame of the transmit ring
    /// (failing after [`STALL`] without progress); `false` when stopped
    /// first.
    fn flush(&mut self, name: &str, stop: &AtomicBool) -> Result<bool> {
        let mut seen = self.tx.word(self.tx.consumer).load(Ordering::Acquire);
        let mut waited = Instant::now();
        while seen != self.prod {
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            self.kick(name)?;
            let now = self.tx.word(self.tx.consumer).load(Ordering::Acquire);
            if now != seen {
                (seen, waited) = (now, Instant::now());
            } else if waited.elapsed() > STALL {
                return Err(Error::Interface {
                    name: name.into(),
                    reason: format!(
                        "AF_XDP transmit: the kernel took nothing for {} s",
                        STALL.as_secs()
                    ),
                });
            } else {
                std::thread::yield_now();
            }
        }
        Ok(true)
    }

    /// Asks the kernel to send (a `sendto` of nothing; a busy device is
    /// asked again later).
    fn kick(&mut self, name: &str) -> Result<()> {
        self.unkicked = 0;
        // Without need_wakeup set the driver is already sending.
        let flags = self.tx.word(self.tx.flags).load(Ordering::Relaxed);
        if flags & libc::XDP_RING_NEED_WAKEUP == 0 {
            return Ok(());
        }
        // SAFETY: a zero-length send on the socket.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => {}
                _ => return Err(xdp_error(name, "sending", e)),
            }
        }
        Ok(())
    }
}

/// One socket bound to transmit queue `queue`.
fn open_queue(name: &str, ifindex: libc::c_int, queue: u32) -> Result<Queue> {
    let umem = RingMap::anonymous(name, CHUNKS as usize * CHUNK)?;
    // SAFETY: plain syscall.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = std::io::Error::last_os_error();
        return Err(xdp_error(name, "opening an XDP socket", e));
    }
    // SAFETY: a fresh descriptor this process owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr() as u64,
        len: (CHUNKS as usize * CHUNK) as u64,
        chunk_size: CHUNK as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    set_opt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
        .map_err(|e| xdp_error(name, "registering the UMEM", e))?;
    for (opt, what) in [
        (libc::XDP_UMEM_FILL_RING, "the fill ring"),
        (libc::XDP_UMEM_COMPLETION_RING, "the completion ring"),
        (libc::XDP_TX_RING, "the transmit ring"),
    ] {
        set_opt(&fd, libc::SOL_XDP, opt, &CHUNKS).map_err(|e| xdp_error(name, what, e))?;
    }
    let off = super::af_xdp::offsets(&fd, name)?;
    let tx = ring(&fd, name, &off.tx, CHUNKS, 16, libc::XDP_PGOFF_TX_RING)?;
    let completion = ring(
        &fd,
        name,
        &off.cr,
        CHUNKS,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
    )?;
    let fill = ring(
        &fd,
        name,
        &off.fr,
        CHUNKS,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
    )?;
    // One kick sends the whole ring (see the module docs: Speed); a kernel
    // without the option keeps its budget, which only costs more kicks.
    let _ = set_opt(&fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &CHUNKS);
    super::af_xdp::bind_queue(&fd, name, ifindex, queue)?;
    Ok(Queue {
        fd,
        umem,
        tx,
        completion,
        _fill: fill,
        free: (0..u64::from(CHUNKS))
            .rev()
            .map(|k| k * CHUNK as u64)
            .collect(),
        lens: vec![0; CHUNKS as usize],
        prod: 0,
        cons: 0,
        unkicked: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 34];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f
    }

    #[test]
    fn hosts_keep_sessions_and_sources_split_them() {
        let mut split = 0;
        for k in 0..64u8 {
            let (a, b) = (
                v4([10, 0, 0, k], [10, 1, 1, 1]),
                v4([10, 1, 1, 1], [10, 0, 0, k]),
            );
            assert_eq!(Spread::Hosts.queue(&a, 2), Spread::Hosts.queue(&b, 2));
            if Spread::Sources.queue(&a, 2) != Spread::Sources.queue(&b, 2) {
                split += 1;
            }
            assert!(Spread::Sources.queue(&a, 2) < 2);
        }
        assert!(split > 10, "{split}");
        assert_eq!(Spread::Sources.queue(&[0u8; 10], 2), 0);
        assert_eq!(Spread::parse("sources"), Some(Spread::Sources));
        assert_eq!(Spread::parse("x"), None);
    }
}
