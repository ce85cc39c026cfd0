//! Requests that touch the same line are carried out in the order they were planned; requests
//! on different lines never wait for one another (issue 16, item 1; docs/architecture.md, "A
//! request through a live volume").
//!
//! Each line has a ticket queue. A request takes a ticket on every line its plan touches while
//! it is planned, under the volume's planning lock, so all tickets are handed out in one global
//! order; it then waits until each of its tickets is served. A request only ever waits for
//! requests planned before it, which never wait for it: no deadlock, whatever the lines. A line
//! without a waiting or working request has no queue at all.

use std::sync::{Condvar, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Shards of the queue table: a request takes and releases tickets on a handful of lines, so
/// sharding by line spreads the locks without any global one.
const SHARDS: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Queue {
    /// The next ticket to hand out.
    next: u64,
    /// The ticket whose holder may work on the line.
    serving: u64,
}

#[derive(Default)]
struct Shard {
    queues: Mutex<FxHashMap<u64, Queue>>,
    turn: Condvar,
}

/// The per-line ticket queues of one volume.
pub struct LineOrder {
    shards: Vec<Shard>,
}

impl Default for LineOrder {
    fn default() -> Self {
        LineOrder {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl LineOrder {
    fn shard(&self, key: u64) -> &Shard {
        let spread = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        &self.shards[spread as usize % SHARDS]
    }

    fn lock(shard: &Shard) -> MutexGuard<'_, FxHashMap<u64, Queue>> {
        shard
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A ticket on `key`'s line, behind every ticket taken before. Taken under the planning
    /// lock only, so that tickets on all lines follow one order.
    pub fn take(&self, key: u64) -> u64 {
        let mut queues = Self::lock(self.shard(key));
        let queue = queues.entry(key).or_insert(Queue {
            next: 0,
            serving: 0,
        });
        queue.next += 1;
        queue.next - 1
    }

    /// True when `ticket` is being served on `key`'s line.
    #[cfg(test)]
    pub fn is_served(&self, key: u64, ticket: u64) -> bool {
        Self::lock(self.shard(key))
            .get(&key)
            .is_some_and(|queue| queue.serving == ticket)
    }

    /// Waits until `ticket` is served on `key`'s line.
    pub fn wait(&self, key: u64, ticket: u64) {
        let shard = self.shard(key);
        let mut queues = Self::lock(shard);
        while queues
            .get(&key)
            .is_some_and(|queue| queue.serving != ticket)
        {
            queues = shard
                .turn
                .wait(queues)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Ends the served ticket's turn on `key`'s line; the next one's begins.
    pub fn release(&self, key: u64) {
        let shard = self.shard(key);
        let mut queues = Self::lock(shard);
        let Some(queue) = queues.get_mut(&key) else {
            debug_assert!(false, "release of line {key} without a ticket");
            return;
        };
        queue.serving += 1;
        let waiting = queue.serving < queue.next;
        if !waiting {
            queues.remove(&key);
        }
        drop(queues);
        if waiting {
            shard.turn.notify_all();
        }
    }

    /// Lines with a queue (requests waiting or working).
    #[cfg(test)]
    pub fn busy_lines(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| Self::lock(shard).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn turns_follow_tickets_and_idle_lines_leave_no_trace() {
        let order = LineOrder::default();
        let first = order.take(5);
        let second = order.take(5);
        let other = order.take(6);
        assert!(order.is_served(5, first) && !order.is_served(5, second));
        assert!(order.is_served(6, other));
        order.wait(6, other);
        order.release(6);
        order.release(5);
        assert!(order.is_served(5, second));
        order.release(5);
        assert_eq!(order.busy_lines(), 0);
    }

    #[test]
    fn waiters_run_in_ticket_order() {
        let order = Arc::new(LineOrder::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        let tickets: Vec<u64> = (0..16).map(|_| order.take(1)).collect();
        let threads: Vec<_> = tickets
            .into_iter()
            .rev()
            .map(|ticket| {
                let (order, log) = (Arc::clone(&order), Arc::clone(&log));
                std::thread::spawn(move || {
                    order.wait(1, ticket);
                    log.lock().unwrap().push(ticket);
                    order.release(1);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*log.lock().unwrap(), (0..16).collect::<Vec<u64>>());
        assert_eq!(order.busy_lines(), 0);
    }
}
