//! `replay` onto a real interface: end `a` of a veth pair whose ends live
//! in two network namespaces of their own (`common::Veth`); in the other
//! namespace a plain AF_PACKET socket counts what arrives on end `b`. Needs root (interfaces,
//! namespaces, AF_PACKET sockets); as any other user the tests say they are
//! skipped and pass.

use crate::common;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::Veth;
use earlybird::{replay, CaptureFile, LinkType, ReplayOptions, ReplayReport, BATCH};

/// The MTU `common::Veth` gives both ends.
const MTU: usize = 9000;

fn sample() -> CaptureFile {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap");
    CaptureFile::open(&p).unwrap()
}

/// Ethernet frames of `file` and their bytes, with how many of them an
/// interface of MTU [`MTU`] accepts.
struct Expect {
    ethernet: u64,
    fitting: u64,
    fitting_bytes: u64,
}

fn expect(file: &CaptureFile) -> Expect {
    let mut e = Expect {
        ethernet: 0,
        fitting: 0,
        fitting_bytes: 0,
    };
    let mut r = file.reader();
    let mut refs = Vec::with_capacity(BATCH);
    while r.next_batch(&mut refs, BATCH) > 0 {
        for p in refs.iter().filter(|p| p.link == LinkType::Ethernet) {
            e.ethernet += 1;
            let len = p.caplen as usize;
            if (14..=MTU + 14).contains(&len) {
                e.fitting += 1;
                e.fitting_bytes += len as u64;
            }
        }
    }
    e
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Received {
    packets: u64,
    bytes: u64,
}

fn setopt<T>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: &T) {
    // SAFETY: `v` points to a live T of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt {opt}: {}", io::Error::last_os_error());
}

/// Runs on a thread inside the namespace of `dev`: listens on `dev`, says
/// it is ready, and counts the frames that arrive until `done` is raised
/// and nothing came for 200 ms.
fn receive(dev: &str, ready: mpsc::Sender<()>, done: &AtomicBool) -> Received {
    // Protocol 0 at creation and ETH_P_ALL at bind: the socket hears only
    // `dev`, from the bind on.
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    setopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &(64 << 20));
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 200_000,
    };
    setopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv);
    let name = std::ffi::CString::new(dev).unwrap();
    // SAFETY: a valid C string; the thread is in the namespace of `dev`.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    assert!(ifindex > 0, "{dev} not found");
    // SAFETY: all-zero sockaddr_ll is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: a valid sockaddr_ll of the size given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "bind: {}", io::Error::last_os_error());
    ready.send(()).unwrap();
    let mut got = Received::default();
    let mut buf = vec![0u8; 1 << 16];
    let give_up = Instant::now() + Duration::from_secs(60);
    while Instant::now() < give_up {
        // SAFETY: all-zero sockaddr_ll is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: buffer and address of the sizes given.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) if done.load(Ordering::SeqCst) => break,
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => panic!("recvfrom: {e}"),
            }
        }
        // Anything the namespace's own stack sends on `dev` is not ours.
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        got.packets += 1;
        got.bytes += n as u64;
    }
    got
}

/// Replays `file` out of `v.a` while a receiver in the peer namespace
/// counts what arrives on `v.b`.
fn replay_and_receive(
    v: &Veth,
    file: &CaptureFile,
    opts: &ReplayOptions,
) -> (earlybird::Result<ReplayReport>, Received) {
    let done = AtomicBool::new(false);
    let (ready, started) = mpsc::channel();
    thread::scope(|s| {
        let receiver = s.spawn(|| v.in_peer(|| receive(&v.b, ready, &done)));
        started
            .recv_timeout(Duration::from_secs(10))
            .expect("receiver did not start");
        let stop = AtomicBool::new(false);
        let report = v.in_capture(|| replay(std::slice::from_ref(file), opts, &stop));
        done.store(true, Ordering::SeqCst);
        (report, receiver.join().expect("receiver"))
    })
}

#[test]
fn every_frame_sent_arrives_on_the_other_side() {
    let Some(v) = Veth::create("ebr") else {
        return;
    };
    let file = sample();
    let want = expect(&file);
    assert_eq!(
        want.ethernet, 500,
        "ndpi__iphone.pcap is 500 Ethernet frames"
    );
    let (report, got) = replay_and_receive(&v, &file, &ReplayOptions::new(&v.a));
    let report = report.unwrap();
    eprintln!("replay: {report}; received {got:?}");
    assert_eq!(
        report.packets_sent,
        want.ethernet - report.skipped_too_big - report.skipped_too_short
    );
    assert_eq!(report.packets_sent, want.fitting);
    assert_eq!(report.bytes_sent, want.fitting_bytes);
    assert_eq!(
        (
            report.skipped_not_ethernet,
            report.rejected,
            report.warnings.len()
        ),
        (0, 0, 0)
    );
    assert_eq!(
        got,
        Received {
            packets: report.packets_sent,
            bytes: report.bytes_sent
        }
    );
}

/// At 20,000 packets/s, 2,000 packets cannot take less than 1,999 / 20,000
/// s (packet k leaves no earlier than k / pps). Only this lower bound is
/// checked: a loaded machine may take longer.
#[test]
fn pps_paces_the_sending() {
    let Some(v) = Veth::create("ebp") else {
        return;
    };
    let file = sample();
    let want = expect(&file);
    let opts = ReplayOptions {
        pps: Some(20_000.0),
        loops: 4,
        ..ReplayOptions::new(&v.a)
    };
    let (report, got) = replay_and_receive(&v, &file, &opts);
    let report = report.unwrap();
    eprintln!("replay --pps 20000: {report}; received {got:?}");
    assert_eq!(report.packets_sent, 4 * want.fitting);
    assert_eq!(report.packets_sent, 2000);
    assert!(report.seconds >= 0.09, "{report}");
    assert_eq!(got.packets, report.packets_sent);
}

/// A raised stop flag ends the replay before the first packet; what was
/// queued (nothing) is still accounted for.
#[test]
fn stop_before_start_sends_nothing() {
    let Some(v) = Veth::create("ebs") else {
        return;
    };
    let file = sample();
    let stop = AtomicBool::new(true);
    let report = v
        .in_capture(|| {
            replay(
                std::slice::from_ref(&file),
                &ReplayOptions::new(&v.a),
                &stop,
            )
        })
        .unwrap();
    assert_eq!((report.packets_sent, report.bytes_sent), (0, 0));
}
