//! Progress on stderr (only when stderr is a terminal): a byte bar for
//! files, a packet counter with its rate for a live capture.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A thread that redraws a byte progress bar until dropped.
pub struct Progress {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the bar over `total` bytes read from `pos`, if `enabled` and
    /// stderr is a terminal.
    pub fn start(enabled: bool, total: u64, pos: Arc<AtomicU64>) -> Progress {
        Progress::spawn(
            enabled,
            ProgressBar::new(total),
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
            pos,
            false,
        )
    }

    /// Starts a counter of the input bytes read so far, for inputs whose
    /// size is not known (streams, compressed files).
    pub fn bytes(enabled: bool, pos: Arc<AtomicU64>) -> Progress {
        Progress::spawn(
            enabled,
            ProgressBar::no_length(),
            "{spinner} [{elapsed_precise}] {bytes} read ({bytes_per_sec})",
            pos,
            false,
        )
    }

    /// Starts a counter of the packets captured so far (`count`) with their
    /// rate, if `enabled` and stderr is a terminal.
    pub fn live(enabled: bool, count: Arc<AtomicU64>) -> Progress {
        Progress::spawn(
            enabled,
            ProgressBar::no_length(),
            "{spinner} [{elapsed_precise}] {human_pos} packets captured{msg}",
            count,
            true,
        )
    }

    /// Redraws `bar` from `pos` every 100 ms; with `rate`, its message is
    /// the rate over the last second.
    fn spawn(
        enabled: bool,
        bar: ProgressBar,
        template: &str,
        pos: Arc<AtomicU64>,
        rate: bool,
    ) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        let style =
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
        let handle = (enabled && std::io::stderr().is_terminal()).then(|| {
            let done = done.clone();
            std::thread::spawn(move || {
                bar.set_style(style);
                let mut window = std::collections::VecDeque::from([0u64]);
                while !done.load(Ordering::Relaxed) {
                    let now = pos.load(Ordering::Relaxed);
                    bar.set_position(now);
                    if rate {
                        // Ten samples 100 ms apart: the last second.
                        window.push_back(now);
                        if window.len() > 11 {
                            window.pop_front();
                        }
                        let span = (window.len() - 1) as f64 / 10.0;
                        let per_sec = (now - window[0]) as f64 / span;
                        bar.set_message(format!(", {:.3} Mpps", per_sec / 1e6));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                bar.finish_and_clear();
            })
        });
        Progress { done, handle }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
