//! Memory prefetching for the simulation loop. A policy's request is a chain of dependent
//! cache misses (table slot, node, list neighbours); hinting the slots and nodes of requests a
//! few positions ahead lets the CPU overlap those misses across requests.

use heterarchy_trace::Request;

use crate::eviction::{EvictionPolicy, SimCounters};

/// How far ahead the table slot of a request is prefetched.
pub const SLOT_DISTANCE: usize = 16;
/// How far ahead a request's node is prefetched (its slot should have arrived by then).
pub const NODE_DISTANCE: usize = 8;

/// A policy that can hint the memory a future request will touch.
pub trait Prefetch {
    /// Starts loading the table slot of `key`.
    fn prefetch_slot(&self, key: u64);
    /// Looks `key` up and starts loading its node (and whatever else a hit will touch).
    fn prefetch_node(&self, key: u64);
    /// Starts loading what the next eviction will touch (list tails and their neighbours).
    fn prefetch_victims(&self) {}
}

/// Asks the CPU to start loading the cache line holding `value`; a hint with no effect on
/// results (and none at all off x86-64).
#[inline(always)]
pub fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint never faults and does not access memory architecturally; the
    // pointer comes from a reference, so it is valid anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// [`EvictionPolicy::simulate`] with prefetching: the same requests, decisions and counts.
#[inline]
pub fn simulate_prefetching<P: EvictionPolicy + Prefetch>(
    policy: &mut P,
    batch: &[Request],
    warmup_left: &mut u64,
    counters: &mut SimCounters,
) {
    let mut evicted = Vec::new();
    for (position, request) in batch.iter().enumerate() {
        if let Some(ahead) = batch.get(position + SLOT_DISTANCE) {
            policy.prefetch_slot(ahead.key);
        }
        if let Some(ahead) = batch.get(position + NODE_DISTANCE) {
            policy.prefetch_node(ahead.key);
        }
        policy.prefetch_victims();
        let hit = policy.get(request, &mut evicted);
        evicted.clear();
        if *warmup_left > 0 {
            *warmup_left -= 1;
            continue;
        }
        counters.requests += 1;
        counters.bytes += u64::from(request.size);
        if !hit {
            counters.misses += 1;
            counters.miss_bytes += u64::from(request.size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::{arc::Arc, lfu::Lfu, lirs::Lirs, twoq::TwoQ};

    /// A skewed stream with repeats, misses and evictions over a small cache.
    fn stream() -> Vec<Request> {
        let mut state = 12345u64;
        (0..20_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let draw = (state >> 33) % 1000;
                let key = draw * draw / 1000;
                Request::new(key, 1 + (key % 7) as u32)
            })
            .collect()
    }

    /// Plays `requests` with plain `get` calls, counting as `simulate` does.
    fn plain(policy: &mut dyn EvictionPolicy, requests: &[Request], warmup: u64) -> SimCounters {
        let mut counters = SimCounters::default();
        let mut evicted = Vec::new();
        for (position, request) in requests.iter().enumerate() {
            let hit = policy.get(request, &mut evicted);
            if (position as u64) < warmup {
                continue;
            }
            counters.requests += 1;
            counters.bytes += u64::from(request.size);
            if !hit {
                counters.misses += 1;
                counters.miss_bytes += u64::from(request.size);
            }
        }
        counters
    }

    #[test]
    fn prefetching_simulation_counts_like_plain_gets() {
        let requests = stream();
        type Make = fn(u64) -> Box<dyn EvictionPolicy>;
        let makers: [Make; 4] = [
            |c| Box::new(Arc::new(c)),
            |c| Box::new(Lfu::new(c)),
            |c| Box::new(Lirs::new(c)),
            |c| Box::new(TwoQ::new(c)),
        ];
        for make in makers {
            let expected = plain(make(400).as_mut(), &requests, 1000);
            let mut policy = make(400);
            let mut counters = SimCounters::default();
            let mut warmup_left = 1000;
            for batch in requests.chunks(777) {
                policy.simulate(batch, &mut warmup_left, &mut counters);
            }
            assert!(expected.misses > 0 && expected.misses < expected.requests);
            assert_eq!(counters, expected, "{}", policy.name());
        }
    }
}
