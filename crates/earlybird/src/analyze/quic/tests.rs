//! RFC 9001 and RFC 9369 Appendix A, byte for byte.

use super::*;

use super::vectors::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const DCID: &str = "8394c8f03e515708";

#[test]
fn rfc9001_initial_keys() {
    let dcid = unhex(DCID);
    let c = initial_keys(V1, &dcid, false).unwrap();
    assert_eq!(c.key.to_vec(), unhex("1f369613dd76d5467730efcbe3b1a22d"));
    assert_eq!(c.iv.to_vec(), unhex("fa044b2f42a3fd3b46fb255c"));
    assert_eq!(c.hp.to_vec(), unhex("9f50449e04a0e810283a1e9933adedd2"));
    let s = initial_keys(V1, &dcid, true).unwrap();
    assert_eq!(s.key.to_vec(), unhex("cf3a5331653c364c88f0f379b6067e37"));
    assert_eq!(s.iv.to_vec(), unhex("0ac1493ca1905853b0bba03e"));
    assert_eq!(s.hp.to_vec(), unhex("c206b8d9b9f0f37644430b490eeaa314"));
}

#[test]
fn rfc9369_initial_keys() {
    let dcid = unhex(DCID);
    let c = initial_keys(V2, &dcid, false).unwrap();
    assert_eq!(c.key.to_vec(), unhex("8b1a0bc121284290a29e0971b5cd045d"));
    assert_eq!(c.iv.to_vec(), unhex("91f73e2351d8fa91660e909f"));
    assert_eq!(c.hp.to_vec(), unhex("45b95e15235d6f45a6b19cbcb0294ba9"));
    let s = initial_keys(V2, &dcid, true).unwrap();
    assert_eq!(s.key.to_vec(), unhex("82db637861d55e1d011f19ea71d5d2a7"));
    assert_eq!(s.iv.to_vec(), unhex("dd13c276499c0249d3310652"));
    assert_eq!(s.hp.to_vec(), unhex("edf6d05c83121201b436e16877593c3a"));
    assert!(initial_keys(0x1234_5678, &dcid, false).is_none());
}

/// Opens a client Initial and checks the plaintext: the CRYPTO frame of
/// the appendix, then PADDING up to 1162 bytes.
fn client_initial(version: u32, packet: &str) {
    let d = unhex(packet);
    assert_eq!(d.len(), 1200);
    let h = long_header(&d).unwrap();
    assert!(h.initial);
    assert_eq!(h.version, version);
    assert_eq!(h.dcid, &unhex(DCID)[..]);
    assert_eq!(h.len, 1200);
    let keys = initial_keys(version, h.dcid, false).unwrap();
    let plain = open_initial(&d, &h, &keys).unwrap();
    assert_eq!(plain.len(), 1162);
    let frame = unhex(V1_CLIENT_CRYPTO);
    assert_eq!(&plain[..frame.len()], &frame[..]);
    assert!(plain[frame.len()..].iter().all(|b| *b == 0));
    let mut got = Vec::new();
    crypto_frames(&plain, |off, data| got.push((off, data.to_vec()))).unwrap();
    assert_eq!(got, vec![(0, frame[4..].to_vec())]);
    // The ClientHello inside.
    let (ty, body) = crate::analyze::tls_hello::crypto_message(&got[0].1)
        .unwrap()
        .unwrap();
    assert_eq!(ty, 1);
    let ch = crate::analyze::tls_hello::client_hello(body).unwrap();
    assert_eq!(ch.sni.as_deref(), Some("example.com"));
    assert_eq!(ch.alpn, vec![b"alpn".to_vec()]);
    // One flipped bit anywhere fails authentication.
    let mut bad = d.clone();
    bad[600] ^= 1;
    assert_eq!(
        open_initial(&bad, &h, &keys).unwrap_err().what,
        "Initial packet does not authenticate"
    );
    // Cut by a snap length.
    assert!(open_initial(&d[..256], &h, &keys)
        .unwrap_err()
        .what
        .contains("snap length"));
}

#[test]
fn rfc9001_client_initial() {
    client_initial(V1, V1_CLIENT_PACKET);
}

#[test]
fn rfc9369_client_initial() {
    client_initial(V2, V2_CLIENT_PACKET);
}

fn server_initial(version: u32, packet: &str) {
    let d = unhex(packet);
    let h = long_header(&d).unwrap();
    assert!(h.initial);
    assert_eq!(h.scid, &unhex("f067a5502a4262b5")[..]);
    assert_eq!(h.len, d.len());
    let keys = initial_keys(version, &unhex(DCID), true).unwrap();
    let plain = open_initial(&d, &h, &keys).unwrap();
    assert_eq!(plain, unhex(V1_SERVER_FRAMES));
    let mut got = Vec::new();
    crypto_frames(&plain, |off, data| got.push((off, data.len()))).unwrap();
    assert_eq!(got, vec![(0, 0x5a)]);
}

#[test]
fn rfc9001_server_initial() {
    server_initial(V1, V1_SERVER_PACKET);
}

#[test]
fn rfc9369_server_initial() {
    server_initial(V2, V2_SERVER_PACKET);
}

#[test]
fn bad_and_short_input_is_an_error() {
    let d = unhex(V1_CLIENT_PACKET);
    for n in 0..40 {
        let _ = long_header(&d[..n]);
    }
    assert_eq!(
        long_header(&[0x40, 0, 0, 0, 1]).unwrap_err().what,
        "not a long header"
    );
    assert!(crypto_frames(&[0x06, 0x00, 0x10, 1, 2], |_, _| {}).is_err());
    assert_eq!(
        crypto_frames(&[0x08], |_, _| {}).unwrap_err().what,
        "frame not allowed in an Initial packet"
    );
    assert_eq!(version_name(0xff00_001d), "draft-29");
    assert_eq!(version_name(u32::from_be_bytes(*b"Q046")), "Q046");
}

#[test]
fn gquic_chlo_sni() {
    // A CHLO with two tags: PAD (3 bytes) and SNI "a.example".
    let mut d = b"\x0d junk CHLO".to_vec();
    d.extend_from_slice(&2u16.to_le_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(b"PAD\0");
    d.extend_from_slice(&3u32.to_le_bytes());
    d.extend_from_slice(b"SNI\0");
    d.extend_from_slice(&12u32.to_le_bytes());
    d.extend_from_slice(b"---a.example");
    assert_eq!(gquic_sni(&d).unwrap().as_deref(), Some("a.example"));
    assert!(gquic_sni(&d[..d.len() - 2]).is_err());
    assert_eq!(gquic_sni(b"no hello here").unwrap(), None);
}

#[test]
fn a_length_ending_inside_the_packet_number_is_an_error() {
    // Found by the quic_initial fuzz target (crash-c231e12e): a v1
    // Initial whose Length field ends the packet before the end of its
    // packet number.
    let d = [
        0xc2, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x02,
        0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02,
        0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02,
        0x02, 0x02, 0x0a, 0x0a, 0x0a,
    ];
    let h = long_header(&d).unwrap();
    let keys = initial_keys(h.version, h.dcid, false).unwrap();
    let e = open_initial(&d, &h, &keys).unwrap_err();
    assert!(e.offset <= d.len(), "{e:?}");
}

#[test]
fn a_packet_cut_before_its_sample_errs_inside_it() {
    // Found by the quic_initial fuzz target (crash-0cb58be2): the error's
    // offset was past the end of the input.
    let crash = [0xc2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    let h = long_header(&crash).unwrap();
    let keys = initial_keys(h.version, h.dcid, false).unwrap();
    let e = open_initial(&crash, &h, &keys).unwrap_err();
    assert!(e.offset <= crash.len(), "{e:?}");
    let d = unhex(V1_CLIENT_PACKET);
    for n in 0..60 {
        if let Ok(h) = long_header(&d[..n]) {
            let keys = initial_keys(h.version, h.dcid, false).unwrap();
            let e = open_initial(&d[..n], &h, &keys).unwrap_err();
            assert!(e.offset <= n, "{n}: {e:?}");
        }
    }
}
