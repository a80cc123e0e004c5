//! Errors for whole inputs and outputs.
//!
//! Contract: an [`Error`] is returned only when a whole input or output is
//! unusable (a file that is not a capture, an unsupported link type, a write
//! that failed). Malformed *packets* never become an `Error`; they are counted
//! by name in [`crate::telemetry::Counters`] and skipped. Every variant names
//! the file and, where it applies, the byte offset or packet number.

use std::path::PathBuf;

/// Result alias used across the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failure that stops processing of one input or output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused to open, map or read a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a pcap or pcapng capture, or its header is damaged.
    #[error("{path}: not a capture file: {reason}")]
    NotCapture {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A structural error inside a capture file at a known byte offset.
    #[error("{path}: at byte offset {offset}: {reason}")]
    BadCapture {
        /// The file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// An output (exporter) failed.
    #[error("output {name}: {reason}")]
    Output {
        /// The output (format and path, e.g. `csv:flows.csv`).
        name: String,
        /// What failed.
        reason: String,
    },
    /// An output's reader went away (a closed pipe, `earlybird flows … |
    /// head`): not a failure of the run, the output just ends there.
    #[error("output {name}: closed by its reader")]
    OutputClosed {
        /// The output.
        name: String,
    },
    /// An output cannot be written where it is named: it is an input, a
    /// directory, in a missing directory, or named twice (checked before
    /// any output is created).
    #[error("output {path}: {reason}")]
    OutputPath {
        /// The output's path.
        path: PathBuf,
        /// Why it cannot be written there.
        reason: String,
    },
    /// A model file could not be read or is of another version.
    #[error("model {path}: {reason}")]
    Model {
        /// The model file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A network interface cannot be captured from or sent to (it does not
    /// exist, needs privileges the process lacks, or has an unsupported
    /// link type).
    #[error("interface {name}: {reason}")]
    Interface {
        /// The interface name.
        name: String,
        /// What failed, and the missing privilege if that is the cause.
        reason: String,
    },
    /// Invalid configuration given by the user.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A value that cannot be read, with the key or option it belongs to
    /// (`label level`, `algorithm`, `interface list`).
    #[error("{key} {value:?}: {reason}")]
    Value {
        /// The key or option the value was given for.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file the run reads besides its captures (a DSCP map, an alarms
    /// file, a media configuration, a label or ground-truth file) that
    /// cannot be read or used.
    #[error("{}{}: {reason}", path.display(), line.map(|l| format!(", line {l}")).unwrap_or_default())]
    File {
        /// The file.
        path: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong with it.
        reason: String,
    },
    /// A training or evaluation that cannot be done with the data given
    /// (an empty training set, no labelled flow, no threshold reaching
    /// the precision asked for).
    #[error("{0}")]
    Training(String),
    /// An engine thread could not be started.
    #[error("cannot start the {name} thread: {source}")]
    Spawn {
        /// The thread (`shard`, `exporter`, `call writer`, …).
        name: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An engine thread panicked: a bug; what it was doing is lost.
    #[error("the {name} thread panicked")]
    Thread {
        /// The thread (`shard`, `exporter`, `record writer`, …).
        name: String,
    },
    /// A socket of the run (the metrics endpoint) cannot listen.
    #[error("cannot listen on {addr} for {what}: {reason}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// What the socket is for (`metrics`).
        what: String,
        /// What failed.
        reason: String,
    },
    /// An option's value, or a combination of options, that cannot run
    /// (the command line exits 2 on it); the text names the options.
    #[error("{0}")]
    Usage(String),
    /// A key of a configuration ([`crate::Config`]) that cannot be read:
    /// unknown, or of the wrong type.
    #[error("{origin}{}: {reason}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Setting {
        /// Where the configuration came from (a file name, "command line").
        origin: String,
        /// The line of the key, when known.
        line: Option<usize>,
        /// What is wrong, naming the key.
        reason: String,
    },
}

impl Error {
    /// An interface error from the operating system's `errno` after `what`
    /// failed; a permission error says which privilege is missing.
    pub fn interface(name: &str, what: &str, e: std::io::Error) -> Self {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => " (needs root or CAP_NET_RAW)",
            _ => "",
        };
        Error::Interface {
            name: name.into(),
            reason: format!("{what}: {e}{hint}"),
        }
    }

    /// An engine thread that panicked (see [`Error::Thread`]).
    pub fn thread(name: &str) -> Self {
        Error::Thread { name: name.into() }
    }

    /// An engine thread that could not start (see [`Error::Spawn`]).
    pub fn spawn(name: &str) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Error::Spawn {
            name: name.into(),
            source,
        }
    }

    /// A value of `key` that cannot be read (see [`Error::Value`]).
    pub fn value(key: &str, value: &str, reason: impl ToString) -> Self {
        Error::Value {
            key: key.into(),
            value: value.into(),
            reason: reason.to_string(),
        }
    }

    /// A file error with the line when known (see [`Error::File`]).
    pub fn file(path: impl Into<PathBuf>, line: Option<usize>, reason: impl ToString) -> Self {
        Error::File {
            path: path.into(),
            line,
            reason: reason.to_string(),
        }
    }

    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_context_as_fields() {
        let e = Error::thread("record writer");
        assert!(matches!(&e, Error::Thread { name } if name == "record writer"));
        assert_eq!(e.to_string(), "the record writer thread panicked");
        let e = Error::spawn("shard")(std::io::Error::other("no memory"));
        assert_eq!(e.to_string(), "cannot start the shard thread: no memory");
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::file("truth.csv", Some(3), "bad port \"x\"");
        assert_eq!(e.to_string(), "truth.csv, line 3: bad port \"x\"");
        assert_eq!(
            Error::file("map.toml", None, "no class").to_string(),
            "map.toml: no class"
        );
        let e = Error::value("label level", "apps", "expected app, proto or category");
        assert_eq!(
            e.to_string(),
            "label level \"apps\": expected app, proto or category"
        );
    }
}
