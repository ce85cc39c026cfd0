//! Stack-distance histograms: the exact one the curve is built from, and the log2-bucketed
//! summary that is reported.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Distinct distances a sparse histogram keeps exactly before it starts rounding them: about
/// 50 MB of hash table.
const SPARSE_EXACT_LIMIT: usize = 1_500_000;

/// Significant bits a distance keeps once a sparse histogram rounds: sizes within 2^-13 of
/// each other share a bin, and at most 2^13 bins cover each power of two.
const ROUNDED_SIGNIFICANT_BITS: u32 = 14;

/// References at one distance: how many, and how many bytes they asked for. Weights are f64
/// because SHARDS counts each sampled reference as 1/R references; exact counts stay exact
/// up to 2^53.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Weights {
    pub(crate) requests: f64,
    pub(crate) bytes: f64,
}

impl Weights {
    fn add(&mut self, other: Weights) {
        self.requests += other.requests;
        self.bytes += other.bytes;
    }
}

/// Counts references by stack distance while a trace streams past.
///
/// Exact distances are counted in an array indexed by distance / unit, where the unit is the
/// greatest common divisor of the sizes seen so far (1 for object distances), since every
/// distance is a sum of such sizes: with uniform sizes every distance lands there. Distances
/// beyond the array's limit (a few per live key), and all scaled SHARDS distances, go to a
/// hash map instead, which rounds them once it grows too large.
pub(crate) struct DistanceHistogram {
    /// `dense_counts[i]`: re-accesses at distance `i * unit`.
    dense_counts: Vec<u64>,
    /// Bytes those re-accesses asked for; kept only once sizes differ (see `sizes`), as they
    /// are the counts times the size before.
    dense_bytes: Vec<u64>,
    sizes: RequestSizes,
    /// Whether the array is used at all.
    dense_enabled: bool,
    /// The gcd of the sizes seen; 0 before the first non-zero size (all distances are 0 then).
    unit: u64,
    sparse: FxHashMap<u64, Weights>,
    /// Once set, sparse distances are rounded up to this many significant bits.
    rounded_to_bits: Option<u32>,
}

/// The sizes requests had so far.
#[derive(Clone, Copy, PartialEq)]
enum RequestSizes {
    Unseen,
    Uniform(u64),
    Mixed,
}

/// Rounds `distance` up to `bits` significant bits. Rounding up keeps `d <= size` exact for
/// every size that itself has at most `bits` significant bits.
fn round_up(distance: u64, bits: u32) -> u64 {
    let width = u64::BITS - distance.leading_zeros();
    if width <= bits {
        return distance;
    }
    let low_mask = (1u64 << (width - bits)) - 1;
    distance
        .checked_add(low_mask)
        .map_or(u64::MAX, |d| d & !low_mask)
}

/// Greatest common divisor (Euclid); `gcd(0, b) == b`.
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl DistanceHistogram {
    /// An empty histogram for distances that are multiples of the sizes noted with
    /// [`note_size`](Self::note_size) (exact curves).
    pub(crate) fn exact() -> DistanceHistogram {
        DistanceHistogram {
            dense_counts: Vec::new(),
            dense_bytes: Vec::new(),
            sizes: RequestSizes::Unseen,
            dense_enabled: true,
            unit: 0,
            sparse: FxHashMap::default(),
            rounded_to_bits: None,
        }
    }

    /// An empty histogram for arbitrary distances (scaled SHARDS distances).
    pub(crate) fn sparse() -> DistanceHistogram {
        DistanceHistogram {
            dense_enabled: false,
            ..DistanceHistogram::exact()
        }
    }

    /// Notes that a request for `size` bytes comes next, so distances from then on may include
    /// an object of that size.
    #[inline]
    pub(crate) fn note_size(&mut self, size: u64) {
        if self.sizes != RequestSizes::Uniform(size) {
            self.note_new_size(size);
        }
    }

    #[cold]
    fn note_new_size(&mut self, size: u64) {
        self.sizes = match self.sizes {
            RequestSizes::Unseen => RequestSizes::Uniform(size),
            RequestSizes::Uniform(uniform) => {
                self.dense_bytes = self.dense_counts.iter().map(|c| c * uniform).collect();
                RequestSizes::Mixed
            }
            RequestSizes::Mixed => RequestSizes::Mixed,
        };
        let unit = gcd(self.unit, size);
        if unit == self.unit {
            return;
        }
        let old_unit = self.unit;
        self.unit = unit;
        if old_unit == 0 {
            // Only distance 0 could have been recorded, and its index stays 0.
            return;
        }
        // The unit shrank by an integer factor: the same number of bins now covers a range that
        // much shorter, and the bins that fall beyond it move to the map.
        let factor = old_unit / unit;
        let bins = self.dense_counts.len();
        let old_counts = std::mem::replace(&mut self.dense_counts, vec![0; bins]);
        let old_bytes = std::mem::replace(&mut self.dense_bytes, vec![0; bins]);
        for (index, &count) in old_counts.iter().enumerate().filter(|(_, &c)| c != 0) {
            let bytes = old_bytes[index];
            let new_index = index as u64 * factor;
            if new_index < self.dense_counts.len() as u64 {
                self.dense_counts[new_index as usize] += count;
                self.dense_bytes[new_index as usize] += bytes;
            } else {
                let weights = Weights {
                    requests: count as f64,
                    bytes: bytes as f64,
                };
                self.record_weighted(index as u64 * old_unit, weights);
            }
        }
    }

    /// Adds one re-access of `size` bytes at `distance`, keeping at most `dense_limit` array
    /// bins. [`note_size`](Self::note_size) must have seen `size` and every size in `distance`.
    #[inline]
    pub(crate) fn record(&mut self, distance: u64, size: u64, dense_limit: usize) {
        let index = match self.unit {
            0 => 0,
            unit if unit.is_power_of_two() => distance >> unit.trailing_zeros(),
            unit => distance / unit,
        } as usize;
        if index < self.dense_counts.len() {
            self.dense_counts[index] += 1;
            if self.sizes == RequestSizes::Mixed {
                self.dense_bytes[index] += size;
            }
        } else {
            self.record_beyond(index, distance, size, dense_limit);
        }
    }

    #[cold]
    fn record_beyond(&mut self, index: usize, distance: u64, size: u64, dense_limit: usize) {
        if self.dense_enabled && index < dense_limit {
            let len = (index + 1).next_power_of_two().min(dense_limit);
            self.dense_counts.resize(len, 0);
            if self.sizes == RequestSizes::Mixed {
                self.dense_bytes.resize(len, 0);
            }
            self.record(distance, size, dense_limit);
        } else {
            let weights = Weights {
                requests: 1.0,
                bytes: size as f64,
            };
            self.record_weighted(distance, weights);
        }
    }

    /// Adds `weights` at `distance` in the map.
    pub(crate) fn record_weighted(&mut self, distance: u64, weights: Weights) {
        let key = match self.rounded_to_bits {
            Some(bits) => round_up(distance, bits),
            None => distance,
        };
        self.sparse.entry(key).or_default().add(weights);
        if self.rounded_to_bits.is_none() && self.sparse.len() > SPARSE_EXACT_LIMIT {
            let mut rounded: FxHashMap<u64, Weights> = FxHashMap::default();
            for (&distance, &weights) in self.sparse.iter() {
                rounded
                    .entry(round_up(distance, ROUNDED_SIGNIFICANT_BITS))
                    .or_default()
                    .add(weights);
            }
            self.sparse = rounded;
            self.rounded_to_bits = Some(ROUNDED_SIGNIFICANT_BITS);
        }
    }

    /// Significant bits distances were rounded up to, or `None` if every distance is exact.
    pub(crate) fn rounded_to_bits(&self) -> Option<u32> {
        self.rounded_to_bits
    }

    /// The non-empty bins in increasing distance, each distance once.
    pub(crate) fn into_sorted(self) -> Vec<(u64, Weights)> {
        let unit = self.unit;
        let sizes = self.sizes;
        let dense_bytes = self.dense_bytes;
        let mut bins: Vec<(u64, Weights)> = self
            .dense_counts
            .into_iter()
            .enumerate()
            .filter(|&(_, count)| count != 0)
            .map(|(index, count)| {
                let bytes = match sizes {
                    RequestSizes::Uniform(size) => count * size,
                    _ => dense_bytes[index],
                };
                let weights = Weights {
                    requests: count as f64,
                    bytes: bytes as f64,
                };
                (index as u64 * unit, weights)
            })
            .chain(self.sparse)
            .collect();
        bins.sort_unstable_by_key(|&(distance, _)| distance);
        let mut merged: Vec<(u64, Weights)> = Vec::with_capacity(bins.len());
        for (distance, weights) in bins {
            match merged.last_mut() {
                Some((last, sum)) if *last == distance => sum.add(weights),
                _ => merged.push((distance, weights)),
            }
        }
        merged
    }
}

/// What a stack distance counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DistanceUnit {
    /// Distinct objects (`--ignore-obj-size`): cache sizes are object counts.
    Objects,
    /// Bytes of distinct objects: cache sizes are bytes.
    Bytes,
}

/// Re-accesses whose stack distance falls in `min_distance..=max_distance`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReuseBucket {
    /// Smallest distance of the bucket.
    pub min_distance: u64,
    /// Largest distance of the bucket, included.
    pub max_distance: u64,
    /// Number of re-accesses (an estimate, possibly fractional, under SHARDS).
    pub requests: f64,
}

/// The stack (reuse) distance histogram in power-of-two buckets: bucket 0 holds distances 0
/// and 1, bucket k ≥ 1 holds `2^k..=2^(k+1)-1`. Every bucket up to the last non-empty one is
/// listed, so index k is always bucket k. First accesses have no distance and are counted in
/// `cold_misses`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReuseHistogram {
    /// What distances count.
    pub unit: DistanceUnit,
    /// First accesses (estimated under SHARDS).
    pub cold_misses: f64,
    /// Bucket k holds the distances of power-of-two class k.
    pub buckets: Vec<ReuseBucket>,
}

impl ReuseHistogram {
    /// Buckets `bins` (distance, requests) by power of two.
    pub(crate) fn from_bins(
        unit: DistanceUnit,
        cold_misses: f64,
        bins: impl Iterator<Item = (u64, f64)>,
    ) -> ReuseHistogram {
        let mut buckets: Vec<ReuseBucket> = Vec::new();
        for (distance, requests) in bins {
            let index = (u64::BITS - distance.leading_zeros()).saturating_sub(1) as usize;
            while buckets.len() <= index {
                let k = buckets.len() as u32;
                buckets.push(ReuseBucket {
                    min_distance: if k == 0 { 0 } else { 1u64 << k },
                    max_distance: if k == 63 {
                        u64::MAX
                    } else {
                        (1u64 << (k + 1)) - 1
                    },
                    requests: 0.0,
                });
            }
            buckets[index].requests += requests;
        }
        ReuseHistogram {
            unit,
            cold_misses,
            buckets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_up_keeps_representable_sizes_exact() {
        assert_eq!(round_up(5, 2), 6);
        assert_eq!(round_up(4, 2), 4);
        assert_eq!(round_up(7, 2), 8);
        assert_eq!(round_up(3, 2), 3);
        assert_eq!(round_up(u64::MAX, 2), u64::MAX);
        // d <= size exactly when round_up(d) <= size, for sizes with <= 2 significant bits.
        for size in [4u64, 6, 8, 12, 16, 24] {
            for d in 0..40u64 {
                assert_eq!(d <= size, round_up(d, 2) <= size, "d {d} size {size}");
            }
        }
    }

    #[test]
    fn log2_buckets_hold_their_ranges() {
        let bins = [(0u64, 1.0), (1, 2.0), (2, 3.0), (3, 4.0), (8, 5.0)];
        let histogram = ReuseHistogram::from_bins(DistanceUnit::Objects, 9.0, bins.into_iter());
        let summary: Vec<(u64, u64, f64)> = histogram
            .buckets
            .iter()
            .map(|b| (b.min_distance, b.max_distance, b.requests))
            .collect();
        assert_eq!(
            summary,
            vec![(0, 1, 3.0), (2, 3, 7.0), (4, 7, 0.0), (8, 15, 5.0)]
        );
    }

    #[test]
    fn bins_survive_the_unit_shrinking_and_the_array_limit() {
        let mut histogram = DistanceHistogram::exact();
        let mut expected: std::collections::BTreeMap<u64, (f64, f64)> = Default::default();
        let mut record = |histogram: &mut DistanceHistogram, size: u64, distance: u64| {
            histogram.note_size(size);
            histogram.record(distance, size, 64);
            let bin = expected.entry(distance).or_default();
            bin.0 += 1.0;
            bin.1 += size as f64;
        };
        // Distances are sums of the sizes noted so far.
        for k in 1..100 {
            record(&mut histogram, 4096, 4096 * k);
        }
        record(&mut histogram, 512, 4096 * 3 + 512);
        record(&mut histogram, 0, 512);
        record(&mut histogram, 3, 4096 * 2 + 3);
        record(&mut histogram, 4096, 4096 * 2);
        let got: Vec<(u64, (f64, f64))> = histogram
            .into_sorted()
            .into_iter()
            .map(|(distance, weights)| (distance, (weights.requests, weights.bytes)))
            .collect();
        assert_eq!(got, expected.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_full_sparse_histogram_rounds_without_losing_weight() {
        let mut histogram = DistanceHistogram::sparse();
        let one = Weights {
            requests: 1.0,
            bytes: 10.0,
        };
        let n = SPARSE_EXACT_LIMIT as u64 + 10;
        for distance in 0..n {
            histogram.record_weighted(distance * 3, one);
        }
        assert_eq!(histogram.rounded_to_bits(), Some(ROUNDED_SIGNIFICANT_BITS));
        let bins = histogram.into_sorted();
        let total: f64 = bins.iter().map(|(_, w)| w.requests).sum();
        assert_eq!(total, n as f64);
        assert!(bins.len() < 200_000);
        // Below 2^14 nothing was rounded.
        assert_eq!(bins[1].0, 3);
    }
}
