//! Fuzz target: any bytes as the kernel's BTF. Looking a function up never
//! panics, and an id found names a record inside the bytes.
#![no_main]

use earlybird::testing::btf::func_id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for name in ["bpf_xdp_metadata_rx_timestamp", "f", ""] {
        if let Some(id) = func_id(data, name) {
            assert!(id >= 1 && (id as usize) <= data.len() / 12);
        }
    }
});
