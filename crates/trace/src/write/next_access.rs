//! Future knowledge for offline-optimal policies: each request's next access to the same key.

use rustc_hash::FxHashMap;

use crate::request::NEXT_ACCESS_NEVER;
use crate::Request;

/// Sets each request's `next_access` to the index (0-based position in `requests`) of the next
/// request for the same key, or [`NEXT_ACCESS_NEVER`] if there is none. One backward pass with a
/// map from key to the latest index seen, so memory grows with the number of distinct keys.
/// The oracleGeneral writer and the Belady policy both rely on it.
pub fn annotate_next_access(requests: &mut [Request]) {
    let mut next_index: FxHashMap<u64, i64> = FxHashMap::default();
    for (index, request) in requests.iter_mut().enumerate().rev() {
        request.next_access = next_index
            .insert(request.key, index as i64)
            .unwrap_or(NEXT_ACCESS_NEVER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_the_next_same_key() {
        let mut requests: Vec<Request> = [5, 6, 5, 7, 6, 5]
            .iter()
            .map(|&k| Request::new(k, 1))
            .collect();
        annotate_next_access(&mut requests);
        let next: Vec<i64> = requests.iter().map(|r| r.next_access).collect();
        let never = NEXT_ACCESS_NEVER;
        assert_eq!(next, vec![2, 4, 5, never, never, never]);
    }

    proptest::proptest! {
        /// Against the definition, one quadratic scan per request, on traces of 0 to 60
        /// requests over a few keys (so keys come back, or never do).
        #[test]
        fn equals_a_forward_scan(keys in proptest::collection::vec(0u64..6, 0..60)) {
            let mut requests: Vec<Request> = keys.iter().map(|&k| Request::new(k, 1)).collect();
            annotate_next_access(&mut requests);
            for (index, request) in requests.iter().enumerate() {
                let expected = keys[index + 1..]
                    .iter()
                    .position(|&key| key == keys[index])
                    .map_or(NEXT_ACCESS_NEVER, |offset| (index + 1 + offset) as i64);
                proptest::prop_assert_eq!(request.next_access, expected, "request {}", index);
            }
        }
    }
}
