//! Trace statistics in one streaming pass: request and key counts, working set, op mix,
//! object-size distribution, reuse-time distribution, one-hit wonders, tenants and time span
//! (docs/architecture.md, "Requests and traces"; the measures libCacheSim's trace analyzer reports).
//!
//! Memory is O(unique keys): one hash-map entry per key (its last request index, last size and
//! whether it was seen twice, about 32 bytes with the map's overhead) plus one per tenant;
//! everything else is fixed-size counters.

use std::fmt::Write as _;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::read::for_each_batch;
use crate::{Op, TraceError, TraceReader};

/// Buckets of a [`Log2Histogram`] while counting: one for zero and one per bit of a u64.
const BUCKETS: usize = 65;

/// The measures [`trace_stats`] computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Requests read.
    pub requests: u64,
    /// Distinct keys.
    pub unique_keys: u64,
    /// Sum over distinct keys of the size of each key's *last* request, in bytes (a key whose
    /// size changes counts at its final size, as a cache holding the newest version would).
    pub working_set_bytes: u64,
    /// Sum of all request sizes, in bytes.
    pub requested_bytes: u64,
    /// Requests per op, in [`Op`] order, ops that never occur left out.
    pub op_counts: Vec<OpCount>,
    /// Requests whose op reads (`read`, `get`, `gets`, `scan`).
    pub reads: u64,
    /// Requests whose op changes data ([`Op::is_write`]). Unknown and other ops count as
    /// neither.
    pub writes: u64,
    /// `reads / writes`; absent when there are no writes.
    pub read_write_ratio: Option<f64>,
    /// Sizes of the distinct keys (each at its last size).
    pub object_sizes: SizeSummary,
    /// Reuse time: for every request to a key seen before, the number of requests since that
    /// key's previous request (1 when the same key is requested twice in a row).
    pub reuse_time_requests: Log2Histogram,
    /// Distinct keys requested exactly once.
    pub one_hit_wonders: u64,
    /// `one_hit_wonders / unique_keys` (0 for an empty trace).
    pub one_hit_wonder_fraction: f64,
    /// Distinct tenant ids.
    pub tenants: u64,
    /// Earliest request time, in ns (0 for an empty trace).
    pub start_time_ns: u64,
    /// Latest request time, in ns.
    pub end_time_ns: u64,
    /// `end_time_ns - start_time_ns`.
    pub duration_ns: u64,
}

/// How many requests had one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCount {
    /// The op.
    pub op: Op,
    /// Requests with that op.
    pub count: u64,
}

/// A distribution of sizes in bytes; all zero when there is nothing to summarise.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeSummary {
    /// Smallest size.
    pub min_bytes: u64,
    /// Arithmetic mean.
    pub mean_bytes: f64,
    /// Largest size.
    pub max_bytes: u64,
    /// Median by nearest rank: the smallest size that at least 50% of sizes do not exceed
    /// (numpy's `method="inverted_cdf"`).
    pub p50_bytes: u64,
    /// 90th percentile, nearest rank.
    pub p90_bytes: u64,
    /// 99th percentile, nearest rank.
    pub p99_bytes: u64,
    /// All sizes in power-of-two buckets.
    pub histogram: Log2Histogram,
}

/// Counts of values in power-of-two buckets, empty buckets left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log2Histogram {
    /// Non-empty buckets, smallest values first.
    pub buckets: Vec<HistogramBucket>,
}

/// The values in [`min`, `max`]: a power-of-two range [2^(i-1), 2^i - 1], or just 0.
///
/// [`min`]: HistogramBucket::min
/// [`max`]: HistogramBucket::max
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramBucket {
    /// Smallest value of the bucket.
    pub min: u64,
    /// Largest value of the bucket.
    pub max: u64,
    /// Values counted in it.
    pub count: u64,
}

impl Log2Histogram {
    /// Builds the histogram from counts indexed by bit length (index 0 holds zeros, index i
    /// the values in [2^(i-1), 2^i)).
    fn from_counts(counts: &[u64; BUCKETS]) -> Log2Histogram {
        let buckets = counts
            .iter()
            .enumerate()
            .filter(|(_, &count)| count > 0)
            .map(|(bits, &count)| match bits {
                0 => HistogramBucket {
                    min: 0,
                    max: 0,
                    count,
                },
                _ => HistogramBucket {
                    min: 1 << (bits - 1),
                    max: u64::MAX >> (64 - bits),
                    count,
                },
            })
            .collect();
        Log2Histogram { buckets }
    }

    /// Sum of the bucket counts.
    pub fn total(&self) -> u64 {
        self.buckets.iter().map(|bucket| bucket.count).sum()
    }
}

/// The bucket a value goes in: its bit length.
fn bucket_of(value: u64) -> usize {
    (64 - value.leading_zeros()) as usize
}

/// What is remembered about one key.
struct KeyState {
    last_index: u64,
    last_size: u32,
    seen_again: bool,
}

/// Reads `reader` to the end and measures it.
pub fn trace_stats(reader: &mut dyn TraceReader) -> Result<TraceStats, TraceError> {
    trace_stats_with_progress(reader, &mut |_| {})
}

/// [`trace_stats`], calling `progress` with the number of requests of each batch just read
/// (for a progress bar).
pub fn trace_stats_with_progress(
    reader: &mut dyn TraceReader,
    progress: &mut dyn FnMut(u64),
) -> Result<TraceStats, TraceError> {
    let mut keys: FxHashMap<u64, KeyState> = FxHashMap::default();
    let mut tenants: FxHashSet<u32> = FxHashSet::default();
    let mut op_counts = [0u64; Op::ALL.len()];
    let mut reuse_counts = [0u64; BUCKETS];
    let mut requested_bytes = 0u64;
    let (mut start_time_ns, mut end_time_ns) = (u64::MAX, 0u64);
    let mut index = 0u64;
    for_each_batch(reader, |batch| {
        for request in batch.iter() {
            op_counts[request.op as usize] += 1;
            requested_bytes += u64::from(request.size);
            start_time_ns = start_time_ns.min(request.time_ns);
            end_time_ns = end_time_ns.max(request.time_ns);
            tenants.insert(request.tenant);
            match keys.entry(request.key) {
                std::collections::hash_map::Entry::Occupied(mut entry) => {
                    let state = entry.get_mut();
                    reuse_counts[bucket_of(index - state.last_index)] += 1;
                    state.last_index = index;
                    state.last_size = request.size;
                    state.seen_again = true;
                }
                std::collections::hash_map::Entry::Vacant(entry) => {
                    entry.insert(KeyState {
                        last_index: index,
                        last_size: request.size,
                        seen_again: false,
                    });
                }
            }
            index += 1;
        }
        progress(batch.len() as u64);
        Ok::<(), TraceError>(())
    })?;

    let mut sizes: Vec<u32> = keys.values().map(|state| state.last_size).collect();
    let one_hit_wonders = keys.values().filter(|state| !state.seen_again).count() as u64;
    let unique_keys = keys.len() as u64;
    drop(keys);
    let working_set_bytes = sizes.iter().map(|&size| u64::from(size)).sum();
    let reads = [Op::Read, Op::Get, Op::Gets, Op::Scan]
        .iter()
        .map(|&op| op_counts[op as usize])
        .sum();
    let writes = Op::ALL
        .iter()
        .filter(|op| op.is_write())
        .map(|&op| op_counts[op as usize])
        .sum();
    if index == 0 {
        start_time_ns = 0;
    }
    Ok(TraceStats {
        requests: index,
        unique_keys,
        working_set_bytes,
        requested_bytes,
        op_counts: Op::ALL
            .iter()
            .zip(op_counts)
            .filter(|(_, count)| *count > 0)
            .map(|(&op, count)| OpCount { op, count })
            .collect(),
        reads,
        writes,
        read_write_ratio: (writes > 0).then(|| reads as f64 / writes as f64),
        object_sizes: summarise_sizes(&mut sizes, working_set_bytes),
        reuse_time_requests: Log2Histogram::from_counts(&reuse_counts),
        one_hit_wonders,
        one_hit_wonder_fraction: if unique_keys == 0 {
            0.0
        } else {
            one_hit_wonders as f64 / unique_keys as f64
        },
        tenants: tenants.len() as u64,
        start_time_ns,
        end_time_ns,
        duration_ns: end_time_ns - start_time_ns,
    })
}

/// The value at `thousandths` of `sorted` by nearest rank: the ceil(p · n)-th smallest, p in
/// thousandths so that the arithmetic is exact (numpy's `method="inverted_cdf"`). `sorted` is
/// not empty.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], thousandths: u64) -> T {
    let rank = (thousandths * sorted.len() as u64).div_ceil(1000).max(1);
    sorted[(rank - 1) as usize]
}

/// Summarises `sizes` (whose sum is `total_bytes`), sorting them in place.
pub(crate) fn summarise_sizes(sizes: &mut [u32], total_bytes: u64) -> SizeSummary {
    if sizes.is_empty() {
        return SizeSummary::default();
    }
    sizes.sort_unstable();
    let count = sizes.len() as u64;
    let percentile = |thousandths: u64| u64::from(nearest_rank(sizes, thousandths));
    let mut counts = [0u64; BUCKETS];
    for &size in sizes.iter() {
        counts[bucket_of(u64::from(size))] += 1;
    }
    SizeSummary {
        min_bytes: u64::from(sizes[0]),
        mean_bytes: total_bytes as f64 / count as f64,
        max_bytes: u64::from(sizes[sizes.len() - 1]),
        p50_bytes: percentile(500),
        p90_bytes: percentile(900),
        p99_bytes: percentile(990),
        histogram: Log2Histogram::from_counts(&counts),
    }
}

impl TraceStats {
    /// A table for people: one measure per line, then the two histograms.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for (name, value) in self.summary() {
            let _ = writeln!(out, "{name:<22} {value}");
        }
        write_histogram(&mut out, "reuse time (requests)", &self.reuse_time_requests);
        write_histogram(
            &mut out,
            "object size (bytes)",
            &self.object_sizes.histogram,
        );
        out
    }

    /// The measures for people, each a name and its value with units, in table order (the
    /// histograms apart).
    pub fn summary(&self) -> Vec<(&'static str, String)> {
        let mut rows = Vec::new();
        let mut row = |name: &'static str, value: String| rows.push((name, value));
        row("requests", self.requests.to_string());
        row("unique keys", self.unique_keys.to_string());
        row("working set", bytes_with_unit(self.working_set_bytes));
        row("requested bytes", bytes_with_unit(self.requested_bytes));
        let ops: Vec<String> = self
            .op_counts
            .iter()
            .map(|c| {
                format!(
                    "{} {} ({})",
                    c.op.name(),
                    c.count,
                    percent(c.count, self.requests)
                )
            })
            .collect();
        row("ops", ops.join(", "));
        let ratio = match self.read_write_ratio {
            Some(ratio) => format!(" (read/write ratio {ratio:.3})"),
            None => String::new(),
        };
        row(
            "reads / writes",
            format!("{} / {}{ratio}", self.reads, self.writes),
        );
        let sizes = &self.object_sizes;
        row(
            "object size (bytes)",
            format!(
                "min {}, mean {:.1}, p50 {}, p90 {}, p99 {}, max {}",
                sizes.min_bytes,
                sizes.mean_bytes,
                sizes.p50_bytes,
                sizes.p90_bytes,
                sizes.p99_bytes,
                sizes.max_bytes
            ),
        );
        row(
            "one-hit wonders",
            format!(
                "{} ({} of keys)",
                self.one_hit_wonders,
                percent(self.one_hit_wonders, self.unique_keys)
            ),
        );
        row("tenants", self.tenants.to_string());
        row(
            "time span",
            format!(
                "{:.3} s ({} ns to {} ns)",
                self.duration_ns as f64 / 1e9,
                self.start_time_ns,
                self.end_time_ns
            ),
        );
        rows
    }
}

fn write_histogram(out: &mut String, title: &str, histogram: &Log2Histogram) {
    let total = histogram.total();
    let _ = writeln!(out, "\n{title:<22} {:>10} {:>7}", "count", "share");
    for bucket in &histogram.buckets {
        let range = format!("{}..={}", bucket.min, bucket.max);
        let _ = writeln!(
            out,
            "  {range:<20} {:>10} {:>7}",
            bucket.count,
            percent(bucket.count, total)
        );
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

/// `1234567 B (1.18 MiB)`.
fn bytes_with_unit(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut scaled = bytes as f64;
    let mut unit = None;
    for name in UNITS {
        if scaled < 1024.0 {
            break;
        }
        scaled /= 1024.0;
        unit = Some(name);
    }
    match unit {
        Some(unit) => format!("{bytes} B ({scaled:.2} {unit})"),
        None => format!("{bytes} B"),
    }
}
