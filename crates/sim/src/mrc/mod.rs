//! Miss-ratio curves of LRU: exact, from every request's stack distance (Mattson et al. 1970,
//! in O(n log m) with a Fenwick tree), and approximate, from a spatially hashed sample of the
//! keys (SHARDS, Waldspurger et al., FAST'15).
//!
//! The stack distance of a re-access is the weight of the distinct objects accessed since the
//! previous access to the same key, the key included: their number ([`DistanceUnit::Objects`])
//! or the sum of their sizes ([`DistanceUnit::Bytes`]). A request hits an LRU cache of size C
//! exactly when its distance is at most C; first accesses (cold misses) miss at every size.
//!
//! # When the byte curve is byte-capacity LRU
//!
//! The object curve equals an LRU simulation with every object of size 1 (`ignore_obj_size`)
//! at every size. The byte curve equals byte-capacity LRU (which admits every object that fits,
//! evicting from the tail until it does) at every cache size C such that
//! 1. every request of the trace is for at most C bytes, and
//! 2. every key keeps one size for the whole trace.
//!
//! Under these two conditions the LRU cache of C bytes always holds the longest prefix of the
//! recency stack whose sizes sum to at most C: a hit reorders the stack without changing which
//! prefix fits, and a miss evicts from the tail exactly until the new prefix fits. A key is in
//! that prefix exactly when the bytes at and above it, its byte distance, are at most C. With
//! uniform sizes both conditions hold at every size that holds one object, so the byte curve is
//! the object curve scaled by the size. The equality breaks when
//! - an object is larger than C: LRU does not admit it, so it is not above anything in the
//!   cache, while its bytes still count in the distance of every key accessed before it — LRU
//!   then hits where the curve says miss, and the cache holds less than the longest fitting
//!   prefix afterwards;
//! - a key changes size: LRU keeps the size it was admitted with until the key is evicted,
//!   while the stack takes each access's size (the distance of a re-access counts the key at
//!   its previous size).

mod fenwick;
mod histogram;
mod positions;
mod shards;
mod simulated;
pub(crate) mod stack;

pub use histogram::{DistanceUnit, ReuseBucket, ReuseHistogram};
pub use shards::{shards_mrc, ShardsConfig};
pub use simulated::simulated_mrc;

use heterarchy_trace::{Request, TraceError, TraceReader};
use serde::{Deserialize, Serialize};

use crate::cache_sim::BATCH;
use histogram::{DistanceHistogram, Weights};
use stack::{ByteStack, ObjectStack, Stack, TooManyKeys};

/// Points a curve gets by default (`MrcResult::curve`).
pub const DEFAULT_CURVE_POINTS: usize = 200;

/// The miss ratio of one cache size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MrcPoint {
    /// Objects or bytes, as the curve's [`DistanceUnit`] says.
    pub cache_size: u64,
    /// Fraction of requests that miss.
    pub miss_ratio: f64,
    /// Fraction of requested bytes that miss; only on byte curves (on object curves every
    /// object counts as one byte, as in the simulator, so it would repeat `miss_ratio`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_miss_ratio: Option<f64>,
}

/// A miss-ratio curve as a list of points in increasing cache size; serialises to
/// `{"points": [{"cache_size": .., "miss_ratio": ..}, ...]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mrc {
    /// The points, by increasing cache size.
    pub points: Vec<MrcPoint>,
}

/// Why a curve could not be built.
#[derive(Debug)]
pub enum MrcError {
    /// The trace could not be read.
    Trace(TraceError),
    /// The configuration is unusable; the message says what was expected.
    Config(String),
    /// More live keys than the 32-bit positions of the stack can number (about 2^32).
    TooManyKeys,
}

impl std::fmt::Display for MrcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MrcError::Trace(e) => e.fmt(f),
            MrcError::Config(message) => f.write_str(message),
            MrcError::TooManyKeys => {
                f.write_str("too many distinct keys for the stack-distance tree (at most 2^32)")
            }
        }
    }
}

impl std::error::Error for MrcError {}

impl From<TraceError> for MrcError {
    fn from(e: TraceError) -> Self {
        MrcError::Trace(e)
    }
}

impl From<TooManyKeys> for MrcError {
    fn from(_: TooManyKeys) -> Self {
        MrcError::TooManyKeys
    }
}

/// The outcome of one pass over a trace: the distribution of stack distances, from which the
/// miss ratio of any cache size follows.
#[derive(Clone, Debug)]
pub struct MrcResult {
    /// What distances and cache sizes count.
    pub unit: DistanceUnit,
    /// Requests in the trace.
    pub requests: u64,
    /// Bytes requested (each request counts 1 on object curves).
    pub bytes: u64,
    /// Requests whose distance was measured: all of them when exact, the sampled ones under
    /// SHARDS.
    pub sampled_requests: u64,
    /// The fraction of keys sampled at the end: 1 when exact.
    pub sampling_rate: f64,
    /// First accesses (estimated under SHARDS): the number of distinct keys.
    pub cold_misses: f64,
    /// Bytes of the first accesses (estimated under SHARDS): the working set in bytes.
    pub cold_miss_bytes: f64,
    /// `None` when every distance is kept exactly; otherwise distances were rounded up to this
    /// many significant bits (byte curves of traces whose sizes vary, past 1.5 million distinct
    /// large distances; SHARDS likewise), and miss ratios are exact only at sizes with that
    /// many significant bits (e.g. 64 MiB, 100 MiB), within a 2^-13 relative size error
    /// elsewhere.
    pub rounded_to_bits: Option<u32>,
    /// Request and byte weight that miss ratios are fractions of.
    total: Weights,
    /// Distinct distances in increasing order.
    distances: Vec<u64>,
    /// `cumulative_hits[i]`: weight of the re-accesses at distances up to `distances[i]`.
    cumulative_hits: Vec<Weights>,
}

impl MrcResult {
    /// Assembles a result from `bins` (distance, weight) sorted by distance.
    #[allow(clippy::too_many_arguments)]
    fn new(
        unit: DistanceUnit,
        requests: u64,
        bytes: u64,
        sampled_requests: u64,
        sampling_rate: f64,
        cold: Weights,
        total: Weights,
        bins: Vec<(u64, Weights)>,
        rounded_to_bits: Option<u32>,
    ) -> MrcResult {
        let mut distances = Vec::with_capacity(bins.len());
        let mut cumulative_hits = Vec::with_capacity(bins.len());
        let mut running = Weights::default();
        for (distance, weights) in bins {
            running.requests += weights.requests;
            running.bytes += weights.bytes;
            distances.push(distance);
            cumulative_hits.push(running);
        }
        MrcResult {
            unit,
            requests,
            bytes,
            sampled_requests,
            sampling_rate,
            cold_misses: cold.requests,
            cold_miss_bytes: cold.bytes,
            rounded_to_bits,
            total,
            distances,
            cumulative_hits,
        }
    }

    /// Weight of the requests that hit a cache of `cache_size`.
    fn hits_at(&self, cache_size: u64) -> Weights {
        let fitting = self.distances.partition_point(|&d| d <= cache_size);
        match fitting {
            0 => Weights::default(),
            n => self.cumulative_hits[n - 1],
        }
    }

    /// Miss ratio of an LRU cache of `cache_size` objects or bytes (as [`Self::unit`] says).
    pub fn miss_ratio_at(&self, cache_size: u64) -> f64 {
        miss_fraction(self.hits_at(cache_size).requests, self.total.requests)
    }

    /// Byte miss ratio of an LRU cache of `cache_size` bytes; `None` on object curves.
    pub fn byte_miss_ratio_at(&self, cache_size: u64) -> Option<f64> {
        match self.unit {
            DistanceUnit::Objects => None,
            DistanceUnit::Bytes => Some(miss_fraction(
                self.hits_at(cache_size).bytes,
                self.total.bytes,
            )),
        }
    }

    /// The point of `cache_size`.
    pub fn point_at(&self, cache_size: u64) -> MrcPoint {
        MrcPoint {
            cache_size,
            miss_ratio: self.miss_ratio_at(cache_size),
            byte_miss_ratio: self.byte_miss_ratio_at(cache_size),
        }
    }

    /// The curve at exactly `cache_sizes` (sorted and deduplicated).
    pub fn curve_at(&self, cache_sizes: &[u64]) -> Mrc {
        let mut sizes = cache_sizes.to_vec();
        sizes.sort_unstable();
        sizes.dedup();
        Mrc {
            points: sizes.into_iter().map(|size| self.point_at(size)).collect(),
        }
    }

    /// The curve at every distinct distance, where the miss ratio steps down, or, when there
    /// are more than `max_points`, at `max_points` log-spaced sizes from the smallest to the
    /// largest distance; plus `extra_sizes` (e.g. the sizes a user asked for). Every point is
    /// evaluated from the full distribution, not interpolated.
    pub fn curve(&self, max_points: usize, extra_sizes: &[u64]) -> Mrc {
        let mut sizes: Vec<u64> = if self.distances.len() <= max_points {
            self.distances.clone()
        } else {
            log_spaced(
                self.distances[0].max(1),
                self.distances[self.distances.len() - 1],
                max_points,
            )
        };
        sizes.extend_from_slice(extra_sizes);
        self.curve_at(&sizes)
    }

    /// The stack-distance histogram in power-of-two buckets.
    pub fn reuse_histogram(&self) -> ReuseHistogram {
        let mut previous = 0.0;
        let bins =
            self.distances
                .iter()
                .zip(&self.cumulative_hits)
                .map(|(&distance, cumulative)| {
                    let requests = cumulative.requests - previous;
                    previous = cumulative.requests;
                    (distance, requests)
                });
        ReuseHistogram::from_bins(self.unit, self.cold_misses, bins)
    }
}

/// `(whole - part) / whole` clamped to [0, 1] (SHARDS estimates can stray outside), 0 for an
/// empty trace as in the simulator. Subtracting counts first keeps exact results bit-identical
/// to `misses / requests`.
fn miss_fraction(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        ((whole - part) / whole).clamp(0.0, 1.0)
    }
}

/// About `count` integers from `low` to `high` (both included) spaced evenly on a log scale.
fn log_spaced(low: u64, high: u64, count: usize) -> Vec<u64> {
    if count < 2 || high <= low {
        return vec![low, high];
    }
    let ratio = (high as f64 / low as f64).ln();
    let mut sizes: Vec<u64> = (0..count)
        .map(|i| (low as f64 * (ratio * i as f64 / (count - 1) as f64).exp()).round() as u64)
        .collect();
    sizes[0] = low;
    sizes[count - 1] = high;
    sizes.dedup();
    sizes
}

/// The exact LRU miss-ratio curve in one pass (Mattson's stack algorithm with a Fenwick tree:
/// O(log m) per request for m distinct keys; memory O(m)). With `ignore_obj_size` distances and
/// sizes count objects, otherwise bytes (see the module documentation for when the byte curve
/// equals byte-capacity LRU). `progress` is called with the number of requests just processed.
pub fn exact_mrc(
    reader: &mut dyn TraceReader,
    ignore_obj_size: bool,
    progress: &dyn Fn(u64),
) -> Result<MrcResult, MrcError> {
    if ignore_obj_size {
        exact_with::<ObjectStack>(reader, DistanceUnit::Objects, progress)
    } else {
        exact_with::<ByteStack>(reader, DistanceUnit::Bytes, progress)
    }
}

fn exact_with<S: Stack>(
    reader: &mut dyn TraceReader,
    unit: DistanceUnit,
    progress: &dyn Fn(u64),
) -> Result<MrcResult, MrcError> {
    let mut stack = S::new();
    let mut histogram = DistanceHistogram::exact();
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut distances: Vec<Option<u64>> = Vec::with_capacity(BATCH);
    let mut requests = 0u64;
    let mut bytes = 0u64;
    let mut cold = Weights::default();
    loop {
        reader.read_batch(&mut batch, BATCH)?;
        if batch.is_empty() {
            break;
        }
        // Two passes, so that the histogram's cache misses, independent of each other, overlap
        // instead of waiting behind each request's stack update.
        distances.clear();
        stack.warm(batch.iter().map(|request| request.key));
        for request in &batch {
            stack.reserve(request.size)?;
            distances.push(stack.access(request.key, request.size));
        }
        let dense_limit = stack.len().saturating_mul(2).max(1 << 16);
        for (request, distance) in batch.iter().zip(&distances) {
            let counted_size = S::weight_of(request.size);
            bytes += counted_size;
            histogram.note_size(counted_size);
            match distance {
                Some(distance) => histogram.record(*distance, counted_size, dense_limit),
                None => {
                    cold.requests += 1.0;
                    cold.bytes += counted_size as f64;
                }
            }
        }
        requests += batch.len() as u64;
        progress(batch.len() as u64);
    }
    let rounded_to_bits = histogram.rounded_to_bits();
    Ok(MrcResult::new(
        unit,
        requests,
        bytes,
        requests,
        1.0,
        cold,
        Weights {
            requests: requests as f64,
            bytes: bytes as f64,
        },
        histogram.into_sorted(),
        rounded_to_bits,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays requests from memory.
    struct VecReader(std::vec::IntoIter<Request>);

    impl TraceReader for VecReader {
        fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
            Ok(self.0.next())
        }
    }

    fn reader(trace: &[(u64, u32)]) -> VecReader {
        let requests: Vec<Request> = trace.iter().map(|&(k, s)| Request::new(k, s)).collect();
        VecReader(requests.into_iter())
    }

    #[test]
    fn object_curve_of_a_loop() {
        // A loop over 3 keys, twice: LRU hits the second round only with room for all 3.
        let trace = [(1, 9), (2, 9), (3, 9), (1, 9), (2, 9), (3, 9)];
        let result = exact_mrc(&mut reader(&trace), true, &|_| {}).unwrap();
        assert_eq!(result.cold_misses, 3.0);
        assert_eq!(result.miss_ratio_at(2), 1.0);
        assert_eq!(result.miss_ratio_at(3), 0.5);
        assert_eq!(result.byte_miss_ratio_at(3), None);
        let histogram = result.reuse_histogram();
        assert_eq!(histogram.buckets.len(), 2);
        assert_eq!(histogram.buckets[1].requests, 3.0);
    }

    #[test]
    fn byte_curve_counts_sizes_and_misses_objects_larger_than_the_cache() {
        // A(1) B(10) A(1): LRU of 5 bytes never admits B, so A hits; the stack puts B's 10
        // bytes above A (distance 11), so the curve says miss — the documented exception.
        let trace = [(1, 1), (2, 10), (1, 1)];
        let result = exact_mrc(&mut reader(&trace), false, &|_| {}).unwrap();
        assert_eq!(result.miss_ratio_at(10), 1.0);
        assert_eq!(result.miss_ratio_at(11), 2.0 / 3.0);
        assert_eq!(result.byte_miss_ratio_at(11), Some(11.0 / 12.0));
        let mut lru = heterarchy_policy::create("lru", 5).unwrap();
        let mut evicted = Vec::new();
        let hits: Vec<bool> = trace
            .iter()
            .map(|&(k, s)| lru.get(&Request::new(k, s), &mut evicted))
            .collect();
        assert_eq!(hits, vec![false, false, true]);
    }

    #[test]
    fn default_curve_lists_every_step_or_log_spaced_sizes() {
        let trace: Vec<(u64, u32)> = (0..1000u64).chain(0..1000).map(|k| (k, 1)).collect();
        let result = exact_mrc(&mut reader(&trace), true, &|_| {}).unwrap();
        // Every re-access has distance 1000: one step.
        let curve = result.curve(DEFAULT_CURVE_POINTS, &[10]);
        let sizes: Vec<u64> = curve.points.iter().map(|p| p.cache_size).collect();
        assert_eq!(sizes, vec![10, 1000]);
        assert_eq!(curve.points[0].miss_ratio, 1.0);
        assert_eq!(curve.points[1].miss_ratio, 0.5);
        let spaced = log_spaced(1, 1_000_000, 200);
        assert_eq!((spaced[0], spaced[spaced.len() - 1]), (1, 1_000_000));
        assert!(spaced.windows(2).all(|w| w[0] < w[1]));
        assert!(spaced.len() > 150);
    }

    #[test]
    fn empty_trace_gives_an_empty_curve() {
        let result = exact_mrc(&mut reader(&[]), false, &|_| {}).unwrap();
        assert_eq!(result.miss_ratio_at(100), 0.0);
        assert!(result.curve(DEFAULT_CURVE_POINTS, &[]).points.is_empty());
    }
}
