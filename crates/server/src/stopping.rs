//! Stopping in order (docs/reliability.md, "What survives what"): on SIGTERM the servers first
//! stop starting requests, then the requests under way finish, and only then are stores
//! flushed and written back, so that no write is answered after the last write-back. A
//! request that arrives once stopping has begun is refused (NBD's `ESHUTDOWN`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether the server is stopping, and how many requests are under way.
#[derive(Debug, Default)]
pub struct Stopping {
    stopping: AtomicBool,
    running: AtomicUsize,
}

/// One request under way; it is over when this is dropped.
#[derive(Debug)]
pub struct Running {
    stopping: Arc<Stopping>,
}

impl Stopping {
    pub fn new() -> Arc<Stopping> {
        Arc::new(Stopping::default())
    }

    /// A request may start: `None` once stopping has begun.
    pub fn begin(self: &Arc<Self>) -> Option<Running> {
        // Counted before the flag is read, and the flag set before the count is read (both
        // sequentially consistent): a request either is counted when `stop` looks, or sees
        // the flag and does not start.
        self.running.fetch_add(1, Ordering::SeqCst);
        if self.stopping.load(Ordering::SeqCst) {
            self.running.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Running {
            stopping: Arc::clone(self),
        })
    }

    /// Starts no more requests and waits up to `patience` for those under way; false when some
    /// were still running then.
    pub fn stop(&self, patience: Duration) -> bool {
        self.stopping.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + patience;
        while self.running.load(Ordering::SeqCst) > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stopping.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_waits_for_requests_under_way_and_refuses_new_ones() {
        let stopping = Stopping::new();
        let running = stopping.begin().expect("not stopping yet");
        assert!(
            !stopping.stop(Duration::from_millis(20)),
            "a request is still running"
        );
        assert!(
            stopping.begin().is_none(),
            "no request starts once stopping"
        );
        let finisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(running);
        });
        assert!(stopping.stop(Duration::from_secs(5)));
        finisher.join().unwrap();
        assert!(stopping.begin().is_none(), "stopped for good");
    }

    #[test]
    fn racing_requests_either_finish_before_stop_returns_or_never_start() {
        for seed in 0..20u64 {
            let stopping = Stopping::new();
            let finished = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let (stopping, finished) = (Arc::clone(&stopping), Arc::clone(&finished));
                    std::thread::spawn(move || {
                        while let Some(running) = stopping.begin() {
                            finished.fetch_add(1, Ordering::SeqCst);
                            drop(running);
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_micros(100 * seed));
            assert!(stopping.stop(Duration::from_secs(5)), "seed {seed}");
            let at_stop = finished.load(Ordering::SeqCst);
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(
                finished.load(Ordering::SeqCst),
                at_stop,
                "seed {seed}: a request ran after stop"
            );
        }
    }
}
