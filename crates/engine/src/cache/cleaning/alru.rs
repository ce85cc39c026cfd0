//! ALRU, Open CAS's default cleaning policy ("Cleaner: ALRU - Approximately Least Recently
//! Used", open-cas.github.io/ocf/design/cleaner; OCF `src/cleaning/alru.c`).
//!
//! Every write that dirties a line puts it at the head of a list with the time of the write
//! (with several cache tiers, a line's latest write to any tier dates it, and cleaning it
//! cleans every copy). A
//! wake-up cleans nothing while the cache saw a request within the activity threshold, or
//! within a wake-up period of a wake-up that found nothing to clean; otherwise it takes up to
//! `flush_max_buffers` lines from the tail whose last write is at least the staleness time old.
//! After cleaning something it asks to run again at once; otherwise after the wake-up time.
//!
//! The list is a queue in write order with lazy deletion: a re-written line gets a new entry
//! and its old one goes stale (its generation no longer matches the line's), to be skipped at
//! the tail or dropped when the queue is compacted. Everything is O(1) amortized per write.
//! Generations are 16 bits: a stale entry passes for current only if its line's latest write
//! drew the same generation (one chance in 65536), and then only cleans the line early.

use std::collections::VecDeque;

use heterarchy_policy::util::key_table::KeyTable;

use super::MIN_IDLE_WAIT_NS;
use crate::cache::config::AlruConfig;
use crate::cache::line::Line;

const NS_PER_MS: u64 = 1_000_000;
const NS_PER_S: u64 = 1_000_000_000;

/// Stale entries tolerated beyond twice the live ones before the queue is compacted.
const COMPACTION_SLACK: usize = 1024;

#[derive(Clone, Copy, Debug)]
struct Entry {
    written_ns: u64,
    key: u64,
    generation: u16,
}

pub(crate) struct Alru {
    wake_up_ns: u64,
    staleness_ns: u64,
    flush_max_buffers: usize,
    activity_threshold_ns: u64,
    /// Dirty copies in write order, oldest at the front.
    queue: VecDeque<Entry>,
    /// Last wake-up that found nothing to clean (Open CAS's `cleaning_thread_access`).
    last_idle_wake_up_ns: Option<u64>,
}

impl Alru {
    pub fn new(config: &AlruConfig) -> Alru {
        Alru {
            wake_up_ns: config.wake_up_s.saturating_mul(NS_PER_S),
            staleness_ns: config.staleness_time_s.saturating_mul(NS_PER_S),
            flush_max_buffers: config.flush_max_buffers as usize,
            activity_threshold_ns: config.activity_threshold_ms.saturating_mul(NS_PER_MS),
            queue: VecDeque::new(),
            last_idle_wake_up_ns: None,
        }
    }

    #[inline]
    pub fn line_written(&mut self, key: u64, generation: u16, now_ns: u64) {
        self.queue.push_back(Entry {
            written_ns: now_ns,
            key,
            generation,
        });
    }

    #[inline]
    fn is_current(entry: &Entry, lines: &KeyTable<Line>) -> bool {
        lines
            .get(entry.key)
            .is_some_and(|line| line.any_dirty() && line.dirty_generation == entry.generation)
    }

    fn idle_wait_ns(&self) -> u64 {
        self.wake_up_ns.max(MIN_IDLE_WAIT_NS)
    }

    pub fn due(
        &mut self,
        now_ns: u64,
        last_request_ns: u64,
        lines: &KeyTable<Line>,
        out: &mut Vec<u64>,
    ) -> u64 {
        let recently_active = now_ns.saturating_sub(last_request_ns) < self.activity_threshold_ns;
        // Open CAS compares with `<=` on whole seconds, which with a wake-up exactly one period
        // after an idle one skips it; on an exact clock the intent, one period, is kept.
        let recently_idle = self
            .last_idle_wake_up_ns
            .is_some_and(|idle_ns| now_ns.saturating_sub(idle_ns) < self.wake_up_ns);
        if recently_active || recently_idle {
            return now_ns.saturating_add(self.idle_wait_ns());
        }
        let start = out.len();
        while out.len() - start < self.flush_max_buffers {
            let Some(entry) = self.queue.front().copied() else {
                break;
            };
            if !Self::is_current(&entry, lines) {
                self.queue.pop_front();
                continue;
            }
            if now_ns.saturating_sub(entry.written_ns) < self.staleness_ns {
                break;
            }
            self.queue.pop_front();
            out.push(entry.key);
        }
        if out.len() > start {
            now_ns
        } else {
            self.last_idle_wake_up_ns = Some(now_ns);
            now_ns.saturating_add(self.idle_wait_ns())
        }
    }

    pub fn compact(&mut self, lines: &KeyTable<Line>, dirty_copies: u64) {
        let live = usize::try_from(dirty_copies).unwrap_or(usize::MAX);
        if self.queue.len() > live.saturating_mul(2).saturating_add(COMPACTION_SLACK) {
            self.queue.retain(|entry| Self::is_current(entry, lines));
        }
    }

    #[cfg(test)]
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirty_line(generation: u16) -> Line {
        let mut line = Line::absent(4096);
        line.set_resident(0);
        line.dirty = 1;
        line.dirty_generation = generation;
        line
    }

    #[test]
    fn cleans_only_stale_lines_when_idle_oldest_first() {
        let config = AlruConfig {
            wake_up_s: 20,
            staleness_time_s: 120,
            flush_max_buffers: 2,
            activity_threshold_ms: 10_000,
        };
        let mut alru = Alru::new(&config);
        let mut lines = KeyTable::default();
        for (generation, (key, written_s)) in [(10u64, 0u64), (11, 5), (12, 50)].iter().enumerate()
        {
            lines.insert(*key, dirty_line(generation as u16));
            alru.line_written(*key, generation as u16, written_s * NS_PER_S);
        }
        let mut out = Vec::new();
        // A request 5 s ago: the cache is active, nothing is cleaned.
        let next = alru.due(130 * NS_PER_S, 125 * NS_PER_S, &lines, &mut out);
        assert!(out.is_empty());
        assert_eq!(next, 150 * NS_PER_S);
        // Idle: at 130 s lines written at 0 s and 5 s are stale, the one of 50 s is not.
        let next = alru.due(130 * NS_PER_S, 100 * NS_PER_S, &lines, &mut out);
        assert_eq!(out, vec![10, 11]);
        assert_eq!(next, 130 * NS_PER_S);
        out.clear();
        let next = alru.due(130 * NS_PER_S, 100 * NS_PER_S, &lines, &mut out);
        assert!(out.is_empty());
        assert_eq!(next, 150 * NS_PER_S);
        let next = alru.due(170 * NS_PER_S, 100 * NS_PER_S, &lines, &mut out);
        assert_eq!(out, vec![12]);
        assert_eq!(next, 170 * NS_PER_S);
    }

    #[test]
    fn rewritten_copies_are_cleaned_by_their_last_write() {
        let mut alru = Alru::new(&AlruConfig::default());
        let mut lines = KeyTable::default();
        alru.line_written(1, 1, 0);
        alru.line_written(1, 2, 100 * NS_PER_S);
        lines.insert(1, dirty_line(2));
        let mut out = Vec::new();
        alru.due(150 * NS_PER_S, 0, &lines, &mut out);
        assert!(out.is_empty(), "the write at 100 s is 50 s old");
        assert_eq!(
            alru.queue_len(),
            1,
            "the stale entry was dropped at the tail"
        );
        alru.due(221 * NS_PER_S, 0, &lines, &mut out);
        assert_eq!(out, vec![1]);
    }

    #[test]
    fn compaction_keeps_only_current_entries() {
        let mut alru = Alru::new(&AlruConfig::default());
        let mut lines = KeyTable::default();
        for generation in 0..5000 {
            alru.line_written(3, generation, u64::from(generation));
        }
        lines.insert(3, dirty_line(4999));
        alru.compact(&lines, 1);
        assert_eq!(alru.queue_len(), 1);
    }
}
