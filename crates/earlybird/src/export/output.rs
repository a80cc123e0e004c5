//! Where exporters write: a file that can be reopened at its path (log
//! rotation) or any writer, behind one formatted-text buffer.
//!
//! Contract: an [`Output`] owns a [`TextBuf`] sized for a chunk plus the
//! longest record its exporter can format, hands the text to the writer in
//! chunks at record boundaries ([`Output::drain`], [`Output::finish`]),
//! keeps the first write error and returns it again on every later call
//! (a reader that went away, EPIPE, is [`Error::OutputClosed`] instead),
//! and reopens a file whose path now names another file or none
//! ([`Output::reopen`]), writing the header it was given again. Nothing
//! here allocates after construction.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::text::TextBuf;
use super::{cells, fields, text, CHUNK};
use crate::error::{Error, Result};

/// A file output that can be opened again at its path.
pub(crate) struct FileOut {
    file: File,
    path: PathBuf,
    /// Device and inode of `file`.
    id: (u64, u64),
}

impl FileOut {
    /// Creates (truncates) the file at `path`.
    pub(crate) fn create(path: &Path) -> std::io::Result<FileOut> {
        let file = File::create(path)?;
        let m = file.metadata()?;
        Ok(FileOut {
            file,
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
        })
    }
}

/// Where an [`Output`] writes: a file it can reopen, or any writer.
pub(crate) enum Writer {
    File(FileOut),
    Other(Box<dyn Write + Send>),
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Writer::File(f) => f.file.write(buf),
            Writer::Other(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Writer::File(f) => f.file.write_all(buf),
            Writer::Other(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Writer::File(f) => f.file.flush(),
            Writer::Other(w) => w.flush(),
        }
    }
}

/// Why an output stopped: a write error, or its reader closed it.
enum Ended {
    Failed(String),
    Closed,
}

/// The formatted-text buffer and the writer it drains into, with the
/// header the output starts with (written again when it is reopened).
pub(crate) struct Output {
    w: Writer,
    /// Formatted text not yet written.
    pub(crate) buf: TextBuf,
    /// Most bytes one record can take.
    pub(crate) max_record: usize,
    /// Text that starts the output (the CSV header line); may be empty.
    header: Box<[u8]>,
    name: String,
    /// The first write error (or the reader's close), returned again by
    /// every later call.
    failed: Option<Ended>,
}

/// Most bytes one record can take with `n` early packets, class names of
/// at most `app_max` bytes once escaped, and the analyzers' `analyzed`
/// fields.
pub(crate) fn max_record_len(n: usize, app_max: usize, analyzed: &[crate::schema::Field]) -> usize {
    fields::FIELDS.len() * text::MAX_FIELD
        + app_max
        + n * fields::EARLY_FIELDS.len() * text::MAX_EARLY_VALUE
        + cells::max_len(analyzed)
        + 128
}

impl Output {
    /// An output whose records take at most `max_record` bytes, starting
    /// with `header` (buffered at once).
    pub(crate) fn new(w: Writer, name: &str, max_record: usize, header: &[u8]) -> Self {
        // The header must fit the buffer, which is empty when it is
        // written.
        let max_record = max_record.max(header.len());
        let mut out = Output {
            w,
            buf: TextBuf::new(CHUNK + max_record),
            max_record,
            header: header.into(),
            name: name.to_string(),
            failed: None,
        };
        out.buf.bytes(header);
        out
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn error(&self, reason: &str) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// Fails when an earlier write failed.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.failed {
            Some(Ended::Failed(r)) => Err(self.error(r)),
            Some(Ended::Closed) => Err(Error::OutputClosed {
                name: self.name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Makes room for one more record, writing the buffer out when needed.
    #[inline]
    pub(crate) fn room_for_record(&mut self) -> Result<()> {
        if self.buf.room() < self.max_record {
            self.drain()
        } else {
            Ok(())
        }
    }

    /// Writes the whole buffer out.
    pub(crate) fn drain(&mut self) -> Result<()> {
        self.check()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self.w.write_all(self.buf.as_slice());
        self.buf.clear();
        r.map_err(|e| self.fail(e))
    }

    /// Writes the buffer and flushes the writer.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.drain()?;
        self.w.flush().map_err(|e| self.fail(e))
    }

    /// Writes `text` (whole records formatted elsewhere) after what is
    /// buffered.
    pub(crate) fn write_text(&mut self, text: &[u8]) -> Result<()> {
        self.drain()?;
        self.w.write_all(text).map_err(|e| self.fail(e))
    }

    /// Opens the file again at its path if the path names another file or
    /// none (see [`Exporter::reopen`]), the header written again; true when
    /// it did.
    pub(crate) fn reopen(&mut self) -> Result<bool> {
        self.finish()?;
        let Writer::File(f) = &self.w else {
            return Ok(false);
        };
        if let Ok(m) = std::fs::metadata(&f.path) {
            if (m.dev(), m.ino()) == f.id {
                return Ok(false);
            }
        }
        match FileOut::create(&f.path) {
            Ok(new) => {
                self.w = Writer::File(new);
                // The buffer was drained by `finish`.
                self.buf.bytes(&self.header);
                Ok(true)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: std::io::Error) -> Error {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            self.failed = Some(Ended::Closed);
            return Error::OutputClosed {
                name: self.name.clone(),
            };
        }
        let reason = e.to_string();
        let err = self.error(&reason);
        self.failed = Some(Ended::Failed(reason));
        err
    }
}
