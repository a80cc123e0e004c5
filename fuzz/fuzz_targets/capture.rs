//! Fuzz target: any bytes as a capture file. Opening may fail (that is an
//! `Err`, never a panic); a file that opens is drained to the end with
//! several batch sizes, and every packet must lie inside the buffer with
//! caplen ≤ orig_len and increasing packet numbers. Skipping every other
//! batch (how shards share the reading: jumping to where a clean whole
//! batch ended, else walking its headers) must stop at the same batch
//! boundaries, position and warning as reading.
#![no_main]

use earlybird::CaptureFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = CaptureFile::from_bytes("fuzz", data.to_vec()) else {
        return;
    };
    let mut batch = Vec::new();
    for max in [1usize, 7, 256] {
        let mut reader = file.reader();
        let mut last = 0u64;
        let mut total = 0usize;
        while reader.next_batch(&mut batch, max) > 0 {
            assert!(batch.len() <= max);
            for p in &batch {
                assert!(p.offset + p.caplen as usize <= reader.data().len());
                assert!(p.caplen <= p.orig_len);
                assert!(p.number > last);
                last = p.number;
                let _ = p.bytes(reader.data());
            }
            total += batch.len();
            assert!(total <= data.len(), "more packets than bytes");
        }
        assert_eq!(reader.next_batch(&mut batch, max), 0, "end is sticky");
        assert!(reader.position() as usize <= data.len());
        if let Some(w) = reader.warning() {
            assert!(w.offset as usize <= data.len());
        }
        let mut skipping = file.reader();
        let mut turn = 0usize;
        let mut read = Vec::new();
        let mut plain = file.reader();
        loop {
            let want = plain.next_batch(&mut read, max);
            let got = if turn % 2 == 0 {
                // How shards step over a turn another shard read: jump to
                // where a clean whole batch ended, else walk its headers.
                if want == max
                    && plain.warning().is_none()
                    && skipping.jump_to(plain.position(), max)
                {
                    max
                } else {
                    skipping.skip_batch(max)
                }
            } else {
                let n = skipping.next_batch(&mut batch, max);
                assert_eq!(batch, read, "batch {turn}");
                n
            };
            assert_eq!(got, want, "batch {turn}");
            if got == 0 {
                break;
            }
            turn += 1;
        }
        assert_eq!(skipping.position(), plain.position());
        assert_eq!(
            skipping.warning().map(|w| w.to_string()),
            plain.warning().map(|w| w.to_string())
        );
    }
});
