//! How the sampling policies (Random, Hyperbolic) draw a "random" resident: uniformly, or as
//! libCacheSim does, reproduced in distribution.
//!
//! libCacheSim draws with `hashtable_rand_obj` of its chained hash table
//! (`chainedHashTableV2.c`), which picks a uniformly random non-empty bucket, then a uniformly
//! random object of that bucket's chain, so an object sharing its bucket with `k − 1` others
//! is drawn with weight `1/k`. The table's size moves with the draws: it starts at 2¹⁶
//! buckets (the Python package's `hashpower=24`, less the 8 that Random and Hyperbolic take
//! off), doubles when an insertion finds more than twice as many objects as buckets, and
//! halves on every empty bucket a draw meets after its 32nd empty one in a row. A sparse table
//! therefore shrinks, overshooting by a halving or two, and insertions double it back, so its
//! load settles between about one and two objects per bucket, where the `1/k` weights differ
//! much.
//!
//! Here the buckets only count residents (the objects stay in the dense array of
//! [`DenseResidents`]): a draw first plays libCacheSim's run of empty buckets (shrinking as it
//! would; a run of 33 whose chance is below 10⁻¹² is taken as impossible), then picks a
//! uniform resident and keeps it with probability `1/k` (rejection), which weights residents
//! exactly as libCacheSim's two-step pick does. The bucket of a key comes from its own 64-bit
//! mix (libCacheSim hashes ids with its own function), so which objects share a bucket
//! differs, but not how many do.

use super::dense_residents::DenseResidents;
use super::rng::Lehmer64;

/// libCacheSim's starting table for Random and Hyperbolic: `max(12, hashpower − 8)` with the
/// package's `hashpower=24`.
const INITIAL_BITS: u32 = 16;
/// Empty buckets a draw may meet in a row before each further one halves the table.
const EMPTY_DRAWS_BEFORE_SHRINK: u32 = 32;
/// Objects per bucket beyond which an insertion doubles the table.
const EXPAND_LOAD: usize = 2;

/// A way to draw a resident of a [`DenseResidents`].
#[derive(Clone, Debug)]
pub enum ResidentDraw {
    /// Every resident equally likely.
    Uniform,
    /// Weighted as libCacheSim's hash-table draw weights them.
    HashBuckets(HashBucketDraw),
}

impl ResidentDraw {
    /// Uniform draws, or libCacheSim's when `uniform` is false.
    pub fn new(uniform: bool) -> ResidentDraw {
        if uniform {
            ResidentDraw::Uniform
        } else {
            ResidentDraw::HashBuckets(HashBucketDraw::default())
        }
    }

    /// Notes `key`, about to join `residents` (call before inserting it there).
    #[inline]
    pub fn add<T>(&mut self, key: u64, residents: &DenseResidents<T>) {
        if let ResidentDraw::HashBuckets(buckets) = self {
            buckets.add(key, residents);
        }
    }

    /// Notes that `key` left the residents.
    #[inline]
    pub fn remove(&mut self, key: u64) {
        if let ResidentDraw::HashBuckets(buckets) = self {
            buckets.remove(key);
        }
    }

    /// The position of a drawn resident; `residents` must not be empty.
    #[inline]
    pub fn draw<T>(&mut self, residents: &DenseResidents<T>, rng: &mut Lehmer64) -> u32 {
        match self {
            ResidentDraw::Uniform => residents.random_position(rng),
            ResidentDraw::HashBuckets(buckets) => buckets.draw(residents, rng),
        }
    }
}

/// Bucket occupancy of a [`DenseResidents`] as libCacheSim's hash table would hold it.
#[derive(Clone, Debug)]
pub struct HashBucketDraw {
    /// Residents per bucket.
    counts: Vec<u32>,
    bits: u32,
    occupied_buckets: usize,
    /// A draw meets 33 empty buckets in a row (and shrinks the table) when a uniform 64-bit
    /// number falls below this: `(1 − occupied/buckets)³³ · 2⁶⁴`.
    shrink_below: u64,
    /// The occupancy changed since `shrink_below` was computed.
    shrink_below_stale: bool,
}

impl Default for HashBucketDraw {
    fn default() -> Self {
        HashBucketDraw {
            counts: vec![0; 1 << INITIAL_BITS],
            bits: INITIAL_BITS,
            occupied_buckets: 0,
            shrink_below: 0,
            shrink_below_stale: true,
        }
    }
}

impl HashBucketDraw {
    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.counts.len()
    }

    #[inline]
    fn bucket(&self, key: u64) -> usize {
        if self.bits == 0 {
            return 0;
        }
        (bucket_hash(key) >> (64 - self.bits)) as usize
    }

    #[inline]
    fn count(&mut self, key: u64) {
        let bucket = self.bucket(key);
        self.occupied_buckets += usize::from(self.counts[bucket] == 0);
        self.counts[bucket] += 1;
        self.shrink_below_stale = true;
    }

    /// Counts `key`, about to join `residents` (call before inserting it there, as
    /// libCacheSim checks its load before adding).
    #[inline]
    pub fn add<T>(&mut self, key: u64, residents: &DenseResidents<T>) {
        if residents.len() > self.buckets() * EXPAND_LOAD {
            self.rebuild(self.bits + 1, residents);
        }
        self.count(key);
    }

    /// Uncounts `key`, which left the residents.
    #[inline]
    pub fn remove(&mut self, key: u64) {
        let bucket = self.bucket(key);
        self.counts[bucket] -= 1;
        self.occupied_buckets -= usize::from(self.counts[bucket] == 0);
        self.shrink_below_stale = true;
    }

    fn rebuild<T>(&mut self, bits: u32, residents: &DenseResidents<T>) {
        self.bits = bits;
        self.counts.clear();
        self.counts.resize(1 << bits, 0);
        self.occupied_buckets = 0;
        for position in 0..residents.len() as u32 {
            self.count(residents.get(position).key);
        }
    }

    /// The chance that a draw meets 33 empty buckets in a row, times 2⁶⁴; 0 when it is below
    /// 10⁻¹² (at least 4 buckets in 7 occupied), which spares the float work in the usual
    /// states (libCacheSim's load settles between one and two objects per bucket).
    fn chance_of_shrinking(&self) -> u64 {
        if self.occupied_buckets * 7 >= self.buckets() * 4 {
            return 0;
        }
        let empty_share = 1.0 - self.occupied_buckets as f64 / self.buckets() as f64;
        // Saturating: with no object at all every draw would shrink.
        (empty_share.powi(EMPTY_DRAWS_BEFORE_SHRINK as i32 + 1) * 2f64.powi(64)) as u64
    }

    /// The position of a resident drawn as libCacheSim draws one; `residents` must not be
    /// empty and must be the residents this has counted.
    #[inline]
    pub fn draw<T>(&mut self, residents: &DenseResidents<T>, rng: &mut Lehmer64) -> u32 {
        debug_assert!(!residents.is_empty() && residents.len() <= u32::MAX as usize);
        if self.shrink_below_stale {
            self.shrink_below = self.chance_of_shrinking();
            self.shrink_below_stale = false;
        }
        if self.shrink_below != 0 && rng.next_u64() < self.shrink_below {
            // The 33rd empty bucket in a row halves the table, and so does every further one
            // until a draw finds an object.
            self.rebuild(self.bits - 1, residents);
            while rng.below(self.buckets() as u64) >= self.occupied_buckets as u64 {
                self.rebuild(self.bits - 1, residents);
            }
        }
        let residents_count = residents.len() as u64;
        loop {
            // One draw for both choices: the high half picks a resident, the low half keeps
            // it with probability 1/k (a 2⁻³² bias no simulation can see).
            let random = rng.next_u64();
            let position = ((random >> 32) * residents_count) >> 32;
            let sharing = self.counts[self.bucket(residents.get(position as u32).key)];
            if ((random & 0xFFFF_FFFF) * u64::from(sharing)) >> 32 == 0 {
                return position as u32;
            }
        }
    }
}

/// The bucket of a key in a model of libCacheSim's hash table: MurmurHash3's 64-bit finaliser,
/// in which every key bit reaches the top bits (libCacheSim hashes with its own function; any
/// well-mixed hash gives the same bucket statistics).
#[inline]
pub fn bucket_hash(key: u64) -> u64 {
    let mut mixed = key;
    mixed ^= mixed >> 33;
    mixed = mixed.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    mixed ^= mixed >> 33;
    mixed = mixed.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    mixed ^ (mixed >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn residents(keys: impl Iterator<Item = u64>) -> (DenseResidents<()>, HashBucketDraw) {
        let mut set = DenseResidents::default();
        let mut buckets = HashBucketDraw::default();
        for key in keys {
            buckets.add(key, &set);
            set.insert(key, 1, ());
        }
        (set, buckets)
    }

    #[test]
    fn a_sparse_table_shrinks_until_draws_find_objects() {
        let (set, mut buckets) = residents(0..500);
        assert_eq!(buckets.buckets(), 1 << 16);
        let mut rng = Lehmer64::new(1);
        for _ in 0..10_000 {
            buckets.draw(&set, &mut rng);
        }
        // Once 33 empty draws have met in a row, every further empty draw halves the table
        // again, so the shrinking stops at the first non-empty draw: for 500 objects, near
        // 2⁹ buckets, a little above or below.
        assert!(
            (1 << 7..=1 << 11).contains(&buckets.buckets()),
            "{}",
            buckets.buckets()
        );
        let counted: u32 = buckets.counts.iter().sum();
        assert_eq!(counted, 500);
    }

    #[test]
    fn insertions_double_a_crowded_table() {
        let (mut set, mut buckets) = residents(0..10);
        let mut rng = Lehmer64::new(2);
        for _ in 0..2_000 {
            buckets.draw(&set, &mut rng);
        }
        let shrunk = buckets.buckets();
        assert!(shrunk < 1 << 10, "{shrunk}");
        // The insertion that finds more than two objects per bucket doubles the table.
        for key in 10..(shrunk as u64 * 2 + 1) {
            buckets.add(key, &set);
            set.insert(key, 1, ());
        }
        assert_eq!(buckets.buckets(), shrunk);
        buckets.add(99_999, &set);
        assert_eq!(buckets.buckets(), shrunk * 2);
    }

    #[test]
    fn residents_sharing_a_bucket_are_drawn_less() {
        let (set, mut buckets) = residents(0..63);
        // Two buckets of unequal lengths: each is picked half the time, so a key in the
        // shorter one is drawn more often.
        buckets.rebuild(1, &set);
        let mut by_bucket = [0u32; 2];
        for position in 0..set.len() as u32 {
            by_bucket[buckets.bucket(set.get(position).key)] += 1;
        }
        let mut rng = Lehmer64::new(3);
        let mut drawn_from = [0u32; 2];
        for _ in 0..20_000 {
            let position = buckets.draw(&set, &mut rng);
            drawn_from[buckets.bucket(set.get(position).key)] += 1;
        }
        assert_ne!(by_bucket[0], by_bucket[1]);
        for drawn in drawn_from {
            assert!(
                (9_500..10_500).contains(&drawn),
                "{drawn_from:?} of {by_bucket:?}"
            );
        }
    }

    #[test]
    fn uniform_draws_ignore_buckets() {
        let (set, _) = residents(0..4);
        let mut draw = ResidentDraw::new(true);
        let mut rng = Lehmer64::new(4);
        let mut seen = [0u32; 4];
        for _ in 0..4_000 {
            seen[draw.draw(&set, &mut rng) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (900..1100).contains(&n)), "{seen:?}");
    }
}
