//! Copies a byte range of one file onto the end of another, in the kernel
//! where it can.
//!
//! Contract: [`Copier::copy`] appends bytes `start..start + len` of `src`
//! at the current position of `dst` (the file's position moves past them)
//! or fails with the error that stopped it; `src`'s own position is not
//! used or moved. On Linux it asks `copy_file_range(2)`, which moves the
//! bytes between the page caches without a pass through this process;
//! where the kernel or the file systems cannot (`ENOSYS`, `EXDEV`,
//! `EOPNOTSUPP`, `EINVAL` before any byte moved), it reads into a buffer
//! and writes, and keeps doing so for the rest of the run. A source that
//! ends before the range does (the input was truncated) is an error, not a
//! short copy.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

/// Bytes read at a time when the kernel cannot copy.
const CHUNK: usize = 1 << 20;

/// How ranges are copied (see the module docs).
#[derive(Default)]
pub(crate) struct Copier {
    /// The kernel said it cannot copy between these files: read and write.
    by_hand: bool,
    buf: Vec<u8>,
}

impl Copier {
    /// Appends bytes `start..start + len` of `src` to `dst`.
    pub(crate) fn copy(
        &mut self,
        src: &File,
        start: u64,
        len: u64,
        dst: &mut File,
    ) -> io::Result<()> {
        let mut at = start;
        let end = start + len;
        #[cfg(target_os = "linux")]
        while !self.by_hand && at < end {
            match in_kernel(src, at, end - at, dst) {
                Ok(0) => return Err(truncated(at)),
                Ok(n) => at += n,
                Err(e) if at == start && cannot(&e) => self.by_hand = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        while at < end {
            if self.buf.is_empty() {
                self.buf = vec![0; CHUNK];
            }
            let want = ((end - at) as usize).min(CHUNK);
            let n = match src.read_at(&mut self.buf[..want], at) {
                Ok(0) => return Err(truncated(at)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            dst.write_all(&self.buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

/// The error of a source that ends at `at`, before the range does.
fn truncated(at: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the input capture ends at byte {at}, before the records to dump"),
    )
}

/// Errors by which `copy_file_range` says it cannot copy between these
/// files (as opposed to a failure of the copy).
#[cfg(target_os = "linux")]
fn cannot(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EXDEV | libc::EOPNOTSUPP | libc::EINVAL)
    )
}

/// One `copy_file_range(2)` call: up to `len` bytes of `src` from `at` to
/// `dst`'s position; returns how many moved.
#[cfg(target_os = "linux")]
fn in_kernel(src: &File, at: u64, len: u64, dst: &File) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut off_in = at as libc::loff_t;
    let len = len.min(1 << 30) as usize;
    // SAFETY: both descriptors are open files borrowed for the call; the
    // input offset is a local the kernel updates; a null output offset
    // makes the kernel use and move `dst`'s file position, as write(2)
    // does.
    let n = unsafe {
        libc::copy_file_range(
            src.as_raw_fd(),
            &mut off_in,
            dst.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            0,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("src");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn ranges_land_after_what_the_file_holds_both_ways() {
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let (dir, path) = file_with(&bytes);
        for by_hand in [false, true] {
            let src = File::open(&path).unwrap();
            let out = dir.path().join(format!("out{by_hand}"));
            let mut dst = File::create(&out).unwrap();
            dst.write_all(b"head").unwrap();
            let mut c = Copier {
                by_hand,
                ..Copier::default()
            };
            c.copy(&src, 5, 2_500_000, &mut dst).unwrap();
            c.copy(&src, 0, 3, &mut dst).unwrap();
            dst.write_all(b"tail").unwrap();
            let mut got = Vec::new();
            File::open(&out).unwrap().read_to_end(&mut got).unwrap();
            let mut want = b"head".to_vec();
            want.extend_from_slice(&bytes[5..2_500_005]);
            want.extend_from_slice(&bytes[..3]);
            want.extend_from_slice(b"tail");
            assert!(got == want, "by hand: {by_hand}");
        }
    }

    #[test]
    fn a_range_past_the_end_of_the_source_is_an_error() {
        let (dir, path) = file_with(&[7; 100]);
        for by_hand in [false, true] {
            let src = File::open(&path).unwrap();
            let mut dst = File::create(dir.path().join("out")).unwrap();
            let mut c = Copier {
                by_hand,
                ..Copier::default()
            };
            let e = c.copy(&src, 50, 100, &mut dst).unwrap_err();
            assert!(e.to_string().contains("ends at byte 100"), "{e}");
            dst.seek(SeekFrom::Start(0)).unwrap();
        }
    }
}
