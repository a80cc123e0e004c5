//! The AF_PACKET transmit ring behind [`super::replay`]: a TPACKET_V2
//! `PACKET_TX_RING` on a packet socket bound to one interface
//! (PACKET_QDISC_BYPASS), the frames it accepts, and the bookkeeping that
//! hands frames to the kernel and takes them back.
//!
//! Contract:
//! - [`Tx::open`] checks the interface (Ethernet or loopback), sizes the
//!   ring for its MTU ([`Geometry`]), maps it and binds the socket; every
//!   failure is [`Error::Interface`] naming the interface.
//! - [`Limits::fit`] applies the kernel's own length rules (`tpacket_snd`),
//!   so the kernel refuses a frame only in cases those rules miss; a
//!   refused frame is taken out of the ring ([`Queue::drop_refused`]) and
//!   counted, and the frames behind it still leave in order.
//! - [`Tx::push`] waits for a free ring frame (failing after [`STALL`]
//!   without progress), [`Tx::kick`] asks the kernel to send without
//!   waiting, [`Tx::drain`] waits (bounded) until every frame is back.
//! - The ring's status words are shared with the kernel and only touched
//!   atomically; a frame's bytes are written only while it is ours and
//!   published by a release store of its status.
//! - Allocation: none per packet; the ring (a few MiB) is mapped once.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use libc::c_int;

use super::netdev::{bind, hw_type, ifindex, ioctl_ifreq, packet_socket, set_opt, RingMap};
use crate::error::{Error, Result};

/// Ethernet header length (the `hard_header_len` of Ethernet devices).
const ETH_HLEN: usize = 14;
/// One 802.1Q tag.
const VLAN_HLEN: usize = 4;
/// Where a frame's bytes start in a TPACKET_V2 transmit frame: the kernel
/// reads them right after the aligned header (`tp_hdrlen` minus the
/// `sockaddr_ll` it reserves on receive) unless PACKET_TX_HAS_OFF is set.
const DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();
/// Smallest and largest ring frame (powers of two).
const MIN_FRAME: usize = 2048;
const MAX_FRAME: usize = 1 << 20;
/// Ring size aimed at, and the fewest frames it has with a huge MTU.
const RING_BYTES: usize = 4 << 20;
const MIN_FRAMES: usize = 16;
/// Smallest ring block: fewer, larger blocks for the kernel to allocate.
const MIN_BLOCK: usize = 64 << 10;
/// Frames filled between two kicks of the kernel (one `send` each).
const KICK_EVERY: usize = 64;
/// How long the ring may stay full without the kernel freeing a frame
/// before the replay fails (the link is down, or the device stuck).
pub(super) const STALL: Duration = Duration::from_secs(10);
/// How long the final drain may wait for the last frames.
const DRAIN: Duration = Duration::from_secs(5);
/// Pause before kicking again when the kernel could not take a frame (the
/// device queue or the socket's send buffer is full).
const BUSY_BACKOFF: Duration = Duration::from_micros(20);
/// Longest wait in `poll` for a frame to come back.
const POLL_MS: c_int = 10;

/// The status bits of a ring frame that mean "the kernel still owns it".
const SEND_REQUEST: u32 = libc::TP_STATUS_SEND_REQUEST;
const SENDING: u32 = libc::TP_STATUS_SENDING;
const WRONG_FORMAT: u32 = libc::TP_STATUS_WRONG_FORMAT;
const AVAILABLE: u32 = libc::TP_STATUS_AVAILABLE;

/// The frame is ours again (sent and released, whatever timestamp bits the
/// kernel added).
fn is_free(status: u32) -> bool {
    status & (SEND_REQUEST | SENDING | WRONG_FORMAT) == 0
}

/// The kernel has moved past this frame (taken it, or skipped it): it no
/// longer waits at it.
fn kernel_passed(status: u32) -> bool {
    status & (SEND_REQUEST | WRONG_FORMAT) == 0
}

/// Shape of the transmit ring for an interface MTU: frames of a power of two
/// big enough for MTU + Ethernet header + one VLAN tag (within
/// [`MIN_FRAME`, `MAX_FRAME`]), blocks of a power of two holding whole
/// frames, about [`RING_BYTES`] in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    frame_size: usize,
    frames: usize,
    block_size: usize,
    blocks: usize,
}

impl Geometry {
    fn for_mtu(mtu: usize, page_size: usize) -> Geometry {
        let need = DATA_OFFSET
            .saturating_add(mtu)
            .saturating_add(ETH_HLEN + VLAN_HLEN);
        let frame_size = need
            .checked_next_power_of_two()
            .unwrap_or(MAX_FRAME)
            .clamp(MIN_FRAME, MAX_FRAME);
        // Powers of two: the largest is a multiple of the others, so blocks
        // are page-aligned and hold whole frames with nothing left over.
        let page = page_size.max(1).next_power_of_two();
        let block_size = frame_size.max(page).max(MIN_BLOCK);
        let blocks = (RING_BYTES.max(MIN_FRAMES * frame_size) / block_size).max(1);
        Geometry {
            frame_size,
            frames: blocks * (block_size / frame_size),
            block_size,
            blocks,
        }
    }

    /// Bytes of frame data one ring frame holds.
    fn capacity(&self) -> usize {
        self.frame_size - DATA_OFFSET
    }

    fn bytes(&self) -> usize {
        self.block_size * self.blocks
    }
}

/// Whether a frame can be sent, and if not why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    Send,
    TooShort,
    TooBig,
}

/// What the interface and the ring accept. The rules are the kernel's
/// (`tpacket_snd`), so that it never has to refuse a frame: at least an
/// Ethernet header, at most MTU + header, 4 more when the frame is 802.1Q
/// tagged and the device is Ethernet (not loopback), and within a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limits {
    mtu: usize,
    capacity: usize,
    vlan_extra: bool,
}

impl Limits {
    pub(super) fn fit(&self, frame: &[u8]) -> Fit {
        if frame.len() < ETH_HLEN {
            return Fit::TooShort;
        }
        let tagged = self.vlan_extra && frame.get(12..14) == Some(&[0x81, 0x00][..]);
        let limit =
            self.mtu
                .saturating_add(ETH_HLEN)
                .saturating_add(if tagged { VLAN_HLEN } else { 0 });
        if frame.len() > limit.min(self.capacity) {
            Fit::TooBig
        } else {
            Fit::Send
        }
    }
}

/// A view of the mapped transmit ring: `frames` frames of `frame_size`
/// bytes from `base`. The kernel writes the status words concurrently, so
/// they are only touched atomically; the rest of a frame is written only
/// while the frame is ours (free), and published by a release store of
/// its status.
struct Ring {
    base: *mut u8,
    frame_size: usize,
    frames: usize,
}

impl Ring {
    /// # Safety
    /// `base` must be valid for reads and writes of `frame_size * frames`
    /// bytes for the life of the `Ring`, aligned to 16, and used by nothing
    /// else than this `Ring` and the kernel; `frame_size` must be a multiple
    /// of 16 larger than [`DATA_OFFSET`].
    unsafe fn new(base: *mut u8, frame_size: usize, frames: usize) -> Ring {
        Ring {
            base,
            frame_size,
            frames,
        }
    }

    fn capacity(&self) -> usize {
        self.frame_size - DATA_OFFSET
    }

    fn header(&self, i: usize) -> *mut libc::tpacket2_hdr {
        // Indices come from the queue's own arithmetic, never from input;
        // the check keeps a bug from writing outside the mapping.
        assert!(i < self.frames, "ring slot {i} out of {}", self.frames);
        // SAFETY: i < frames, so the frame lies inside the region `new`
        // was given.
        unsafe { self.base.add(i * self.frame_size).cast() }
    }

    fn status_word(&self, i: usize) -> &AtomicU32 {
        let h = self.header(i);
        // SAFETY: the header is in the region, 16-aligned (so is its first
        // field), and outlives `&self`; everyone touches it atomically.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*h).tp_status)) }
    }

    fn status(&self, i: usize) -> u32 {
        self.status_word(i).load(Ordering::Acquire)
    }

    /// Sets a frame's status; with SEND_REQUEST this hands it (and the
    /// bytes written before) to the kernel.
    fn publish(&self, i: usize, status: u32) {
        self.status_word(i).store(status, Ordering::Release);
    }

    fn len(&self, i: usize) -> u32 {
        let h = self.header(i);
        // SAFETY: in the region and aligned; tp_len is written only by us.
        unsafe { std::ptr::addr_of!((*h).tp_len).read_volatile() }
    }

    /// Writes `frame` into free frame `i` (its status is not changed).
    fn fill(&mut self, i: usize, frame: &[u8]) {
        assert!(frame.len() <= self.capacity(), "frame larger than a slot");
        let h = self.header(i);
        // SAFETY: frame `i` is free (the caller's bookkeeping), its data
        // area holds `capacity` bytes, and `frame` is not in the ring.
        unsafe {
            let dst = h.cast::<u8>().add(DATA_OFFSET);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), dst, frame.len());
            std::ptr::addr_of_mut!((*h).tp_len).write_volatile(frame.len() as u32);
        }
    }

    /// Copies frame `from` (length and bytes) over frame `to`; neither may
    /// be in the kernel's hands at the time (see `Queue::drop_refused`).
    fn move_frame(&mut self, from: usize, to: usize) {
        let len = (self.len(from) as usize).min(self.capacity());
        let (src, dst) = (self.header(from), self.header(to));
        // SAFETY: both frames are in the region and `len` fits a frame's
        // data area; `copy` allows from == to.
        unsafe {
            std::ptr::copy(
                src.cast::<u8>().add(DATA_OFFSET),
                dst.cast::<u8>().add(DATA_OFFSET),
                len,
            );
            std::ptr::addr_of_mut!((*dst).tp_len).write_volatile(len as u32);
        }
    }
}

/// Bookkeeping over the ring, in ring order from the oldest frame not yet
/// reclaimed: `inflight` frames end at `next` (the next frame to fill), and
/// the last `pending` of them the kernel has not taken yet (it stops at a
/// frame still SEND_REQUEST, or one it refused).
pub(super) struct Queue {
    ring: Ring,
    next: usize,
    inflight: usize,
    pending: usize,
    pub(super) packets: u64,
    pub(super) bytes: u64,
    pub(super) rejected: u64,
}

impl Queue {
    fn new(ring: Ring) -> Queue {
        Queue {
            ring,
            next: 0,
            inflight: 0,
            pending: 0,
            packets: 0,
            bytes: 0,
            rejected: 0,
        }
    }

    /// The frame `n` places before `next`, in ring order.
    fn back(&self, n: usize) -> usize {
        (self.next + self.ring.frames - n) % self.ring.frames
    }

    fn full(&self) -> bool {
        self.inflight == self.ring.frames
    }

    /// Queues `frame` in the next frame; the caller made sure it is free and
    /// that the frame fits.
    fn push(&mut self, frame: &[u8]) {
        let i = self.next;
        self.ring.fill(i, frame);
        self.ring.publish(i, SEND_REQUEST);
        self.next = (i + 1) % self.ring.frames;
        self.inflight += 1;
        self.pending += 1;
        self.packets += 1;
        self.bytes += frame.len() as u64;
    }

    /// Moves past the frames the kernel has taken since the last call
    /// (amortised: each frame is looked at once).
    fn track_kernel(&mut self) {
        while self.pending > 0 && kernel_passed(self.ring.status(self.back(self.pending))) {
            self.pending -= 1;
        }
    }

    /// The kernel stopped at a frame it refused.
    fn refused(&self) -> bool {
        self.pending > 0 && self.ring.status(self.back(self.pending)) & WRONG_FORMAT != 0
    }

    /// Takes the refused frame out: the kernel stays on that slot until it
    /// holds a frame to send, so the frames queued behind it move one slot
    /// back, in order, and the last slot becomes free again. Rare (the
    /// checks of [`Limits::fit`] are the kernel's), so the copying is fine.
    fn drop_refused(&mut self) {
        let frames = self.ring.frames;
        let mut to = self.back(self.pending);
        let len = u64::from(self.ring.len(to));
        for _ in 1..self.pending {
            let from = (to + 1) % frames;
            self.ring.move_frame(from, to);
            self.ring.publish(to, SEND_REQUEST);
            to = from;
        }
        self.ring.publish(to, AVAILABLE);
        self.next = to;
        self.pending -= 1;
        self.inflight -= 1;
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(len);
        self.rejected += 1;
    }

    /// Frees the oldest frames the kernel has sent and released; returns
    /// whether any was freed.
    fn reclaim(&mut self) -> bool {
        let before = self.inflight;
        while self.inflight > self.pending && is_free(self.ring.status(self.back(self.inflight))) {
            self.inflight -= 1;
        }
        self.inflight < before
    }
}

/// An AF_PACKET socket bound to one interface, with its transmit ring.
pub(super) struct Tx {
    /// Declared before `_map`: the view must not outlive the mapping.
    pub(super) queue: Queue,
    /// Kept only to unmap the ring on drop.
    _map: RingMap,
    fd: OwnedFd,
    name: String,
    pub(super) limits: Limits,
    /// Frames queued since the last kick.
    unkicked: usize,
}

impl Tx {
    pub(super) fn open(name: &str) -> Result<Tx> {
        let ifindex = ifindex(name)?;
        let fd = packet_socket(name)?;
        let hw_type = hw_type(&fd, name)?;
        if hw_type != libc::ARPHRD_ETHER && hw_type != libc::ARPHRD_LOOPBACK {
            return Err(Error::Interface {
                name: name.into(),
                reason: format!(
                    "not an Ethernet interface (ARP hardware type {hw_type}); \
                     only Ethernet frames can be replayed"
                ),
            });
        }
        let m = ioctl_ifreq(&fd, name, libc::SIOCGIFMTU as _)
            .map_err(|e| Error::interface(name, "reading the MTU", e))?;
        // SAFETY: SIOCGIFMTU filled the mtu member of the union.
        let mtu = usize::try_from(unsafe { m.ifr_ifru.ifru_mtu }).unwrap_or(0);
        let geo = Geometry::for_mtu(mtu, page_size());
        setup_ring(&fd, name, &geo)?;
        let map = RingMap::new(&fd, name, geo.bytes(), false, "mapping the transmit ring")?;
        bind(&fd, name, ifindex, 0)?;
        // SAFETY: the mapping is `geo.bytes()` long (frames * frame_size,
        // since blocks hold whole frames), page-aligned, shared only with
        // the kernel, and dropped after the queue (field order).
        let ring = unsafe { Ring::new(map.ptr(), geo.frame_size, geo.frames) };
        Ok(Tx {
            queue: Queue::new(ring),
            _map: map,
            fd,
            name: name.to_string(),
            limits: Limits {
                mtu,
                capacity: geo.capacity(),
                vlan_extra: hw_type == libc::ARPHRD_ETHER,
            },
            unkicked: 0,
        })
    }

    /// Queues one frame, waiting for a free ring frame if needed; `false`
    /// when stopped while waiting.
    pub(super) fn push(&mut self, frame: &[u8], stop: &AtomicBool) -> Result<bool> {
        if self.queue.full() && !self.wait_free(stop)? {
            return Ok(false);
        }
        self.queue.push(frame);
        self.unkicked += 1;
        if self.unkicked >= KICK_EVERY {
            self.kick()?;
        }
        Ok(true)
    }

    /// Asks the kernel to send the queued frames, without waiting for them
    /// to complete. Returns `true` when it could not take them all (device
    /// queue or send buffer full: try again a little later).
    pub(super) fn kick(&mut self) -> Result<bool> {
        self.unkicked = 0;
        loop {
            if self.queue.pending == 0 {
                return Ok(false);
            }
            // SAFETY: plain syscall on our socket; a NULL, empty message
            // means "send what the ring holds".
            let rc =
                unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            let err = (rc < 0).then(io::Error::last_os_error);
            self.queue.track_kernel();
            if self.queue.refused() {
                // The kernel halts on a refused frame until it is replaced.
                self.queue.drop_refused();
                continue;
            }
            let Some(e) = err else {
                return Ok(self.queue.pending > 0);
            };
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // Nothing lost: the kernel left the frame queued and takes
                // it again at the next kick.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => return Ok(true),
                _ => return Err(Error::interface(&self.name, "send", e)),
            }
        }
    }

    /// Waits until the ring has a free frame; `false` when stopped first.
    fn wait_free(&mut self, stop: &AtomicBool) -> Result<bool> {
        let since = Instant::now();
        loop {
            let busy = self.kick()?;
            if self.queue.reclaim() {
                return Ok(true);
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            if since.elapsed() > STALL {
                return Err(self.stalled(STALL));
            }
            if busy {
                std::thread::sleep(BUSY_BACKOFF);
            } else {
                self.poll_out();
            }
        }
    }

    /// Sleeps until the kernel releases the oldest frame (POLLOUT on a
    /// transmit ring), at most [`POLL_MS`].
    fn poll_out(&self) {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd. Errors (EINTR) just end the wait early.
        unsafe { libc::poll(&mut p, 1, POLL_MS) };
    }

    /// Hands every queued frame over and waits (bounded) until the kernel
    /// has released them all.
    pub(super) fn drain(&mut self) -> Result<()> {
        let since = Instant::now();
        loop {
            let busy = self.kick()?;
            self.queue.reclaim();
            if self.queue.inflight == 0 {
                return Ok(());
            }
            if since.elapsed() > DRAIN {
                return Err(self.stalled(DRAIN));
            }
            std::thread::sleep(if busy {
                BUSY_BACKOFF
            } else {
                Duration::from_micros(100)
            });
        }
    }

    fn stalled(&self, waited: Duration) -> Error {
        Error::Interface {
            name: self.name.clone(),
            reason: format!(
                "{} frames still queued after {} s without progress (is the link up?)",
                self.queue.inflight,
                waited.as_secs()
            ),
        }
    }
}

/// TPACKET_V2, qdisc bypass, a send buffer as large as the ring, and the
/// ring itself.
fn setup_ring(fd: &OwnedFd, name: &str, geo: &Geometry) -> Result<()> {
    let v2 = libc::tpacket_versions::TPACKET_V2 as c_int;
    set_opt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &v2)
        .map_err(|e| Error::interface(name, "PACKET_VERSION", e))?;
    set_opt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_QDISC_BYPASS,
        &1 as &c_int,
    )
    .map_err(|e| Error::interface(name, "PACKET_QDISC_BYPASS", e))?;
    // The kernel stops building packets once the socket's unreleased bytes
    // pass SO_SNDBUF, which would leave most of the ring idle on a device
    // that completes late. Forcing it needs CAP_NET_ADMIN; without it the
    // capped size is still better than the default, and neither is fatal.
    let want = c_int::try_from(geo.bytes().saturating_mul(2)).unwrap_or(c_int::MAX);
    if set_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &want).is_err() {
        let _ = set_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &want);
    }
    let req = libc::tpacket_req {
        tp_block_size: geo.block_size as libc::c_uint,
        tp_block_nr: geo.blocks as libc::c_uint,
        tp_frame_size: geo.frame_size as libc::c_uint,
        tp_frame_nr: geo.frames as libc::c_uint,
    };
    set_opt(fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &req)
        .map_err(|e| Error::interface(name, "setting up the transmit ring", e))
}

fn page_size() -> usize {
    // SAFETY: plain libc call.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_starts_after_the_aligned_header() {
        assert_eq!(DATA_OFFSET, 32);
    }

    /// The ring shapes obey the kernel's rules (packet_set_ring): blocks
    /// page-aligned, frames 16-aligned and larger than the header, the
    /// frame count exactly blocks × frames per block; and a frame holds the
    /// largest frame the MTU allows.
    #[test]
    fn geometry_follows_the_kernel_rules() {
        for page in [4096, 16384, 65536] {
            for mtu in [0, 68, 1500, 9000, 65536, 1 << 24, usize::MAX] {
                let g = Geometry::for_mtu(mtu, page);
                assert_eq!(g.block_size % page, 0, "{g:?}");
                assert_eq!(g.frame_size % libc::TPACKET_ALIGNMENT, 0, "{g:?}");
                assert!(g.frame_size > libc::TPACKET2_HDRLEN, "{g:?}");
                assert_eq!(g.block_size % g.frame_size, 0, "{g:?}");
                assert_eq!(g.frames, g.blocks * (g.block_size / g.frame_size));
                assert_eq!(g.bytes(), g.frames * g.frame_size);
                assert!(g.frames >= MIN_FRAMES, "{g:?}");
                assert!(
                    g.bytes() <= RING_BYTES.max(MIN_FRAMES * g.frame_size),
                    "{g:?}"
                );
                if mtu <= 1 << 19 {
                    assert!(g.capacity() >= mtu + ETH_HLEN + VLAN_HLEN, "{mtu} {g:?}");
                }
            }
        }
        let g = Geometry::for_mtu(1500, 4096);
        assert_eq!(
            (g.frame_size, g.frames, g.block_size, g.blocks),
            (2048, 2048, 65536, 64)
        );
        let g = Geometry::for_mtu(9000, 4096);
        assert_eq!((g.frame_size, g.frames), (16384, 256));
    }

    #[test]
    fn frames_fit_like_the_kernel_checks() {
        let l = Limits {
            mtu: 1500,
            capacity: 2016,
            vlan_extra: true,
        };
        let mut f = vec![0u8; 1514];
        assert_eq!(l.fit(&f), Fit::Send);
        assert_eq!(l.fit(&f[..14]), Fit::Send);
        assert_eq!(l.fit(&f[..13]), Fit::TooShort);
        assert_eq!(l.fit(&[]), Fit::TooShort);
        f.push(0);
        assert_eq!(l.fit(&f), Fit::TooBig, "MTU + 15");
        // An 802.1Q tag may come on top of the MTU, not other EtherTypes.
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(l.fit(&f), Fit::Send);
        f.resize(1518, 0);
        assert_eq!(l.fit(&f), Fit::Send);
        f.push(0);
        assert_eq!(l.fit(&f), Fit::TooBig);
        f.truncate(1515);
        f[12..14].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(l.fit(&f), Fit::TooBig, "QinQ outer tag gets no allowance");
        // Loopback is not an Ethernet device: no tag allowance.
        let lo = Limits {
            vlan_extra: false,
            ..l
        };
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(lo.fit(&f), Fit::TooBig);
        // The ring frame bounds a huge MTU.
        let big = Limits {
            mtu: 65536,
            capacity: 4000,
            vlan_extra: true,
        };
        assert_eq!(big.fit(&vec![0; 4000]), Fit::Send);
        assert_eq!(big.fit(&vec![0; 4001]), Fit::TooBig);
    }

    #[test]
    fn status_bits() {
        assert!(is_free(AVAILABLE));
        assert!(is_free(libc::TP_STATUS_TS_SOFTWARE), "timestamp bits only");
        for s in [SEND_REQUEST, SENDING, WRONG_FORMAT] {
            assert!(!is_free(s));
        }
        assert!(kernel_passed(SENDING) && kernel_passed(AVAILABLE));
        assert!(!kernel_passed(SEND_REQUEST) && !kernel_passed(WRONG_FORMAT));
    }

    /// A ring over ordinary memory, 16-aligned; the test plays the kernel
    /// by setting statuses.
    struct FakeRing {
        _mem: Vec<u128>,
        queue: Queue,
    }

    fn fake(frames: usize, frame_size: usize) -> FakeRing {
        let mut mem = vec![0u128; frames * frame_size / 16];
        // SAFETY: the Vec is 16-aligned, frames * frame_size bytes, and
        // kept alive (and unmoved: its heap buffer) beside the queue.
        let ring = unsafe { Ring::new(mem.as_mut_ptr().cast(), frame_size, frames) };
        FakeRing {
            _mem: mem,
            queue: Queue::new(ring),
        }
    }

    fn frame(tag: u8, len: usize) -> Vec<u8> {
        vec![tag; len]
    }

    fn data(q: &Queue, i: usize) -> Vec<u8> {
        let len = q.ring.len(i) as usize;
        let h = q.ring.header(i).cast::<u8>();
        // SAFETY: frame i is inside the fake ring and len ≤ capacity.
        unsafe { std::slice::from_raw_parts(h.add(DATA_OFFSET), len) }.to_vec()
    }

    #[test]
    fn queue_tracks_the_kernel_and_reclaims_in_order() {
        let mut f = fake(4, 128);
        let q = &mut f.queue;
        for t in 1..=4 {
            assert!(!q.full());
            q.push(&frame(t, 20 + t as usize));
        }
        assert!(q.full());
        assert_eq!((q.inflight, q.pending, q.next), (4, 4, 0));
        assert_eq!(data(q, 2), frame(3, 23));
        assert_eq!(q.ring.status(2), SEND_REQUEST);
        // The kernel takes frames 0 and 1; 0 completes, 1 is still on the
        // wire.
        q.ring.publish(0, AVAILABLE);
        q.ring.publish(1, SENDING);
        q.track_kernel();
        assert_eq!(q.pending, 2);
        assert!(!q.refused());
        assert!(q.reclaim());
        assert_eq!(q.inflight, 3);
        // Frame 2 completes before 1: reclaim waits for 1 (ring order).
        q.ring.publish(2, AVAILABLE | libc::TP_STATUS_TS_SOFTWARE);
        q.track_kernel();
        assert_eq!(q.pending, 1);
        assert!(!q.reclaim());
        q.ring.publish(1, AVAILABLE);
        assert!(q.reclaim());
        assert_eq!(q.inflight, 1, "frame 3 is still pending");
        assert_eq!((q.packets, q.bytes), (4, 21 + 22 + 23 + 24));
        // Wrap around.
        q.push(&frame(5, 25));
        assert_eq!((q.next, q.inflight, q.pending), (1, 2, 2));
        assert_eq!(data(q, 0), frame(5, 25));
    }

    #[test]
    fn refused_frame_is_dropped_and_the_rest_moves_back() {
        let mut f = fake(4, 128);
        let q = &mut f.queue;
        // Start near the end of the ring so the shift wraps.
        for t in 1..=2 {
            q.push(&frame(t, 20));
        }
        q.ring.publish(0, AVAILABLE);
        q.ring.publish(1, AVAILABLE);
        q.track_kernel();
        q.reclaim();
        assert_eq!((q.next, q.inflight), (2, 0));
        for t in 3..=6 {
            q.push(&frame(t, 30 + t as usize));
        }
        // Slots 2, 3, 0, 1 hold frames 3..=6. The kernel sends 3 and
        // refuses 4 (slot 3), halting there.
        q.ring.publish(2, AVAILABLE);
        q.ring.publish(3, WRONG_FORMAT);
        q.track_kernel();
        assert!(q.refused());
        assert_eq!(q.pending, 3);
        q.drop_refused();
        assert!(!q.refused());
        assert_eq!((q.next, q.inflight, q.pending), (1, 3, 2));
        assert_eq!(data(q, 3), frame(5, 35));
        assert_eq!(data(q, 0), frame(6, 36));
        assert_eq!(q.ring.status(3), SEND_REQUEST);
        assert_eq!(q.ring.status(0), SEND_REQUEST);
        assert_eq!(q.ring.status(1), AVAILABLE);
        assert_eq!(q.rejected, 1);
        assert_eq!((q.packets, q.bytes), (5, 40 + 33 + 35 + 36));
        // The last queued frame refused: nothing to move.
        q.ring.publish(3, AVAILABLE);
        q.ring.publish(0, WRONG_FORMAT);
        q.track_kernel();
        assert!(q.refused());
        q.drop_refused();
        assert_eq!((q.next, q.inflight, q.pending, q.rejected), (0, 2, 0, 2));
        assert_eq!(q.ring.status(0), AVAILABLE);
        assert!(q.reclaim());
        assert_eq!(q.inflight, 0);
        assert_eq!((q.packets, q.bytes), (4, 40 + 33 + 35));
    }
}
