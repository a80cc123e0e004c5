//! The state both capture readers (`pcap`, `pcapng`) keep while they walk
//! a file's records: where they are, how many packets they passed, whether
//! and why the walk ended.
//!
//! Contract: plain data the readers update on their own path; the
//! operations here are the ones a file that shrinks while it is read needs
//! (`CaptureReader` in `file.rs`): go back to a mark, take the data to end
//! earlier, end the walk with a warning. Nothing here panics.

use super::Warning;

/// Where a reader is in its data and how its walk ended.
#[derive(Debug, Clone)]
pub(crate) struct Walk<'a> {
    /// The bytes walked (the whole file, or less once it is limited).
    pub data: &'a [u8],
    /// Byte position of the next record.
    pub pos: usize,
    /// Packets walked so far (the number of the last one).
    pub number: u64,
    /// The walk has ended (no more batches).
    pub done: bool,
    /// The walk stopped because the data ended (cleanly or inside a
    /// record), not on a corrupt record.
    pub at_end: bool,
    /// Why the walk ended early, when it did.
    pub warning: Option<Warning>,
}

impl<'a> Walk<'a> {
    /// A walk of `data` from byte `pos`.
    pub fn new(data: &'a [u8], pos: usize) -> Walk<'a> {
        Walk {
            data,
            pos,
            number: 0,
            done: false,
            at_end: false,
            warning: None,
        }
    }

    /// Goes back to byte `pos` after `number` packets, the walk not ended.
    pub fn restart(&mut self, pos: usize, number: u64) {
        self.pos = pos;
        self.number = number;
        self.done = false;
        self.at_end = false;
        self.warning = None;
    }

    /// Takes the data to end at byte `end` (the walk must not be past it):
    /// later walks stop there as at the end of the file.
    pub fn limit(&mut self, end: usize) {
        if self.pos <= end && end < self.data.len() {
            self.data = &self.data[..end];
        }
    }

    /// Ends the walk here with `warning`.
    pub fn end_with(&mut self, warning: Warning) {
        self.done = true;
        self.warning = Some(warning);
    }

    /// The walk has ended because the data ended there.
    pub fn ended_at_end(&self) -> bool {
        self.done && self.at_end
    }
}
