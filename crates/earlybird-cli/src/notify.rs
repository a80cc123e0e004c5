//! systemd's service notifications (`sd_notify`) for `earlybird flows`.
//!
//! Contract: with `NOTIFY_SOCKET` set (a unit of `Type=notify`), a thread
//! sends `READY=1` once every shard runs (for a live capture: its sockets
//! are open and capturing), then, with `WATCHDOG_USEC` set (`WatchdogSec=`)
//! and `WATCHDOG_PID` unset or this process, `WATCHDOG=1` every half of
//! that interval, but only while the run goes on: in a live run, only when
//! the shards have ticked since the previous ping ([`RunControl::ticks`];
//! an idle shard still ticks every 100 ms, a shard stuck in its loop does
//! not, and systemd then ends and restarts the service). `STOPPING=1` is
//! sent once a stop is asked for or the run ends. Without `NOTIFY_SOCKET`
//! nothing is started. A notification that cannot be sent is dropped
//! (systemd's own `sd_notify` does the same): it never stops the run.
//! The socket is a path or, starting with `@`, an abstract address.

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use earlybird::RunControl;

/// How often the thread looks at the run between pings.
const LOOK: Duration = Duration::from_millis(50);

/// The notifier of a run; [`Notifier::finish`] sends `STOPPING=1`.
pub struct Notifier {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The socket `NOTIFY_SOCKET` names, connected.
fn connect(name: &std::ffi::OsStr) -> Option<UnixDatagram> {
    let s = UnixDatagram::unbound().ok()?;
    let bytes = name.as_encoded_bytes();
    if let Some(abs) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abs).ok()?;
        s.connect_addr(&addr).ok()?;
    } else {
        s.connect(name).ok()?;
    }
    Some(s)
}

/// The watchdog interval systemd asked this process for, if any.
fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    match std::env::var("WATCHDOG_PID") {
        Ok(pid) if pid.parse::<u32>().ok() != Some(std::process::id()) => return None,
        _ => {}
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

impl Notifier {
    /// Starts the notifier for the run `ctl` controls (`live`: a live
    /// capture, whose shards tick), or nothing without `NOTIFY_SOCKET`.
    pub fn start(ctl: &RunControl, live: bool) -> Option<Notifier> {
        let sock = connect(&std::env::var_os("NOTIFY_SOCKET")?)?;
        let watchdog = watchdog_interval();
        let done = Arc::new(AtomicBool::new(false));
        let (ctl, end) = (ctl.clone(), done.clone());
        let thread = std::thread::Builder::new()
            .name("eb-notify".into())
            .spawn(move || run(&sock, &ctl, &end, live, watchdog))
            .ok()?;
        Some(Notifier {
            done,
            thread: Some(thread),
        })
    }

    /// The run ended: `STOPPING=1` (unless sent already), and the thread
    /// ends.
    pub fn finish(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: ready, pings, stopping (see the module docs).
fn run(
    sock: &UnixDatagram,
    ctl: &RunControl,
    done: &AtomicBool,
    live: bool,
    watchdog: Option<Duration>,
) {
    let send = |m: &str| {
        let _ = sock.send(m.as_bytes());
    };
    let over = || done.load(Ordering::Relaxed) || ctl.stopping();
    while !ctl.started.load(Ordering::Relaxed) && !over() {
        std::thread::sleep(LOOK);
    }
    // A run that ended at once (a small file) still was ready.
    if ctl.started.load(Ordering::Relaxed) {
        send("READY=1");
    }
    let every = watchdog.map(|w| w / 2);
    let mut next = Instant::now();
    let mut ticks = ctl.ticks.load(Ordering::Relaxed);
    while !over() {
        if let Some(every) = every.filter(|_| Instant::now() >= next) {
            next += every;
            let now = ctl.ticks.load(Ordering::Relaxed);
            if !live || now != ticks {
                send("WATCHDOG=1");
            }
            ticks = now;
        }
        std::thread::sleep(LOOK);
    }
    send("STOPPING=1");
}
