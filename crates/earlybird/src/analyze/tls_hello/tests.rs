//! Parsing real hellos, the fingerprints against the JA4 specification's
//! example, and bad input.

use super::*;

/// JA4's two ALPN characters of `alpn`.
fn alpn_chars(alpn: &[Vec<u8>]) -> String {
    let mut s = String::new();
    push_ja4_alpn(&mut s, alpn);
    s
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The ClientHello of RFC 9001 Appendix A.2 (its CRYPTO frame's data).
fn rfc9001_client_hello() -> Vec<u8> {
    let mut v = unhex(concat!(
        "010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47",
        "f06a2b69484c00000413011302010000c000000010000e00000b6578616d706c",
        "652e636f6dff01000100000a00080006001d0017001800100007000504616c70",
        "6e000500050100000000003300260024001d00209370b2c9caa47fbabaf4559f",
        "edba753de171fa71f50f1ce15d43e994ec74d748002b0003020304000d001000",
        "0e0403050306030203080408050806002d00020101001c000240010039003204",
        "08ffffffffffffffff05048000ffff07048000ffff0801100104800075300901",
        "100f088394c8f03e51570806048000ffff",
    ));
    assert_eq!(v.len(), 4 + 0xed);
    v.shrink_to_fit();
    v
}

#[test]
fn client_hello_fields() {
    let msg = rfc9001_client_hello();
    let (ty, body) = crypto_message(&msg).unwrap().unwrap();
    assert_eq!(ty, CLIENT_HELLO);
    let ch = client_hello(body).unwrap();
    assert_eq!(ch.version, 0x0303);
    assert_eq!(ch.ciphers, vec![0x1301, 0x1302]);
    assert_eq!(
        ch.extensions,
        vec![
            0x0000, 0xff01, 0x000a, 0x0010, 0x0005, 0x0033, 0x002b, 0x000d, 0x002d, 0x001c, 0x0039
        ]
    );
    assert_eq!(ch.sni.as_deref(), Some("example.com"));
    assert_eq!(ch.alpn, vec![b"alpn".to_vec()]);
    assert_eq!(ch.versions, vec![0x0304]);
    assert_eq!(ch.groups, vec![0x001d, 0x0017, 0x0018]);
    assert!(ch.point_formats.is_empty());
    assert_eq!(
        ch.sig_algs,
        vec![0x0403, 0x0503, 0x0603, 0x0203, 0x0804, 0x0805, 0x0806]
    );
    assert!(!ch.ech);
    assert_eq!(
        ja3_string(&ch),
        "771,4865-4866,0-65281-10-16-5-51-43-13-45-28-57,29-23-24,"
    );
    // JA4 `a` by hand: QUIC, 1.3, SNI, 2 ciphers, 11 extensions, "alpn".
    assert!(ja4(&ch, true).starts_with("q13d0211an_"));
    assert!(ja4(&ch, false).starts_with("t13d0211an_"));
}

#[test]
fn record_layer_joins_and_splits() {
    let msg = rfc9001_client_hello();
    // One record.
    let mut one = vec![22, 3, 1, 0, msg.len() as u8];
    one.extend_from_slice(&msg);
    let (ty, body) = record_message(&one).unwrap().unwrap();
    assert_eq!((ty, &body[..]), (1, &msg[4..]));
    assert!(matches!(body, Cow::Borrowed(_)));
    // Split over two records, and every prefix is "need more".
    let mut two = vec![22, 3, 1, 0, 100];
    two.extend_from_slice(&msg[..100]);
    two.extend_from_slice(&[22, 3, 3, 0, (msg.len() - 100) as u8]);
    two.extend_from_slice(&msg[100..]);
    let (_, body) = record_message(&two).unwrap().unwrap();
    assert_eq!(&body[..], &msg[4..]);
    for n in 0..two.len() {
        assert_eq!(record_message(&two[..n]).unwrap(), None, "prefix {n}");
    }
    // Not a handshake record; not TLS.
    assert_eq!(
        record_message(b"\x17\x03\x03\x00\x10").unwrap_err(),
        HelloError {
            offset: 0,
            what: "not a TLS handshake record"
        }
    );
    assert_eq!(record_message(b"GET / HTTP/1.1").unwrap_err().offset, 0);
}

#[test]
fn truncated_and_bad_hellos_are_errors_with_offsets() {
    let msg = rfc9001_client_hello();
    let body = &msg[4..];
    for n in 0..body.len() {
        // Any cut is an error or a hello without the cut-off extensions;
        // never a panic.
        let _ = client_hello(&body[..n]);
        let _ = server_hello(&body[..n]);
    }
    let e = client_hello(&body[..40]).unwrap_err();
    // The list's length (at 35) says 4 bytes; 3 follow it.
    assert_eq!(e.what, "truncated cipher suites");
    assert_eq!(e.offset, 37);
    let mut odd = body.to_vec();
    odd[36] = 3; // odd cipher suites length
    assert!(client_hello(&odd).is_err());
}

#[test]
fn server_hello_chosen_version() {
    // RFC 9001 Appendix A.3's ServerHello (from its CRYPTO frame).
    let m = unhex(concat!(
        "020000560303eefce7f7b37ba1d1632e96677825ddf73988cfc79825df566dc5",
        "430b9a045a1200130100002e00330024001d00209d3c940d89690b84d08a6099",
        "3c144eca684d1081287c834d5311bcf32bb9da1a002b00020304",
    ));
    let (ty, body) = crypto_message(&m).unwrap().unwrap();
    assert_eq!(ty, SERVER_HELLO);
    let sh = server_hello(body).unwrap();
    assert_eq!(sh.version, 0x0303);
    assert_eq!(sh.cipher, 0x1301);
    assert_eq!(sh.selected, Some(0x0304));
    assert_eq!(sh.chosen(), 0x0304);
    assert_eq!(version_name(sh.chosen()), "1.3");
}

#[test]
fn grease_values() {
    let all: Vec<u16> = (0..=0xffffu16).filter(|v| is_grease(*v)).collect();
    assert_eq!(all.len(), 16);
    assert_eq!(all[0], 0x0a0a);
    assert_eq!(all[15], 0xfafa);
    assert!(!is_grease(0x0a1a));
}

/// The example of FoxIO's JA4 specification (technical_details/JA4.md):
/// the hello's lists in wire order, and the fingerprint it gives.
#[test]
fn ja4_specification_example() {
    let ch = ClientHello {
        version: 0x0303,
        ciphers: vec![
            0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014,
            0x009c, 0x009d, 0x002f, 0x0035,
        ],
        extensions: vec![
            0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012,
            0x002b, 0xff01, 0x000b, 0x000a, 0x0015,
        ],
        sni: Some("example.com".into()),
        alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        versions: vec![0x0304, 0x0303],
        sig_algs: vec![
            0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
        ],
        ..ClientHello::default()
    };
    assert_eq!(ja4(&ch, false), "t13d1516h2_8daaf6152771_e5627efa2ab1");
    // GREASE anywhere changes nothing.
    let mut g = ch.clone();
    g.ciphers.insert(0, 0x2a2a);
    g.extensions.insert(0, 0xdada);
    g.extensions.push(0x1a1a);
    g.versions.insert(0, 0x7a7a);
    g.sig_algs.insert(0, 0x8a8a);
    assert_eq!(ja4(&g, false), ja4(&ch, false));
    // Without signature algorithms: the spec's second hash.
    let mut n = ch.clone();
    n.sig_algs.clear();
    assert!(ja4(&n, false).ends_with("_6d807ffa2a79"));
    // No SNI, no ALPN, no ciphers or extensions.
    let bare = ClientHello {
        version: 0x0301,
        ..ClientHello::default()
    };
    assert_eq!(ja4(&bare, false), "t10i000000_000000000000_000000000000");
}

#[test]
fn ja4_alpn_characters() {
    assert_eq!(alpn_chars(&[]), "00");
    assert_eq!(alpn_chars(&[b"http/1.1".to_vec()]), "h1");
    assert_eq!(alpn_chars(&[b"h3".to_vec()]), "h3");
    assert_eq!(alpn_chars(&[b"x".to_vec()]), "xx");
    // Non-alphanumeric ends: the first and last hex digits.
    assert_eq!(alpn_chars(&[vec![0xab]]), "ab");
    assert_eq!(alpn_chars(&[vec![0xab, 0xcd]]), "ad");
    assert_eq!(alpn_chars(&[vec![0x30, 0xab]]), "3b");
}

/// JA3 with GREASE values in every list (they are left out).
#[test]
fn ja3_leaves_grease_out() {
    let ch = ClientHello {
        version: 771,
        ciphers: vec![0x0a0a, 4865, 4866, 49195],
        extensions: vec![0x1a1a, 0, 23, 65281, 10, 11, 0x2a2a],
        groups: vec![0x3a3a, 29, 23, 24],
        point_formats: vec![0],
        ..ClientHello::default()
    };
    assert_eq!(
        ja3_string(&ch),
        "771,4865-4866-49195,0-23-65281-10-11,29-23-24,0"
    );
    // MD5 of that string, by an independent tool (coreutils md5sum).
    assert_eq!(ja3(&ch), "d513a2c384da97e772fef72dfe6d8276");
}

/// JA3 and JA4 spelled out with `format!`, as their specifications read
/// (the code before the fingerprints were written digit by digit; the
/// version's two characters are the same table's).
fn plain_ja3_ja4(ch: &ClientHello, quic: bool) -> (String, String) {
    let keep = |v: &[u16]| {
        v.iter()
            .copied()
            .filter(|x| !is_grease(*x))
            .collect::<Vec<_>>()
    };
    let dec = |v: &[u16]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("-")
    };
    let hex4 = |v: &[u16]| {
        v.iter()
            .map(|x| format!("{x:04x}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let h12 = |s: &str| {
        if s.is_empty() {
            "000000000000".to_string()
        } else {
            Sha256::digest(s.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()[..12]
                .to_string()
        }
    };
    let pf: Vec<u16> = ch.point_formats.iter().map(|&p| u16::from(p)).collect();
    let j3 = format!(
        "{},{},{},{},{}",
        ch.version,
        dec(&keep(&ch.ciphers)),
        dec(&keep(&ch.extensions)),
        dec(&keep(&ch.groups)),
        dec(&pf)
    );
    let j3: String = Md5::digest(j3.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let ciphers = keep(&ch.ciphers);
    let exts = keep(&ch.extensions);
    let v = ja4_version(keep(&ch.versions).into_iter().max().unwrap_or(ch.version));
    let alpn = match ch.alpn.first().filter(|a| !a.is_empty()) {
        None => "00".to_string(),
        Some(f) => {
            let (a, z) = (f[0], f[f.len() - 1]);
            if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() {
                format!("{}{}", a as char, z as char)
            } else {
                let h: String = f.iter().map(|b| format!("{b:02x}")).collect();
                format!("{}{}", &h[..1], &h[h.len() - 1..])
            }
        }
    };
    let a = format!(
        "{}{}{}{:02}{:02}{}",
        if quic { 'q' } else { 't' },
        v,
        if exts.contains(&EXT_SNI) { 'd' } else { 'i' },
        ciphers.len().min(99),
        exts.len().min(99),
        alpn
    );
    let mut sorted = ciphers;
    sorted.sort_unstable();
    let mut e: Vec<u16> = exts
        .into_iter()
        .filter(|x| *x != EXT_SNI && *x != EXT_ALPN)
        .collect();
    e.sort_unstable();
    let mut c = hex4(&e);
    let sigs = keep(&ch.sig_algs);
    if !sigs.is_empty() {
        c.push('_');
        c.push_str(&hex4(&sigs));
    }
    let c = if e.is_empty() { h12("") } else { h12(&c) };
    (j3, format!("{a}_{}_{c}", h12(&hex4(&sorted))))
}

#[test]
fn fingerprints_match_their_plain_spelling_on_random_hellos() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Values drawn from a short list (GREASE, SNI, ALPN, versions among
    // them) or at random.
    let value = |next: &mut dyn FnMut() -> u64| {
        const SOME: [u16; 10] = [
            0x0a0a, 0xfafa, 0, 16, 43, 0x0304, 0x0303, 0x0301, 0x1301, 0xc02b,
        ];
        let r = next();
        if r.is_multiple_of(3) {
            (r >> 8) as u16
        } else {
            SOME[(r >> 8) as usize % SOME.len()]
        }
    };
    for i in 0..3_000 {
        let mut list = |n: u64| {
            (0..next() % n)
                .map(|_| value(&mut next))
                .collect::<Vec<u16>>()
        };
        let ch = ClientHello {
            version: [0x0303, 0x0301, 0x0300][i % 3],
            ciphers: list(130),
            extensions: list(25),
            versions: list(5),
            groups: list(8),
            sig_algs: list(12),
            point_formats: (0..next() % 4).map(|_| next() as u8).collect(),
            alpn: (0..next() % 3)
                .map(|_| (0..next() % 9).map(|_| next() as u8).collect())
                .collect(),
            ..ClientHello::default()
        };
        let quic = i % 2 == 0;
        let (j3, j4) = plain_ja3_ja4(&ch, quic);
        assert_eq!(ja3(&ch), j3, "{ch:?}");
        assert_eq!(ja4(&ch, quic), j4, "{ch:?}");
    }
}
