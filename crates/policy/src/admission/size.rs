//! Size threshold: admit only objects smaller than a fixed size, libCacheSim's `size`
//! admissioner (`admission/size.c`). Its default threshold, `INT64_MAX`, admits everything.

use heterarchy_trace::Request;

use super::{AdmissionFilter, FilterEntry};
use crate::params::{ParamKind, ParamSpec};

/// The registry entry.
pub const ENTRY: FilterEntry = FilterEntry {
    name: "size",
    aliases: &[],
    params: &[ParamSpec {
        name: "size",
        kind: ParamKind::Int {
            min: 1,
            max: i64::MAX as u64,
        },
        default: "9223372036854775807",
        doc: "objects of this many bytes or more are not admitted",
    }],
    source: "size threshold; libCacheSim admission/size.c",
    build: |params| Ok(Box::new(SizeThreshold::new(params.int("size")))),
};

/// Admits objects strictly smaller than a threshold.
pub struct SizeThreshold {
    threshold_bytes: u64,
}

impl SizeThreshold {
    /// Admits objects of fewer than `threshold_bytes`.
    pub fn new(threshold_bytes: u64) -> SizeThreshold {
        SizeThreshold { threshold_bytes }
    }
}

impl AdmissionFilter for SizeThreshold {
    fn admit(&mut self, request: &Request) -> bool {
        u64::from(request.size) < self.threshold_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::PolicySpec;

    #[test]
    fn objects_at_the_threshold_are_refused() {
        let mut filter = SizeThreshold::new(100);
        assert!(filter.admit(&Request::new(1, 99)));
        assert!(!filter.admit(&Request::new(1, 100)));
        let spec = PolicySpec::parse("lru", Some("size:size=100")).unwrap();
        assert_eq!(spec.label(), "lru+size:size=100");
        let mut cache = spec.build(1000).unwrap();
        let mut evicted = Vec::new();
        assert!(!cache.get(&Request::new(1, 100), &mut evicted));
        assert!(!cache.get(&Request::new(1, 100), &mut evicted));
        assert!(!cache.get(&Request::new(2, 50), &mut evicted));
        assert!(cache.get(&Request::new(2, 50), &mut evicted));
        assert_eq!(cache.len(), 1);
        let error = PolicySpec::parse("lru", Some("size:size=0"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "size: size=0 is out of range: expected an integer from 1 to 9223372036854775807"
        );
        let error = PolicySpec::parse("lru", Some("bouncer"))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("unknown admission filter \"bouncer\""));
    }
}
