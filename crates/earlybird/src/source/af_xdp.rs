//! Live capture through an AF_XDP socket (`--capture af-xdp`): the frames
//! of one receive queue of an interface land in memory shared with the
//! kernel (the UMEM) and are read there in place.
//!
//! Contract:
//! - [`open`] opens one XDP socket on each receive queue asked for
//!   ([`rx_queues`] says how many the interface has): each maps a UMEM of
//!   `frames` chunks of [`FRAME`] bytes, has a fill ring and a receive
//!   ring of `frames` entries (and the completion ring the kernel asks
//!   for), asks for `need_wakeup`, and binds without forcing a mode: the
//!   kernel takes zero-copy where the driver offers it and copy mode
//!   otherwise (veth); [`Xsk::mode`] says which it took.
//! - The program that sends each queue's frames to its socket is
//!   assembled here (no compiler, nothing to build): it puts [`META`]
//!   bytes of metadata in front of the frame (the stamps below), reads the
//!   frame's receive queue and redirects to the socket of that queue in an
//!   XSKMAP, passing the frame on to the host's stack when there is none.
//!   One program serves every socket of a run. It is attached through a
//!   BPF link (driver mode, else generic), which the kernel takes off the
//!   interface when its last descriptor is closed: when the process ends,
//!   also by SIGKILL.
//! - Reading: [`Xsk::take`] waits for the receive ring (while frames keep
//!   coming, it first sleeps up to 200 µs so that they come in hundreds,
//!   not in the dozens the kernel wakes a reader for; a batch stamp is
//!   then as late); a take is at most a quarter of the UMEM's chunks;
//!   the frames taken are handed out as offsets into the UMEM, and given
//!   back to the fill ring, in one step, when the caller is done with them
//!   ([`Xsk::release`]). A descriptor that points outside the UMEM is
//!   counted ([`Xsk::bad`]) and skipped; nothing panics.
//! - Stamps: XDP descriptors carry no time, so the program writes two in
//!   the frame's metadata, which the kernel copies into the UMEM in front
//!   of the frame: the driver's receive stamp, from kfunc
//!   `bpf_xdp_metadata_rx_timestamp` (found in the kernel's BTF,
//!   `super::btf`; the program is then bound to the device, which needs
//!   driver mode: where it cannot load or attach, a program without it
//!   is), and the kernel's clock (`CLOCK_BOOTTIME`) when the program ran
//!   on the frame, turned into the system clock with the two clocks'
//!   difference read at each take. A frame gets the driver's stamp when
//!   it is not 0 ([`Stamp::Driver`]; veth's is the skb's hardware stamp,
//!   0), else the kernel's ([`Stamp::Kernel`]), else, when the frame came
//!   without metadata, the system clock read when the take began
//!   ([`Stamp::Batch`]).
//! - Safety: AF_XDP takes the frames away from the host's stack. An
//!   interface that has an IPv4 address or an IPv6 address other than a
//!   link-local one is refused unless the caller says it may take its
//!   traffic. Every failure is an [`Error::Interface`] that says why and
//!   names `--capture af-packet`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::netdev::RingMap;
use super::PacketRef;
use crate::decode::LinkType;
use crate::error::{Error, Result};

/// Bytes of a UMEM chunk (one frame each).
pub const FRAME: usize = 2048;

/// Where a frame's stamp came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// The driver's receive stamp (`bpf_xdp_metadata_rx_timestamp`).
    Driver,
    /// The kernel's clock when the XDP program ran on the frame.
    Kernel,
    /// No metadata: the time the batch was taken.
    Batch,
}

/// Clock `id` in nanoseconds.
fn clock_ns(id: libc::clockid_t) -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a timespec to fill.
    unsafe { libc::clock_gettime(id, &mut t) };
    // (time_t and c_long are i64 on the 64-bit Linux targets AF_XDP runs on.)
    t.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec)
}

/// What the kernel's socket statistics say (`XDP_STATISTICS`).
///
/// The counters overlap: in copy mode (veth, generic XDP) a frame that
/// finds the fill ring empty is counted in `rx_dropped` *and* in
/// `fill_ring_empty` (net/xdp/xsk.c: the chunk allocation counts the empty
/// fill ring, its caller the drop). With zero-copy the driver counts an
/// empty fill ring when it refills its own ring, and the frames the NIC
/// then drops are in the NIC's counters, not here. So the frames this
/// socket lost are [`XskStats::lost`], never a sum with `fill_ring_empty`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames dropped for reasons other than a full receive ring: no free
    /// chunk in the fill ring (copy mode) or a frame too big for a chunk.
    pub rx_dropped: u64,
    /// Frames dropped because the receive ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring had no free chunk (in copy mode each of these
    /// frames is in `rx_dropped` too).
    pub fill_ring_empty: u64,
    /// Descriptors the kernel found invalid.
    pub rx_invalid: u64,
}

impl XskStats {
    /// The frames the socket dropped: `rx_dropped + rx_ring_full` (an
    /// empty fill ring is already in `rx_dropped`, see the type's docs).
    pub fn lost(&self) -> u64 {
        self.rx_dropped.saturating_add(self.rx_ring_full)
    }
}

/// One mapped ring of a socket (receive here, transmit in
/// `af_xdp_tx.rs`): its producer and consumer words and its entries.
pub(super) struct XRing {
    pub(super) map: RingMap,
    pub(super) producer: usize,
    pub(super) consumer: usize,
    pub(super) flags: usize,
    pub(super) desc: usize,
    pub(super) mask: u32,
}

impl XRing {
    pub(super) fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: the offsets the kernel gave are 4-aligned words inside
        // the mapping, shared with the kernel and accessed atomically.
        unsafe { AtomicU32::from_ptr(self.map.ptr().add(at).cast()) }
    }
    fn producer(&self) -> &AtomicU32 {
        self.word(self.producer)
    }
    fn consumer(&self) -> &AtomicU32 {
        self.word(self.consumer)
    }
    fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// An open XDP socket with its rings, program and link (see the module
/// docs). The UMEM and the socket itself belong to the caller.
pub struct Xsk {
    fd: RawFd,
    umem_len: usize,
    rx: XRing,
    fill: XRing,
    /// Kept mapped while the socket lives (the kernel asks for one).
    _completion: XRing,
    /// The receive ring's consumer position (entries taken so far).
    cons: u32,
    /// Entries of the current take.
    taken: u32,
    /// Of those, handed out so far.
    walked: u32,
    stamp: u64,
    /// `CLOCK_REALTIME` minus `CLOCK_BOOTTIME` when the take began, in ns.
    boot_to_real: i64,
    /// The stamp each frame of the last batch got, in its order.
    kinds: Vec<Stamp>,
    numbered: u64,
    bad: u64,
    zero_copy: bool,
    /// The program that feeds the sockets of the run (set once every
    /// socket is open; the last socket dropped detaches it).
    attached: Option<Arc<Attached>>,
    /// How long a take that finds the receive ring empty while frames
    /// are coming sleeps before it looks again ([`linger`]).
    linger: std::time::Duration,
    /// The last take had frames.
    flowing: bool,
}

/// The longest a take lingers: frames then come in takes of about this
/// long's worth, as AF_PACKET's blocks hand over thousands at a time.
const LINGER_MAX: std::time::Duration = std::time::Duration::from_micros(200);

/// The fastest a 10 GbE port sends minimal frames, packets a second.
const LINE_RATE_10G: u64 = 14_880_952;

/// How long a socket of `frames` UMEM chunks lingers: [`LINGER_MAX`],
/// or less where a quarter of its chunks would fill at 10 GbE's line
/// rate of minimal frames before then (the fill ring must never run dry
/// while the thread sleeps).
fn linger(frames: u32) -> std::time::Duration {
    let quarter =
        std::time::Duration::from_nanos(u64::from(frames / 4) * 1_000_000_000 / LINE_RATE_10G);
    quarter.min(LINGER_MAX)
}

// SAFETY: the mappings are owned by this value alone; the kernel writes
// only what the rings hand it.
unsafe impl Send for Xsk {}

/// BPF commands and constants (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Queues the XSKMAP has room for.
const MAP_QUEUES: u32 = 64;

/// One eBPF instruction, as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Insn {
    pub(super) code: u8,
    pub(super) regs: u8,
    pub(super) off: i16,
    pub(super) imm: i32,
}

/// Bytes of metadata the program puts in front of each frame: the
/// driver's receive stamp (0 when it gave none) and the kernel's clock
/// (`CLOCK_BOOTTIME`) when the program ran, two native-endian u64.
pub const META: usize = 16;

/// The program for the XSKMAP `map_fd`. It makes [`META`] bytes of room in
/// front of the frame (`bpf_xdp_adjust_meta`), writes there the receive
/// stamp of kfunc `bpf_xdp_metadata_rx_timestamp` (type id `kfunc`, when
/// given; 0 otherwise or when the driver has none) and the time of
/// `bpf_ktime_get_boot_ns`, then redirects the frame to the socket of its
/// receive queue (`XDP_PASS` when the queue has none). A frame with no
/// room for the metadata is redirected without it.
fn program(map_fd: RawFd, kfunc: Option<u32>) -> Vec<Insn> {
    let i = |code, regs, off, imm| Insn {
        code,
        regs,
        off,
        imm,
    };
    let mut p = vec![
        // r6 = ctx.
        i(0xbf, 0x16, 0, 0),
        // r0 = bpf_xdp_adjust_meta(ctx, -META) (helper 54).
        i(0xb7, 0x02, 0, -(META as i32)),
        i(0x85, 0, 0, 54),
        // if r0 != 0 goto redirect (the offset is set below).
        i(0x55, 0x00, 0, 0),
        // r7 = ctx->data_meta; r3 = ctx->data; if r7 + META > r3 goto
        // redirect.
        i(0x61, 0x67, 8, 0),
        i(0x61, 0x63, 0, 0),
        i(0xbf, 0x74, 0, 0),
        i(0x07, 0x04, 0, META as i32),
        i(0x2d, 0x34, 0, 0),
        // meta[0] = 0; meta[1] = bpf_ktime_get_boot_ns() (helper 125).
        i(0x7a, 0x07, 0, 0),
        i(0x85, 0, 0, 125),
        i(0x7b, 0x07, 8, 0),
    ];
    if let Some(id) = kfunc {
        // bpf_xdp_metadata_rx_timestamp(ctx, &meta[0]): a kfunc call
        // (BPF_PSEUDO_KFUNC_CALL); it writes nothing when it fails.
        p.push(i(0xbf, 0x61, 0, 0));
        p.push(i(0xbf, 0x72, 0, 0));
        p.push(i(0x85, 0x20, 0, id as i32));
    }
    let redirect = p.len() as i16;
    // The two jumps to `redirect` (offsets count from the next instruction).
    p[3].off = redirect - 4;
    p[8].off = redirect - 9;
    p.extend([
        // r2 = ctx->rx_queue_index.
        i(0x61, 0x62, 16, 0),
        // BPF_LD | BPF_DW | BPF_IMM with BPF_PSEUDO_MAP_FD: r1 = map.
        i(0x18, 0x11, 0, map_fd),
        i(0, 0, 0, 0),
        // r3 = XDP_PASS (taken when the queue has no socket).
        i(0xb7, 0x03, 0, 2),
        // return bpf_redirect_map(r1, r2, r3) (helper 51).
        i(0x85, 0, 0, 51),
        i(0x95, 0, 0, 0),
    ]);
    p
}

/// The `bpf` system call over an attribute block of 128 bytes.
pub(super) fn bpf(cmd: libc::c_int, attr: &mut [u8; 128]) -> std::io::Result<libc::c_long> {
    // SAFETY: the attribute block is as large as the kernel reads for
    // these commands; unused fields are zero.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(super) fn put32(a: &mut [u8; 128], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

pub(super) fn put64(a: &mut [u8; 128], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

pub(super) fn fd_of(r: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor the kernel just returned to this process.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// An error that says where AF_XDP failed and names the other capture.
fn xdp_error(name: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Interface {
        name: name.into(),
        reason: format!("AF_XDP: {what}: {e}; --capture af-packet captures without it"),
    }
}

/// Whether `name` has an IPv4 address or a routable IPv6 address.
fn has_addresses(name: &str) -> bool {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return false;
    }
    let mut found = false;
    let mut at = list;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name of the list.
        let n = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if n.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: every sockaddr starts with its family.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET {
            found = true;
        } else if family == libc::AF_INET6 {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            let b = a.sin6_addr.s6_addr;
            let link_local = b[0] == 0xfe && b[1] & 0xc0 == 0x80;
            found |= !link_local;
        }
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

fn set<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> std::io::Result<()> {
    super::netdev::set_opt(fd, libc::SOL_XDP, opt, v)
}

/// Maps one of the socket's rings.
fn ring(
    fd: &OwnedFd,
    name: &str,
    off: &libc::xdp_ring_offset,
    entries: u32,
    entry: usize,
    pgoff: libc::off_t,
) -> Result<XRing> {
    map_ring(fd, name, off, entries, entry, pgoff).map_err(|e| xdp_error(name, "mapping a ring", e))
}

/// Maps ring `off` of `entries` entries of `entry` bytes at `pgoff` (the
/// error is the mapping's own).
pub(super) fn map_ring(
    fd: &OwnedFd,
    name: &str,
    off: &libc::xdp_ring_offset,
    entries: u32,
    entry: usize,
    pgoff: libc::off_t,
) -> Result<XRing> {
    let len = off.desc as usize + entries as usize * entry;
    let map = RingMap::at(fd, name, len, pgoff, "AF_XDP ring mapping")?;
    Ok(XRing {
        map,
        producer: off.producer as usize,
        consumer: off.consumer as usize,
        flags: off.flags as usize,
        desc: off.desc as usize,
        mask: entries - 1,
    })
}

/// `ETHTOOL_GCHANNELS` (linux/ethtool.h) and its `struct ethtool_channels`.
const ETHTOOL_GCHANNELS: u32 = 0x3c;

#[repr(C)]
#[derive(Default)]
struct Channels {
    cmd: u32,
    max: [u32; 4],
    rx: u32,
    tx: u32,
    other: u32,
    combined: u32,
}

/// The receive queues of interface `name` (its channels: receive-only or
/// combined, whichever it has more of); 1 when the driver does not say.
pub fn rx_queues(fd: &OwnedFd, name: &str) -> u32 {
    let mut c = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Channels::default()
    };
    match super::hwstamp::ifreq_data(
        fd,
        name,
        libc::SIOCETHTOOL,
        (&mut c as *mut Channels).cast(),
    ) {
        Ok(()) => c.rx.max(c.combined).max(1),
        Err(_) => 1,
    }
}

/// One socket of [`open`]: its descriptor, its UMEM and its rings.
pub type Opened = (OwnedFd, RingMap, Xsk);

/// Opens one XDP socket on each of queues `0..queues` of interface `name`
/// (index `ifindex`), each over a UMEM of its own of `frames` chunks (a
/// power of two), and one program that sends each queue's frames to its
/// socket; see the module docs.
pub fn open(
    name: &str,
    ifindex: libc::c_int,
    frames: u32,
    take_traffic: bool,
    queues: u32,
) -> Result<Vec<Opened>> {
    if !take_traffic && has_addresses(name) {
        return Err(Error::Interface {
            name: name.into(),
            reason: "AF_XDP takes the packets away from the host's stack, and this interface \
                     has addresses: use it on a mirror or a dedicated port, give \
                     --xdp-take-traffic to take its traffic anyway, or --capture af-packet"
                .into(),
        });
    }
    if queues == 0 || queues > MAP_QUEUES {
        return Err(xdp_error(
            name,
            "queues",
            format!("{queues} receive queues (1 to {MAP_QUEUES} are read)"),
        ));
    }
    let mut opened = Vec::new();
    for q in 0..queues {
        opened.push(socket(name, ifindex, frames, q)?);
    }
    let fds: Vec<RawFd> = opened.iter().map(|o| o.0.as_raw_fd()).collect();
    let attached = Arc::new(attach(name, ifindex, &fds)?);
    for o in &mut opened {
        o.2.attached = Some(attached.clone());
    }
    Ok(opened)
}

/// The XSKMAP, the program and its link, shared by the sockets of a run.
struct Attached {
    generic: bool,
    /// The program asks the driver for its receive stamps.
    driver_stamps: bool,
    // Dropped last: the link detaches the program from the interface.
    _map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
}

/// One XDP socket bound to `queue`, its fill ring full.
fn socket(name: &str, ifindex: libc::c_int, frames: u32, queue: u32) -> Result<Opened> {
    let frames = frames.clamp(64, 1 << 18).next_power_of_two();
    let umem_len = frames as usize * FRAME;
    let umem = RingMap::anonymous(name, umem_len)?;
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
        len: umem_len as u64,
        chunk_size: FRAME as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    set(&fd, libc::XDP_UMEM_REG, &reg).map_err(|e| xdp_error(name, "registering the UMEM", e))?;
    for (opt, what) in [
        (libc::XDP_UMEM_FILL_RING, "the fill ring"),
        (libc::XDP_UMEM_COMPLETION_RING, "the completion ring"),
        (libc::XDP_RX_RING, "the receive ring"),
    ] {
        set(&fd, opt, &frames).map_err(|e| xdp_error(name, what, e))?;
    }
    let off = offsets(&fd, name)?;
    let rx = ring(&fd, name, &off.rx, frames, 16, libc::XDP_PGOFF_RX_RING)?;
    let fill = ring(
        &fd,
        name,
        &off.fr,
        frames,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
    )?;
    let completion = ring(
        &fd,
        name,
        &off.cr,
        frames,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
    )?;
    // Every chunk to the kernel.
    for k in 0..frames {
        // SAFETY: entry k of the fill ring, inside its mapping.
        unsafe {
            let slot = fill.map.ptr().add(fill.desc + 8 * k as usize).cast::<u64>();
            slot.write(u64::from(k) * FRAME as u64);
        }
    }
    fill.producer().store(frames, Ordering::Release);
    bind_queue(&fd, name, ifindex, queue)?;
    let zero_copy = zero_copy(&fd);
    let xsk = Xsk {
        fd: raw,
        umem_len,
        rx,
        fill,
        _completion: completion,
        cons: 0,
        taken: 0,
        walked: 0,
        stamp: 0,
        boot_to_real: 0,
        kinds: Vec::new(),
        numbered: 0,
        bad: 0,
        zero_copy,
        attached: None,
        linger: linger(frames),
        flowing: false,
    };
    Ok((fd, umem, xsk))
}

/// The socket's ring offsets (`XDP_MMAP_OFFSETS`).
pub(crate) fn offsets(fd: &OwnedFd, name: &str) -> Result<libc::xdp_mmap_offsets> {
    // SAFETY: plain-data struct, zero is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: an xdp_mmap_offsets of the size given.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(xdp_error(name, "reading the ring offsets", e));
    }
    Ok(off)
}

/// Binds the socket to `queue` of the interface, asking for `need_wakeup`.
pub(crate) fn bind_queue(fd: &OwnedFd, name: &str, ifindex: libc::c_int, queue: u32) -> Result<()> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_USE_NEED_WAKEUP,
        sxdp_ifindex: ifindex as u32,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // A queue still holding the UMEM of a socket that was just closed (the
    // kernel frees it later, in deferred work) refuses with EBUSY: a replay
    // or capture that follows another on the queue waits up to a second.
    let start = std::time::Instant::now();
    loop {
        // SAFETY: a sockaddr_xdp of the size given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY)
            && start.elapsed() < std::time::Duration::from_secs(1)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let what = if e.raw_os_error() == Some(libc::EBUSY) {
            format!("binding to queue {queue} (another XDP socket holds it)")
        } else {
            format!("binding to queue {queue}")
        };
        return Err(xdp_error(name, &what, e));
    }
}

/// Whether the kernel bound the socket in zero-copy mode.
pub(crate) fn zero_copy(fd: &OwnedFd) -> bool {
    // SAFETY: plain-data struct.
    let mut opts: libc::xdp_options = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
    // SAFETY: an xdp_options of the size given.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            (&mut opts as *mut libc::xdp_options).cast(),
            &mut len,
        )
    };
    r == 0 && opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
}

/// Creates the XSKMAP holding socket `xsks[q]` at queue q, loads the
/// program and links it to the interface (driver mode, else generic mode).
fn attach(name: &str, ifindex: libc::c_int, xsks: &[RawFd]) -> Result<Attached> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, BPF_MAP_TYPE_XSKMAP);
    put32(&mut a, 4, 4);
    put32(&mut a, 8, 4);
    put32(&mut a, 12, MAP_QUEUES);
    let map = fd_of(
        bpf(BPF_MAP_CREATE, &mut a)
            .map_err(|e| xdp_error(name, "creating the XSKMAP (needs CAP_BPF or root)", e))?,
    );
    for (q, &xsk) in xsks.iter().enumerate() {
        let (key, value) = (q as u32, xsk as u32);
        let mut a = [0u8; 128];
        put32(&mut a, 0, map.as_raw_fd() as u32);
        put64(&mut a, 8, &key as *const u32 as u64);
        put64(&mut a, 16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a)
            .map_err(|e| xdp_error(name, "putting the socket in the XSKMAP", e))?;
    }
    // The driver's receive stamp needs a program bound to the device, which
    // runs in driver mode only; without it (or where it cannot load or
    // attach) the program stamps with the kernel's clock alone.
    if let Some(id) = super::btf::kernel_func_id("bpf_xdp_metadata_rx_timestamp") {
        if let Ok(prog) = load(name, map.as_raw_fd(), Some((id, ifindex))) {
            if let Ok(link) = link(&prog, ifindex, XDP_FLAGS_DRV_MODE) {
                return Ok(Attached {
                    generic: false,
                    driver_stamps: true,
                    _map: map,
                    _prog: prog,
                    _link: link,
                });
            }
        }
    }
    let prog = load(name, map.as_raw_fd(), None)?;
    let mut last = None;
    for (flags, generic) in [(XDP_FLAGS_DRV_MODE, false), (XDP_FLAGS_SKB_MODE, true)] {
        match link(&prog, ifindex, flags) {
            Ok(link) => {
                return Ok(Attached {
                    generic,
                    driver_stamps: false,
                    _map: map,
                    _prog: prog,
                    _link: link,
                })
            }
            Err(e) => last = Some(e),
        }
    }
    Err(xdp_error(
        name,
        "attaching the XDP program (BPF link)",
        last.map_or_else(String::new, |e| e.to_string()),
    ))
}

/// `BPF_F_XDP_DEV_BOUND_ONLY` (linux/bpf.h): a program bound to one device,
/// which may call its driver's metadata kfuncs.
const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;

/// Loads the program for XSKMAP `map_fd`; with `kfunc` = (type id,
/// interface index), bound to that interface and reading its driver's
/// receive stamps.
fn load(name: &str, map_fd: RawFd, kfunc: Option<(u32, libc::c_int)>) -> Result<OwnedFd> {
    let insns = program(map_fd, kfunc.map(|k| k.0));
    let license = c"GPL";
    let mut log = vec![0u8; 4096];
    let mut a = [0u8; 128];
    put32(&mut a, 0, BPF_PROG_TYPE_XDP);
    put32(&mut a, 4, insns.len() as u32);
    put64(&mut a, 8, insns.as_ptr() as u64);
    put64(&mut a, 16, license.as_ptr() as u64);
    put32(&mut a, 24, 1);
    put32(&mut a, 28, log.len() as u32);
    put64(&mut a, 32, log.as_mut_ptr() as u64);
    a[48..56].copy_from_slice(b"eb_xsk\0\0");
    if let Some((_, ifindex)) = kfunc {
        put32(&mut a, 44, BPF_F_XDP_DEV_BOUND_ONLY);
        put32(&mut a, 64, ifindex as u32);
    }
    put32(&mut a, 68, BPF_XDP);
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => Ok(fd_of(fd)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            Err(xdp_error(
                name,
                "loading the XDP program",
                format!("{e} {}", text.trim()),
            ))
        }
    }
}

/// Links `prog` to interface `ifindex` in XDP mode `flags`.
fn link(prog: &OwnedFd, ifindex: libc::c_int, flags: u32) -> std::io::Result<OwnedFd> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, prog.as_raw_fd() as u32);
    put32(&mut a, 4, ifindex as u32);
    put32(&mut a, 8, BPF_XDP);
    put32(&mut a, 12, flags);
    bpf(BPF_LINK_CREATE, &mut a).map(fd_of)
}

impl Xsk {
    /// How the socket and program run: `zero-copy` or `copy` mode,
    /// `driver` or `generic` XDP.
    pub fn mode(&self) -> String {
        format!(
            "{} mode, {} XDP",
            if self.zero_copy { "zero-copy" } else { "copy" },
            if self.attached.as_ref().is_some_and(|a| a.generic) {
                "generic"
            } else {
                "driver"
            }
        )
    }

    /// Waits up to `timeout_ms` for frames in the receive ring, or for
    /// `wake` (an eventfd) to be readable; takes every frame there (their
    /// count, 0 when none came). Each take must be released
    /// ([`Xsk::release`]) before the next.
    ///
    /// When the last take had frames and the ring is empty, it first
    /// sleeps for the socket's linger (at most [`LINGER_MAX`]) and takes
    /// what came meanwhile: the kernel wakes a socket's reader for every
    /// few dozen frames it delivers, and a sleep and a wake-up for each
    /// such handful cost more than reading them.
    pub fn take(&mut self, timeout_ms: i32, wake: Option<RawFd>) -> std::io::Result<u32> {
        let mut ready = self.ready();
        if ready == 0 && self.flowing && !self.linger.is_zero() {
            self.kick();
            std::thread::sleep(self.linger);
            ready = self.ready();
        }
        if ready == 0 {
            self.kick();
            // The socket, and the eventfd that says another shard sent
            // frames (see `super::xdp_mesh`).
            let mut pfd = [
                libc::pollfd {
                    fd: self.fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: wake.unwrap_or(-1),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two pollfds (a negative descriptor is skipped).
            let r = unsafe { libc::poll(pfd.as_mut_ptr(), 2, timeout_ms) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            if pfd[0].revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                return Err(std::io::Error::other("the XDP socket failed"));
            }
            ready = self.ready();
        }
        self.flowing = ready > 0;
        // A take holds its chunks until it is released: at most a quarter
        // of them, so that the kernel always has the rest to fill while a
        // large take is read (the others wait in the receive ring).
        self.taken = ready.min(((self.rx.mask + 1) / 4).max(1));
        self.walked = 0;
        let real = clock_ns(libc::CLOCK_REALTIME);
        self.stamp = real.max(0) as u64;
        self.boot_to_real = real - clock_ns(libc::CLOCK_BOOTTIME);
        Ok(self.taken)
    }

    /// Entries the kernel has put in the receive ring and not yet taken.
    fn ready(&self) -> u32 {
        self.rx
            .producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.cons)
    }

    /// Wakes the driver when the fill ring asks for it (`need_wakeup`).
    fn kick(&self) {
        if self.fill.needs_wakeup() {
            // SAFETY: a zero-length receive that only wakes the driver.
            unsafe {
                libc::recvfrom(
                    self.fd,
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Fills `out` (cleared first) with up to `max` frames of the current
    /// take, as offsets into `umem` (the socket's UMEM), stamped from the
    /// metadata the program wrote in front of each (see the module docs);
    /// returns how many (0 at its end). [`Xsk::kinds`] says which stamp
    /// each got.
    pub fn next_batch(&mut self, umem: &mut [u8], out: &mut Vec<PacketRef>, max: usize) -> usize {
        out.clear();
        self.kinds.clear();
        while self.walked < self.taken && out.len() < max {
            let k = self.cons.wrapping_add(self.walked) & self.rx.mask;
            self.walked += 1;
            // SAFETY: entry k of the receive ring, inside its mapping; the
            // kernel does not write it until the consumer moves past it.
            let d: libc::xdp_desc = unsafe {
                self.rx
                    .map
                    .ptr()
                    .add(self.rx.desc + 16 * k as usize)
                    .cast::<libc::xdp_desc>()
                    .read()
            };
            let (at, len) = (d.addr as usize, d.len as usize);
            if at.checked_add(len).is_none_or(|e| e > self.umem_len) {
                self.bad += 1;
                continue;
            }
            self.numbered += 1;
            let (ts, kind) = self.stamp_of(umem, at);
            self.kinds.push(kind);
            out.push(PacketRef {
                offset: at,
                caplen: d.len,
                orig_len: d.len,
                ts,
                link: LinkType::Ethernet,
                number: self.numbered,
            });
        }
        out.len()
    }

    /// The stamp of the frame at `at` in `umem` from the metadata in front
    /// of it, which is zeroed once read (a chunk's next frame may come
    /// without metadata). A frame too close to its chunk's start to have
    /// metadata, or whose metadata is zero, gets the take's batch stamp.
    fn stamp_of(&self, umem: &mut [u8], at: usize) -> (u64, Stamp) {
        if at % FRAME < META || at > umem.len() {
            return (self.stamp, Stamp::Batch);
        }
        let meta = &mut umem[at - META..at];
        let word = |k: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&meta[8 * k..8 * k + 8]);
            u64::from_ne_bytes(w)
        };
        let (driver, boot) = (word(0), word(1));
        meta.fill(0);
        if driver != 0 {
            (driver, Stamp::Driver)
        } else if boot != 0 {
            let real = (boot as i64).saturating_add(self.boot_to_real);
            (real.max(0) as u64, Stamp::Kernel)
        } else {
            (self.stamp, Stamp::Batch)
        }
    }

    /// The stamp each frame of the last batch got ([`Xsk::next_batch`]),
    /// in its order.
    pub fn kinds(&self) -> &[Stamp] {
        &self.kinds
    }

    /// Whether the program asks the driver for its receive stamps.
    pub fn driver_stamps(&self) -> bool {
        self.attached.as_ref().is_some_and(|a| a.driver_stamps)
    }

    /// Gives every chunk of the current take back to the fill ring and
    /// moves the receive ring on past it.
    pub fn release(&mut self) {
        let n = self.taken;
        let prod = self.fill.producer().load(Ordering::Relaxed);
        for j in 0..n {
            let k = self.cons.wrapping_add(j) & self.rx.mask;
            // SAFETY: entries inside the two rings' mappings: the chunk of
            // receive entry k goes back to the fill ring (which has room
            // for every chunk, so never overflows).
            unsafe {
                let d = self
                    .rx
                    .map
                    .ptr()
                    .add(self.rx.desc + 16 * k as usize)
                    .cast::<libc::xdp_desc>()
                    .read();
                let chunk = d.addr & !(FRAME as u64 - 1);
                let f = prod.wrapping_add(j) & self.fill.mask;
                self.fill
                    .map
                    .ptr()
                    .add(self.fill.desc + 8 * f as usize)
                    .cast::<u64>()
                    .write(chunk.min((self.umem_len - FRAME) as u64));
            }
        }
        self.fill
            .producer()
            .store(prod.wrapping_add(n), Ordering::Release);
        self.cons = self.cons.wrapping_add(n);
        self.rx.consumer().store(self.cons, Ordering::Release);
        self.taken = 0;
        self.walked = 0;
    }

    /// Frames the current take holds.
    pub fn taken(&self) -> u32 {
        self.taken
    }

    /// Descriptors that pointed outside the UMEM.
    pub fn bad(&self) -> u64 {
        self.bad
    }

    /// Frames handed out so far.
    pub fn received(&self) -> u64 {
        self.numbered
    }

    /// The kernel's statistics of the socket.
    pub fn stats(&self) -> XskStats {
        // SAFETY: plain-data struct.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: an xdp_statistics of the size given.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut s as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return XskStats::default();
        }
        XskStats {
            rx_dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            fill_ring_empty: s.rx_fill_ring_empty_descs,
            rx_invalid: s.rx_invalid_descs,
        }
    }
}
