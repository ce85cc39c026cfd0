//! Builds eviction policies by name, one line per policy.

use crate::eviction::{
    arc::Arc, belady::Belady, clock::Clock, fifo::Fifo, lfu::Lfu, lirs::Lirs, lru::Lru,
    s3fifo::S3Fifo, sieve::Sieve, twoq::TwoQ, EvictionPolicy,
};

/// Names accepted by [`create`], in the order `--policy all` runs them.
pub const POLICY_NAMES: &[&str] = &[
    "lru", "fifo", "clock", "sieve", "s3fifo", "lfu", "arc", "twoq", "lirs", "belady",
];

/// A policy name or parameter that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// Builds the policy `name` (case-insensitive; libCacheSim's spellings are accepted too) with
/// `capacity` bytes.
pub fn create(name: &str, capacity: u64) -> Result<Box<dyn EvictionPolicy>, PolicyError> {
    let policy: Box<dyn EvictionPolicy> = match name.to_ascii_lowercase().as_str() {
        "lru" => Box::new(Lru::new(capacity)),
        "fifo" => Box::new(Fifo::new(capacity)),
        "clock" => Box::new(Clock::new(capacity)),
        "sieve" => Box::new(Sieve::new(capacity)),
        "s3fifo" | "s3-fifo" => Box::new(S3Fifo::new(capacity)),
        "lfu" => Box::new(Lfu::new(capacity)),
        "arc" => Box::new(Arc::new(capacity)),
        "twoq" | "2q" => Box::new(TwoQ::new(capacity)),
        "lirs" => Box::new(Lirs::new(capacity)),
        "belady" | "opt" => Box::new(Belady::new(capacity)),
        _ => {
            return Err(PolicyError(format!(
                "unknown policy \"{name}\"; expected one of: {}",
                POLICY_NAMES.join(", ")
            )))
        }
    };
    Ok(policy)
}
