//! Builds eviction policies by name, one line per policy.

use crate::eviction::{lru::Lru, EvictionPolicy};

/// Names accepted by [`create`], in the order `--policy all` runs them.
pub const POLICY_NAMES: &[&str] = &[
    "lru", "arc", "fifo", "clock", "sieve", "s3fifo", "belady", "lfu", "twoq", "lirs",
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
        "arc" => Box::new(crate::eviction::arc::Arc::new(capacity)),
        "lfu" => Box::new(crate::eviction::lfu::Lfu::new(capacity)),
        "twoq" | "2q" => Box::new(crate::eviction::twoq::TwoQ::new(capacity)),
        "lirs" => Box::new(crate::eviction::lirs::Lirs::new(capacity)),
        "fifo" => Box::new(crate::eviction::fifo::Fifo::new(capacity)),
        "clock" => Box::new(crate::eviction::clock::Clock::new(capacity)),
        "sieve" => Box::new(crate::eviction::sieve::Sieve::new(capacity)),
        "s3fifo" | "s3-fifo" => Box::new(crate::eviction::s3fifo::S3Fifo::new(capacity)),
        "belady" | "opt" => Box::new(crate::eviction::belady::Belady::new(capacity)),
        _ => {
            return Err(PolicyError(format!(
                "unknown policy \"{name}\"; expected one of: {}",
                POLICY_NAMES.join(", ")
            )))
        }
    };
    Ok(policy)
}
