//! Test support: drives any [`EvictionPolicy`] with a request stream and checks it against a
//! plain map of what must be resident (capacity never exceeded, counts and bytes consistent,
//! hits exactly on resident keys, evictions only of resident objects).

use std::collections::HashMap;

use heterarchy_trace::request::NEXT_ACCESS_NEVER;
use heterarchy_trace::Request;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::eviction::EvictionPolicy;

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

/// Plays `steps` on `policy` and fails on the first inconsistency with the model.
pub fn check_against_model(
    policy: &mut dyn EvictionPolicy,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let requests = with_next_access(steps);
    let mut model: HashMap<u64, u32> = HashMap::new();
    let mut evicted = Vec::new();
    for (step, request) in steps.iter().zip(&requests) {
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
        prop_assert!(policy.used_bytes() <= policy.capacity_bytes());
        prop_assert_eq!(policy.len(), model.len());
        prop_assert_eq!(
            policy.used_bytes(),
            model.values().map(|&size| u64::from(size)).sum::<u64>()
        );
    }
    Ok(())
}
