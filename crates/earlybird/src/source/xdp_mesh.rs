//! How the shards of an AF_XDP capture keep flows whole: each XDP socket
//! sees one receive queue, and a NIC (or a veth sender) need not put both
//! directions of a session on the same queue, so every shard hands the
//! frames of other shards' host pairs to them.
//!
//! Contract:
//! - [`shard_of`] gives a frame's shard from its two IP addresses (an
//!   Ethernet frame, up to two VLAN tags): the same for both directions
//!   (the addresses in order), the same for a session's fragments (no
//!   ports). A frame that is not IP, or too short to say, stays on the
//!   shard that received it.
//! - [`mesh`] makes one [`Mesh`] per shard. A shard copies each frame of
//!   another shard into a [`Parcel`] for that shard ([`Mesh::place`]),
//!   in the order its socket received them, and sends the parcels when
//!   its take ends ([`Mesh::flush`]), waking the other shard through its
//!   eventfd ([`Mesh::wake_fd`]). The receiving shard runs a parcel as a
//!   block of its own ([`Mesh::incoming`]) and sends it back emptied
//!   ([`Mesh::give_back`]).
//! - Memory is bounded: a shard makes at most [`PARCELS`] parcels of
//!   [`PARCEL_BYTES`] for each other shard, reused once they come back; a frame for which no parcel
//!   is free is dropped and counted ([`Mesh::dropped`]), never waited for.
//! - Frames keep their receive stamps. A frame that another shard runs
//!   reaches it a take later than the frames its own socket received at
//!   the same time, so the order of frames of different queues inside a
//!   session is that of their arrival only up to the takes' length.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::PacketRef;

/// Bytes of frames a parcel holds.
pub const PARCEL_BYTES: usize = 256 * 1024;
/// Parcels a shard may own for each other shard. A parcel leaves at the
/// end of every take, however few frames it holds, so at a low rate one
/// parcel may carry one frame: this many takes can wait for a shard that
/// is not scheduled (eight were used up by a busy machine's pause in a
/// test at 1,000 packets a second). Parcels are made only when none
/// came back, so the bound (this × [`PARCEL_BYTES`] for each pair of
/// shards) is reached only while a shard stalls.
pub const PARCELS: usize = 64;

/// Frames copied for another shard: their bytes and where each starts.
pub struct Parcel {
    /// The frames' bytes, one after the other.
    pub bytes: Vec<u8>,
    /// The frames, as offsets into `bytes`.
    pub refs: Vec<PacketRef>,
    /// Frames of `refs` handed out so far by the receiving shard.
    pub walked: usize,
    origin: usize,
}

/// One shard's ends of the exchange (see the module docs).
pub struct Mesh {
    me: usize,
    /// To each shard (own slot unused).
    to: Vec<Sender<Parcel>>,
    /// Emptied parcels back to each shard.
    back_to: Vec<Sender<Parcel>>,
    /// Every shard's eventfd.
    wakes: Vec<Arc<OwnedFd>>,
    from: Receiver<Parcel>,
    back: Receiver<Parcel>,
    /// The parcel being filled for each shard.
    filling: Vec<Option<Parcel>>,
    /// Parcels made for each shard so far.
    made: Vec<usize>,
    /// Whether a parcel was sent to each shard since the last wake.
    sent: Vec<bool>,
    dropped: u64,
    exchanged: u64,
    /// Frames of other shards' parcels this shard ran.
    run: u64,
}

/// The exchange between `shards` shards, one [`Mesh`] each (in shard
/// order).
pub fn mesh(shards: usize) -> std::io::Result<Vec<Mesh>> {
    let mut to = Vec::new();
    let mut from = Vec::new();
    let mut back_to = Vec::new();
    let mut back = Vec::new();
    let mut wakes = Vec::new();
    for _ in 0..shards {
        let (s, r) = bounded(PARCELS * shards);
        to.push(s);
        from.push(r);
        let (s, r) = bounded(PARCELS * shards);
        back_to.push(s);
        back.push(r);
        // SAFETY: plain syscall; the descriptor is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor this process owns.
        wakes.push(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }));
    }
    Ok(from
        .into_iter()
        .zip(back)
        .enumerate()
        .map(|(me, (from, back))| Mesh {
            me,
            to: to.clone(),
            back_to: back_to.clone(),
            wakes: wakes.clone(),
            from,
            back,
            filling: (0..shards).map(|_| None).collect(),
            made: vec![0; shards],
            sent: vec![false; shards],
            dropped: 0,
            exchanged: 0,
            run: 0,
        })
        .collect())
}

/// The shard of an Ethernet frame among `shards` (see the module docs);
/// `None` when it is not IP.
pub fn shard_of(frame: &[u8], shards: usize) -> Option<usize> {
    let mut at = 12;
    let mut ether = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    for _ in 0..2 {
        if ether == 0x8100 || ether == 0x88a8 {
            at += 4;
            ether = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        }
    }
    let ip = at + 2;
    let (a, b) = match ether {
        0x0800 => (frame.get(ip + 12..ip + 16)?, frame.get(ip + 16..ip + 20)?),
        0x86dd => (frame.get(ip + 8..ip + 24)?, frame.get(ip + 24..ip + 40)?),
        _ => return None,
    };
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    // FNV-1a over the two addresses in order, then a final mix so the low
    // bits depend on every byte.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in lo.iter().chain(hi) {
        h = (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    Some((h % shards.max(1) as u64) as usize)
}

impl Mesh {
    /// The eventfd that says a parcel came (poll it with the socket).
    pub fn wake_fd(&self) -> RawFd {
        self.wakes[self.me].as_raw_fd()
    }

    /// Frames dropped because no parcel was free.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Frames handed to other shards.
    pub fn exchanged(&self) -> u64 {
        self.exchanged
    }

    /// Frames of other shards' parcels this shard ran. Summed over the
    /// shards at the end of a run, what was handed and not run was still
    /// in the exchange when the run stopped.
    pub fn run(&self) -> u64 {
        self.run
    }

    /// Whether the frame `r` of `data` is this shard's; if not, it is
    /// copied for its shard (or dropped and counted when no parcel is
    /// free).
    pub fn place(&mut self, r: &PacketRef, data: &[u8]) -> bool {
        let shards = self.to.len();
        let frame = r.bytes(data);
        let Some(s) = shard_of(frame, shards).filter(|&s| s != self.me) else {
            return true;
        };
        let full = self.filling[s]
            .as_ref()
            .is_some_and(|p| p.bytes.len() + frame.len() > PARCEL_BYTES);
        if full {
            self.send(s);
        }
        if self.filling[s].is_none() {
            self.filling[s] = self.parcel(s);
        }
        let Some(p) = self.filling[s].as_mut() else {
            self.dropped += 1;
            return false;
        };
        let offset = p.bytes.len();
        p.bytes.extend_from_slice(frame);
        p.refs.push(PacketRef { offset, ..*r });
        self.exchanged += 1;
        false
    }

    /// A free parcel for shard `s`: one that came back, or a new one while
    /// fewer than [`PARCELS`] exist.
    fn parcel(&mut self, s: usize) -> Option<Parcel> {
        // Parcels come back from every shard on one channel, and serve
        // any shard next: the bound is on all of this shard's parcels.
        if let Ok(mut p) = self.back.try_recv() {
            p.bytes.clear();
            p.refs.clear();
            p.walked = 0;
            return Some(p);
        }
        if self.made[s] >= PARCELS {
            return None;
        }
        self.made[s] += 1;
        Some(Parcel {
            bytes: Vec::with_capacity(PARCEL_BYTES),
            refs: Vec::new(),
            walked: 0,
            origin: self.me,
        })
    }

    fn send(&mut self, s: usize) {
        if let Some(p) = self.filling[s].take() {
            if p.refs.is_empty() {
                self.filling[s] = Some(p);
                return;
            }
            // The channel holds every parcel this shard can make: a send
            // never finds it full. A shard that has gone takes no more.
            let n = p.refs.len() as u64;
            if self.to[s].try_send(p).is_err() {
                self.dropped += n;
                self.exchanged -= n;
                self.made[s] -= 1;
            } else {
                self.sent[s] = true;
            }
        }
    }

    /// Sends every parcel being filled and wakes the shards it sent to.
    pub fn flush(&mut self) {
        for s in 0..self.to.len() {
            self.send(s);
            if std::mem::take(&mut self.sent[s]) {
                let one: u64 = 1;
                // SAFETY: an 8-byte write to an eventfd.
                unsafe { libc::write(self.wakes[s].as_raw_fd(), (&one as *const u64).cast(), 8) };
            }
        }
    }

    /// Whether a parcel another shard sent is waiting.
    pub fn waiting(&self) -> bool {
        !self.from.is_empty()
    }

    /// A parcel another shard sent, if one is waiting.
    pub fn incoming(&mut self) -> Option<Box<Parcel>> {
        self.from.try_recv().ok().map(Box::new)
    }

    /// Clears this shard's eventfd (after poll said it was readable).
    pub fn clear_wake(&self) {
        let mut v: u64 = 0;
        // SAFETY: an 8-byte read from a non-blocking eventfd.
        unsafe { libc::read(self.wake_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    /// Sends a parcel that was run back to the shard that made it.
    pub fn give_back(&mut self, p: Parcel) {
        self.run += p.walked as u64;
        let origin = p.origin;
        // Its origin has room for all its parcels; one that has gone
        // takes none back.
        let _ = self.back_to[origin].try_send(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::LinkType;

    fn v4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f
    }

    #[test]
    fn both_directions_go_to_one_shard() {
        for k in 0..50u8 {
            let (a, b) = ([10, 0, 0, k], [192, 168, k, 7]);
            for n in 2..5 {
                assert_eq!(shard_of(&v4(a, b), n), shard_of(&v4(b, a), n));
            }
        }
        // Both shards get some host pairs.
        let spread: std::collections::HashSet<_> = (0..50u8)
            .map(|k| shard_of(&v4([10, 0, 0, k], [10, 0, 1, 1]), 2))
            .collect();
        assert_eq!(spread.len(), 2);
    }

    #[test]
    fn tagged_and_v6_frames_are_read_and_the_rest_stay() {
        let mut tagged = v4([1, 2, 3, 4], [5, 6, 7, 8]);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(
            shard_of(&tagged, 7),
            shard_of(&v4([5, 6, 7, 8], [1, 2, 3, 4]), 7)
        );
        let mut v6 = vec![0u8; 14 + 40];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[22..38].copy_from_slice(&[0x20; 16]);
        assert!(shard_of(&v6, 3).is_some());
        assert_eq!(shard_of(&v6[..40], 3), None);
        let mut arp = v4([1, 2, 3, 4], [5, 6, 7, 8]);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(shard_of(&arp, 2), None);
        assert_eq!(shard_of(&[], 2), None);
    }

    #[test]
    fn frames_cross_in_order_and_parcels_are_bounded() {
        let mut m = mesh(2).unwrap();
        let mut b = m.pop().unwrap();
        let mut a = m.pop().unwrap();
        // Host pairs of each shard.
        let pairs: Vec<Vec<u8>> = (0..40u8)
            .map(|k| v4([10, 0, 0, k], [10, 9, 9, 9]))
            .collect();
        let theirs: Vec<&Vec<u8>> = pairs.iter().filter(|f| shard_of(f, 2) == Some(1)).collect();
        assert!(!theirs.is_empty());
        let mut data = Vec::new();
        let mut refs = Vec::new();
        for (i, f) in theirs.iter().enumerate() {
            refs.push(PacketRef {
                offset: data.len(),
                caplen: f.len() as u32,
                orig_len: f.len() as u32,
                ts: i as u64,
                link: LinkType::Ethernet,
                number: i as u64 + 1,
            });
            data.extend_from_slice(f);
        }
        for r in &refs {
            assert!(!a.place(r, &data));
        }
        assert!(b.incoming().is_none());
        a.flush();
        let p = b.incoming().unwrap();
        assert_eq!(p.refs.len(), refs.len());
        for (got, want) in p.refs.iter().zip(&refs) {
            assert_eq!(got.bytes(&p.bytes), want.bytes(&data));
            assert_eq!(got.ts, want.ts);
        }
        b.clear_wake();
        b.give_back(*p);
        // With every parcel in flight and none back, frames are dropped
        // and counted.
        let big = vec![0u8; PARCEL_BYTES];
        let mut frame = theirs[0].clone();
        frame.extend_from_slice(&big[..PARCEL_BYTES - frame.len()]);
        let r = PacketRef {
            offset: 0,
            caplen: frame.len() as u32,
            orig_len: frame.len() as u32,
            ts: 0,
            link: LinkType::Ethernet,
            number: 1,
        };
        for _ in 0..3 * PARCELS {
            assert!(!a.place(&r, &frame));
            a.flush();
        }
        assert!(a.dropped() > 0);
        assert!(a.made[1] <= PARCELS);
    }
}
