//! Progress bar on stderr (only when stderr is a terminal).

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
        let done = Arc::new(AtomicBool::new(false));
        let handle = (enabled && std::io::stderr().is_terminal()).then(|| {
            let done = done.clone();
            std::thread::spawn(move || {
                let bar = ProgressBar::new(total);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                while !done.load(Ordering::Relaxed) {
                    bar.set_position(pos.load(Ordering::Relaxed));
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
