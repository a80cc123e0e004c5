//! Where IPFIX messages go: a file (or any writer), a collector over UDP,
//! or a collector over TCP.
//!
//! Contract: a [`Transport`] takes whole messages and decides when the
//! template messages go before them: a file at its start (and again in a
//! file created by [`Transport::reopen`]), UDP first and then again when
//! the refresh interval or message count is reached, TCP at the start of
//! every connection. Each template message is stamped with the export time
//! and sequence number of the data message it precedes.
//!
//! Failures: a file's write error is sticky and returned by every later
//! call ([`Error::Output`]; a closed pipe is [`Error::OutputClosed`]).
//! Network failures never end the output and never block the caller: UDP
//! sends are non-blocking, and a failed one (ICMP port unreachable seen as
//! ECONNREFUSED, unreachable network, full socket buffer) drops its
//! message; as the kernel reports a port unreachable on the send after
//! the datagram that caused it, a refused send counts its message's
//! records as not delivered (standing for the lost one) and is tried
//! once more, so that a collector that came back gets the first message
//! (templates included); TCP messages go to a bounded queue that a thread of their own
//! drains into the connection, reconnecting after a failure with a backoff
//! from 100 ms to 5 s, and a message the queue cannot take (collector
//! unreachable, stalled or slow) is dropped. Every dropped record and
//! failure is counted, and [`Transport::finish`] returns an
//! [`Error::Output`] stating them (how many records of how many were not
//! delivered, the failures and the last one). At finish a TCP transport
//! waits at most its linger time for the queue to drain.

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use super::message::stamp_like;
use crate::error::{Error, Result};

/// A destination of IPFIX messages.
pub(crate) trait Transport: Send {
    /// Sends message `msg` holding `records` data records.
    fn send(&mut self, msg: &[u8], records: u32) -> Result<()>;
    /// Pushes out what is buffered.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    /// Ends the stream; an error states what was not delivered.
    fn finish(&mut self) -> Result<()>;
    /// Reopens a file at its path (see `Exporter::reopen`).
    fn reopen(&mut self) -> Result<bool> {
        Ok(false)
    }
}

/// What a network transport could not deliver.
#[derive(Default)]
pub(crate) struct Tally {
    /// Data records handed to the transport.
    records: AtomicU64,
    /// Data records not delivered.
    dropped: AtomicU64,
    /// Sends, writes or connection attempts that failed.
    failures: AtomicU64,
    last: Mutex<Option<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(what);
    }

    fn drop_records(&self, n: u32) {
        self.dropped.fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// Data records not delivered so far.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// `Ok` when everything was delivered, else the error stating the
    /// losses of output `name`.
    fn result(&self, name: &str) -> Result<()> {
        let dropped = self.dropped.load(Ordering::Relaxed);
        let failures = self.failures.load(Ordering::Relaxed);
        if dropped == 0 && failures == 0 {
            return Ok(());
        }
        let records = self.records.load(Ordering::Relaxed);
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        Err(Error::Output {
            name: name.to_string(),
            reason: format!(
                "{dropped} of {records} records not delivered; {failures} failure{} (last: {})",
                if failures == 1 { "" } else { "s" },
                last.as_deref().unwrap_or("queue full")
            ),
        })
    }
}

/// The text of a network error, naming ICMP port unreachable for what the
/// kernel reports as a refused connection on UDP.
fn describe(e: &std::io::Error, udp: bool) -> String {
    match e.kind() {
        ErrorKind::ConnectionRefused if udp => {
            format!("collector refused (ICMP port unreachable): {e}")
        }
        _ => e.to_string(),
    }
}

/// The first address `host:port` resolves to.
pub(crate) fn resolve(hostport: &str) -> std::io::Result<SocketAddr> {
    hostport.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(ErrorKind::NotFound, format!("{hostport}: no address found"))
    })
}

/// A file or another writer.
enum Sink {
    File {
        w: BufWriter<File>,
        path: PathBuf,
        id: (u64, u64),
    },
    Other(BufWriter<Box<dyn Write + Send>>),
}

/// Buffer of a file output. `BufWriter` hands a write at least this long
/// straight to the file (after what it holds), so the full messages of a
/// run that writes many records (64 KiB) are not copied into the buffer
/// first; smaller ones (templates, the live run's flushes) are gathered.
const FILE_BUFFER: usize = 1 << 14;

/// Messages concatenated into a file (RFC 5655 §4: an IPFIX file is a
/// sequence of messages) or any writer.
pub(crate) struct FileTransport {
    sink: Sink,
    templates: Vec<Vec<u8>>,
    /// The templates are written before the next data message.
    due: bool,
    name: String,
    failed: Option<Error>,
}

impl FileTransport {
    /// Creates (truncates) the file at `path`.
    pub(crate) fn create(path: &Path, templates: Vec<Vec<u8>>, name: &str) -> Result<Self> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let m = file.metadata().map_err(|e| Error::io(path, e))?;
        Ok(FileTransport {
            sink: Sink::File {
                w: BufWriter::with_capacity(FILE_BUFFER, file),
                path: path.to_path_buf(),
                id: (m.dev(), m.ino()),
            },
            templates,
            due: true,
            name: name.to_string(),
            failed: None,
        })
    }

    /// Writes to `w`.
    pub(crate) fn over(w: Box<dyn Write + Send>, templates: Vec<Vec<u8>>, name: &str) -> Self {
        FileTransport {
            sink: Sink::Other(BufWriter::with_capacity(FILE_BUFFER, w)),
            templates,
            due: true,
            name: name.to_string(),
            failed: None,
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::File { w, .. } => w,
            Sink::Other(w) => w,
        }
    }

    /// Runs `f` unless the output failed before; keeps its error.
    fn guard(&mut self, f: impl FnOnce(&mut Self) -> std::io::Result<()>) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(same(e));
        }
        if let Err(e) = f(self) {
            let err = if e.kind() == ErrorKind::BrokenPipe {
                Error::OutputClosed {
                    name: self.name.clone(),
                }
            } else {
                Error::Output {
                    name: self.name.clone(),
                    reason: e.to_string(),
                }
            };
            self.failed = Some(same(&err));
            return Err(err);
        }
        Ok(())
    }
}

/// A copy of a sticky output error.
fn same(e: &Error) -> Error {
    match e {
        Error::OutputClosed { name } => Error::OutputClosed { name: name.clone() },
        Error::Output { name, reason } => Error::Output {
            name: name.clone(),
            reason: reason.clone(),
        },
        other => Error::Output {
            name: String::new(),
            reason: other.to_string(),
        },
    }
}

impl Transport for FileTransport {
    fn send(&mut self, msg: &[u8], _records: u32) -> Result<()> {
        self.guard(|t| {
            if t.due {
                let mut templates = std::mem::take(&mut t.templates);
                for m in &mut templates {
                    stamp_like(m, msg);
                    t.writer().write_all(m)?;
                }
                t.templates = templates;
                t.due = false;
            }
            t.writer().write_all(msg)
        })
    }

    fn flush(&mut self) -> Result<()> {
        self.guard(|t| t.writer().flush())
    }

    fn finish(&mut self) -> Result<()> {
        self.flush()
    }

    fn reopen(&mut self) -> Result<bool> {
        self.flush()?;
        let Sink::File { path, id, .. } = &self.sink else {
            return Ok(false);
        };
        let same_file = std::fs::metadata(path.as_path()).is_ok_and(|m| (m.dev(), m.ino()) == *id);
        if same_file {
            return Ok(false);
        }
        let path = path.clone();
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let m = file.metadata().map_err(|e| Error::io(&path, e))?;
        self.sink = Sink::File {
            w: BufWriter::with_capacity(FILE_BUFFER, file),
            path,
            id: (m.dev(), m.ino()),
        };
        self.due = true;
        Ok(true)
    }
}

/// Settings of the network transports.
#[derive(Debug, Clone)]
pub(crate) struct NetConfig {
    /// UDP: send the templates again after this long.
    pub refresh: Duration,
    /// UDP: send the templates again after this many data messages.
    pub refresh_messages: u32,
    /// TCP: messages the queue holds.
    pub queue: usize,
    /// TCP: how long finish waits for the queue to drain.
    pub linger: Duration,
}

/// Messages to a collector over UDP, one datagram each.
pub(crate) struct UdpTransport {
    sock: UdpSocket,
    templates: Vec<Vec<u8>>,
    cfg: NetConfig,
    /// When the templates were last sent, and data messages since.
    last: Option<Instant>,
    since: u32,
    tally: Tally,
    name: String,
}

impl UdpTransport {
    /// A socket connected to `addr` (so ICMP errors are reported on later
    /// sends), non-blocking.
    pub(crate) fn connect(
        addr: SocketAddr,
        templates: Vec<Vec<u8>>,
        cfg: NetConfig,
        name: &str,
    ) -> Result<Self> {
        let err = |e: std::io::Error| Error::Output {
            name: name.to_string(),
            reason: e.to_string(),
        };
        let local: SocketAddr = if addr.is_ipv6() {
            "[::]:0".parse().expect("address")
        } else {
            "0.0.0.0:0".parse().expect("address")
        };
        let sock = UdpSocket::bind(local).map_err(err)?;
        sock.connect(addr).map_err(err)?;
        sock.set_nonblocking(true).map_err(err)?;
        Ok(UdpTransport {
            sock,
            templates,
            cfg,
            last: None,
            since: 0,
            tally: Tally::default(),
            name: name.to_string(),
        })
    }

    /// Sends one datagram: whether it went out, and whether the send was
    /// refused first (a failure, counted).
    fn datagram(&self, msg: &[u8]) -> (bool, bool) {
        match self.sock.send(msg) {
            // The refusal is an earlier datagram's (ICMP port unreachable
            // comes back after it left), and reporting it cleared it: this
            // one goes again, so that a collector that came back gets it
            // (the templates before the first message, else the data
            // after them would reach it undecodable).
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                self.tally.fail(describe(&e, true));
                (self.result(self.sock.send(msg), msg), true)
            }
            r => (self.result(r, msg), false),
        }
    }

    /// Whether `msg` went out whole; a failure is counted.
    fn result(&self, r: std::io::Result<usize>, msg: &[u8]) -> bool {
        match r {
            Ok(n) if n == msg.len() => true,
            Ok(n) => {
                self.tally
                    .fail(format!("sent {n} of {} bytes of a message", msg.len()));
                false
            }
            Err(e) => {
                self.tally.fail(describe(&e, true));
                false
            }
        }
    }
}

impl Transport for UdpTransport {
    fn send(&mut self, msg: &[u8], records: u32) -> Result<()> {
        self.tally
            .records
            .fetch_add(u64::from(records), Ordering::Relaxed);
        let due = match self.last {
            None => true,
            Some(t) => t.elapsed() >= self.cfg.refresh || self.since >= self.cfg.refresh_messages,
        };
        if due {
            let mut templates = std::mem::take(&mut self.templates);
            let mut ok = true;
            for m in &mut templates {
                stamp_like(m, msg);
                ok &= self.datagram(m).0;
            }
            self.templates = templates;
            // Until the templates got out, send them before every message.
            if ok {
                self.last = Some(Instant::now());
                self.since = 0;
            }
        }
        // A refused send counts its records as not delivered: they stand
        // for the datagram that met the closed port, which the kernel
        // cannot name (the first one of an outage goes uncounted, and a
        // retry that reaches a collector just back is counted too).
        let (sent, refused) = self.datagram(msg);
        if sent {
            self.since += 1;
        }
        if !sent || refused {
            self.tally.drop_records(records);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.tally.result(&self.name)
    }
}

/// A message for the TCP thread: its bytes and data records.
type Queued = (Vec<u8>, u32);

/// What the exporter and the TCP thread share.
struct Shared {
    tally: Tally,
    /// Raised when finish stops waiting: the thread drops what is left.
    stop: AtomicBool,
}

/// Messages to a collector over TCP, written by a thread of their own.
pub(crate) struct TcpTransport {
    tx: Option<Sender<Queued>>,
    /// Emptied message buffers coming back for reuse.
    spare: Receiver<Vec<u8>>,
    done: Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Shared>,
    linger: Duration,
    name: String,
}

/// Longest wait of one write or connection attempt, so that the thread
/// sees a stop request soon.
const TCP_STEP: Duration = Duration::from_millis(200);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

impl TcpTransport {
    /// Starts the thread that connects to `addr` (the first attempt is
    /// made there too, so this never waits for the network).
    pub(crate) fn start(
        addr: SocketAddr,
        templates: Vec<Vec<u8>>,
        cfg: NetConfig,
        name: &str,
    ) -> Result<Self> {
        let (tx, rx) = bounded::<Queued>(cfg.queue.max(1));
        let (spare_tx, spare) = bounded::<Vec<u8>>(cfg.queue.max(1));
        let (done_tx, done) = bounded::<()>(1);
        let shared = Arc::new(Shared {
            tally: Tally::default(),
            stop: AtomicBool::new(false),
        });
        let sh = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("eb-ipfix-tcp".into())
            .spawn(move || {
                tcp_loop(addr, templates, &rx, &spare_tx, &sh);
                let _ = done_tx.send(());
            })
            .map_err(|e| Error::Output {
                name: name.to_string(),
                reason: format!("cannot start the TCP thread: {e}"),
            })?;
        Ok(TcpTransport {
            tx: Some(tx),
            spare,
            done,
            thread: Some(thread),
            shared,
            linger: cfg.linger,
            name: name.to_string(),
        })
    }

    /// Data records dropped so far.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.shared.tally.dropped()
    }
}

impl Transport for TcpTransport {
    fn send(&mut self, msg: &[u8], records: u32) -> Result<()> {
        let tally = &self.shared.tally;
        tally
            .records
            .fetch_add(u64::from(records), Ordering::Relaxed);
        let Some(tx) = &self.tx else {
            tally.drop_records(records);
            return Ok(());
        };
        let mut buf = self.spare.try_recv().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(msg);
        match tx.try_send((buf, records)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tally.drop_records(records);
                tally.fail("queue full: the collector takes messages slower than they come".into());
            }
            Err(TrySendError::Disconnected(_)) => tally.drop_records(records),
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        // No more messages: the thread sends what is queued, then ends.
        self.tx = None;
        if self.done.recv_timeout(self.linger).is_err() {
            self.shared.stop.store(true, Ordering::Relaxed);
            let _ = self.done.recv_timeout(TCP_STEP * 10);
        }
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                let _ = t.join();
            }
        }
        self.shared.tally.result(&self.name)
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        self.tx = None;
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// Writes all of `msg` to `s`, retrying timeouts until `stop` is raised.
fn write_msg(s: &mut TcpStream, msg: &[u8], stop: &AtomicBool) -> std::io::Result<()> {
    let mut off = 0;
    while off < msg.len() {
        match s.write(&msg[off..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return Err(std::io::Error::new(
                        ErrorKind::TimedOut,
                        "collector stalled: gave up at the end of the run",
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The TCP thread: takes messages off the queue and writes them, each
/// connection starting with the templates.
fn tcp_loop(
    addr: SocketAddr,
    mut templates: Vec<Vec<u8>>,
    rx: &Receiver<Queued>,
    spare: &Sender<Vec<u8>>,
    sh: &Shared,
) {
    let mut conn: Option<TcpStream> = None;
    let mut backoff = BACKOFF_MIN;
    let mut next_try = Instant::now();
    while let Ok((msg, records)) = rx.recv() {
        let delivered = loop {
            if sh.stop.load(Ordering::Relaxed) {
                break false;
            }
            if conn.is_none() {
                let now = Instant::now();
                if now < next_try {
                    std::thread::sleep((next_try - now).min(TCP_STEP));
                    continue;
                }
                match TcpStream::connect_timeout(&addr, TCP_STEP * 5) {
                    Ok(s) => {
                        let _ = s.set_write_timeout(Some(TCP_STEP));
                        let _ = s.set_nodelay(true);
                        conn = Some(s);
                        backoff = BACKOFF_MIN;
                        let s = conn.as_mut().expect("connected");
                        let mut sent = Ok(());
                        for m in &mut templates {
                            stamp_like(m, &msg);
                            sent = sent.and_then(|()| write_msg(s, m, &sh.stop));
                        }
                        if let Err(e) = sent {
                            sh.tally.fail(describe(&e, false));
                            conn = None;
                        }
                    }
                    Err(e) => {
                        sh.tally.fail(format!("connecting to {addr}: {e}"));
                        next_try = Instant::now() + backoff;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
                continue;
            }
            let s = conn.as_mut().expect("connected");
            match write_msg(s, &msg, &sh.stop) {
                Ok(()) => break true,
                Err(e) => {
                    // The collector saw part of a message at most: the
                    // stream is broken; reconnect for the next one.
                    sh.tally.fail(describe(&e, false));
                    conn = None;
                    next_try = Instant::now() + backoff;
                    break false;
                }
            }
        };
        if !delivered {
            sh.tally.drop_records(records);
        }
        let _ = spare.try_send(msg);
    }
    if let Some(s) = conn {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
}
