//! Frames kept whole although the snap length is short: those that may
//! carry a handshake the payload labellers read (a QUIC Initial is at
//! least 1,200 bytes, a post-quantum ClientHello about 1,800, and live
//! capture keeps 256 bytes of a frame unless told otherwise).
//!
//! Contract:
//! - The rule, over an Ethernet frame carrying IPv4 (not a later fragment)
//!   or IPv6 (no extension header) and TCP or UDP: the whole frame
//!   ([`WHOLE`] bytes at most) when either port is 53; for TCP, when the
//!   payload starts with a TLS handshake record (`16 03`) or `SSH-`, or
//!   with an HTTP method (`GET `, `POST`, `HEAD`, `PUT `, `DELE`, `OPTI`,
//!   `PATC`, `CONN`) and either port is 80; for UDP, when either port is
//!   443 and the payload starts with a QUIC long header (its first bit
//!   set). Every other frame keeps `snaplen` bytes.
//! - [`program`] is the rule as a classic BPF socket filter whose return
//!   value is the bytes to keep, for a packet socket (the kernel has
//!   taken any VLAN tag out of the frame); it never reads past the frame
//!   (a load there would drop it), so a frame too short for a check
//!   keeps `snaplen` bytes. [`splice`] puts it in place of the accepting
//!   `ret`s of another program (the choice of interfaces, the capture
//!   filter).
//! - [`keep`] is the same rule in user space (AF_XDP), over the frame's
//!   bytes, stepping over up to two VLAN tags.

/// Bytes kept of a frame the rule keeps whole (as libpcap's default).
pub const WHOLE: u32 = 262_144;

/// HTTP request methods, as the first four bytes of a payload.
const METHODS: [&[u8; 4]; 8] = [
    b"GET ", b"POST", b"HEAD", b"PUT ", b"DELE", b"OPTI", b"PATC", b"CONN",
];

/// The bytes to keep of `frame` (an Ethernet frame) under the rule.
pub fn keep(frame: &[u8], snaplen: u32) -> u32 {
    if whole(frame).is_some_and(|w| w) {
        WHOLE
    } else {
        snaplen
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Whether the rule keeps `frame` whole (`None`: too short to say).
fn whole(frame: &[u8]) -> Option<bool> {
    let mut at = 12;
    let mut ether = be16(frame, at)?;
    for _ in 0..2 {
        if ether == 0x8100 || ether == 0x88a8 {
            at += 4;
            ether = be16(frame, at)?;
        }
    }
    let ip = at + 2;
    let (proto, l4) = match ether {
        0x0800 => {
            if be16(frame, ip + 6)? & 0x1fff != 0 {
                return Some(false);
            }
            (
                *frame.get(ip + 9)?,
                ip + 4 * usize::from(frame.get(ip)? & 0xf),
            )
        }
        0x86dd => (*frame.get(ip + 6)?, ip + 40),
        _ => return Some(false),
    };
    let (sport, dport) = (be16(frame, l4)?, be16(frame, l4 + 2)?);
    let either = |p: u16| sport == p || dport == p;
    match proto {
        6 => {
            if either(53) {
                return Some(true);
            }
            let payload = l4 + 4 * usize::from(frame.get(l4 + 12)? >> 4);
            let head: &[u8] = frame.get(payload..payload + 4)?;
            Some(
                head[..2] == [0x16, 0x03]
                    || head == b"SSH-"
                    || (either(80) && METHODS.iter().any(|m| head == &m[..])),
            )
        }
        17 => Some(either(53) || (either(443) && frame.get(l4 + 8)? & 0x80 != 0)),
        _ => Some(false),
    }
}

/// Classic BPF opcodes (linux/filter.h).
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_W_IND: u16 = 0x40;
const LD_H_IND: u16 = 0x48;
const LD_B_IND: u16 = 0x50;
const LD_W_LEN: u16 = 0x80;
const LD_MEM: u16 = 0x60;
const ST: u16 = 0x02;
const LDX_IMM: u16 = 0x01;
const LDX_MEM: u16 = 0x61;
const LDX_MSH: u16 = 0xb1;
const ADD_K: u16 = 0x04;
const ADD_X: u16 = 0x0c;
const AND_K: u16 = 0x54;
const RSH_K: u16 = 0x74;
const TAX: u16 = 0x07;
const TXA: u16 = 0x87;
const JGE_K: u16 = 0x35;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGE_X: u16 = 0x3d;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// A program being assembled, with jumps to labels resolved at the end.
struct Asm {
    p: Vec<libc::sock_filter>,
    /// (instruction, label if true, label if false) of each jump.
    jumps: Vec<(usize, Option<Label>, Option<Label>)>,
    at: Vec<Option<usize>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Whole = 0,
    Snap,
    V4,
    V6,
    Proto,
    Udp,
    Quic,
    TcpPayload,
    Http,
    Ports,
}

impl Asm {
    fn op(&mut self, code: u16, k: u32) {
        self.p.push(libc::sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        });
    }
    /// A conditional jump: on to the next instruction where a label is
    /// `None`.
    fn jump(&mut self, code: u16, k: u32, t: Option<Label>, f: Option<Label>) {
        self.jumps.push((self.p.len(), t, f));
        self.op(code, k);
    }
    fn label(&mut self, l: Label) {
        self.at[l as usize] = Some(self.p.len());
    }
    fn finish(mut self) -> Vec<libc::sock_filter> {
        for &(i, t, f) in &self.jumps {
            let off = |l: Option<Label>| match l {
                None => 0,
                // Labels lie ahead of every jump to them, within reach.
                Some(l) => (self.at[l as usize].unwrap_or(i + 1) - i - 1) as u32,
            };
            if self.p[i].code == JA {
                self.p[i].k = off(t);
            } else {
                self.p[i].jt = off(t) as u8;
                self.p[i].jf = off(f) as u8;
            }
        }
        self.p
    }
}

/// The rule as a classic BPF program returning the bytes to keep (see the
/// module docs). Scratch memory: M[0] destination port, M[1] source
/// port, M[2] the offset of the TCP payload, M[3] its first four bytes,
/// M[4] the IP header's length, M[5] the protocol.
pub fn program(snaplen: u32) -> Vec<libc::sock_filter> {
    use Label::*;
    let mut a = Asm {
        p: Vec::new(),
        jumps: Vec::new(),
        at: vec![None; 10],
    };
    a.op(LD_W_LEN, 0);
    a.jump(JGE_K, 24, None, Some(Snap));
    a.op(LD_H_ABS, 12);
    a.jump(JEQ_K, 0x0800, Some(V4), None);
    a.jump(JEQ_K, 0x86dd, Some(V6), Some(Snap));
    a.label(V4);
    a.op(LD_H_ABS, 20);
    a.jump(JSET_K, 0x1fff, Some(Snap), None);
    a.op(LDX_MSH, 14);
    a.op(LD_B_ABS, 23);
    a.jump(JA, 0, Some(Proto), None);
    a.label(V6);
    a.op(LDX_IMM, 40);
    a.op(LD_B_ABS, 20);
    a.label(Proto);
    // X: the IP header's length; A: the protocol.
    a.jump(JEQ_K, 6, Some(Ports), None);
    a.jump(JEQ_K, 17, Some(Ports), Some(Snap));
    a.label(Ports);
    a.op(ST, 5);
    a.op(TXA, 0);
    a.op(ST, 4);
    a.op(ADD_K, 18);
    a.op(TAX, 0);
    a.op(LD_W_LEN, 0);
    a.jump(JGE_X, 0, None, Some(Snap));
    a.op(LDX_MEM, 4);
    a.op(LD_H_IND, 16);
    a.op(ST, 0);
    a.jump(JEQ_K, 53, Some(Whole), None);
    a.op(LD_H_IND, 14);
    a.op(ST, 1);
    a.jump(JEQ_K, 53, Some(Whole), None);
    a.op(LD_MEM, 5);
    a.jump(JEQ_K, 17, Some(Udp), None);
    // TCP: the payload's offset, then its first four bytes if it has them.
    a.op(TXA, 0);
    a.op(ADD_K, 14 + 13);
    a.op(TAX, 0);
    a.op(LD_W_LEN, 0);
    a.jump(JGE_X, 0, None, Some(Snap));
    a.op(LDX_MEM, 4);
    a.op(LD_B_IND, 14 + 12);
    a.op(AND_K, 0xf0);
    a.op(RSH_K, 2);
    a.op(ADD_X, 0);
    a.op(ADD_K, 14);
    a.op(ST, 2);
    a.op(ADD_K, 4);
    a.op(TAX, 0);
    a.op(LD_W_LEN, 0);
    a.jump(JGE_X, 0, Some(TcpPayload), Some(Snap));
    a.label(TcpPayload);
    a.op(LDX_MEM, 2);
    a.op(LD_W_IND, 0);
    a.op(ST, 3);
    a.op(RSH_K, 16);
    a.jump(JEQ_K, 0x1603, Some(Whole), None);
    a.op(LD_MEM, 3);
    a.jump(JEQ_K, u32::from_be_bytes(*b"SSH-"), Some(Whole), None);
    a.op(LD_MEM, 0);
    a.jump(JEQ_K, 80, Some(Http), None);
    a.op(LD_MEM, 1);
    a.jump(JEQ_K, 80, Some(Http), Some(Snap));
    a.label(Http);
    a.op(LD_MEM, 3);
    for m in METHODS {
        a.jump(JEQ_K, u32::from_be_bytes(*m), Some(Whole), None);
    }
    a.jump(JA, 0, Some(Snap), None);
    // UDP: QUIC's long header on port 443.
    a.label(Udp);
    a.op(LD_MEM, 0);
    a.jump(JEQ_K, 443, Some(Quic), None);
    a.op(LD_MEM, 1);
    a.jump(JEQ_K, 443, Some(Quic), Some(Snap));
    a.label(Quic);
    a.op(LD_MEM, 4);
    a.op(ADD_K, 14 + 8 + 1);
    a.op(TAX, 0);
    a.op(LD_W_LEN, 0);
    a.jump(JGE_X, 0, None, Some(Snap));
    a.op(LDX_MEM, 4);
    a.op(LD_B_IND, 14 + 8);
    a.jump(JSET_K, 0x80, Some(Whole), Some(Snap));
    a.label(Snap);
    a.op(RET_K, snaplen);
    a.label(Whole);
    a.op(RET_K, WHOLE);
    a.finish()
}

/// `prog` with every `ret` of a non-zero value (a frame it keeps) turned
/// into a jump to the rule, appended after it: the frames `prog` keeps
/// keep what the rule says. (Classic BPF jumps only forward; `ja` reaches
/// any distance.)
pub fn splice(prog: &[libc::sock_filter], snaplen: u32) -> Vec<libc::sock_filter> {
    let end = prog.len();
    let mut p: Vec<libc::sock_filter> = prog
        .iter()
        .enumerate()
        .map(|(i, ins)| {
            if ins.code == RET_K && ins.k != 0 {
                libc::sock_filter {
                    code: JA,
                    jt: 0,
                    jf: 0,
                    k: (end - i - 1) as u32,
                }
            } else {
                *ins
            }
        })
        .collect();
    p.extend(program(snaplen));
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// An Ethernet frame: IPv4 (or IPv6) carrying `proto` from `sport` to
    /// `dport` with `payload` (TCP with a 20-byte header).
    fn frame(v6: bool, proto: u8, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        let l4_len = if proto == 6 { 20 } else { 8 } + payload.len();
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4_len as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&[0x20; 32]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        }
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        if proto == 6 {
            f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            f.extend_from_slice(&(l4_len as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
        }
        f.extend_from_slice(payload);
        f.resize(f.len().max(60), 0);
        f
    }

    /// What the kernel keeps of `frame` under `prog`: the program attached
    /// to a datagram socket, whose filter trims datagrams as a packet
    /// socket's trims frames (0: the datagram was dropped).
    fn kernel_keeps(prog: &[libc::sock_filter], frame: &[u8]) -> usize {
        let mut fds = [0; 2];
        // SAFETY: plain syscall filling two descriptors.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0);
        // SAFETY: fresh descriptors this test owns.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        super::super::netdev::set_opt(&b, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
            .expect("the kernel takes the program");
        // SAFETY: sends and receives into buffers of the sizes given.
        unsafe {
            libc::send(a.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0);
            let mut buf = vec![0u8; 4096];
            let n = libc::recv(
                b.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            );
            n.max(0) as usize
        }
    }

    #[test]
    fn handshakes_are_kept_whole_in_the_kernel_and_in_user_space() {
        let hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
        let long = [0xc3, 0, 0, 0, 1, 8];
        let cases: Vec<(&str, Vec<u8>, bool)> = vec![
            ("TLS on 443", frame(false, 6, 40000, 443, &hello), true),
            (
                "TLS on 8443, IPv6",
                frame(true, 6, 40000, 8443, &hello),
                true,
            ),
            (
                "TLS application data",
                frame(false, 6, 40000, 443, &[0x17, 3, 3, 0]),
                false,
            ),
            (
                "QUIC long header",
                frame(false, 17, 50000, 443, &long),
                true,
            ),
            (
                "QUIC from the server, IPv6",
                frame(true, 17, 443, 50000, &long),
                true,
            ),
            (
                "QUIC short header",
                frame(false, 17, 50000, 443, &[0x43, 1, 2, 3]),
                false,
            ),
            (
                "UDP 4433 long header",
                frame(false, 17, 50000, 4433, &long),
                false,
            ),
            ("DNS over UDP", frame(false, 17, 5353, 53, b"abcd"), true),
            (
                "DNS answer over TCP, IPv6",
                frame(true, 6, 53, 40000, b"\x00\x1dab"),
                true,
            ),
            (
                "SSH banner",
                frame(false, 6, 2222, 40000, b"SSH-2.0-x"),
                true,
            ),
            (
                "HTTP GET on 80",
                frame(false, 6, 40000, 80, b"GET / HTTP/1.1"),
                true,
            ),
            (
                "HTTP POST on 80, IPv6",
                frame(true, 6, 40000, 80, b"POST /"),
                true,
            ),
            (
                "GET on 8080",
                frame(false, 6, 40000, 8080, b"GET / HTTP/1.1"),
                false,
            ),
            (
                "HTTP response",
                frame(false, 6, 80, 40000, b"HTTP/1.1 200"),
                false,
            ),
            (
                "TCP without payload",
                frame(false, 6, 40000, 443, &[]),
                false,
            ),
            ("ICMP", frame(false, 1, 53, 53, b"abcd"), false),
        ];
        let snaplen = 40;
        let prog = program(snaplen);
        for (what, mut f, whole) in cases {
            // Past the snap length, and a frame that ends right after the
            // bytes the rule reads.
            for pad in [0usize, 600] {
                f.resize(f.len() + pad, 0xee);
                let want = if whole { f.len() } else { snaplen as usize };
                assert_eq!(kernel_keeps(&prog, &f), want, "{what} (+{pad})");
                let user = keep(&f, snaplen) as usize;
                assert_eq!(user.min(f.len()), want, "{what} (+{pad}), user space");
            }
        }
        // Frames too short to judge keep the snap length (none is dropped).
        let f = frame(false, 6, 40000, 443, &hello);
        for cut in [10, 23, 30, 37, 45, 54, 57] {
            let g = &f[..cut];
            assert_eq!(
                kernel_keeps(&prog, g),
                cut.min(snaplen as usize),
                "cut {cut}"
            );
            assert_eq!(keep(g, snaplen), snaplen, "cut {cut}, user space");
        }
        // A later IPv4 fragment is not judged.
        let mut frag = frame(false, 6, 40000, 443, &hello);
        frag[20] = 0x00;
        frag[21] = 0x10;
        assert_eq!(kernel_keeps(&prog, &frag), snaplen as usize);
        assert_eq!(keep(&frag, snaplen), snaplen);
    }

    #[test]
    fn spliced_after_a_program_the_rule_judges_what_it_keeps() {
        // `ldh [12]; jeq #0x0800 → ret 1000; ret 0`: IPv4 only.
        let ip_only = [
            libc::sock_filter {
                code: LD_H_ABS,
                jt: 0,
                jf: 0,
                k: 12,
            },
            libc::sock_filter {
                code: JEQ_K,
                jt: 0,
                jf: 1,
                k: 0x0800,
            },
            libc::sock_filter {
                code: RET_K,
                jt: 0,
                jf: 0,
                k: 1000,
            },
            libc::sock_filter {
                code: RET_K,
                jt: 0,
                jf: 0,
                k: 0,
            },
        ];
        let prog = splice(&ip_only, 40);
        let mut f = frame(false, 6, 40000, 443, &[0x16, 3, 1, 0]);
        f.resize(300, 0);
        assert_eq!(kernel_keeps(&prog, &f), 300);
        let mut f = frame(false, 6, 40000, 443, &[0x17, 3, 1, 0]);
        f.resize(300, 0);
        assert_eq!(kernel_keeps(&prog, &f), 40);
        let mut f = frame(true, 6, 40000, 443, &[0x16, 3, 1, 0]);
        f.resize(300, 0);
        assert_eq!(kernel_keeps(&prog, &f), 0, "left out by the first program");
    }
}
