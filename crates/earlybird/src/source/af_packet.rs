//! Live capture on Linux: AF_PACKET sockets with TPACKET_V3 receive rings.
//!
//! Contract:
//! - [`Ring::open`] opens one packet socket on an interface and maps a
//!   receive ring shared with the kernel (`blocks` blocks of `block_size`
//!   bytes). The kernel fills a block with as many frames as fit and hands
//!   it over when it is full or `block_timeout_ms` after its first frame.
//!   With `fanout`, the socket joins a kernel fanout group whose members
//!   the kernel chooses between for every packet so that both directions of
//!   a session reach the same socket ([`super::fanout`]): one socket per
//!   shard, and the kernel does the split that `exchange.rs` does for
//!   files. A classic BPF program keeps only the first `snaplen` bytes of
//!   each frame (the flow meter reads headers; the original length is
//!   still reported), except the Ethernet frames that may carry a
//!   handshake, kept whole ([`super::snaprule`], after the capture
//!   filter).
//! - [`Ring::next_block`] waits up to a timeout for the next block the
//!   kernel has handed over. The [`Block`] it returns fills the caller's
//!   reused `Vec<PacketRef>` batch after batch ([`Block::next_batch`]) with
//!   offsets into [`Block::data`], and gives the block back to the kernel
//!   when dropped. No packet is copied and nothing is allocated per packet.
//! - Every field the kernel wrote is bounds-checked before use: a frame
//!   header that points outside its block ends the block and is counted in
//!   [`Ring::bad_frames`]; nothing panics.
//! - A link that goes down (the kernel reports `ENETDOWN` on the socket)
//!   does not end the capture of a single interface: the ring waits, and
//!   the kernel hands packets over again once the link is up (the packets
//!   of the down time are not seen; [`Ring::link_downs`] counts the
//!   times). An interface deleted (or deleted and made again, a new
//!   index) ends it with an error saying so. (`-i any` and several
//!   interfaces are bound to no single one and see neither.) An XDP
//!   socket reports neither: with AF_XDP the interface is looked up
//!   whenever a wait brings no frame, to the same effect.
//! - [`Ring::stats`] reads the kernel's counters: packets the socket was
//!   offered and packets dropped because the ring was full.
//! - Errors ([`Error::Interface`]) name the interface: it does not exist,
//!   its link type cannot be decoded, or the process lacks CAP_NET_RAW.
//! - VLAN tags: Linux takes the 802.1Q tag out of every received frame
//!   (in the driver or in `skb_vlan_untag`) and reports it beside the frame
//!   (`TP_STATUS_VLAN_VALID`). The walk puts it back in place, as libpcap
//!   does — the MAC addresses move 4 bytes earlier into the room the
//!   socket reserves in front of each frame (`PACKET_RESERVE`) and the tag
//!   goes between them and the EtherType — so a frame reads as it was on
//!   the wire and its flow keeps its VLAN.
//! - A capture filter (`--filter`, [`super::capfilter`]) runs in the
//!   kernel, after the choice of interfaces in the socket's program, over
//!   untagged frames; tagged frames are judged by the walk once their tag
//!   is back ([`Frames::with_filter`]), and those it leaves out are counted
//!   ([`Walked::filtered`]) and not handed out. `-i any` takes no filter
//!   (its frames have different link types).
//! - `--capture af-xdp` ([`Capture::AfXdp`], one interface,
//!   [`Ring::open_xdp`]): one XDP socket per shard, bound to the receive
//!   queue of the shard's number ([`super::af_xdp`]); the interface must
//!   have as many receive queues as the run has shards. A block is what
//!   the socket's receive ring holds when asked, handed out in place from
//!   the UMEM and given back to the fill ring when the block is dropped;
//!   frames carry the stamps the XDP program wrote in front of them
//!   (counted as hardware for the driver's, software for the kernel's
//!   clock, none for batch stamps; see `super::af_xdp`); the snap length
//!   is applied in the walk, after the capture filter, with the same rule
//!   as AF_PACKET's program ([`super::snaprule::keep`]); the capture filter
//!   runs over every frame in the walk. With several shards the queues need
//!   not keep a session's two directions together, so the walk hands every
//!   frame of another shard's host pair to that shard
//!   ([`super::xdp_mesh`]), and a block may be a parcel of frames another
//!   shard sent (its frames were counted and filtered there); frames the
//!   exchange had no room for are counted as dropped.
//! - Loopback hands every packet to packet sockets twice (leaving and
//!   coming back in); on a loopback interface the socket ignores the
//!   outgoing copy (`PACKET_IGNORE_OUTGOING`), so each is counted once.
//! - The interface is looked up through the socket ([`super::netdev`]), in
//!   the calling thread's network namespace.
//! - Stamps ([`super::hwstamp`]): the socket asks for the kernel's software
//!   receive stamps, and for the NIC's hardware stamps when the driver
//!   offers them; the walk counts frames by the stamp they got
//!   ([`Ring::stamped`]), and [`Ring::stamp_note`] says what the interfaces
//!   offer.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::af_xdp::Stamp;
use super::capfilter::{kernel_programs, CaptureFilter, Program};
use super::fanout::{host_pair_program, Fanout};
use super::hwstamp::{Stamped, TsInfo};
use super::netdev::{bind, hw_type, ifindex, packet_socket, set_opt, RingMap};
use super::PacketRef;
use crate::decode::LinkType;
use crate::error::{Error, Result};

/// How a live capture reads the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Capture {
    /// AF_PACKET sockets with TPACKET_V3 rings (the default).
    #[default]
    AfPacket,
    /// An AF_XDP socket on each receive queue of the interface, one per
    /// shard (`super::af_xdp`).
    AfXdp,
}

impl Capture {
    /// `af-packet` or `af-xdp`.
    pub fn parse(s: &str) -> Option<Capture> {
        match s {
            "af-packet" => Some(Capture::AfPacket),
            "af-xdp" => Some(Capture::AfXdp),
            _ => None,
        }
    }
}

/// Options of a live capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveConfig {
    /// Interface name (`eth0`), or several separated by commas
    /// (`eth0,eth1`: the two ports of a tap, one direction each), whose
    /// packets then share each socket's ring in the order the kernel
    /// received them.
    pub interface: String,
    /// Bytes of a ring block (a multiple of the page size).
    pub block_size: u32,
    /// Blocks in the ring of each socket.
    pub blocks: u32,
    /// Milliseconds after its first frame that the kernel hands over a
    /// block that is not full.
    pub block_timeout_ms: u32,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// Put the interface in promiscuous mode while capturing.
    pub promiscuous: bool,
    /// How packets are spread over several sockets.
    pub fanout: Fanout,
    /// Turn the NIC's hardware receive stamps on (`--hw-timestamps`,
    /// `super::hwstamp::HwStamping`); an interface without them is an
    /// error.
    pub hw_timestamps: bool,
    /// A capture filter (`--filter`) run in the kernel on every socket.
    pub filter: Option<std::sync::Arc<super::capfilter::CaptureFilter>>,
    /// AF_PACKET rings or an AF_XDP socket.
    pub capture: Capture,
    /// AF_XDP: capture even if the interface has addresses (its traffic
    /// no longer reaches the host's stack).
    pub xdp_take_traffic: bool,
}

impl LiveConfig {
    /// Defaults for `interface`: 64 blocks of 1 MiB per socket, blocks
    /// handed over after 10 ms, 256 bytes kept per frame, promiscuous.
    pub fn new(interface: &str) -> LiveConfig {
        LiveConfig {
            interface: interface.into(),
            block_size: 1 << 20,
            blocks: 64,
            block_timeout_ms: 10,
            snaplen: 256,
            promiscuous: true,
            fanout: Fanout::Hosts,
            hw_timestamps: false,
            filter: None,
            capture: Capture::AfPacket,
            xdp_take_traffic: false,
        }
    }
}

/// The kernel's counters of one socket since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets the socket was offered (dropped ones included).
    pub packets: u64,
    /// Packets dropped because the ring had no free block.
    pub drops: u64,
    /// Times the ring was found full.
    pub freezes: u64,
}

/// Offsets in a block descriptor (`struct tpacket_block_desc`, whose
/// `tpacket_hdr_v1` starts at byte 8).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST: usize = 16;
/// Offsets in a frame header (`struct tpacket3_hdr`).
const FRAME_NEXT: usize = 0;
const FRAME_SEC: usize = 4;
const FRAME_NSEC: usize = 8;
const FRAME_SNAPLEN: usize = 12;
const FRAME_LEN: usize = 16;
const FRAME_STATUS: usize = 20;
const FRAME_MAC: usize = 24;
const FRAME_VLAN_TCI: usize = 32;
const FRAME_VLAN_TPID: usize = 36;
/// Bytes of the frame header and the `sockaddr_ll` the kernel writes
/// after it (16-aligned header, then 20 bytes); a restored tag must start
/// at or after this.
const FRAME_META: usize = 48 + 20;
/// Where the kernel writes the frame's `sockaddr_ll` (after the 16-aligned
/// frame header), and the offsets of its hardware and packet types.
const FRAME_SLL: usize = 48;
const SLL_HATYPE: usize = 8;
const SLL_PKTTYPE: usize = 10;
/// Bytes of an 802.1Q tag.
const VLAN_TAG: usize = 4;
/// Bytes of a frame header the walk reads (up to the VLAN TPID).
const FRAME_HDR: usize = 40;

/// One packet socket with its mapped receive ring.
pub struct Ring {
    fd: OwnedFd,
    map: RingMap,
    block_size: usize,
    blocks: usize,
    next: usize,
    /// `None`: each frame's own (a socket on every interface).
    link: Option<LinkType>,
    interface: String,
    /// The interface index the socket is bound to (0: every interface).
    bound: libc::c_int,
    /// Times the bound interface's link went down.
    link_downs: u64,
    /// The link went down and no block came since.
    down: bool,
    /// Packets handed out so far (numbers in [`PacketRef::number`]).
    numbered: u64,
    bad_frames: u64,
    unsupported: u64,
    stats: KernelStats,
    /// Frames by the stamp the kernel gave them.
    stamped: Stamped,
    /// Each named interface and what its driver offers for stamps (`None`
    /// when it could not say).
    ts_info: Vec<(String, Option<TsInfo>)>,
    /// Hardware stamps turned on by the run (`--hw-timestamps`).
    hw_asked: bool,
    /// The capture filter, and its program the walk runs over tagged
    /// frames.
    filter: Option<(Arc<CaptureFilter>, Arc<Program>)>,
    /// `--capture af-xdp`: the XDP socket (`map` is then its UMEM).
    xdp: Option<Box<super::af_xdp::Xsk>>,
    /// `--capture af-xdp` with several shards: the exchange of frames.
    mesh: Option<Box<super::xdp_mesh::Mesh>>,
    /// The counts [`Ring::xdp_counts_since`] last saw.
    xdp_published: [u64; 7],
    /// AF_XDP: the snap length, applied with `super::snaprule` in the walk.
    snap: u32,
}

/// The link type of frames read with a raw packet socket from an
/// interface of ARP hardware type `arphrd`.
pub fn link_of(name: &str, arphrd: u16) -> Result<LinkType> {
    link_kind(arphrd).ok_or_else(|| Error::Interface {
        name: name.into(),
        reason: format!(
            "link type ARPHRD {arphrd} is not supported (Ethernet, loopback, raw IP, 802.11, radiotap)"
        ),
    })
}

/// The link type of an ARP hardware type, if earlybird decodes it.
fn link_kind(arphrd: u16) -> Option<LinkType> {
    match arphrd {
        // Ethernet and loopback frames carry an Ethernet header.
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => Some(LinkType::Ethernet),
        // Tunnels, PPP, raw IP and "none" (tun) devices start at the IP header.
        768 | 769 | 776 | 778 | 512 | 519 | 0xfffe => Some(LinkType::Raw),
        // Monitor-mode wireless interfaces.
        801 => Some(LinkType::Ieee80211),
        803 => Some(LinkType::Radiotap),
        _ => None,
    }
}

/// The socket's classic BPF filter: keep the first `snaplen` bytes of each
/// frame (`ret #snaplen`); with several interfaces (a socket bound to all of
/// them), only of frames whose interface index is one of `indexes`.
pub fn capture_filter(indexes: &[libc::c_int], snaplen: u32) -> Vec<libc::sock_filter> {
    use super::fanout::{op, JMP_JEQ_K, LD_W_ABS, RET_K};
    if indexes.len() <= 1 {
        return vec![op(RET_K, 0, 0, snaplen)];
    }
    let k = indexes.len();
    let mut p = vec![op(
        LD_W_ABS,
        0,
        0,
        (libc::SKF_AD_OFF + libc::SKF_AD_IFINDEX) as u32,
    )];
    for (j, &ix) in indexes.iter().enumerate() {
        // Jump to the accepting `ret` at the end (k - j instructions on).
        p.push(op(JMP_JEQ_K, (k - j) as u8, 0, ix as u32));
    }
    p.push(op(RET_K, 0, 0, 0));
    p.push(op(RET_K, 0, 0, snaplen));
    p
}

/// A socket without a ring that counts, with `program`, the packets a
/// capture filter leaves out in the kernel (see `super::capfilter`): the
/// few that fit its smallest receive buffer wait there unread, the rest
/// are dropped, and the kernel counts both.
fn counting_socket(
    name: &str,
    program: &[libc::sock_filter],
    bound: libc::c_int,
    loopback: bool,
) -> Result<OwnedFd> {
    let err = |what: &'static str| move |e: std::io::Error| Error::interface(name, what, e);
    let fd = packet_socket(name)?;
    let small: libc::c_int = 1;
    set_opt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &small).map_err(err("SO_RCVBUF"))?;
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    set_opt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
        .map_err(err("capture filter's counting program"))?;
    if loopback {
        let on: libc::c_int = 1;
        set_opt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &on)
            .map_err(err("PACKET_IGNORE_OUTGOING"))?;
    }
    bind(&fd, name, bound, libc::ETH_P_ALL as u16)?;
    Ok(fd)
}

/// A fanout group id for this run: unique among the processes of the
/// machine (the process id) and among runs within the process.
pub fn fanout_group() -> u16 {
    static RUNS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    (std::process::id() as u16).wrapping_add(run.wrapping_mul(0x9e37))
}

impl Ring {
    /// Opens a socket on `cfg.interface` with its ring; joins fanout group
    /// `fanout` = (id, members) when given (every socket of a run passes
    /// the same), spreading packets as `cfg.fanout` says.
    pub fn open(cfg: &LiveConfig, fanout: Option<(u16, u32)>) -> Result<Ring> {
        if cfg.capture == Capture::AfXdp {
            // One shard; several open together (`Ring::open_xdp`).
            if fanout.is_some() {
                return Err(Error::Config(
                    "AF_XDP sockets of several shards are opened together".into(),
                ));
            }
            return Ring::open_xdp(cfg, 1)?
                .pop()
                .ok_or_else(|| Error::Config("AF_XDP opened no socket".into()));
        }
        let name = cfg.interface.as_str();
        let page = 4096u32;
        if cfg.block_size < page || !cfg.block_size.is_multiple_of(page) || cfg.blocks == 0 {
            return Err(Error::Config(format!(
                "ring blocks must be a multiple of {page} bytes and at least one (got {} × {})",
                cfg.blocks, cfg.block_size
            )));
        }
        let names: Vec<&str> = name.split(',').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(Error::value(
                "interface list",
                name,
                "names separated by commas",
            ));
        }
        let any = names == ["any"];
        if !any && names.contains(&"any") {
            return Err(Error::value(
                "interface list",
                name,
                "\"any\" already takes every interface",
            ));
        }
        // Protocol 0: the socket receives nothing until `bind` names what it
        // captures, so no frame of another interface slips into the ring.
        let fd = packet_socket(name)?;
        let (mut indexes, mut link, mut loopback) = (Vec::new(), None, false);
        let mut ts_info = Vec::new();
        for n in names.iter().filter(|_| !any) {
            indexes.push(ifindex(n)?);
            ts_info.push((n.to_string(), super::hwstamp::ts_info(&fd, n).ok()));
            let arphrd = hw_type(&fd, n)?;
            let l = link_of(n, arphrd)?;
            if link.is_some_and(|first| first != l) {
                return Err(Error::Interface {
                    name: name.into(),
                    reason: "the interfaces have different link types".into(),
                });
            }
            link = Some(l);
            loopback |= arphrd == libc::ARPHRD_LOOPBACK;
        }
        if loopback && names.len() > 1 {
            return Err(Error::Interface {
                name: name.into(),
                reason: "loopback cannot be captured together with other interfaces".into(),
            });
        }
        let err = |what: &'static str| move |e: std::io::Error| Error::interface(name, what, e);
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        set_opt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
            .map_err(err("PACKET_VERSION 3"))?;
        let hardware = ts_info.iter().any(|(_, i)| i.is_some_and(|i| i.hardware()));
        super::hwstamp::socket_options(&fd, name, hardware)?;
        // One interface: bound to it. Several: bound to every interface,
        // the filter keeping theirs, so their packets share one ring in the
        // order the kernel received them.
        let bound = if indexes.len() == 1 { indexes[0] } else { 0 };
        let snaplen = cfg.snaplen.max(64);
        let mut filter = capture_filter(&indexes, snaplen);
        let user = match (&cfg.filter, link) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::Interface {
                    name: name.into(),
                    reason: "--filter cannot be used with \"any\" (its interfaces have \
                             different link types): name the interfaces"
                        .into(),
                })
            }
            (Some(f), Some(l)) => {
                let user = f.program(l)?;
                // The accepting `ret` of the choice of interfaces gives way
                // to the filter.
                filter.pop();
                let (capture, counting) = kernel_programs(&filter, &user, snaplen);
                if !f.counts_in_kernel() {
                    f.count_in_kernel(counting_socket(name, &counting, bound, loopback)?);
                }
                filter = capture;
                Some((f.clone(), user))
            }
        };
        if link == Some(LinkType::Ethernet) && snaplen < super::snaprule::WHOLE {
            // Frames that may carry a handshake are kept whole.
            filter = super::snaprule::splice(&filter, snaplen);
        }
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        set_opt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
            .map_err(err("capture filter"))?;
        let frame = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size,
            tp_block_nr: cfg.blocks,
            tp_frame_size: frame,
            tp_frame_nr: (cfg.block_size / frame) * cfg.blocks,
            tp_retire_blk_tov: cfg.block_timeout_ms.max(1),
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        // Room in front of each frame for the VLAN tag the walk puts back.
        let reserve = VLAN_TAG as libc::c_uint;
        set_opt(&fd, libc::SOL_PACKET, libc::PACKET_RESERVE, &reserve)
            .map_err(err("PACKET_RESERVE"))?;
        set_opt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(err("receive ring"))?;
        let map_len = cfg.block_size as usize * cfg.blocks as usize;
        let map = RingMap::new(&fd, name, map_len, true, "cannot map the ring")?;
        let ring = Ring {
            fd,
            map,
            block_size: cfg.block_size as usize,
            blocks: cfg.blocks as usize,
            next: 0,
            link,
            interface: name.into(),
            bound,
            link_downs: 0,
            down: false,
            numbered: 0,
            bad_frames: 0,
            unsupported: 0,
            stats: KernelStats::default(),
            stamped: Stamped::default(),
            ts_info,
            hw_asked: cfg.hw_timestamps,
            filter: user,
            xdp: None,
            mesh: None,
            xdp_published: [0; 7],
            snap: snaplen,
        };
        // (With "any" there are no indexes: bound to every interface and
        // filtered by none; each frame says its own link type, and the walk
        // drops loopback's outgoing copies.)
        bind(&ring.fd, name, bound, libc::ETH_P_ALL as u16)?;
        if loopback {
            // On loopback every packet is seen twice, leaving and coming
            // back in; keep the incoming copy (as libpcap does).
            let on: libc::c_int = 1;
            set_opt(
                &ring.fd,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &on,
            )
            .map_err(err("PACKET_IGNORE_OUTGOING"))?;
        }
        for &ix in indexes.iter().filter(|_| cfg.promiscuous) {
            let mreq = libc::packet_mreq {
                mr_ifindex: ix,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            set_opt(
                &ring.fd,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
            )
            .map_err(err("promiscuous mode"))?;
        }
        if let Some((group, members)) = fanout {
            let kind = match cfg.fanout {
                Fanout::Hosts => libc::PACKET_FANOUT_CBPF,
                Fanout::Flows => libc::PACKET_FANOUT_HASH,
            };
            let arg: u32 = u32::from(group) | (kind << 16);
            set_opt(&ring.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
                .map_err(err("fanout group"))?;
            if cfg.fanout == Fanout::Hosts {
                let prog = host_pair_program(members);
                let fprog = libc::sock_fprog {
                    len: prog.len() as u16,
                    filter: prog.as_ptr() as *mut libc::sock_filter,
                };
                set_opt(&ring.fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &fprog)
                    .map_err(err("fanout program"))?;
            }
        }
        Ok(ring)
    }

    /// `--capture af-xdp` for `shards` shards: one XDP socket on each
    /// receive queue of one interface (it must have `shards` of them), and
    /// with several, the exchange that keeps flows whole (see the module
    /// docs).
    pub fn open_xdp(cfg: &LiveConfig, shards: usize) -> Result<Vec<Ring>> {
        let name = cfg.interface.as_str();
        let refuse = |reason: &str| Error::Interface {
            name: name.into(),
            reason: format!("{reason}; --capture af-packet can"),
        };
        if name.contains(',') || name == "any" {
            return Err(refuse("AF_XDP captures one interface"));
        }
        if cfg.hw_timestamps {
            return Err(refuse("AF_XDP frames carry no hardware stamps"));
        }
        let probe = packet_socket(name)?;
        let index = ifindex(name)?;
        let link = link_of(name, hw_type(&probe, name)?)?;
        if link != LinkType::Ethernet {
            return Err(refuse("AF_XDP reads Ethernet interfaces"));
        }
        let queues = super::af_xdp::rx_queues(&probe, name);
        drop(probe);
        if queues as usize != shards.max(1) {
            return Err(refuse(&format!(
                "AF_XDP reads each receive queue with a shard of its own, and the \
                 interface has {queues} receive queue(s) for {} shard(s): give --shards \
                 {queues}, or set the queues (ethtool -L {name} combined N)",
                shards.max(1)
            )));
        }
        let frames = (cfg.block_size as u64 * cfg.blocks as u64 / super::af_xdp::FRAME as u64)
            .min(1 << 18) as u32;
        let opened = super::af_xdp::open(name, index, frames, cfg.xdp_take_traffic, queues)?;
        let mut meshes = if queues > 1 {
            super::xdp_mesh::mesh(queues as usize)
                .map_err(|e| Error::interface(name, "AF_XDP exchange (eventfd)", e))?
                .into_iter()
                .map(|m| Some(Box::new(m)))
                .collect()
        } else {
            vec![None]
        };
        let user = match &cfg.filter {
            Some(f) => Some((f.clone(), f.program(LinkType::Ethernet)?)),
            None => None,
        };
        let umem = frames.clamp(64, 1 << 18).next_power_of_two() as usize * super::af_xdp::FRAME;
        Ok(opened
            .into_iter()
            .zip(meshes.iter_mut())
            .map(|((fd, map, xsk), mesh)| Ring {
                fd,
                map,
                block_size: umem,
                blocks: 1,
                next: 0,
                link: Some(LinkType::Ethernet),
                interface: name.into(),
                bound: index,
                link_downs: 0,
                down: false,
                numbered: 0,
                bad_frames: 0,
                unsupported: 0,
                stats: KernelStats::default(),
                stamped: Stamped::default(),
                ts_info: Vec::new(),
                hw_asked: false,
                filter: user.clone(),
                xdp: Some(Box::new(xsk)),
                mesh: mesh.take(),
                xdp_published: [0; 7],
                snap: cfg.snaplen.max(64),
            })
            .collect())
    }

    /// AF_XDP: adds the socket's statistics and the exchange's counts to
    /// `c` (see [`crate::telemetry::Counters::live_xdp`]).
    pub fn add_xdp_counts(&self, c: &mut [u64; 7]) {
        let Some(x) = &self.xdp else {
            return;
        };
        let s = x.stats();
        let (handed, lost, run) = self
            .mesh
            .as_ref()
            .map_or((0, 0, 0), |m| (m.exchanged(), m.dropped(), m.run()));
        for (a, b) in c.iter_mut().zip([
            s.rx_dropped,
            s.rx_ring_full,
            s.fill_ring_empty,
            s.rx_invalid,
            handed,
            lost,
            run,
        ]) {
            *a += b;
        }
    }

    /// AF_XDP: what [`Ring::add_xdp_counts`] adds now less what it added
    /// at the last call of this (for metrics that take increments).
    pub fn xdp_counts_since(&mut self) -> [u64; 7] {
        let mut now = [0; 7];
        self.add_xdp_counts(&mut now);
        let mut since = [0; 7];
        for ((s, n), p) in since.iter_mut().zip(now).zip(self.xdp_published.iter_mut()) {
            *s = n.saturating_sub(*p);
            *p = n;
        }
        since
    }

    /// Frames skipped because their link type cannot be decoded (`-i any`).
    pub fn unsupported(&self) -> u64 {
        self.unsupported
    }

    /// Frame headers that pointed outside their block (the rest of such a
    /// block is not read).
    pub fn bad_frames(&self) -> u64 {
        self.bad_frames
    }

    /// Frames handed out so far, by the stamp the kernel gave them.
    pub fn stamped(&self) -> Stamped {
        self.stamped
    }

    /// What the interfaces offer for stamps, in words: `eth0 offers no
    /// hardware stamps`, `eth0 offers hardware stamps, not turned on
    /// (--hw-timestamps)`, `hardware stamps on eth0`.
    pub fn stamp_note(&self) -> String {
        if let Some(x) = &self.xdp {
            return format!(
                "AF_XDP ({}): the XDP program stamps each frame: hardware = the driver's \
                 receive stamp{}, software = the kernel's clock when the program ran, \
                 none = the time the batch was read (no metadata)",
                x.mode(),
                if x.driver_stamps() {
                    " (bpf_xdp_metadata_rx_timestamp)"
                } else {
                    ", not asked for (the program is not bound to the device: generic XDP, \
                     or the kernel has no bpf_xdp_metadata_rx_timestamp)"
                }
            );
        }
        if self.ts_info.is_empty() {
            return "every interface: software stamps asked for".into();
        }
        let parts: Vec<String> = self
            .ts_info
            .iter()
            .map(|(n, i)| match i {
                None => format!("{n} does not say what stamps it offers"),
                Some(i) if !i.hardware() => format!("{n} offers no hardware stamps"),
                Some(_) if self.hw_asked => format!("hardware stamps turned on on {n}"),
                Some(_) => format!(
                    "{n} offers hardware stamps, used when its receive stamping is on \
                     (--hw-timestamps turns it on)"
                ),
            })
            .collect();
        parts.join("; ")
    }

    fn status(&self, block: usize) -> &AtomicU32 {
        // SAFETY: the status word of a block inside the mapping, 4-aligned
        // (blocks are page-aligned); the kernel and this thread access it
        // atomically.
        unsafe {
            AtomicU32::from_ptr(
                self.map
                    .ptr()
                    .add(block * self.block_size + BLOCK_STATUS)
                    .cast(),
            )
        }
    }

    /// The next block the kernel has handed over, waiting up to
    /// `timeout_ms` for it; `None` when none came in time. An error means
    /// the socket failed (the interface went away).
    pub fn next_block(&mut self, timeout_ms: i32) -> Result<Option<Block<'_>>> {
        if self.xdp.is_some() {
            if self.mesh.as_ref().is_some_and(|m| m.waiting()) {
                return Ok(self.parcel_block());
            }
            let wake = self.mesh.as_ref().map(|m| m.wake_fd());
            let Some(x) = self.xdp.as_mut() else {
                return Ok(None);
            };
            let n = match x.take(timeout_ms, wake) {
                Ok(n) => n,
                Err(e) => {
                    return Err(match super::netdev::link_up(&self.interface) {
                        Some((index, _)) if index == self.bound => {
                            Error::interface(&self.interface, "AF_XDP receive", e)
                        }
                        _ => self.deleted(),
                    })
                }
            };
            if n == 0 {
                if let Some(m) = &self.mesh {
                    m.clear_wake();
                }
                // No frame came: the XDP socket says nothing of its link,
                // so the interface is looked up (see `xdp_link`).
                if self.mesh.as_ref().is_none_or(|m| !m.waiting()) {
                    self.xdp_link()?;
                }
                return Ok(self.parcel_block());
            }
            self.down = false;
            // SAFETY: the UMEM, mapped for the ring's life; the kernel
            // writes no chunk of the take until it is released (when the
            // `Block` is dropped).
            let data = unsafe { std::slice::from_raw_parts_mut(self.map.ptr(), self.block_size) };
            return Ok(Some(Block {
                ring: self,
                frames: Frames {
                    data,
                    left: 0,
                    at: 0,
                    filter: None,
                },
                xdp: true,
                parcel: None,
            }));
        }
        if self.status(self.next).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            // SAFETY: one pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::interface(&self.interface, "poll", e));
                }
            }
            if pfd.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                return match self.socket_error() {
                    None => {
                        self.link_downs += 1;
                        self.down = true;
                        Ok(None)
                    }
                    Some(e) => Err(e),
                };
            }
            if self.status(self.next).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                // A link down may be the start of a deletion, which sends
                // no error of its own: the interface is looked up again
                // while no packet comes.
                if self.down && super::netdev::ifindex(&self.interface).ok() != Some(self.bound) {
                    return Err(self.deleted());
                }
                return Ok(None);
            }
        }
        self.down = false;
        let index = self.next;
        self.next = (self.next + 1) % self.blocks;
        // SAFETY: the block lies inside the mapping and the kernel does not
        // write it until its status goes back to TP_STATUS_KERNEL (when the
        // `Block` is dropped).
        let data = unsafe {
            std::slice::from_raw_parts_mut(
                self.map.ptr().add(index * self.block_size),
                self.block_size,
            )
        };
        Ok(Some(Block {
            ring: self,
            frames: Frames::new(data),
            xdp: false,
            parcel: None,
        }))
    }

    /// A parcel of frames another shard sent, as a block (AF_XDP with
    /// several shards), if one is waiting.
    fn parcel_block(&mut self) -> Option<Block<'_>> {
        let mut p = self.mesh.as_mut()?.incoming()?;
        // SAFETY: the parcel's bytes, on the heap: they stay where they are
        // while the block owns the parcel, and the block's slice goes with
        // it.
        let data = unsafe { std::slice::from_raw_parts_mut(p.bytes.as_mut_ptr(), p.bytes.len()) };
        Some(Block {
            ring: self,
            frames: Frames {
                data,
                left: 0,
                at: 0,
                filter: None,
            },
            xdp: false,
            parcel: Some(p),
        })
    }

    /// The pending error of the socket (after POLLERR).
    /// The socket's pending error, read (and so cleared): `None` when it
    /// is the bound interface's link going down while the interface is
    /// still there (the capture waits for it to come up).
    fn socket_error(&self) -> Option<Error> {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an int-sized option into an int.
        unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            );
        }
        if err == libc::ENETDOWN && self.bound != 0 {
            return match super::netdev::ifindex(&self.interface) {
                Ok(i) if i == self.bound => None,
                _ => Some(self.deleted()),
            };
        }
        Some(Error::interface(
            &self.interface,
            "capture stopped",
            std::io::Error::from_raw_os_error(err.max(1)),
        ))
    }

    /// AF_XDP, while no frame comes: an XDP socket reports neither its
    /// link going down nor its interface going away (it waits on, bound
    /// to nothing), so the interface is looked up: a link down is counted
    /// once until frames come again or the link is up, as AF_PACKET's
    /// `ENETDOWN` is; an interface gone (or made again: a new index) ends
    /// the capture with the same error. A down shorter than one wait
    /// (the caller's timeout) may go unseen.
    fn xdp_link(&mut self) -> Result<()> {
        match super::netdev::link_up(&self.interface) {
            Some((index, up)) if index == self.bound => {
                if !up && !self.down {
                    self.link_downs += 1;
                }
                self.down = !up;
                Ok(())
            }
            _ => Err(self.deleted()),
        }
    }

    /// The error of a capture whose interface was deleted.
    fn deleted(&self) -> Error {
        Error::Interface {
            name: self.interface.clone(),
            reason: "capture stopped: the interface was deleted".into(),
        }
    }

    /// Times the bound interface's link went down during the capture.
    pub fn link_downs(&self) -> u64 {
        self.link_downs
    }

    /// The kernel's counters since the socket was opened.
    pub fn stats(&mut self) -> KernelStats {
        if let Some(x) = &self.xdp {
            let s = x.stats();
            let drops = s.lost();
            // Frames the exchange had no room for were received here and
            // are dropped all the same.
            let exchange = self.mesh.as_ref().map_or(0, |m| m.dropped());
            return KernelStats {
                packets: x.received() + drops,
                drops: drops + exchange,
                freezes: s.fill_ring_empty,
            };
        }
        // SAFETY: zeroed plain-data struct.
        let mut s: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: a tpacket_stats_v3 of the size passed. The kernel resets
        // its counters on each read, so they are added up here.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut s as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            // The kernel's packet count already includes the drops.
            self.stats.packets += u64::from(s.tp_packets);
            self.stats.drops += u64::from(s.tp_drops);
            self.stats.freezes += u64::from(s.tp_freeze_q_cnt);
        }
        self.stats
    }
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_ne_bytes([s[0], s[1]]))
}

/// A block handed over by the kernel; given back when dropped.
pub struct Block<'a> {
    ring: &'a mut Ring,
    frames: Frames<'a>,
    /// An XDP socket's take (the ring is `ring.xdp`).
    xdp: bool,
    /// Frames another shard sent (AF_XDP with several shards): `frames`
    /// holds their bytes.
    parcel: Option<Box<super::xdp_mesh::Parcel>>,
}

impl Block<'_> {
    /// The block's bytes (the [`PacketRef`] offsets point into them).
    pub fn data(&self) -> &[u8] {
        self.frames.data
    }

    /// Frames in the block.
    pub fn frames(&self) -> u32 {
        if let Some(p) = &self.parcel {
            return p.refs.len() as u32;
        }
        match (&self.ring.xdp, self.xdp) {
            (Some(x), true) => x.taken(),
            _ => read_u32(self.frames.data, BLOCK_NUM_PKTS),
        }
    }

    /// Fills `out` (cleared first) with up to `max` of the block's next
    /// frames; returns how many (0 at the end of the block).
    pub fn next_batch(&mut self, out: &mut Vec<PacketRef>, max: usize) -> usize {
        let ring = &mut *self.ring;
        if let Some(p) = self.parcel.as_mut() {
            out.clear();
            let end = p.walked.saturating_add(max).min(p.refs.len());
            out.extend_from_slice(&p.refs[p.walked.min(end)..end]);
            p.walked = end;
            // (Their stamps were counted by the shard that received them.)
            return out.len();
        }
        if let (Some(x), true) = (ring.xdp.as_mut(), self.xdp) {
            // A batch left empty by the filter (or by the exchange) is not
            // the end of the take.
            loop {
                let bad = x.bad();
                let n = x.next_batch(self.frames.data, out, max);
                ring.bad_frames += x.bad() - bad;
                if n == 0 {
                    return 0;
                }
                let data = &*self.frames.data;
                let (kinds, mut at, mut filtered) = (x.kinds(), 0, 0);
                let (filter, mesh, stamped) = (&ring.filter, &mut ring.mesh, &mut ring.stamped);
                let snap = ring.snap;
                // Stamps are counted here for the frames the filter keeps,
                // also those handed to another shard.
                out.retain_mut(|r| {
                    let kind = kinds.get(at).copied();
                    at += 1;
                    if let Some((_, p)) = filter {
                        if !p.matches(r.bytes(data), r.orig_len) {
                            filtered += 1;
                            return false;
                        }
                    }
                    // The snap length, frames that may carry a handshake
                    // kept whole (as the kernel's program does for
                    // AF_PACKET).
                    r.caplen = r.caplen.min(super::snaprule::keep(r.bytes(data), snap));
                    let mut lost = false;
                    let mine = match mesh.as_mut() {
                        Some(m) => {
                            let before = m.dropped();
                            let mine = m.place(r, data);
                            lost = m.dropped() > before;
                            mine
                        }
                        None => true,
                    };
                    if !lost {
                        match kind {
                            Some(Stamp::Driver) => stamped.hardware += 1,
                            Some(Stamp::Kernel) => stamped.software += 1,
                            _ => stamped.none += 1,
                        }
                    }
                    mine
                });
                if let Some((f, _)) = filter {
                    f.count(filtered);
                }
                if !out.is_empty() {
                    return out.len();
                }
            }
        }
        let mut walk = Walked {
            numbered: ring.numbered,
            ..Walked::default()
        };
        self.frames.filter = ring.filter.as_ref().map(|(_, p)| p.clone());
        let n = self.frames.next_batch(ring.link, out, max, &mut walk);
        if let Some((f, _)) = &ring.filter {
            f.count(walk.filtered);
        }
        ring.numbered = walk.numbered;
        ring.bad_frames += walk.bad_frames;
        ring.unsupported += walk.unsupported;
        ring.stamped.add(&walk.stamps);
        n
    }
}

/// What a walk over frames counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Walked {
    /// Number of the last frame handed out (numbers go on across blocks).
    pub numbered: u64,
    /// Frame headers that pointed outside the block (the walk stops there).
    pub bad_frames: u64,
    /// Frames whose VLAN tag was put back.
    pub vlan_restored: u64,
    /// Frames skipped for a link type that cannot be decoded (`-i any`).
    pub unsupported: u64,
    /// Frames handed out, by the stamp the kernel gave them.
    pub stamps: Stamped,
    /// Tagged frames the capture filter left out ([`Frames::with_filter`]).
    pub filtered: u64,
}

/// The walk over the frames of one block's bytes: reads only `data`, so
/// any bytes can be given (tests, fuzzing), and never reads outside it; it
/// writes only to put a VLAN tag back in front of a frame's EtherType.
pub struct Frames<'a> {
    data: &'a mut [u8],
    left: u32,
    at: usize,
    /// The capture filter's program, run over tagged frames.
    filter: Option<Arc<Program>>,
}

impl<'a> Frames<'a> {
    /// The frames of a block (`struct tpacket_block_desc` first).
    pub fn new(data: &'a mut [u8]) -> Frames<'a> {
        Frames {
            left: read_u32(data, BLOCK_NUM_PKTS),
            at: read_u32(data, BLOCK_FIRST) as usize,
            data,
            filter: None,
        }
    }

    /// Runs `program` (a capture filter's, for the link type of the walk)
    /// over every frame the kernel took a VLAN tag off, once the tag is
    /// back, handing out only the frames it keeps (the kernel ran the
    /// filter over the others).
    pub fn with_filter(mut self, program: Option<Arc<Program>>) -> Frames<'a> {
        self.filter = program;
        self
    }

    /// The block's bytes (the [`PacketRef`] offsets point into them).
    pub fn data(&self) -> &[u8] {
        self.data
    }

    /// Fills `out` (cleared first) with up to `max` of the next frames, as
    /// `link` packets numbered on from `walk.numbered`; returns how many (0
    /// at the end of the block or at its first bad frame header). With
    /// `link` `None` (a socket on every interface, `-i any`) each frame's
    /// link type comes from the hardware type the kernel wrote beside it:
    /// frames of a type that cannot be decoded are counted in
    /// `walk.unsupported` and skipped, and so (uncounted) are the outgoing
    /// copies of loopback packets, which the kernel also hands over coming
    /// back in.
    pub fn next_batch(
        &mut self,
        link: Option<LinkType>,
        out: &mut Vec<PacketRef>,
        max: usize,
        walk: &mut Walked,
    ) -> usize {
        out.clear();
        while self.left > 0 && out.len() < max {
            let data = &mut *self.data;
            let h = self.at;
            let hdr_ok =
                h.is_multiple_of(4) && h.checked_add(FRAME_HDR).is_some_and(|e| e <= data.len());
            let mut mac = h.saturating_add(usize::from(read_u16(data, h + FRAME_MAC)));
            let mut caplen = read_u32(data, h + FRAME_SNAPLEN);
            if !hdr_ok || mac.saturating_add(caplen as usize) > data.len() {
                walk.bad_frames += 1;
                self.left = 0;
                break;
            }
            // Step to the next frame now: this one may be skipped.
            self.left -= 1;
            let next = read_u32(data, h + FRAME_NEXT) as usize;
            if next == 0 {
                self.left = 0;
            }
            self.at = h + next;
            let link = match link {
                Some(l) => l,
                None => {
                    let hatype = read_u16(data, h + FRAME_SLL + SLL_HATYPE);
                    let outgoing = data.get(h + FRAME_SLL + SLL_PKTTYPE).copied()
                        == Some(libc::PACKET_OUTGOING);
                    if hatype == libc::ARPHRD_LOOPBACK && outgoing {
                        continue;
                    }
                    match link_kind(hatype) {
                        Some(l) => l,
                        None => {
                            walk.unsupported += 1;
                            continue;
                        }
                    }
                }
            };
            let status = read_u32(data, h + FRAME_STATUS);
            let mut orig_len = read_u32(data, h + FRAME_LEN).max(caplen);
            if status & libc::TP_STATUS_VLAN_VALID != 0
                && link == LinkType::Ethernet
                && caplen >= 12
                && mac >= h + FRAME_META + VLAN_TAG
            {
                // Put the tag back: MAC addresses 4 bytes earlier, then
                // TPID and TCI, then the EtherType where it was.
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    read_u16(data, h + FRAME_VLAN_TPID)
                } else {
                    0x8100
                };
                let tci = read_u32(data, h + FRAME_VLAN_TCI) as u16;
                data.copy_within(mac..mac + 12, mac - VLAN_TAG);
                mac -= VLAN_TAG;
                data[mac + 12..mac + 14].copy_from_slice(&tpid.to_be_bytes());
                data[mac + 14..mac + 16].copy_from_slice(&tci.to_be_bytes());
                caplen += VLAN_TAG as u32;
                // The wire length is the kernel's word: never trusted not
                // to overflow (found by the fuzzer).
                orig_len = orig_len.saturating_add(VLAN_TAG as u32);
                walk.vlan_restored += 1;
            }
            if status & libc::TP_STATUS_VLAN_VALID != 0 {
                if let Some(p) = &self.filter {
                    let frame = &data[mac..mac + caplen as usize];
                    if !p.matches(frame, orig_len) {
                        walk.filtered += 1;
                        continue;
                    }
                }
            }
            walk.numbered += 1;
            walk.stamps.count(status);
            out.push(PacketRef {
                offset: mac,
                caplen,
                orig_len,
                ts: u64::from(read_u32(data, h + FRAME_SEC)) * 1_000_000_000
                    + u64::from(read_u32(data, h + FRAME_NSEC)),
                link,
                number: walk.numbered,
            });
        }
        out.len()
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.parcel.take() {
            if let Some(m) = self.ring.mesh.as_mut() {
                m.give_back(*p);
            }
            return;
        }
        if let (Some(x), true) = (self.ring.xdp.as_mut(), self.xdp) {
            // The frames copied for other shards leave before the chunks
            // go back to the kernel.
            if let Some(m) = self.ring.mesh.as_mut() {
                m.flush();
            }
            x.release();
            return;
        }
        // SAFETY: the status word of this block, 4-aligned (blocks are
        // page-aligned), written through the block's own borrow; the
        // kernel reads it atomically.
        let status =
            unsafe { AtomicU32::from_ptr(self.frames.data.as_mut_ptr().add(BLOCK_STATUS).cast()) };
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the kernel puts a frame's first byte: after the frame header,
    /// its `sockaddr_ll` and the reserved room, as `tpacket_rcv` lays it
    /// out for a 14-byte link header with `PACKET_RESERVE` = 4.
    const MAC_AT: usize = 86;

    /// A block of `frames` (caplen, wire length, seconds, stripped VLAN
    /// TCI) laid out as the kernel does: descriptor, then each frame
    /// header with its bytes `MAC_AT` further, 16-aligned. Frame i's bytes
    /// are all `i`.
    fn block(frames: &[(u32, u32, u32, Option<u16>)]) -> Vec<u8> {
        let mut b = vec![0u8; 8192];
        let put =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(&mut b, BLOCK_NUM_PKTS, frames.len() as u32);
        put(&mut b, BLOCK_FIRST, 48);
        let mut at = 48;
        for (i, &(caplen, len, sec, vlan)) in frames.iter().enumerate() {
            let size = (MAC_AT + caplen as usize).next_multiple_of(16);
            let next = if i + 1 == frames.len() {
                0
            } else {
                size as u32
            };
            put(&mut b, at + FRAME_NEXT, next);
            put(&mut b, at + FRAME_SEC, sec);
            put(&mut b, at + FRAME_NSEC, 7);
            put(&mut b, at + FRAME_SNAPLEN, caplen);
            put(&mut b, at + FRAME_LEN, len);
            let status = match vlan {
                Some(tci) => {
                    put(&mut b, at + FRAME_VLAN_TCI, u32::from(tci));
                    libc::TP_STATUS_VLAN_VALID
                }
                None => 1,
            };
            put(&mut b, at + FRAME_STATUS, status);
            b[at + FRAME_MAC..at + FRAME_MAC + 2].copy_from_slice(&(MAC_AT as u16).to_ne_bytes());
            for k in 0..caplen as usize {
                b[at + MAC_AT + k] = i as u8;
            }
            at += size;
        }
        b
    }

    #[test]
    fn walks_frames_in_batches_and_numbers_them() {
        let mut b = block(&[(60, 60, 1, None), (100, 1500, 2, None), (14, 14, 3, None)]);
        let mut f = Frames::new(&mut b);
        let mut out = Vec::new();
        let mut w = Walked {
            numbered: 10,
            ..Walked::default()
        };
        assert_eq!(
            f.next_batch(Some(LinkType::Ethernet), &mut out, 2, &mut w),
            2
        );
        assert_eq!(out[0].caplen, 60);
        assert_eq!(out[0].ts, 1_000_000_007);
        assert_eq!(out[1].orig_len, 1500);
        assert_eq!(out[1].bytes(f.data()), &[1u8; 100][..]);
        assert_eq!(out[1].number, 12);
        assert_eq!(
            f.next_batch(Some(LinkType::Ethernet), &mut out, 2, &mut w),
            1
        );
        assert_eq!(out[0].bytes(f.data()), &[2u8; 14][..]);
        assert_eq!(
            f.next_batch(Some(LinkType::Ethernet), &mut out, 2, &mut w),
            0
        );
        assert_eq!(
            w,
            Walked {
                numbered: 13,
                bad_frames: 0,
                vlan_restored: 0,
                unsupported: 0,
                stamps: Stamped {
                    none: 3,
                    ..Stamped::default()
                },
                filtered: 0,
            }
        );
    }

    #[test]
    fn a_stripped_vlan_tag_is_put_back() {
        let mut b = block(&[(60, 60, 1, Some(0x2064)), (60, 60, 1, None)]);
        // Frame 0: destination MAC 0..6, source 6..12, EtherType IPv4.
        let first = 48 + MAC_AT;
        for k in 0..12 {
            b[first + k] = 0xa0 + k as u8;
        }
        b[first + 12..first + 14].copy_from_slice(&[0x08, 0x00]);
        let mut f = Frames::new(&mut b);
        let (mut out, mut w) = (Vec::new(), Walked::default());
        assert_eq!(
            f.next_batch(Some(LinkType::Ethernet), &mut out, 8, &mut w),
            2
        );
        let tagged = out[0].bytes(f.data());
        assert_eq!((out[0].caplen, out[0].orig_len), (64, 64));
        let macs: Vec<u8> = (0..12).map(|k| 0xa0 + k).collect();
        assert_eq!(&tagged[..12], &macs[..]);
        assert_eq!(&tagged[12..18], &[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        assert_eq!(out[1].bytes(f.data()), &[1u8; 60][..]);
        assert_eq!(w.vlan_restored, 1);
        // A wire length at the top of its range stays there.
        let mut b = block(&[(60, u32::MAX, 1, Some(7))]);
        let mut f = Frames::new(&mut b);
        f.next_batch(Some(LinkType::Ethernet), &mut out, 8, &mut w);
        assert_eq!((out[0].caplen, out[0].orig_len), (64, u32::MAX));
        // Not on links without Ethernet headers.
        let mut b = block(&[(60, 60, 1, Some(7))]);
        let mut f = Frames::new(&mut b);
        f.next_batch(Some(LinkType::Raw), &mut out, 8, &mut w);
        assert_eq!((out[0].caplen, w.vlan_restored), (60, 2));
    }

    #[test]
    fn with_any_interface_each_frame_says_its_link_type() {
        let mut b = block(&[
            (60, 60, 1, None),
            (60, 60, 2, None),
            (60, 60, 3, None),
            (60, 60, 4, None),
        ]);
        // Frame 0 Ethernet, 1 a loopback packet leaving (its copy coming
        // back in is frame 2), 3 an unsupported type (ARPHRD_IEEE80211_PRISM).
        let mut at = 48;
        for (hatype, pkttype) in [
            (1u16, 0u8),
            (772, libc::PACKET_OUTGOING),
            (772, 0),
            (802, 0),
        ] {
            b[at + FRAME_SLL + SLL_HATYPE..at + FRAME_SLL + SLL_HATYPE + 2]
                .copy_from_slice(&hatype.to_ne_bytes());
            b[at + FRAME_SLL + SLL_PKTTYPE] = pkttype;
            at += (MAC_AT + 60).next_multiple_of(16);
        }
        let mut f = Frames::new(&mut b);
        let (mut out, mut w) = (Vec::new(), Walked::default());
        assert_eq!(f.next_batch(None, &mut out, 8, &mut w), 2);
        assert_eq!(
            out.iter().map(|p| p.ts / 1_000_000_000).collect::<Vec<_>>(),
            [1, 3]
        );
        assert!(out.iter().all(|p| p.link == LinkType::Ethernet));
        assert_eq!((w.numbered, w.unsupported), (2, 1));
    }

    #[test]
    fn a_frame_pointing_outside_its_block_ends_the_walk() {
        let mut b = block(&[(60, 60, 1, None), (60, 60, 2, None)]);
        // The second frame claims more bytes than the block has.
        let second = 48 + (MAC_AT + 60).next_multiple_of(16);
        b[second + FRAME_SNAPLEN..second + FRAME_SNAPLEN + 4]
            .copy_from_slice(&90000u32.to_ne_bytes());
        let mut f = Frames::new(&mut b);
        let (mut out, mut w) = (Vec::new(), Walked::default());
        assert_eq!(
            f.next_batch(Some(LinkType::Ethernet), &mut out, 8, &mut w),
            1
        );
        assert_eq!(
            f.next_batch(Some(LinkType::Ethernet), &mut out, 8, &mut w),
            0
        );
        assert_eq!(w.bad_frames, 1);
    }

    #[test]
    fn any_bytes_walk_without_panicking() {
        // Made-up blocks: every frame handed out lies inside the bytes.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut b = vec![0u8; 256];
            for x in b.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *x = (state % 7) as u8 * 8;
            }
            let len = b.len();
            let mut f = Frames::new(&mut b);
            let (mut out, mut w) = (Vec::new(), Walked::default());
            while f.next_batch(Some(LinkType::Ethernet), &mut out, 4, &mut w) > 0 {
                for p in &out {
                    assert!(p.offset + p.caplen as usize <= len);
                }
            }
        }
    }

    /// Runs a capture filter over a frame of interface `ifindex`.
    fn filter_keeps(p: &[libc::sock_filter], ifindex: u32) -> u32 {
        use crate::source::fanout::{JMP_JEQ_K, LD_W_ABS, RET_K};
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = p[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => a = ifindex,
                JMP_JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
                RET_K => return i.k,
                other => panic!("opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn the_capture_filter_keeps_the_interfaces_listed() {
        assert_eq!(filter_keeps(&capture_filter(&[4], 256), 9), 256);
        let p = capture_filter(&[3, 7, 12], 200);
        for (ix, kept) in [(3, 200), (7, 200), (12, 200), (1, 0), (8, 0)] {
            assert_eq!(filter_keeps(&p, ix), kept, "ifindex {ix}");
        }
    }

    #[test]
    fn interface_lists_are_checked() {
        let e = Ring::open(&LiveConfig::new("lo,,lo"), None)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("separated by commas")));
        let e = Ring::open(&LiveConfig::new("lo,any"), None)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("already takes every interface")));
        let e = Ring::open(&LiveConfig::new("lo,eb-nosuch0"), None)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("interface eb-nosuch0: no such interface")
        );
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = Ring::open(&LiveConfig::new("eb-nosuch0"), None)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("interface eb-nosuch0: no such interface")
        );
    }
}
