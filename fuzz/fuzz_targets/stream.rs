//! Fuzz target: any bytes as a capture stream, cut into chunks by
//! `source::stream::Chunker` with chunk and read sizes taken from the first
//! two bytes. Never a panic; every chunk is a capture the file reader
//! opens (or an error, never a panic); and when the bytes open as a file,
//! the packets of the chunks begin with every packet the file gives, in
//! order (after damage a file stops, a stream goes on with its next chunk).
#![no_main]

use std::io::Read;

use earlybird::testing::Chunker;
use earlybird::CaptureFile;
use libfuzzer_sys::fuzz_target;

/// Gives at most `step` bytes per read.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.len().min(self.1).min(buf.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn packets(file: &CaptureFile) -> Vec<(u64, Vec<u8>)> {
    let mut r = file.reader();
    let mut batch = Vec::new();
    let mut out = Vec::new();
    while r.next_batch(&mut batch, 64) > 0 {
        for p in &batch {
            out.push((p.ts, p.bytes(r.data()).to_vec()));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [a, b, rest @ ..] = data else {
        return;
    };
    let target = 1 + *a as usize * 64;
    let step = 1 + *b as usize * 16;
    let mut chunker = Chunker::new(Trickle(rest, step), target, step % 2 == 0);
    let mut got = Vec::new();
    let mut chunks = 0;
    while let Ok(Some(ch)) = chunker.next_chunk() {
        chunks += 1;
        assert!(chunks <= rest.len() + 2, "the chunker always moves on");
        if let Ok(f) = CaptureFile::from_bytes("chunk", ch.bytes) {
            got.extend(packets(&f));
        }
    }
    if let Ok(f) = CaptureFile::from_bytes("whole", rest.to_vec()) {
        let want = packets(&f);
        assert!(got.len() >= want.len() && got[..want.len()] == want[..]);
    }
});
