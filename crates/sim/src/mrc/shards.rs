//! SHARDS: Spatially Hashed Approximate Reuse Distance Sampling (Waldspurger, Park, Garthwaite
//! and Ahmad, "Efficient MRC Construction with SHARDS", FAST'15).
//!
//! A key is sampled when its hash falls below a threshold T, so the sample holds a fraction
//! R = T / 2^64 of the keys and every access to them. Stack distances measured within the
//! sample are scaled by 1/R and each sampled reference stands for 1/R references.
//! - Fixed rate: R stays as configured.
//! - Fixed size: at most `max_keys` keys are tracked; when one more would enter, the key
//!   with the largest hash leaves the sample and T drops to that hash, lowering R. The paper
//!   then rescales the histogram counts by R_new / R_old so that all counts are in units of the
//!   current rate; we count every reference as 1/R of the rate it was sampled at, which is the
//!   same histogram divided by the final R (the products of R_new / R_old telescope), without
//!   touching every bin on each change.
//! - SHARDS_adj, the paper's correction: the sample may hold more or fewer references than the
//!   expected N·R; the difference is added to the smallest-distance bin before miss ratios are
//!   computed, in our units N − Σ 1/R (and likewise for bytes).

use std::collections::BinaryHeap;

use heterarchy_trace::{Request, TraceReader};

use super::histogram::{DistanceHistogram, Weights};
use super::stack::{ByteStack, ObjectStack, Stack};
use super::{DistanceUnit, MrcError, MrcResult};
use crate::cache_sim::BATCH;

/// 2^64 as a float: thresholds over the full 64-bit hash space.
const HASH_SPACE: f64 = 18_446_744_073_709_551_616.0;

/// How to sample. At least one of `rate` and `max_keys` must be set; with both, `rate` is the
/// starting rate of fixed-size sampling.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardsConfig {
    /// Fraction of keys sampled, in (0, 1].
    pub rate: Option<f64>,
    /// Most keys tracked at once (fixed-size SHARDS), at least 1.
    pub max_keys: Option<usize>,
    /// Count objects instead of bytes.
    pub ignore_obj_size: bool,
    /// Selects which keys are sampled: different salts give independent samples.
    pub salt: u64,
}

impl ShardsConfig {
    /// Fixed-rate sampling of a fraction `rate` of the keys, byte distances, salt 0.
    pub fn fixed_rate(rate: f64) -> ShardsConfig {
        ShardsConfig {
            rate: Some(rate),
            max_keys: None,
            ignore_obj_size: false,
            salt: 0,
        }
    }

    /// Fixed-size sampling of at most `max_keys` keys, starting from every key.
    pub fn fixed_size(max_keys: usize) -> ShardsConfig {
        ShardsConfig {
            rate: None,
            max_keys: Some(max_keys),
            ignore_obj_size: false,
            salt: 0,
        }
    }

    /// Checks the ranges; the error says what was expected.
    pub fn validate(&self) -> Result<(), MrcError> {
        if let Some(rate) = self.rate {
            if !(rate > 0.0 && rate <= 1.0) {
                return Err(MrcError::Config(format!(
                    "SHARDS sampling rate must be in (0, 1], got {rate}"
                )));
            }
        }
        match self.max_keys {
            Some(0) => Err(MrcError::Config(
                "SHARDS max keys must be at least 1".to_string(),
            )),
            None if self.rate.is_none() => Err(MrcError::Config(
                "SHARDS needs a sampling rate or a maximum number of keys".to_string(),
            )),
            _ => Ok(()),
        }
    }
}

/// A 64-bit hash of `key` that spreads neighbouring keys uniformly: the splitmix64 finaliser
/// (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA'14), a
/// bijection, so distinct keys never share a hash.
fn spatial_hash(key: u64, salt: u64) -> u64 {
    let mut z = key ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An approximate LRU miss-ratio curve from a spatial sample of the keys (SHARDS, see the
/// module documentation). `progress` is called with the number of requests just processed.
pub fn shards_mrc(
    reader: &mut dyn TraceReader,
    config: &ShardsConfig,
    progress: &dyn Fn(u64),
) -> Result<MrcResult, MrcError> {
    config.validate()?;
    if config.ignore_obj_size {
        shards_with::<ObjectStack>(reader, config, DistanceUnit::Objects, progress)
    } else {
        shards_with::<ByteStack>(reader, config, DistanceUnit::Bytes, progress)
    }
}

fn shards_with<S: Stack>(
    reader: &mut dyn TraceReader,
    config: &ShardsConfig,
    unit: DistanceUnit,
    progress: &dyn Fn(u64),
) -> Result<MrcResult, MrcError> {
    // Sample a key iff its hash < threshold; u128 so that rate 1 samples every hash.
    let mut threshold = (config.rate.unwrap_or(1.0) * HASH_SPACE) as u128;
    let mut rate = threshold as f64 / HASH_SPACE;
    // Sampled keys by hash, largest on top: the next to leave a full fixed-size sample.
    let mut sampled_keys: BinaryHeap<(u64, u64)> = BinaryHeap::new();
    let mut stack = S::new();
    let mut histogram = DistanceHistogram::sparse();
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut requests = 0u64;
    let mut bytes = 0u64;
    let mut sampled_requests = 0u64;
    let mut sampled = Weights::default();
    let mut cold = Weights::default();
    loop {
        reader.read_batch(&mut batch, BATCH)?;
        if batch.is_empty() {
            break;
        }
        for request in &batch {
            let counted_size = S::weight_of(request.size);
            bytes += counted_size;
            let hash = spatial_hash(request.key, config.salt);
            if u128::from(hash) >= threshold {
                continue;
            }
            stack.reserve(request.size)?;
            let distance = stack.access(request.key, request.size);
            if let (None, Some(max_keys)) = (distance, config.max_keys) {
                sampled_keys.push((hash, request.key));
                if sampled_keys.len() > max_keys {
                    if let Some((largest_hash, leaving_key)) = sampled_keys.pop() {
                        threshold = u128::from(largest_hash);
                        rate = threshold as f64 / HASH_SPACE;
                        stack.remove(leaving_key);
                        if leaving_key == request.key {
                            continue;
                        }
                    }
                }
            }
            sampled_requests += 1;
            let weights = Weights {
                requests: 1.0 / rate,
                bytes: counted_size as f64 / rate,
            };
            sampled.requests += weights.requests;
            sampled.bytes += weights.bytes;
            match distance {
                Some(distance) => {
                    let scaled = (distance as f64 / rate).round() as u64;
                    histogram.record_weighted(scaled, weights);
                }
                None => {
                    cold.requests += weights.requests;
                    cold.bytes += weights.bytes;
                }
            }
        }
        requests += batch.len() as u64;
        progress(batch.len() as u64);
    }
    let rounded_to_bits = histogram.rounded_to_bits();
    let mut bins = histogram.into_sorted();
    let total = match bins.first_mut() {
        Some((_, smallest)) => {
            smallest.requests += requests as f64 - sampled.requests;
            smallest.bytes += bytes as f64 - sampled.bytes;
            Weights {
                requests: requests as f64,
                bytes: bytes as f64,
            }
        }
        // Nothing to correct: no sampled key was ever re-accessed.
        None => sampled,
    };
    Ok(MrcResult::new(
        unit,
        requests,
        bytes,
        sampled_requests,
        rate,
        cold,
        total,
        bins,
        rounded_to_bits,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_spreads_consecutive_keys_evenly() {
        // Consecutive keys, as block traces have, must land evenly in 16 hash ranges.
        let mut counts = [0u32; 16];
        for key in 0..16_000u64 {
            counts[(spatial_hash(key, 0) >> 60) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
        assert_ne!(spatial_hash(1, 0), spatial_hash(1, 1));
    }

    #[test]
    fn bad_configs_are_rejected() {
        assert!(ShardsConfig::fixed_rate(0.0).validate().is_err());
        assert!(ShardsConfig::fixed_rate(1.5).validate().is_err());
        assert!(ShardsConfig::fixed_rate(f64::NAN).validate().is_err());
        assert!(ShardsConfig::fixed_size(0).validate().is_err());
        let size_only = ShardsConfig::fixed_size(1);
        assert!(size_only.validate().is_ok());
        let neither = ShardsConfig {
            max_keys: None,
            ..size_only
        };
        assert!(neither.validate().is_err());
        assert!(ShardsConfig::fixed_rate(1.0).validate().is_ok());
    }
}
