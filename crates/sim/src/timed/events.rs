//! The timed simulator's pending stage completions, earliest first.
//!
//! Each in-flight slot has at most one stage running, so `(time, slot)` keys are unique and any
//! correct priority queue hands them out in the same order: the queue's shape changes speed,
//! never results. Keys are packed into one `u128`, time above slot, so that ordering them is one
//! integer comparison. A closed loop keeps about one event per client (16 in
//! `scripts/bench-timed`); so few fit a sorted array, taken from its end in a few instructions
//! and added by a binary search and a short shift, cheaper than a binary heap's sifting both
//! ways. An open loop may keep thousands in flight, where shifting costs more than sifting:
//! above [`SORTED_MAX`] events the queue is a binary heap, until it has drained to half that.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Most events kept in the sorted list; beyond, a heap.
const SORTED_MAX: usize = 64;

/// Stage completions `(time ns, slot)`, taken earliest first (ties by slot).
#[derive(Debug, Default)]
pub struct EventQueue {
    /// Keys in descending order, the earliest last, while there are few.
    sorted: Vec<u128>,
    /// Every key once there were more than [`SORTED_MAX`] (`sorted` is then empty).
    heap: BinaryHeap<Reverse<u128>>,
}

/// Orders by time, then by slot.
#[inline]
fn key(time_ns: u64, slot: u32) -> u128 {
    (u128::from(time_ns) << 32) | u128::from(slot)
}

#[inline]
fn unkey(key: u128) -> (u64, u32) {
    ((key >> 32) as u64, key as u32)
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> EventQueue {
        EventQueue::default()
    }

    /// Adds the completion of `slot`'s stage at `time_ns`.
    #[inline]
    pub fn push(&mut self, time_ns: u64, slot: u32) {
        let key = key(time_ns, slot);
        if self.sorted.len() < SORTED_MAX && self.heap.is_empty() {
            let at = self.sorted.partition_point(|&other| other > key);
            self.sorted.insert(at, key);
        } else {
            self.heap.extend(self.sorted.drain(..).map(Reverse));
            self.heap.push(Reverse(key));
        }
    }

    /// The earliest completion's time.
    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        match self.sorted.last() {
            Some(&key) => Some(unkey(key).0),
            None => self.heap.peek().map(|&Reverse(key)| unkey(key).0),
        }
    }

    /// Takes the earliest completion, `(time ns, slot)`.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u32)> {
        if let Some(key) = self.sorted.pop() {
            return Some(unkey(key));
        }
        let Reverse(key) = self.heap.pop()?;
        if self.heap.len() <= SORTED_MAX / 2 {
            let mut keys: Vec<u128> = std::mem::take(&mut self.heap)
                .into_iter()
                .map(|Reverse(key)| key)
                .collect();
            keys.sort_unstable_by(|a, b| b.cmp(a));
            self.sorted = keys;
        }
        Some(unkey(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_trace::generate::mix64;

    /// Pushes and pops in a seeded pattern that grows the queue to a thousand and drains it
    /// again, against a sorted list of what should come out.
    #[test]
    fn hands_out_the_earliest_first() {
        let mut queue = EventQueue::new();
        let mut expected: Vec<(u64, u32)> = Vec::new();
        let mut now = 0u64;
        let mut next_slot = 0u32;
        let mut state = 7u64;
        let mut grew_to = 0;
        for round in 0..20_000u64 {
            state = mix64(state);
            // Grow for a while, then shrink, twice over.
            let growing = (round / 2_500) % 2 == 0;
            let push = if growing {
                !state.is_multiple_of(4)
            } else {
                state.is_multiple_of(4)
            };
            if push || expected.is_empty() {
                let time = now + (mix64(state) % 1_000);
                queue.push(time, next_slot);
                expected.push((time, next_slot));
                next_slot += 1;
            } else {
                expected.sort_unstable();
                let earliest = expected.remove(0);
                assert_eq!(queue.peek_time(), Some(earliest.0));
                assert_eq!(queue.pop(), Some(earliest));
                now = earliest.0;
            }
            grew_to = grew_to.max(expected.len());
        }
        assert!(grew_to > 1_000, "{grew_to}");
        expected.sort_unstable();
        for earliest in expected {
            assert_eq!(queue.pop(), Some(earliest));
        }
        assert_eq!(queue.pop(), None);
        assert_eq!(queue.peek_time(), None);
    }

    #[test]
    fn ties_go_by_slot() {
        let mut queue = EventQueue::new();
        for slot in [5, 1, 3] {
            queue.push(100, slot);
        }
        queue.push(50, 9);
        assert_eq!(queue.pop(), Some((50, 9)));
        assert_eq!(queue.pop(), Some((100, 1)));
        assert_eq!(queue.pop(), Some((100, 3)));
        assert_eq!(queue.pop(), Some((100, 5)));
    }

    #[test]
    fn times_of_hours_keep_their_order() {
        let mut queue = EventQueue::new();
        let hour_ns = 3_600_000_000_000u64;
        queue.push(100 * hour_ns, 0);
        queue.push(hour_ns, u32::MAX);
        assert_eq!(queue.pop(), Some((hour_ns, u32::MAX)));
        assert_eq!(queue.pop(), Some((100 * hour_ns, 0)));
    }
}
