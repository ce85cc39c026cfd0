//! Requests that touch the same line are carried out in the order they were planned; requests
//! on different lines never wait for one another (docs/architecture.md, "A request through a
//! live volume").
//!
//! Each line has a ticket queue. A request takes a ticket on every line its plan touches while
//! it is planned, under the volume's planning lock, so all tickets are handed out in one global
//! order; it then waits until each of its tickets is served. A request only ever waits for
//! requests planned before it, which never wait for it: no deadlock, whatever the lines. A line
//! without a waiting or working request has no queue at all.
//!
//! A thread may wait for its turn ([`Turns::wait`]), or leave the request parked
//! ([`LineOrder::when_served`]): the thread that ends the last turn before it then hands it on,
//! so a server's workers only ever take requests whose turn has come and never sit waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Shards of the queue table: a request takes and releases tickets on a handful of lines, so
/// sharding by line spreads the locks without any global one.
const SHARDS: usize = 64;

struct Queue {
    /// The next ticket to hand out.
    next: u64,
    /// The ticket whose holder may work on the line.
    serving: u64,
    /// Parked requests, by the ticket they wait for on this line.
    parked: Vec<(u64, Arc<Parked>)>,
}

/// A request waiting for its turn without a thread: what to do once its last ticket is served.
struct Parked {
    /// Tickets not served yet, plus one while tickets are still being registered.
    missing: AtomicUsize,
    action: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Parked {
    /// One more ticket served; the last runs the action.
    fn arrive(&self) {
        if self.missing.fetch_sub(1, Ordering::AcqRel) == 1 {
            let action = self
                .action
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take();
            if let Some(action) = action {
                action();
            }
        }
    }
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
            parked: Vec::new(),
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

    /// Tickets on every line of `keys` and on every line with a queue now, so that the request
    /// waits for every request planned before it, whatever lines they touch. Taken under the
    /// planning lock only, as every ticket is.
    pub fn take_turns_after_all(self: &Arc<Self>, keys: &[u64]) -> Turns {
        let mut lines: rustc_hash::FxHashSet<u64> = keys.iter().copied().collect();
        let mut all = keys.to_vec();
        for shard in &self.shards {
            for &key in Self::lock(shard).keys() {
                if lines.insert(key) {
                    all.push(key);
                }
            }
        }
        self.take_turns(&all)
    }

    /// Runs `action` once every ticket of `tickets` is served: at once if they are, else on
    /// the thread that ends the last turn before them.
    pub fn when_served(&self, tickets: &[(u64, u64)], action: Box<dyn FnOnce() + Send>) {
        let parked = Arc::new(Parked {
            missing: AtomicUsize::new(1),
            action: Mutex::new(Some(action)),
        });
        for &(key, ticket) in tickets {
            let mut queues = Self::lock(self.shard(key));
            if let Some(queue) = queues.get_mut(&key).filter(|queue| queue.serving != ticket) {
                parked.missing.fetch_add(1, Ordering::AcqRel);
                queue.parked.push((ticket, Arc::clone(&parked)));
            }
        }
        parked.arrive();
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
        let serving = queue.serving;
        let mut arrived = Vec::new();
        queue.parked.retain(|(ticket, parked)| {
            let now = *ticket == serving;
            if now {
                arrived.push(Arc::clone(parked));
            }
            !now
        });
        let waiting = queue.serving < queue.next;
        if !waiting {
            queues.remove(&key);
        }
        drop(queues);
        if waiting {
            shard.turn.notify_all();
        }
        for parked in arrived {
            parked.arrive();
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
    /// (line, ticket) of every ticket.
    pub fn tickets(&self) -> &[(u64, u64)] {
        &self.tickets
    }

    /// The line order the tickets are in.
    pub fn order(&self) -> &Arc<LineOrder> {
        &self.order
    }

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
    fn a_parked_request_goes_on_when_its_last_turn_comes() {
        let order = Arc::new(LineOrder::default());
        let mut first = order.take_turns(&[1, 2]);
        let second = order.take_turns(&[2, 3]);
        let handed = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&handed);
        let tickets = second.tickets().to_vec();
        order.when_served(
            &tickets,
            Box::new(move || *slot.lock().unwrap() = Some(second)),
        );
        assert!(
            handed.lock().unwrap().is_none(),
            "line 2 is still the first's"
        );
        first.wait();
        drop(first);
        let second = handed
            .lock()
            .unwrap()
            .take()
            .expect("handed on by the release");
        assert!(second.is_ready());
        drop(second);
        // Ready at once: the action runs on the caller.
        let third = order.take_turns(&[4]);
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&ran);
        let tickets = third.tickets().to_vec();
        order.when_served(
            &tickets,
            Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(third);
            }),
        );
        assert_eq!(ran.load(Ordering::SeqCst), 1);
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
