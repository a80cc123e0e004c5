//! Fuzz target for the TLS hello parser (`earlybird::analyze::tls_hello`):
//! the bytes as a TLS stream (records), as a QUIC CRYPTO stream, and as
//! the bodies of a ClientHello and a ServerHello; a parsed ClientHello
//! gets its JA3 and JA4. No function may panic; an error's offset lies
//! within the bytes given.
#![no_main]

use earlybird::analyze::tls_hello as th;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match th::record_message(data) {
        Ok(Some((_, body))) => assert!(body.len() <= data.len()),
        Ok(None) => {}
        Err(e) => assert!(e.offset <= data.len()),
    }
    if let Ok(Some((_, body))) = th::crypto_message(data) {
        assert!(body.len() + 4 <= data.len());
    }
    match th::client_hello(data) {
        Ok(ch) => {
            let ja4 = th::ja4(&ch, false);
            assert_eq!(ja4.len(), 36, "{ja4}");
            assert_eq!(th::ja3(&ch).len(), 32);
        }
        Err(e) => assert!(e.offset <= data.len()),
    }
    if let Err(e) = th::server_hello(data) {
        assert!(e.offset <= data.len());
    }
});
