//! Flow keys and the flow hash.
//!
//! Contract: [`Key::from_decoded`] turns a decoded packet into the key of its
//! flow plus the packet's direction relative to the key's canonical order.
//! In bidirectional mode the two endpoints are sorted, so both directions of
//! a session produce the same key — and therefore the same hash, which is how
//! shard selection stays symmetric (the software twin of RSS with a
//! symmetric Toeplitz key). Pure functions, no allocation.

use crate::decode::{Decoded, TunnelKind};

/// A flow key: endpoints, protocol and encapsulation context. 44 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct Key {
    /// First endpoint address (the lower one in bidirectional mode).
    pub a: [u8; 16],
    /// Second endpoint address.
    pub b: [u8; 16],
    /// Port of endpoint `a`.
    pub pa: u16,
    /// Port of endpoint `b`.
    pub pb: u16,
    /// IP protocol.
    pub proto: u8,
    /// [`TunnelKind`] as u8.
    pub tunnel: u8,
    /// Outer VLAN id.
    pub vlan: u16,
    /// GRE key, VXLAN or Geneve VNI, CAPWAP radio id; 0 for GTP-U and PPTP
    /// (their id differs by direction: both directions are one flow).
    pub tunnel_id: u32,
}

impl Key {
    /// Builds the key of `d`. Returns the key and `true` when the packet was
    /// sent by endpoint `a`.
    #[inline]
    pub fn from_decoded(d: &Decoded, bidirectional: bool) -> (Key, bool) {
        let forward = !bidirectional
            || (u128::from_be_bytes(d.src), d.sport) <= (u128::from_be_bytes(d.dst), d.dport);
        let (a, pa, b, pb) = if forward {
            (d.src, d.sport, d.dst, d.dport)
        } else {
            (d.dst, d.dport, d.src, d.sport)
        };
        (
            Key {
                a,
                b,
                pa,
                pb,
                proto: d.proto,
                tunnel: d.tunnel as u8,
                vlan: d.vlan,
                tunnel_id: d.tunnel_id,
            },
            forward,
        )
    }

    /// The key of an untunnelled, untagged IPv4 packet: the same key as
    /// [`Self::from_decoded`] gives for it, without the decoded form.
    #[inline(always)]
    pub fn from_v4(
        src: [u8; 4],
        sport: u16,
        dst: [u8; 4],
        dport: u16,
        proto: u8,
        bidirectional: bool,
    ) -> (Key, bool) {
        // The mapped addresses share their first 12 bytes, so comparing the
        // IPv4 addresses compares the mapped ones.
        let forward =
            !bidirectional || (u32::from_be_bytes(src), sport) <= (u32::from_be_bytes(dst), dport);
        let (a, pa, b, pb) = if forward {
            (src, sport, dst, dport)
        } else {
            (dst, dport, src, sport)
        };
        (
            Key {
                a: crate::decode::map_v4(a),
                b: crate::decode::map_v4(b),
                pa,
                pb,
                proto,
                tunnel: 0,
                vlan: 0,
                tunnel_id: 0,
            },
            forward,
        )
    }

    /// The tunnel kind of this key.
    pub fn tunnel_kind(&self) -> TunnelKind {
        TunnelKind::from_u8(self.tunnel)
    }
}

impl Key {
    /// The hash that picks the flow's shard: symmetric by construction
    /// (each endpoint — address and port — is hashed alone and the two
    /// results are added), so it needs no canonical order and the fast path
    /// computes it from the raw header fields ([`shard_hash_v4`]) before
    /// building a key: packets of other shards are dropped for the price of
    /// a few instructions.
    ///
    /// Why not XOR the endpoints together first (cheaper by one multiply):
    /// endpoints that differ in a structured way cancel out. On the
    /// worst-case generator's flows (10.x.y.z ↔ 172.16.y.z with related
    /// ports) XOR-folding gave a 56/44 split between two shards; hashing
    /// each endpoint first splits evenly.
    #[inline]
    pub fn shard_hash(&self) -> u64 {
        let w = |b: &[u8; 16], i: usize| {
            u64::from_le_bytes([
                b[i],
                b[i + 1],
                b[i + 2],
                b[i + 3],
                b[i + 4],
                b[i + 5],
                b[i + 6],
                b[i + 7],
            ])
        };
        let ends = endpoint(w(&self.a, 0), w(&self.a, 8), self.pa).wrapping_add(endpoint(
            w(&self.b, 0),
            w(&self.b, 8),
            self.pb,
        ));
        shard_mix(
            ends,
            self.proto as u64
                | (self.tunnel as u64) << 8
                | (self.vlan as u64) << 16
                | (self.tunnel_id as u64) << 32,
        )
    }
}

/// The key as the flow table stores it: 20 bytes, so a flow's hot state
/// fits one cache line with its counters.
///
/// IPv4 flows (with or without VLAN or tunnel context) are stored whole:
/// `a` and `b` are the addresses. IPv6 flows carry a 32-bit fold of each
/// address here and [`KIND_V6`] in `kind`; the table keeps their 16-byte
/// addresses in a side array and compares them too, so equality is exact
/// for both families.
#[derive(Debug, Clone, Copy, Eq, Default)]
#[repr(C)]
pub struct TableKey {
    /// Endpoint `a`'s IPv4 address (big-endian value), or the fold of its
    /// IPv6 address.
    pub a: u32,
    /// Endpoint `b`'s address (same form).
    pub b: u32,
    /// Port of endpoint `a`.
    pub pa: u16,
    /// Port of endpoint `b`.
    pub pb: u16,
    /// IP protocol.
    pub proto: u8,
    /// [`TunnelKind`] as u8, with [`KIND_V6`] set for IPv6.
    pub kind: u8,
    /// Outer VLAN id.
    pub vlan: u16,
    /// GRE key, VXLAN or Geneve VNI, CAPWAP radio id; 0 for GTP-U and PPTP
    /// (their id differs by direction: both directions are one flow).
    pub tunnel_id: u32,
}

impl PartialEq for TableKey {
    /// Field by field, but as three word compares without a branch between
    /// them (the derived comparison branched after each of the eight
    /// fields; the table compares keys about twice per packet).
    #[inline(always)]
    fn eq(&self, o: &TableKey) -> bool {
        let (x, y) = (self.words(), o.words());
        ((x.0 ^ y.0) | (x.1 ^ y.1) | u64::from(x.2 ^ y.2)) == 0
    }
}

/// [`TableKey::kind`] bit of IPv6 flows.
pub const KIND_V6: u8 = 0x80;

const _: () = assert!(std::mem::size_of::<TableKey>() == 20);

impl TableKey {
    /// The table key of an untunnelled, untagged IPv4 packet (the fast
    /// path): the same as [`Self::from_key`] of [`Key::from_v4`], with the
    /// packet's direction.
    #[inline(always)]
    pub fn v4(
        src: [u8; 4],
        sport: u16,
        dst: [u8; 4],
        dport: u16,
        proto: u8,
        bidirectional: bool,
    ) -> (TableKey, bool) {
        let (s, d) = (u32::from_be_bytes(src), u32::from_be_bytes(dst));
        let forward = !bidirectional || (s, sport) <= (d, dport);
        let (a, pa, b, pb) = if forward {
            (s, sport, d, dport)
        } else {
            (d, dport, s, sport)
        };
        let k = TableKey {
            a,
            b,
            pa,
            pb,
            proto,
            kind: 0,
            vlan: 0,
            tunnel_id: 0,
        };
        (k, forward)
    }

    /// The table key of a full key; `v6` says which family the addresses
    /// are (IPv4 addresses are mapped into the last 4 bytes).
    #[inline]
    pub fn from_key(key: &Key, v6: bool) -> TableKey {
        let addr = |x: &[u8; 16]| {
            if v6 {
                let w = |i: usize| u32::from_be_bytes([x[i], x[i + 1], x[i + 2], x[i + 3]]);
                w(0) ^ w(4).rotate_left(8) ^ w(8).rotate_left(16) ^ w(12).rotate_left(24)
            } else {
                u32::from_be_bytes([x[12], x[13], x[14], x[15]])
            }
        };
        TableKey {
            a: addr(&key.a),
            b: addr(&key.b),
            pa: key.pa,
            pb: key.pb,
            proto: key.proto,
            kind: key.tunnel | if v6 { KIND_V6 } else { 0 },
            vlan: key.vlan,
            tunnel_id: key.tunnel_id,
        }
    }

    /// True for an IPv6 flow.
    #[inline(always)]
    pub fn is_v6(&self) -> bool {
        self.kind & KIND_V6 != 0
    }

    /// The tunnel kind of this key.
    pub fn tunnel_kind(&self) -> TunnelKind {
        TunnelKind::from_u8(self.kind & !KIND_V6)
    }

    /// Every field, packed into two words and the tunnel id (on a
    /// little-endian machine the layout of the struct itself, so the
    /// compiler can load them whole).
    #[inline(always)]
    fn words(&self) -> (u64, u64, u32) {
        (
            self.a as u64 | (self.b as u64) << 32,
            self.pa as u64
                | (self.pb as u64) << 16
                | (self.proto as u64) << 32
                | (self.kind as u64) << 40
                | (self.vlan as u64) << 48,
            self.tunnel_id,
        )
    }
}

/// [`Key::shard_hash`] of the key [`Key::from_v4`] builds, from the header
/// fields.
#[inline(always)]
pub fn shard_hash_v4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, proto: u8) -> u64 {
    // A mapped address: bytes 0..8 zero, 8..10 zero, 10..12 0xff, then the
    // IPv4 address (little-endian words, as Key::shard_hash reads them).
    let hi = |a: [u8; 4]| 0xffff_0000 | (u32::from_le_bytes(a) as u64) << 32;
    let ends = endpoint(0, hi(src), sport).wrapping_add(endpoint(0, hi(dst), dport));
    shard_mix(ends, proto as u64)
}

/// Hash of one endpoint (address words and port).
#[inline(always)]
fn endpoint(lo: u64, hi: u64, port: u16) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    // `fold` sets the low bit of its second operand, so the port goes into
    // the first (the one bit of `hi` it drops, in byte 8 of an IPv6
    // address, only costs balance, never correctness).
    fold(lo ^ port as u64 ^ K, hi ^ 0x2545_F491_4F6C_DD1D)
}

/// Mixes the endpoint sum with the rest of the key.
#[inline(always)]
fn shard_mix(ends: u64, rest: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    fold(ends ^ rest, K)
}

/// Multiplies two words as 128 bits and folds the halves (as wyhash does).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128 | 1);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Picks the shard of a flow from its hash (high bits, so the table index,
/// which uses the low bits, stays independent of the shard).
#[inline]
pub fn shard_of(hash: u64, shards: usize) -> usize {
    (((hash >> 32) * shards as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::map_v4;

    fn pkt(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Decoded {
        Decoded {
            src: map_v4(src),
            dst: map_v4(dst),
            sport,
            dport,
            proto: 6,
            ip_version: 4,
            ..Default::default()
        }
    }

    #[test]
    fn table_keys_differing_in_any_field_are_unequal() {
        let k = TableKey {
            a: 0x0a00_0001,
            b: 0xac10_0002,
            pa: 1234,
            pb: 443,
            proto: 6,
            kind: 2,
            vlan: 100,
            tunnel_id: 77,
        };
        assert_eq!(k, k.clone());
        let changes: [fn(&mut TableKey); 8] = [
            |k| k.a ^= 1 << 31,
            |k| k.b ^= 1,
            |k| k.pa ^= 1 << 15,
            |k| k.pb ^= 1,
            |k| k.proto ^= 1 << 7,
            |k| k.kind ^= KIND_V6,
            |k| k.vlan ^= 1 << 11,
            |k| k.tunnel_id ^= 1 << 31,
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut o = k;
            change(&mut o);
            assert_ne!(k, o, "field {i}");
        }
    }

    #[test]
    fn both_directions_share_key_and_hash() {
        let p = pkt([10, 0, 0, 1], 40000, [10, 0, 0, 2], 443);
        let r = pkt([10, 0, 0, 2], 443, [10, 0, 0, 1], 40000);
        let (kp, fp) = Key::from_decoded(&p, true);
        let (kr, fr) = Key::from_decoded(&r, true);
        assert_eq!(kp, kr);
        assert_eq!(kp.shard_hash(), kr.shard_hash());
        assert_ne!(fp, fr);
    }

    #[test]
    fn v4_keys_equal_decoded_keys() {
        for (s, sp, d, dp) in [
            ([10, 0, 0, 1], 40000, [10, 0, 0, 2], 443),
            ([10, 0, 0, 2], 443, [10, 0, 0, 1], 40000),
            ([10, 0, 0, 1], 443, [10, 0, 0, 1], 80),
            ([192, 168, 1, 1], 5, [9, 255, 255, 255], 5),
        ] {
            for bidir in [true, false] {
                let from_decoded = Key::from_decoded(&pkt(s, sp, d, dp), bidir);
                assert_eq!(Key::from_v4(s, sp, d, dp, 6, bidir), from_decoded);
                let table = TableKey::from_key(&from_decoded.0, false);
                assert_eq!(
                    TableKey::v4(s, sp, d, dp, 6, bidir),
                    (table, from_decoded.1)
                );
            }
        }
    }

    #[test]
    fn shard_hash_is_symmetric_and_matches_the_fast_path() {
        let ab = pkt([10, 0, 0, 1], 40000, [10, 0, 0, 2], 443);
        let ba = pkt([10, 0, 0, 2], 443, [10, 0, 0, 1], 40000);
        for bidir in [true, false] {
            let (k1, _) = Key::from_decoded(&ab, bidir);
            let (k2, _) = Key::from_decoded(&ba, bidir);
            assert_eq!(k1.shard_hash(), k2.shard_hash());
            assert_eq!(
                k1.shard_hash(),
                shard_hash_v4([10, 0, 0, 1], 40000, [10, 0, 0, 2], 443, 6)
            );
        }
        let other = pkt([10, 0, 0, 1], 40001, [10, 0, 0, 2], 443);
        assert_ne!(
            Key::from_decoded(&ab, true).0.shard_hash(),
            Key::from_decoded(&other, true).0.shard_hash()
        );
    }

    #[test]
    fn unidirectional_keys_differ() {
        let p = pkt([10, 0, 0, 1], 40000, [10, 0, 0, 2], 443);
        let r = pkt([10, 0, 0, 2], 443, [10, 0, 0, 1], 40000);
        let (kp, fp) = Key::from_decoded(&p, false);
        let (kr, fr) = Key::from_decoded(&r, false);
        assert_ne!(kp, kr);
        assert!(fp && fr);
    }

    #[test]
    fn shards_spread_evenly() {
        // Many clients of one server; and the worst-case generator's plan,
        // where client and server share their low address bits and the
        // ports are related (XOR-folding the endpoints split it 56/44).
        let plans: [fn(u32) -> Decoded; 2] = [
            |i| {
                let b = i.to_be_bytes();
                pkt([10, b[1], b[2], b[3]], 1024, [172, 16, 0, 1], 80)
            },
            |i| {
                let b = (i & 0xF_FFFF).to_be_bytes();
                let (sp, dp) = (1024 + (i % 64_000) as u16, 1 + (i % 65_000) as u16);
                pkt([10, b[1], b[2], b[3]], sp, [172, 16 | b[1], b[2], b[3]], dp)
            },
        ];
        for plan in plans {
            let mut counts = [0u32; 4];
            for i in 0..40_000u32 {
                let (k, _) = Key::from_decoded(&plan(i), true);
                counts[shard_of(k.shard_hash(), 4)] += 1;
            }
            for c in counts {
                assert!((9_600..10_400).contains(&c), "{counts:?}");
            }
        }
    }

    #[test]
    fn vlan_and_tunnel_are_part_of_the_key() {
        let p = pkt([10, 0, 0, 1], 1, [10, 0, 0, 2], 2);
        let mut q = p;
        q.vlan = 7;
        assert_ne!(Key::from_decoded(&p, true).0, Key::from_decoded(&q, true).0);
        let mut t = p;
        t.tunnel = TunnelKind::Vxlan;
        t.tunnel_id = 42;
        let h = |d: &Decoded| Key::from_decoded(d, true).0.shard_hash();
        assert_ne!(h(&p), h(&t));
        assert_ne!(h(&p), h(&q));
    }
}

/// The Toeplitz hash of RSS (as NICs compute it), over the key's bytes, with
/// the symmetric 0x6d5a key. Kept to compare against [`Key::shard_hash`] (see
/// BENCHMARKS.md); a table-driven byte-at-a-time implementation.
pub mod toeplitz {
    use super::Key;
    use std::sync::OnceLock;

    /// Bytes of the key hashed: addresses, ports, protocol, tunnel, VLAN, id.
    const INPUT: usize = 44;

    fn table() -> &'static [[u32; 256]; INPUT] {
        static T: OnceLock<Box<[[u32; 256]; INPUT]>> = OnceLock::new();
        T.get_or_init(|| {
            // The symmetric key: 0x6d5a repeated (Woo & Park), long enough
            // for INPUT bytes + 4.
            let key: Vec<u8> = (0..INPUT + 4)
                .map(|i| if i % 2 == 0 { 0x6d } else { 0x5a })
                .collect();
            let mut t = Box::new([[0u32; 256]; INPUT]);
            for (pos, row) in t.iter_mut().enumerate() {
                for (v, out) in row.iter_mut().enumerate() {
                    let mut h = 0u32;
                    for bit in 0..8 {
                        if v & (0x80 >> bit) != 0 {
                            // The 32-bit window of the key starting at bit
                            // pos*8 + bit.
                            let start = pos * 8 + bit;
                            let mut w = 0u64;
                            for k in 0..5 {
                                w = (w << 8) | key[start / 8 + k] as u64;
                            }
                            h ^= (w >> (8 - start % 8)) as u32;
                        }
                    }
                    *out = h;
                }
            }
            t
        })
    }

    fn bytes(k: &Key) -> [u8; INPUT] {
        let mut b = [0u8; INPUT];
        b[..16].copy_from_slice(&k.a);
        b[16..32].copy_from_slice(&k.b);
        b[32..34].copy_from_slice(&k.pa.to_be_bytes());
        b[34..36].copy_from_slice(&k.pb.to_be_bytes());
        b[36] = k.proto;
        b[37] = k.tunnel;
        b[38..40].copy_from_slice(&k.vlan.to_be_bytes());
        b[40..44].copy_from_slice(&k.tunnel_id.to_be_bytes());
        b
    }

    /// 32-bit Toeplitz hash of `k`, spread to 64 bits (the table takes its
    /// bucket from the low bits, its tag and the shard from the high ones).
    pub fn hash(k: &Key) -> u64 {
        let t = table();
        let mut h = 0u32;
        for (i, b) in bytes(k).iter().enumerate() {
            h ^= t[i][*b as usize];
        }
        (h as u64) | ((h as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) & 0xFFFF_FFFF_0000_0000)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Bit-serial reference straight from the definition.
        fn reference(input: &[u8], key: &[u8]) -> u32 {
            let mut h = 0u32;
            for (i, byte) in input.iter().enumerate() {
                for bit in 0..8 {
                    if byte & (0x80 >> bit) != 0 {
                        let start = i * 8 + bit;
                        let mut w = 0u64;
                        for k in 0..5 {
                            w = (w << 8) | key[start / 8 + k] as u64;
                        }
                        h ^= (w >> (8 - start % 8)) as u32;
                    }
                }
            }
            h
        }

        #[test]
        fn table_matches_bit_serial_definition() {
            let key: Vec<u8> = (0..48)
                .map(|i| if i % 2 == 0 { 0x6d } else { 0x5a })
                .collect();
            let k = Key {
                a: [7; 16],
                b: [200; 16],
                pa: 1234,
                pb: 443,
                proto: 6,
                tunnel: 0,
                vlan: 3,
                tunnel_id: 9,
            };
            assert_eq!(hash(&k) as u32, reference(&bytes(&k), &key));
        }
    }
}
