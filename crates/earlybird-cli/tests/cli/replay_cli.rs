//! `earlybird replay` as a user meets it when something is wrong: the
//! interface, the options, the files. None of these needs root: the
//! interface name is checked before any socket is opened. (Sending itself is
//! tested in the library's `tests/replay.rs`, over a veth pair.)

use crate::common;

use std::path::PathBuf;

use common::eb;

fn sample() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap/ndpi__iphone.pcap")
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn unknown_interface_is_an_error_naming_it() {
    let (code, _, err) = eb(&["replay", &sample(), "-i", "ebr-nope0"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("earlybird: error: interface ebr-nope0: no such interface"),
        "{err}"
    );
}

#[test]
fn zero_loops_and_bad_rates_are_refused() {
    let (code, _, err) = eb(&["replay", &sample(), "-i", "lo", "--loops", "0"]);
    assert_eq!(code, 2, "usage error: {err}");
    for pps in ["0", "-5", "NaN"] {
        let (code, _, err) = eb(&["replay", &sample(), "-i", "lo", &format!("--pps={pps}")]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("pps must be a positive number"), "{err}");
    }
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let (code, _, err) = eb(&["replay", "no-such-file.pcap", "-i", "lo"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no-such-file.pcap"), "{err}");
    let (code, _, err) = eb(&["replay", "-i", "lo"]);
    assert_eq!(code, 2, "a file is required: {err}");
}
