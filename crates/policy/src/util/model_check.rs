//! Test support: drives any [`EvictionPolicy`] with a request stream and checks it against a
//! plain map of what must be resident (capacity never exceeded, counts and bytes consistent,
//! hits and `contains` exactly on resident keys, evictions only of resident objects).

use std::collections::HashMap;

use heterarchy_trace::request::NEXT_ACCESS_NEVER;
use heterarchy_trace::Request;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::eviction::{Evicted, EvictionPolicy};

/// One step of a generated stream: a key, its size, and what to do with it.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub key: u64,
    pub size: u32,
    /// 0: `remove`; 1: `lookup` then `admit` on a miss; otherwise `get`.
    pub action: u8,
}

/// Random streams over few keys (so that hits, ghosts and re-insertions happen) with sizes up
/// to `max_size` bytes.
pub fn steps(max_size: u32) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (0u64..24, 1u32..=max_size, 0u8..10).prop_map(|(key, size, action)| Step {
            key,
            size,
            action,
        }),
        1..400,
    )
}

/// Sets each step's next access to the index of the next step on the same key, as an oracle
/// needs.
pub fn with_next_access(steps: &[Step]) -> Vec<Request> {
    let mut next_seen: HashMap<u64, i64> = HashMap::new();
    let mut requests: Vec<Request> = steps
        .iter()
        .map(|step| Request::new(step.key, step.size))
        .collect();
    for (index, request) in requests.iter_mut().enumerate().rev() {
        request.next_access = next_seen
            .insert(request.key, index as i64)
            .unwrap_or(NEXT_ACCESS_NEVER);
    }
    requests
}

/// Serves one request for `key` of `size` bytes; whether it hit.
pub fn get(
    policy: &mut dyn EvictionPolicy,
    key: u64,
    size: u32,
    evicted: &mut Vec<Evicted>,
) -> bool {
    policy.get(&Request::new(key, size), evicted)
}

/// The keys in `evicted`, in order, leaving it empty.
pub fn drain_keys(evicted: &mut Vec<Evicted>) -> Vec<u64> {
    evicted.drain(..).map(|victim| victim.key).collect()
}

/// Plays `steps` on `policy` and fails on the first inconsistency with the model.
pub fn check_against_model(
    policy: &mut dyn EvictionPolicy,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let requests = with_next_access(steps);
    let mut model: HashMap<u64, u32> = HashMap::new();
    let mut evicted = Vec::new();
    for (step, request) in steps.iter().zip(&requests) {
        if let Some(resident) = policy.contains(step.key) {
            prop_assert_eq!(
                resident,
                model.contains_key(&step.key),
                "contains {}",
                step.key
            );
        }
        if step.action == 0 {
            prop_assert_eq!(policy.remove(step.key), model.remove(&step.key).is_some());
        } else {
            let hit = if step.action == 1 {
                let hit = policy.lookup(request);
                if !hit {
                    policy.admit(request, &mut evicted);
                }
                hit
            } else {
                policy.get(request, &mut evicted)
            };
            prop_assert_eq!(hit, model.contains_key(&step.key), "hit on {}", step.key);
            policy.drain_hit_evictions(&mut evicted);
            for gone in evicted.drain(..) {
                prop_assert_eq!(
                    model.remove(&gone.key),
                    Some(gone.size),
                    "evicted {:?}",
                    gone
                );
            }
            // A policy may decline an object (larger than the cache, or than S3-FIFO's small
            // queue); the object count says whether it was admitted.
            if !hit && policy.len() == model.len() + 1 {
                prop_assert!(u64::from(step.size) <= policy.capacity_bytes());
                model.insert(step.key, step.size);
            }
        }
        if let Err(broken) = policy.check_invariants() {
            return Err(TestCaseError::fail(format!("after {step:?}: {broken}")));
        }
        prop_assert!(policy.used_bytes() <= policy.capacity_bytes());
        prop_assert_eq!(policy.len(), model.len());
        prop_assert_eq!(
            policy.used_bytes(),
            model.values().map(|&size| u64::from(size)).sum::<u64>()
        );
    }
    Ok(())
}

/// Checks that a policy's [`EvictionPolicy::simulate`] (which may prefetch or batch) counts
/// exactly as plain [`EvictionPolicy::get`] calls do, warm-up included, on a skewed stream with
/// variable sizes, and leaves the cache in the same state.
pub fn check_simulate_matches_get(make: &dyn Fn() -> Box<dyn EvictionPolicy>) {
    use crate::eviction::SimCounters;
    let mut state = 99u64;
    let steps: Vec<Step> = (0..30_000)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let draw = (state >> 33) % 2000;
            let key = draw * draw / 2000;
            Step {
                key,
                size: 1 + (key % 13) as u32,
                action: 2,
            }
        })
        .collect();
    // Real next accesses, for oracles.
    let requests = with_next_access(&steps);
    let warmup = 1000;
    let mut plain = make();
    let mut expected = SimCounters::default();
    let mut evicted = Vec::new();
    for (position, request) in requests.iter().enumerate() {
        let hit = plain.get(request, &mut evicted);
        evicted.clear();
        if position < warmup {
            continue;
        }
        expected.requests += 1;
        expected.bytes += u64::from(request.size);
        if !hit {
            expected.misses += 1;
            expected.miss_bytes += u64::from(request.size);
        }
    }
    let mut batched = make();
    let mut counters = SimCounters::default();
    let mut warmup_left = warmup as u64;
    for batch in requests.chunks(777) {
        batched.simulate(batch, &mut warmup_left, &mut counters);
    }
    assert!(expected.misses > 0 && expected.misses < expected.requests);
    assert_eq!(counters, expected);
    assert_eq!(
        (batched.len(), batched.used_bytes()),
        (plain.len(), plain.used_bytes())
    );
}
