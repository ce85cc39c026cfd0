//! Promotion policies: which misses may be installed ("Promotion policies",
//! open-cas.github.io/concepts/promotion; OCF `src/promotion/nhit/`).
//!
//! nhit lets every miss in while the top tier is filled below the trigger percentage, counting
//! nothing. Above it, a line's first access starts tracking it with a count of 1, later
//! accesses add one, and the line is installed once its count reaches the threshold (so with
//! the default 3, on its third access). Tracking is bounded like OCF's ring buffer, which holds
//! twice as many lines as the cache: here tracked lines may total twice the top tier's bytes,
//! the oldest tracked line making room first. A line installed, or discarded, has its count
//! reset to 0 and stays tracked, as OCF's purge does.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::config::{CacheConfig, PromotionPolicy};

/// Tracked bytes allowed per byte of the top tier (OCF `NHIT_MAPPING_RATIO`).
const TRACKING_RATIO: u64 = 2;

#[derive(Clone, Copy, Debug)]
struct Tracked {
    accesses: u32,
    size: u32,
}

pub(crate) struct Nhit {
    threshold: u32,
    trigger_percent: u64,
    tracked: FxHashMap<u64, Tracked>,
    /// Tracked keys in the order tracking started, oldest first.
    order: VecDeque<u64>,
    tracked_bytes: u64,
    tracking_limit_bytes: u64,
}

/// The selected promotion policy and its state.
pub(crate) enum Promoter {
    Always,
    Nhit(Nhit),
}

impl Promoter {
    /// A promoter for a top tier of `top_tier_bytes`.
    pub fn new(config: &CacheConfig, top_tier_bytes: u64) -> Promoter {
        match config.promotion {
            PromotionPolicy::Always => Promoter::Always,
            PromotionPolicy::Nhit => Promoter::Nhit(Nhit {
                threshold: config.nhit.threshold,
                trigger_percent: u64::from(config.nhit.trigger_percent),
                tracked: FxHashMap::default(),
                order: VecDeque::new(),
                tracked_bytes: 0,
                tracking_limit_bytes: top_tier_bytes.saturating_mul(TRACKING_RATIO),
            }),
        }
    }

    /// Counts an access to `key`, which no cache tier holds, and says whether to install it.
    /// `used_bytes` and `capacity_bytes` describe the top tier.
    #[inline]
    pub fn should_promote(
        &mut self,
        key: u64,
        size: u32,
        used_bytes: u64,
        capacity_bytes: u64,
    ) -> bool {
        match self {
            Promoter::Always => true,
            Promoter::Nhit(nhit) => nhit.should_promote(key, size, used_bytes, capacity_bytes),
        }
    }

    /// Resets `key`'s count: it was installed, or discarded.
    #[inline]
    pub fn purge(&mut self, key: u64) {
        if let Promoter::Nhit(nhit) = self {
            if let Some(tracked) = nhit.tracked.get_mut(&key) {
                tracked.accesses = 0;
            }
        }
    }
}

impl Nhit {
    fn should_promote(
        &mut self,
        key: u64,
        size: u32,
        used_bytes: u64,
        capacity_bytes: u64,
    ) -> bool {
        let below_trigger = u128::from(used_bytes) * 100
            < u128::from(self.trigger_percent) * u128::from(capacity_bytes);
        if below_trigger {
            return true;
        }
        if let Some(tracked) = self.tracked.get_mut(&key) {
            tracked.accesses = tracked.accesses.saturating_add(1);
            return tracked.accesses >= self.threshold;
        }
        self.tracked.insert(key, Tracked { accesses: 1, size });
        self.order.push_back(key);
        self.tracked_bytes += u64::from(size);
        while self.tracked_bytes > self.tracking_limit_bytes {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(dropped) = self.tracked.remove(&oldest) {
                let size = u64::from(dropped.size);
                debug_assert!(size <= self.tracked_bytes, "tracked bytes undercounted");
                self.tracked_bytes = self.tracked_bytes.saturating_sub(size);
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nhit(threshold: u32, trigger_percent: u32, top_tier_bytes: u64) -> Promoter {
        let mut config = CacheConfig {
            promotion: PromotionPolicy::Nhit,
            ..CacheConfig::default()
        };
        config.nhit.threshold = threshold;
        config.nhit.trigger_percent = trigger_percent;
        Promoter::new(&config, top_tier_bytes)
    }

    #[test]
    fn installs_on_the_nth_access_above_the_trigger() {
        let mut promoter = nhit(3, 80, 100);
        let full = |p: &mut Promoter, key| p.should_promote(key, 1, 90, 100);
        assert!(!full(&mut promoter, 5));
        assert!(!full(&mut promoter, 5));
        assert!(full(&mut promoter, 5));
        promoter.purge(5);
        assert!(!full(&mut promoter, 5), "a purged count starts again");
        assert!(!full(&mut promoter, 5));
        assert!(full(&mut promoter, 5));
    }

    #[test]
    fn below_the_trigger_every_miss_is_installed_uncounted() {
        let mut promoter = nhit(3, 80, 100);
        assert!(promoter.should_promote(1, 1, 79, 100));
        assert!(
            !promoter.should_promote(1, 1, 80, 100),
            "first counted access"
        );
        let mut never = nhit(3, 0, 100);
        assert!(
            !never.should_promote(2, 1, 0, 100),
            "a 0 % trigger counts from the start"
        );
    }

    #[test]
    fn tracking_forgets_the_oldest_lines_beyond_twice_the_tier() {
        let mut promoter = nhit(2, 0, 2);
        for key in 0..4 {
            assert!(!promoter.should_promote(key, 1, 2, 2));
        }
        // Four 1-byte lines fill the 2 x 2 bytes of tracking: key 0 is still counted.
        assert!(promoter.should_promote(0, 1, 2, 2));
        assert!(!promoter.should_promote(4, 1, 2, 2));
        assert!(
            !promoter.should_promote(0, 1, 2, 2),
            "key 0 was the oldest and is forgotten"
        );
    }
}
