//! Requests that touch the same line are carried out in the order they were planned; requests
//! on different lines never wait for one another (issue 16, item 1; docs/architecture.md, "A
//! request through a live volume").
//!
//! Each line has a ticket queue. A request takes a ticket on every line its plan touches while
//! it is planned, under the volume's planning lock, so all tickets are handed out in one global
//! order; it then waits until each of its tickets is served. A request only ever waits for
//! requests planned before it, which never wait for it: no deadlock, whatever the lines. A line
//! without a waiting or working request has no queue at all.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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
    fn take(&self, key: u64) -> u64 {
        let mut queues = Self::lock(self.shard(key));
        let queue = queues.entry(key).or_insert(Queue {
            next: 0,
            serving: 0,
        });
        queue.next += 1;
        queue.next - 1
    }

    /// True when `ticket` is being served on `key`'s line.
    fn is_served(&self, key: u64, ticket: u64) -> bool {
        Self::lock(self.shard(key))
            .get(&key)
            .is_some_and(|queue| queue.serving == ticket)
    }

    /// Waits until `ticket` is served on `key`'s line.
    fn wait(&self, key: u64, ticket: u64) {
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

    /// Tickets on every line of `keys`, as one request's [`Turns`]. Taken under the planning
    /// lock only.
    pub fn take_turns(self: &Arc<Self>, keys: &[u64]) -> Turns {
        Turns {
            order: Arc::clone(self),
            tickets: keys.iter().map(|&key| (key, self.take(key))).collect(),
            waited: false,
        }
    }

    /// Ends the served ticket's turn on `key`'s line; the next one's begins.
    fn release(&self, key: u64) {
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

/// One request's tickets on its lines. Its turn has come once [`wait`](Turns::wait) returns; it
/// ends when the value is dropped, waited for or not — a request that fails, panics or is
/// abandoned still takes its turn and ends it, so it never holds a line from the requests
/// planned after it.
pub struct Turns {
    order: Arc<LineOrder>,
    tickets: Vec<(u64, u64)>,
    waited: bool,
}

impl Turns {
    /// True when every ticket is being served: waiting would not wait.
    pub fn is_ready(&self) -> bool {
        self.tickets
            .iter()
            .all(|&(key, ticket)| self.order.is_served(key, ticket))
    }

    /// Waits until every ticket is served. The tickets were taken in the global order, so the
    /// requests waited for never wait for this one.
    pub fn wait(&mut self) {
        for &(key, ticket) in &self.tickets {
            self.order.wait(key, ticket);
        }
        self.waited = true;
    }
}

impl Drop for Turns {
    fn drop(&mut self) {
        if !self.waited {
            self.wait();
        }
        for &(key, _) in &self.tickets {
            self.order.release(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_follow_tickets_and_idle_lines_leave_no_trace() {
        let order = Arc::new(LineOrder::default());
        let mut first = order.take_turns(&[5]);
        let second = order.take_turns(&[5, 6]);
        let mut other = order.take_turns(&[7]);
        assert!(order.is_served(5, 0) && !order.is_served(5, 1));
        assert!(first.is_ready() && !second.is_ready());
        other.wait();
        drop(other);
        first.wait();
        drop(first);
        assert!(order.is_served(5, 1));
        // Dropped without waiting, a request still takes its turn and ends it.
        drop(second);
        assert_eq!(order.busy_lines(), 0);
    }

    #[test]
    fn waiters_run_in_ticket_order() {
        let order = Arc::new(LineOrder::default());
        let log = Mutex::new(Vec::new());
        let turns: Vec<(u64, Turns)> = (0..16)
            .map(|index| (index, order.take_turns(&[1])))
            .collect();
        std::thread::scope(|scope| {
            for (index, mut turn) in turns.into_iter().rev() {
                let log = &log;
                scope.spawn(move || {
                    turn.wait();
                    log.lock().unwrap().push(index);
                });
            }
        });
        assert_eq!(*log.lock().unwrap(), (0..16).collect::<Vec<u64>>());
        assert_eq!(order.busy_lines(), 0);
    }
}
