//! A flood of half handshakes: TLS flows whose ClientHello's first segment
//! (15,000 bytes of a hello that announces more) is never followed. The
//! handshake bytes all flows of a flow table hold stay within
//! `analyze/tls.rs`'s bound (64 MiB): the flows past it stop with
//! `tls_status` `cut-memory`, and the summary counts them. The capture
//! (about 69 MB) is made here and removed with its directory.

use crate::common::eb;

const FLOWS: u32 = 4_600;
const SEGMENT: usize = 15_000;
const BUDGET: usize = 64 << 20;

/// The first `SEGMENT` bytes of a ClientHello whose record and message
/// announce more (its cipher suites run past the segment).
fn half_hello() -> Vec<u8> {
    let mut h = vec![0x16, 0x03, 0x01];
    h.extend_from_slice(&16_300u16.to_be_bytes());
    h.extend_from_slice(&[0x01, 0x00]);
    h.extend_from_slice(&16_296u16.to_be_bytes());
    h.extend_from_slice(&[0x03, 0x03]);
    h.extend_from_slice(&[7; 32]);
    h.push(0);
    h.extend_from_slice(&16_000u16.to_be_bytes());
    while h.len() < SEGMENT {
        h.extend_from_slice(&[0x13, 0x01]);
    }
    h.truncate(SEGMENT);
    h
}

fn capture(path: &std::path::Path) {
    let hello = half_hello();
    let mut b = Vec::new();
    for v in [
        0xa1b2_c3d4u32.to_le_bytes().as_slice(),
        &2u16.to_le_bytes(),
        &4u16.to_le_bytes(),
        &[0; 8],
        &65535u32.to_le_bytes(),
        &1u32.to_le_bytes(),
    ] {
        b.extend_from_slice(v);
    }
    for k in 0..FLOWS {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
        f.extend_from_slice(&((40 + SEGMENT) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&[10, 1, (k >> 8) as u8, k as u8]);
        f.extend_from_slice(&[192, 0, 2, 1]);
        f.extend_from_slice(&(20_000 + (k % 40_000) as u16).to_be_bytes());
        f.extend_from_slice(&443u16.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(&hello);
        let us = 10 * k;
        b.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        b.extend_from_slice(&us.to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn handshake_flood_cli_half_hellos_stay_within_the_bound_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("half.pcap");
    capture(&cap);
    let csv = dir.path().join("out.csv");
    let (code, _, err) = eb(&[
        "flows",
        cap.to_str().unwrap(),
        "--analyzer",
        "tls",
        "-o",
        csv.to_str().unwrap(),
    ]);
    std::fs::remove_file(&cap).unwrap();
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == "tls_status").unwrap();
    let (mut held, mut cut) = (0, 0);
    for l in text.lines().skip(1) {
        match l.split(',').nth(at).unwrap() {
            "incomplete" => held += 1,
            "cut-memory" => cut += 1,
            s => panic!("unexpected tls_status {s}: {l}"),
        }
    }
    assert_eq!(held + cut, FLOWS as usize);
    // The flows that kept their bytes to the end held them all at once.
    assert!(held * SEGMENT <= BUDGET, "{held} flows of {SEGMENT} bytes");
    assert_eq!(held, BUDGET / SEGMENT, "the bound is used, not less");
    assert!(
        err.contains(&format!(
            "handshakes stopped by the reassembly bound: {cut} "
        )),
        "{err}"
    );
}
