//! Sending from the kernel (`earlybird replay --capture xdp-live`): the
//! frames of capture files are put in a BPF array map and a small XDP
//! program, run by the kernel in its live-frame test mode
//! (`BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`, kernel 5.18 or
//! later), writes frame k into each page it is handed and redirects it out
//! of the interface (`bpf_redirect`). No socket, no ring and no copy from
//! user space per frame: one system call sends thousands.
//!
//! Contract:
//! - Input: capture files, [`ReplayOptions`] (interface, `pps`, `loops`;
//!   one queue) and a stop flag. The Ethernet frames of every file, in
//!   order, are loaded once (the counts of what is left out are those of
//!   `replay`: another link type, too short, longer than the interface's
//!   MTU + 14 (+ 4 when 802.1Q-tagged) or than [`MAX_FRAME`]). Their map
//!   takes at most [`MAX_MAP_BYTES`]; more is an [`Error::Config`].
//! - Output: frame k of the run is frame k mod N of the files (N frames),
//!   byte for byte, `loops` × N frames in all, and a [`ReplayReport`]
//!   whose `packets_sent`/`bytes_sent` are what the program handed to the
//!   redirect (counted in the map by the program itself, so an interrupted
//!   run is counted exactly). A frame the program could not write is
//!   counted in `rejected`.
//! - What the kernel does with a redirected frame is the device's: on veth
//!   the frame reaches the peer only when the peer runs XDP (a program of
//!   its own, or an AF_XDP capture's) or has GRO on; otherwise veth drops
//!   it and counts it in the sending end's `ethtool -S` (`xdp_xmit_err`),
//!   not here. The receive work of the peer runs on the sending core, and
//!   on veth the peer's receive queue is that core's number modulo its
//!   queue count: one sending core feeds one queue.
//! - Rate: without `pps` the kernel runs as fast as it can, in system
//!   calls of up to [`CALL_FRAMES`] frames; with `pps`, each call sends
//!   [`PACED_SECONDS`] worth of frames (at least one) at the kernel's
//!   speed and frame k leaves no earlier than start + k / pps: the rate is
//!   an average over bursts, not a steady rate. (A live run of more than
//!   a few frames cost the kernel 25–30 ms to set up and take down on a
//!   loaded 6.18 VM, so calls of a millisecond's worth reached 3 % of the
//!   rate asked.)
//! - Stop: the flag (raised by a signal, which also ends the kernel's loop
//!   early) stops before the next call.
//! - Failures: every failure names the interface; no privilege (CAP_BPF
//!   and CAP_NET_ADMIN, or root) and a kernel without live frames say so.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::af_packet_tx::Fit;
use super::af_xdp::{bpf, fd_of, put32, put64, Insn};
use super::netdev::{hw_type, ifindex, ioctl_ifreq, packet_socket};
use super::replay::{due_ns, elapsed_ns, wait_step, ReplayOptions, ReplayReport, Wait};
use super::{CaptureFile, BATCH};
use crate::decode::LinkType;
use crate::error::{Error, Result};

/// Longest frame sent (a page holds the frame, the kernel's headroom and
/// its tail; 3,000 bytes fit with room to spare on 4 KiB pages).
pub const MAX_FRAME: usize = 3000;
/// Most bytes the frames' map may take in the kernel.
pub const MAX_MAP_BYTES: usize = 512 << 20;
/// Most frames of one system call when no rate is asked.
pub const CALL_FRAMES: u32 = 1 << 20;
/// Seconds of frames at the rate asked that one system call sends.
pub const PACED_SECONDS: f64 = 0.1;
/// Frames the kernel runs between two sends of its batch. veth's peer
/// takes redirected frames into a ring of 256: batches of 256 (the most
/// the kernel takes) found it not yet drained and lost 0.7–0.9 % of the
/// frames there (`xdp_xmit_errors`), batches of 64 none, at the same rate
/// (10.0–10.7 Mpps into a veth dropping in XDP, 2.3–2.4 Mpps into
/// AF_PACKET, on a loaded 2-core VM).
const KERNEL_BATCH: u32 = 64;

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_TEST_RUN: libc::c_int = 10;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Bytes of the counters' map value: frames run, frames redirected, their
/// bytes (three native-endian u64).
const STATE: usize = 24;

fn live_error(name: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Interface {
        name: name.into(),
        reason: format!(
            "kernel sender (XDP live frames): {what}: {e}; --capture af-xdp or af-packet send without it"
        ),
    }
}

/// The program. Map `state` (one entry of [`STATE`] bytes) counts; map
/// `frames` holds N entries, each a native-endian u32 length followed by
/// the frame's bytes (`max_len` at most). For each run: c = runs so far
/// (then runs + 1), frame k = c mod N, the page's frame is resized to its
/// length (`bpf_xdp_adjust_tail`, from the length it has now: the kernel
/// may hand back a page as the last run left it) and overwritten with it
/// (`bpf_xdp_store_bytes`), the counters of sent frames and bytes grow,
/// and the frame is redirected to interface `ifindex`. Any failure drops
/// the frame (counted: runs - sent).
fn program(state: RawFd, frames: RawFd, n: u32, max_len: u32, ifindex: i32) -> Vec<Insn> {
    let i = |code, regs, off, imm| Insn {
        code,
        regs,
        off,
        imm,
    };
    let mut p = vec![
        // r6 = ctx.
        i(0xbf, 0x16, 0, 0),
        // *(u32 *)(r10 - 4) = 0; r2 = r10 - 4; r1 = state;
        // r0 = bpf_map_lookup_elem(r1, r2) (helper 1).
        i(0x62, 0x0a, -4, 0),
        i(0xbf, 0xa2, 0, 0),
        i(0x07, 0x02, 0, -4),
        i(0x18, 0x11, 0, state),
        i(0, 0, 0, 0),
        i(0x85, 0, 0, 1),
        // if r0 == 0 goto drop.
        i(0x15, 0x00, 0, 0),
        // r7 = r0; r1 = runs; r2 = r1 + 1; runs = r2.
        i(0xbf, 0x07, 0, 0),
        i(0x79, 0x71, 0, 0),
        i(0xbf, 0x12, 0, 0),
        i(0x07, 0x02, 0, 1),
        i(0x7b, 0x27, 0, 0),
        // r1 %= N; *(u32 *)(r10 - 8) = r1; r2 = r10 - 8; r1 = frames;
        // r0 = bpf_map_lookup_elem(r1, r2).
        i(0x97, 0x01, 0, n as i32),
        i(0x63, 0x1a, -8, 0),
        i(0xbf, 0xa2, 0, 0),
        i(0x07, 0x02, 0, -8),
        i(0x18, 0x11, 0, frames),
        i(0, 0, 0, 0),
        i(0x85, 0, 0, 1),
        // if r0 == 0 goto drop.
        i(0x15, 0x00, 0, 0),
        // r9 = r0; r8 = its length; if r8 > max_len goto drop;
        // if r8 < 14 goto drop.
        i(0xbf, 0x09, 0, 0),
        i(0x61, 0x98, 0, 0),
        i(0x25, 0x08, 0, max_len as i32),
        i(0xa5, 0x08, 0, 14),
        // r0 = bpf_xdp_get_buff_len(ctx) (helper 188).
        i(0xbf, 0x61, 0, 0),
        i(0x85, 0, 0, 188),
        // r0 = bpf_xdp_adjust_tail(ctx, r8 - r0) (helper 65).
        i(0xbf, 0x82, 0, 0),
        i(0x1f, 0x02, 0, 0),
        i(0xbf, 0x61, 0, 0),
        i(0x85, 0, 0, 65),
        // if r0 != 0 goto drop.
        i(0x55, 0x00, 0, 0),
        // r0 = bpf_xdp_store_bytes(ctx, 0, r9 + 4, r8) (helper 190).
        i(0xbf, 0x61, 0, 0),
        i(0xb7, 0x02, 0, 0),
        i(0xbf, 0x93, 0, 0),
        i(0x07, 0x03, 0, 4),
        i(0xbf, 0x84, 0, 0),
        i(0x85, 0, 0, 190),
        // if r0 != 0 goto drop.
        i(0x55, 0x00, 0, 0),
        // sent += 1; bytes += r8.
        i(0x79, 0x71, 8, 0),
        i(0x07, 0x01, 0, 1),
        i(0x7b, 0x17, 8, 0),
        i(0x79, 0x71, 16, 0),
        i(0x0f, 0x81, 0, 0),
        i(0x7b, 0x17, 16, 0),
        // return bpf_redirect(ifindex, 0) (helper 23).
        i(0xb7, 0x01, 0, ifindex),
        i(0xb7, 0x02, 0, 0),
        i(0x85, 0, 0, 23),
        i(0x95, 0, 0, 0),
    ];
    let drop = p.len() as i16;
    // Every conditional jump so far goes to `drop` (offsets count from the
    // next instruction).
    for (at, insn) in p.iter_mut().enumerate() {
        if matches!(insn.code, 0x15 | 0x25 | 0x55 | 0xa5) {
            insn.off = drop - at as i16 - 1;
        }
    }
    // drop: return XDP_DROP.
    p.push(i(0xb7, 0x00, 0, 1));
    p.push(i(0x95, 0, 0, 0));
    p
}

/// The frames of a run, each as its map value: a u32 length and the
/// bytes, `value` bytes per frame.
struct Frames {
    values: Vec<u8>,
    value: usize,
    count: usize,
    max_len: usize,
}

/// Reads the Ethernet frames of `files` that fit (`fit`), counting the
/// others in `report`.
fn collect(files: &[CaptureFile], fit: impl Fn(&[u8]) -> Fit, report: &mut ReplayReport) -> Frames {
    let mut lens = Vec::new();
    let mut bytes = Vec::new();
    let mut refs = Vec::with_capacity(BATCH);
    for file in files {
        let mut reader = file.reader();
        let data = reader.data();
        while reader.next_batch(&mut refs, BATCH) > 0 {
            for r in &refs {
                if r.link != LinkType::Ethernet {
                    report.skipped_not_ethernet += 1;
                    continue;
                }
                let frame = r.bytes(data);
                match fit(frame) {
                    Fit::TooShort => report.skipped_too_short += 1,
                    Fit::TooBig => report.skipped_too_big += 1,
                    Fit::Send => {
                        lens.push(frame.len());
                        bytes.extend_from_slice(frame);
                    }
                }
            }
        }
        report.skipped_not_ethernet += reader.skipped_unsupported_link();
        report.warnings.extend(reader.warnings().cloned());
    }
    let max_len = lens.iter().copied().max().unwrap_or(0);
    let value = (4 + max_len).next_multiple_of(8);
    let mut values = vec![0u8; value * lens.len()];
    let mut at = 0;
    for (k, &len) in lens.iter().enumerate() {
        let v = &mut values[k * value..(k + 1) * value];
        v[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        v[4..4 + len].copy_from_slice(&bytes[at..at + len]);
        at += len;
    }
    Frames {
        values,
        value,
        count: lens.len(),
        max_len,
    }
}

/// An array map of `entries` values of `value` bytes with 4-byte keys.
fn array(name: &str, value: usize, entries: usize) -> Result<OwnedFd> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, BPF_MAP_TYPE_ARRAY);
    put32(&mut a, 4, 4);
    put32(&mut a, 8, value as u32);
    put32(&mut a, 12, entries as u32);
    bpf(BPF_MAP_CREATE, &mut a)
        .map(fd_of)
        .map_err(|e| live_error(name, "creating a BPF map (needs CAP_BPF or root)", e))
}

fn update(map: &OwnedFd, key: u32, value: &[u8]) -> std::io::Result<()> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, map.as_raw_fd() as u32);
    put64(&mut a, 8, &key as *const u32 as u64);
    put64(&mut a, 16, value.as_ptr() as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// The counters: frames run, sent, bytes sent.
fn counters(state: &OwnedFd) -> std::io::Result<[u64; 3]> {
    let (key, mut v) = (0u32, [0u64; 3]);
    let mut a = [0u8; 128];
    put32(&mut a, 0, state.as_raw_fd() as u32);
    put64(&mut a, 8, &key as *const u32 as u64);
    put64(&mut a, 16, v.as_mut_ptr() as u64);
    bpf(BPF_MAP_LOOKUP_ELEM, &mut a)?;
    Ok(v)
}

fn load(name: &str, insns: &[Insn]) -> Result<OwnedFd> {
    let license = c"GPL";
    let mut log = vec![0u8; 16384];
    let mut a = [0u8; 128];
    put32(&mut a, 0, BPF_PROG_TYPE_XDP);
    put32(&mut a, 4, insns.len() as u32);
    put64(&mut a, 8, insns.as_ptr() as u64);
    put64(&mut a, 16, license.as_ptr() as u64);
    put32(&mut a, 24, 1);
    put32(&mut a, 28, log.len() as u32);
    put64(&mut a, 32, log.as_mut_ptr() as u64);
    a[48..56].copy_from_slice(b"eb_send\0");
    bpf(BPF_PROG_LOAD, &mut a).map(fd_of).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        live_error(
            name,
            "loading the XDP program",
            format!("{e} {}", text.trim()),
        )
    })
}

/// One live run of `prog` over `repeat` frames made from `data`.
fn run(prog: &OwnedFd, data: &[u8], repeat: u32) -> std::io::Result<()> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, prog.as_raw_fd() as u32);
    put32(&mut a, 8, data.len() as u32);
    put64(&mut a, 16, data.as_ptr() as u64);
    put32(&mut a, 32, repeat);
    put32(&mut a, 64, BPF_F_TEST_XDP_LIVE_FRAMES);
    put32(&mut a, 72, KERNEL_BATCH);
    bpf(BPF_PROG_TEST_RUN, &mut a).map(|_| ())
}

/// Sends the Ethernet frames of `files` out of `opts.interface` from the
/// kernel, `loops` times, at `opts.pps` or as fast as the kernel runs,
/// until done or `stop` is raised (see the module documentation).
pub fn replay_live(
    files: &[CaptureFile],
    opts: &ReplayOptions,
    stop: &AtomicBool,
) -> Result<ReplayReport> {
    if opts.queues != 1 {
        return Err(Error::Config(
            "replay: --capture xdp-live sends from one core to one queue (no --queues)".into(),
        ));
    }
    opts.validate()?;
    let name = opts.interface.as_str();
    let index = ifindex(name)?;
    let probe = packet_socket(name)?;
    if hw_type(&probe, name)? != libc::ARPHRD_ETHER {
        return Err(live_error(name, "the interface", "not Ethernet"));
    }
    let m = ioctl_ifreq(&probe, name, libc::SIOCGIFMTU as _)
        .map_err(|e| Error::interface(name, "reading the MTU", e))?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    let mtu = usize::try_from(unsafe { m.ifr_ifru.ifru_mtu }).unwrap_or(0);
    let fit = |frame: &[u8]| {
        let tagged = frame.get(12..14) == Some(&[0x81, 0x00][..]);
        let limit = mtu + 14 + if tagged { 4 } else { 0 };
        if frame.len() < 14 {
            Fit::TooShort
        } else if frame.len() > limit.min(MAX_FRAME) {
            Fit::TooBig
        } else {
            Fit::Send
        }
    };
    let mut report = ReplayReport::default();
    let frames = collect(files, fit, &mut report);
    if frames.count == 0 {
        return Ok(report);
    }
    if frames.values.len() > MAX_MAP_BYTES || frames.count > i32::MAX as usize {
        return Err(Error::Config(format!(
            "replay: --capture xdp-live: {} frames of up to {} bytes need {} MiB in the kernel, \
             more than {} MiB: send fewer packets",
            frames.count,
            frames.max_len,
            frames.values.len() >> 20,
            MAX_MAP_BYTES >> 20
        )));
    }
    let state = array(name, STATE, 1)?;
    let map = array(name, frames.value, frames.count)?;
    for (k, v) in frames.values.chunks(frames.value).enumerate() {
        update(&map, k as u32, v).map_err(|e| live_error(name, "filling the frames' map", e))?;
    }
    let prog = load(
        name,
        &program(
            state.as_raw_fd(),
            map.as_raw_fd(),
            frames.count as u32,
            frames.max_len as u32,
            index,
        ),
    )?;
    // Each page starts as the longest frame; the program writes its own.
    let data = vec![0u8; frames.max_len];
    let total = frames.count as u64 * u64::from(opts.loops);
    let chunk = match opts.pps {
        Some(pps) => (pps * PACED_SECONDS).clamp(1.0, f64::from(CALL_FRAMES)) as u32,
        None => CALL_FRAMES,
    };
    let start = Instant::now();
    let mut done = 0u64;
    while done < total && !stop.load(Ordering::Relaxed) {
        if let Some(pps) = opts.pps {
            match wait_step(elapsed_ns(start), due_ns(done, pps)) {
                Wait::Go => {}
                Wait::Spin => {
                    std::hint::spin_loop();
                    continue;
                }
                Wait::Sleep(d) => {
                    std::thread::sleep(d);
                    continue;
                }
            }
        }
        let repeat = (total - done).min(u64::from(chunk)) as u32;
        match run(&prog, &data, repeat) {
            Ok(()) => {}
            // A signal ended the kernel's loop early: the map says how far
            // it went.
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) => {
                let what = match e.raw_os_error() {
                    Some(libc::EINVAL) => {
                        "running the program (live frames need kernel 5.18 or later)"
                    }
                    Some(libc::EPERM) => {
                        "running the program (needs CAP_BPF and CAP_NET_ADMIN, or root)"
                    }
                    _ => "running the program",
                };
                return Err(live_error(name, what, e));
            }
        }
        done = counters(&state).map_err(|e| live_error(name, "reading the counters", e))?[0];
    }
    report.seconds = start.elapsed().as_secs_f64();
    let [ran, sent, bytes] =
        counters(&state).map_err(|e| live_error(name, "reading the counters", e))?;
    report.packets_sent = sent;
    report.bytes_sent = bytes;
    report.rejected = ran - sent;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_on_the_drop() {
        let p = program(3, 4, 10, 1514, 7);
        let drop = p.len() - 2;
        assert_eq!((p[drop].code, p[drop].imm), (0xb7, 1));
        let mut jumps = 0;
        for (at, insn) in p.iter().enumerate() {
            if matches!(insn.code, 0x15 | 0x25 | 0x55 | 0xa5) {
                assert_eq!(at as i64 + 1 + i64::from(insn.off), drop as i64, "{at}");
                jumps += 1;
            }
        }
        assert_eq!(jumps, 6);
    }

    #[test]
    fn frames_are_laid_out_as_length_and_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let mut f = Vec::new();
        f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
        f.extend_from_slice(&[2, 0, 4, 0]);
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&65535u32.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        for len in [60usize, 10, 100] {
            f.extend_from_slice(&[0; 8]);
            f.extend_from_slice(&(len as u32).to_le_bytes());
            f.extend_from_slice(&(len as u32).to_le_bytes());
            f.extend((0..len).map(|b| b as u8));
        }
        std::fs::write(&path, f).unwrap();
        let file = CaptureFile::open(&path).unwrap();
        let mut report = ReplayReport::default();
        let fit = |b: &[u8]| {
            if b.len() < 14 {
                Fit::TooShort
            } else {
                Fit::Send
            }
        };
        let frames = collect(&[file], fit, &mut report);
        assert_eq!(report.skipped_too_short, 1);
        assert_eq!((frames.count, frames.max_len, frames.value), (2, 100, 104));
        let second = &frames.values[104..208];
        assert_eq!(u32::from_ne_bytes(second[..4].try_into().unwrap()), 100);
        assert_eq!(second[4..], (0..100).collect::<Vec<u8>>()[..]);
        assert_eq!(frames.values[4 + 59], 59);
        assert!(frames.values[4 + 60..104].iter().all(|&b| b == 0));
    }
}
