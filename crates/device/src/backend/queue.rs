//! A device's queue depth: how many of its operations may be outstanding at once, whichever
//! threads issue them (seed 000 §3.1.1 shows why it matters: an Optane SSD saturates at a
//! handful of outstanding requests, flash keeps gaining with depth, a disk only seeks more).

use std::sync::{Condvar, Mutex};

/// A counting semaphore in front of one device.
pub struct QueueDepth {
    limit: usize,
    outstanding: Mutex<usize>,
    freed: Condvar,
}

/// Gives the place back when an operation ends, even by unwinding.
struct Place<'a>(&'a QueueDepth);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        *self.0.lock() -= 1;
        self.0.freed.notify_one();
    }
}

impl QueueDepth {
    /// At most `limit` outstanding operations (at least one).
    pub fn new(limit: usize) -> QueueDepth {
        QueueDepth {
            limit: limit.max(1),
            outstanding: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// The most operations outstanding at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Operations outstanding now.
    pub fn outstanding(&self) -> usize {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.outstanding
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `operation` once fewer than `limit` others are outstanding. Whoever waits here must
    /// hold nothing another operation of the device waits for.
    pub fn run<T>(&self, operation: impl FnOnce() -> T) -> T {
        {
            let mut outstanding = self.lock();
            while *outstanding >= self.limit {
                outstanding = self
                    .freed
                    .wait(outstanding)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            *outstanding += 1;
        }
        let _place = Place(self);
        operation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn never_more_than_the_limit_at_once() {
        let queue = QueueDepth::new(3);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..200 {
                        queue.run(|| {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert_eq!(queue.outstanding(), 0);
        assert_eq!(QueueDepth::new(0).limit(), 1);
    }
}
