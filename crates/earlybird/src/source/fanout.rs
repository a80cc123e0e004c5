//! How the kernel spreads a live interface's packets over the shards'
//! sockets (an AF_PACKET fanout group).
//!
//! Contract: [`Fanout::Hosts`] (the default) is a classic BPF program run
//! by the kernel for every packet ([`host_pair_program`]): it adds the
//! 32-bit words of the outermost IP header's source and destination
//! addresses, mixes the sum (a multiplicative hash) and takes it modulo
//! the number of sockets.
//! The sum does not change when the addresses swap, so both directions of
//! a session reach the same socket; and since only the outer addresses
//! count, so do both directions of a flow inside a tunnel (GRE, VXLAN,
//! GTP-U and IP-in-IP carry each direction between the same two tunnel
//! endpoints) and every fragment of a datagram. Every flow is then whole
//! in one shard, as with files, and the records are those of one shard.
//! Packets that are neither IPv4 nor IPv6 once the kernel has taken off a
//! VLAN tag (MPLS, PPPoE, a second VLAN tag, ARP) all go to socket 0, so
//! they stay whole too. The price: a shard's share is a set of host pairs,
//! so one very busy pair loads one shard.
//!
//! [`Fanout::Flows`] is the kernel's own `PACKET_FANOUT_HASH`, a symmetric
//! hash of addresses *and ports* of the outer header: better spread over
//! many flows between few hosts, but the two directions of a tunnelled flow
//! (whose outer ports differ by direction, as VXLAN's do) and the fragments
//! of a datagram may reach different shards, which then each report part
//! of the flow.

/// How packets are spread over the sockets of a live run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fanout {
    /// By outer host pair (a classic BPF program): flows always whole.
    #[default]
    Hosts,
    /// By the kernel's flow hash (addresses and ports of the outer header).
    Flows,
}

impl Fanout {
    /// Parses `hosts` or `flows`.
    pub fn parse(s: &str) -> Option<Fanout> {
        match s {
            "hosts" => Some(Fanout::Hosts),
            "flows" => Some(Fanout::Flows),
            _ => None,
        }
    }
}

// Classic BPF opcodes (class | operation | source, linux/bpf_common.h).
/// BPF_LD | BPF_W | BPF_ABS.
pub(crate) const LD_W_ABS: u16 = 0x20;
/// BPF_ALU | BPF_ADD | BPF_X.
const ALU_ADD_X: u16 = 0x0c;
/// BPF_ALU | BPF_MUL | BPF_K.
const ALU_MUL_K: u16 = 0x24;
/// BPF_ALU | BPF_RSH | BPF_K.
const ALU_RSH_K: u16 = 0x74;
/// BPF_ALU | BPF_MOD | BPF_K.
const ALU_MOD_K: u16 = 0x94;
/// BPF_JMP | BPF_JA.
const JMP_JA: u16 = 0x05;
/// BPF_JMP | BPF_JEQ | BPF_K.
pub(crate) const JMP_JEQ_K: u16 = 0x15;
/// BPF_RET | BPF_K.
pub(crate) const RET_K: u16 = 0x06;
/// BPF_RET | BPF_A.
const RET_A: u16 = 0x16;
/// BPF_MISC | BPF_TAX.
const TAX: u16 = 0x07;

/// Offsets relative to the network header, whatever the link header.
const NET: u32 = libc::SKF_NET_OFF as u32;
/// The packet's EtherType (`skb->protocol`, after VLAN untagging).
const PROTOCOL: u32 = (libc::SKF_AD_OFF + libc::SKF_AD_PROTOCOL) as u32;

pub(crate) fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The classic BPF program of [`Fanout::Hosts`] for `members` sockets
/// (see the module docs). Returns the socket index.
pub fn host_pair_program(members: u32) -> Vec<libc::sock_filter> {
    let mut p = vec![op(LD_W_ABS, 0, 0, PROTOCOL)];
    // IPv4: source + destination.
    let v4 = [
        op(LD_W_ABS, 0, 0, NET + 12),
        op(TAX, 0, 0, 0),
        op(LD_W_ABS, 0, 0, NET + 16),
        op(ALU_ADD_X, 0, 0, 0),
    ];
    // IPv6: the eight words of source and destination.
    let mut v6 = vec![op(LD_W_ABS, 0, 0, NET + 8)];
    for w in 1..8 {
        v6.push(op(TAX, 0, 0, 0));
        v6.push(op(LD_W_ABS, 0, 0, NET + 8 + 4 * w));
        v6.push(op(ALU_ADD_X, 0, 0, 0));
    }
    // Mix (a multiplicative hash: the high half of the product depends on
    // every bit of the sum), then the socket index.
    let fold = [
        op(ALU_MUL_K, 0, 0, 0x9e37_79b1),
        op(ALU_RSH_K, 0, 0, 16),
        op(ALU_MOD_K, 0, 0, members.max(1)),
        op(RET_A, 0, 0, 0),
    ];
    // Layout: [ld proto] [jeq v4] [v4 … ja mix] [jeq v6] [v6 …] [mix …] [ret 0]
    let v4_len = v4.len() as u8 + 1; // with its jump to the fold
    p.push(op(JMP_JEQ_K, 0, v4_len, 0x0800));
    p.extend(v4);
    p.push(op(JMP_JA, 0, 0, 1 + v6.len() as u32));
    p.push(op(JMP_JEQ_K, 0, (v6.len() + fold.len()) as u8, 0x86dd));
    p.extend(v6);
    p.extend(fold);
    p.push(op(RET_K, 0, 0, 0));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the subset of classic BPF the program uses over a packet given
    /// by its EtherType and network-layer bytes (loads past the end return
    /// 0, as the kernel's do).
    fn run(p: &[libc::sock_filter], proto: u16, net: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        loop {
            let i = p[pc];
            pc += 1;
            match i.code {
                LD_W_ABS if i.k == PROTOCOL => a = u32::from(proto),
                LD_W_ABS => {
                    let at = i.k.wrapping_sub(NET) as usize;
                    match net.get(at..at + 4) {
                        Some(b) => a = u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                        None => return 0,
                    }
                }
                TAX => x = a,
                ALU_ADD_X => a = a.wrapping_add(x),
                ALU_MUL_K => a = a.wrapping_mul(i.k),
                ALU_RSH_K => a >>= i.k,
                ALU_MOD_K => a %= i.k,
                JMP_JA => pc += i.k as usize,
                JMP_JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
                RET_A => return a,
                RET_K => return i.k,
                other => panic!("opcode {other:#x} not in the program"),
            }
        }
    }

    fn v4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, 17, 0, 0];
        h.extend(src);
        h.extend(dst);
        h
    }

    fn v6(src: [u8; 16], dst: [u8; 16]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
        h.extend(src);
        h.extend(dst);
        h
    }

    #[test]
    fn both_directions_reach_one_socket_and_pairs_spread() {
        let p = host_pair_program(4);
        let mut seen = [0u32; 4];
        for i in 0..400u32 {
            let a = [10, 0, (i >> 8) as u8, i as u8];
            let b = [192, 168, 1, (i * 7) as u8];
            let s = run(&p, 0x0800, &v4(a, b));
            assert_eq!(s, run(&p, 0x0800, &v4(b, a)));
            seen[s as usize] += 1;
            let (mut a6, mut b6) = ([0u8; 16], [0u8; 16]);
            a6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
            a6[12..].copy_from_slice(&a);
            b6[..2].copy_from_slice(&[0xfe, 0x80]);
            b6[12..].copy_from_slice(&b);
            let s6 = run(&p, 0x86dd, &v6(a6, b6));
            assert_eq!(s6, run(&p, 0x86dd, &v6(b6, a6)));
            assert!(s6 < 4);
        }
        assert!(
            seen.iter().all(|&n| n > 60),
            "spread over 4 sockets: {seen:?}"
        );
    }

    #[test]
    fn other_and_short_packets_go_to_socket_zero() {
        let p = host_pair_program(3);
        assert_eq!(run(&p, 0x0806, &[0; 28]), 0);
        assert_eq!(run(&p, 0x8847, &[0; 40]), 0);
        assert_eq!(run(&p, 0x0800, &[0x45, 0, 0, 20]), 0);
    }
}
