//! BlkSample's post-processing (seed 002 §5.2.2–5.3.3, Algorithms 2–4, and the loop around them
//! that §5.3.3 describes in prose): per-region access features of the temporary sample, greedy
//! removal of the region whose removal most lowers the mean feature error, and the filter that
//! takes the removed regions out of the sample.
//!
//! Corrections to the pseudocode as seed 002 §5.2.3 prints it: Algorithm 2's `if`s form one
//! chain (solo, left, right, mid) and an aligned end has no misalignment; Algorithm 4 repairs
//! both neighbours (two independent `if`s, `[R]` read as `[r]`).
//!
//! Regions larger than a page (b > 0) need two misalignment sums per region where the thesis
//! keeps one: the bytes of the region outside the request (Algorithm 3's byte delta,
//! `accesses · region − misalignment`) and the bytes of partial 4 KiB pages at the request's
//! edges (the misalignment feature). With b = 0 they are the same number.
//!
//! IATs: a sample's mean IAT is its own gaps' mean times the rate (`counters.rs`), which is
//! each op's time span times the rate over its request count. Removing regions leaves the
//! span as it is (but for the first or last request of an op) and changes the count, so the
//! loop predicts the IAT features from the temporary sample's spans and the counts
//! ([`with_span_iat`]); Algorithm 3's lines 17–18 and Algorithm 4's IAT moves, which keep
//! each request's IAT in the full trace, do not say what the sample's gaps will be, and are
//! left out.
//!
//! The filter trims the removed regions out of the sample's requests (a request loses its edge,
//! or splits in two) instead of dropping every request that touched one, as §5.2.2 words it:
//! that is the removal Algorithm 3 models, so the filtered sample's counters are exactly the
//! ones the loop predicted.

use std::collections::BTreeMap;

use super::counters::{feature_errors, mean_error, WorkloadCounters};
use super::SampleRequest;

/// A region's key: its volume and its index on the volume.
pub(crate) type RegionKey = (u32, u64);

/// How one op's sample requests touched a region (Algorithm 2's `table[blk][op]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Positions {
    /// Requests that touched this region only.
    solo: i64,
    /// Requests that also touched a region below and one above.
    mid: i64,
    /// Requests that started here and went on above.
    left: i64,
    /// Requests that came from below and ended here.
    right: i64,
    /// Bytes of the region outside the requests that touched it.
    region_misaligned_bytes: i64,
    /// Bytes of partial pages at those requests' edges in this region.
    page_misaligned_bytes: i64,
}

/// The features of one region, reads then writes.
type RegionFeatures = [Positions; 2];

/// Algorithm 2: the features of every region the sample's requests touch.
pub(crate) fn region_table(
    requests: &[SampleRequest],
    region_bytes: u64,
) -> BTreeMap<RegionKey, RegionFeatures> {
    let mut table: BTreeMap<RegionKey, RegionFeatures> = BTreeMap::new();
    for request in requests {
        let (first, last) = request.regions(region_bytes);
        let front_region = (request.start_byte - first * region_bytes) as i64;
        let rear_region = ((last + 1) * region_bytes - request.end_byte) as i64;
        let (front_page, rear_page) = request.page_misalignment();
        let (front_page, rear_page) = (front_page as i64, rear_page as i64);
        for region in first..=last {
            let at = &mut table.entry((request.volume, region)).or_default()[request.op_index];
            if first == last {
                at.solo += 1;
                at.region_misaligned_bytes += front_region + rear_region;
                at.page_misaligned_bytes += front_page + rear_page;
            } else if region == first {
                at.left += 1;
                at.region_misaligned_bytes += front_region;
                at.page_misaligned_bytes += front_page;
            } else if region == last {
                at.right += 1;
                at.region_misaligned_bytes += rear_region;
                at.page_misaligned_bytes += rear_page;
            } else {
                at.mid += 1;
            }
        }
    }
    table
}

/// Algorithm 3: the sample's counters once every access to a region with `features` is gone.
/// Requests it held alone disappear, requests it was in the middle of split in two, requests
/// it was an edge of get shorter and lose that edge's partial page. (IATs: see
/// [`with_span_iat`].)
pub(crate) fn counters_without(
    counters: &WorkloadCounters,
    features: &RegionFeatures,
    region_bytes: u64,
) -> WorkloadCounters {
    let mut after = *counters;
    for (op, at) in features.iter().enumerate() {
        let accesses = at.solo + at.mid + at.left + at.right;
        after.requests[op] += at.mid - at.solo;
        after.bytes[op] -= accesses * region_bytes as i64 - at.region_misaligned_bytes;
        after.misaligned_bytes[op] -= at.page_misaligned_bytes;
    }
    after
}

/// Algorithm 4: deletes `key` and repairs its neighbours. The region below saw the requests it
/// was in the middle of end with it and the ones it started become its own; the region above
/// sees its middles become starts and its ends become solos.
pub(crate) fn remove_region(table: &mut BTreeMap<RegionKey, RegionFeatures>, key: RegionKey) {
    let (volume, region) = key;
    if let Some(below) = region
        .checked_sub(1)
        .and_then(|below| table.get_mut(&(volume, below)))
    {
        for at in below.iter_mut() {
            at.right += std::mem::take(&mut at.mid);
            at.solo += std::mem::take(&mut at.left);
        }
    }
    if let Some(above) = region
        .checked_add(1)
        .and_then(|above| table.get_mut(&(volume, above)))
    {
        for at in above.iter_mut() {
            at.left += std::mem::take(&mut at.mid);
            at.solo += std::mem::take(&mut at.right);
        }
    }
    table.remove(&key);
}

/// What the loop did.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Removal {
    /// Regions still in the sample.
    pub(crate) kept: BTreeMap<RegionKey, RegionFeatures>,
    /// The sample's counters the loop predicts for the filtered sample (IATs left 0).
    pub(crate) counters: WorkloadCounters,
    /// The mean feature error before the first removal and after each one, percent.
    pub(crate) iteration_errors: Vec<f64>,
}

/// The counters with each op's IAT total set to its span times `rate`: the total of the gaps
/// a sample with these requests would show, scaled as [`WorkloadCounters::of_records`] scales
/// them.
fn with_span_iat(counters: &WorkloadCounters, span_ns: [u64; 2], rate: f64) -> WorkloadCounters {
    WorkloadCounters {
        iat_ns: span_ns.map(|span| (span as f64 * rate).round() as i64),
        ..*counters
    }
}

/// The greedy loop: removes, one at a time, the region whose removal lowers the mean feature
/// error most, until `max_iterations` or no removal lowers it. Ties go to the lowest region,
/// so the result does not depend on anything but the input.
pub(crate) fn greedy_removal(
    requests: &[SampleRequest],
    full: &WorkloadCounters,
    rate: f64,
    region_bytes: u64,
    max_iterations: u32,
) -> Removal {
    let mut table = region_table(requests, region_bytes);
    let mut counters = WorkloadCounters::default();
    let mut first_last_ns: [Option<(u64, u64)>; 2] = [None; 2];
    for request in requests {
        counters.add(request.op_index, request.start_byte, request.end_byte, 0);
        let span = &mut first_last_ns[request.op_index];
        *span = Some(
            span.map_or((request.time_ns, request.time_ns), |(first, last)| {
                (first.min(request.time_ns), last.max(request.time_ns))
            }),
        );
    }
    let span_ns = first_last_ns.map(|span| span.map_or(0, |(first, last)| last - first));
    let error_of = |counters: &WorkloadCounters| {
        mean_error(&feature_errors(
            full,
            &with_span_iat(counters, span_ns, rate),
            rate,
        ))
    };
    let mut current = error_of(&counters);
    let mut iteration_errors = vec![current];
    for _ in 0..max_iterations {
        let mut best: Option<(RegionKey, WorkloadCounters, f64)> = None;
        for (key, features) in &table {
            let after = counters_without(&counters, features, region_bytes);
            let error = error_of(&after);
            if error < best.as_ref().map_or(current, |best| best.2) {
                best = Some((*key, after, error));
            }
        }
        let Some((key, after, error)) = best else {
            break;
        };
        remove_region(&mut table, key);
        counters = after;
        current = error;
        iteration_errors.push(current);
    }
    Removal {
        kept: table,
        counters,
        iteration_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(start_byte: u64, end_byte: u64, op_index: usize) -> SampleRequest {
        SampleRequest {
            time_ns: 0,
            volume: 0,
            op_index,
            start_byte,
            end_byte,
        }
    }

    #[test]
    fn algorithm_2_classifies_positions_and_misalignment() {
        // Regions of 8 KiB: a request over regions 0..=2 starting 512 B in, ending 1 KiB short.
        let requests = [
            request(512, 3 * 8192 - 1024, 0),
            request(8192, 8192 + 4096, 1),
        ];
        let table = region_table(&requests, 8192);
        let read = |region: u64| table[&(0, region)][0];
        assert_eq!(read(0).left, 1);
        assert_eq!(read(0).region_misaligned_bytes, 512);
        assert_eq!(read(0).page_misaligned_bytes, 512);
        assert_eq!(read(1).mid, 1);
        assert_eq!(read(2).right, 1);
        assert_eq!(read(2).region_misaligned_bytes, 1024);
        assert_eq!(read(2).page_misaligned_bytes, 1024);
        let write = table[&(0, 1)][1];
        assert_eq!(write.solo, 1);
        // 4 KiB of the 8 KiB region outside the request, but no partial page.
        assert_eq!(write.region_misaligned_bytes, 4096);
        assert_eq!(write.page_misaligned_bytes, 0);
    }

    #[test]
    fn removal_predicts_what_trimming_the_requests_gives() {
        let requests = [
            request(512, 4 * 4096, 0),
            request(4096, 2 * 4096, 1),
            request(2 * 4096, 3 * 4096 + 100, 0),
        ];
        let mut counters = WorkloadCounters::default();
        for r in &requests {
            counters.add(r.op_index, r.start_byte, r.end_byte, 0);
        }
        let mut table = region_table(&requests, 4096);
        // Removing region 1 splits the first read, deletes the write, leaves the second read.
        let after = counters_without(&counters, &table[&(0, 1)], 4096);
        remove_region(&mut table, (0, 1));
        let mut expected = WorkloadCounters::default();
        for (start, end, op) in [
            (512, 4096, 0),
            (2 * 4096, 4 * 4096, 0),
            (2 * 4096, 3 * 4096 + 100, 0),
        ] {
            expected.add(op, start, end, 0);
        }
        assert_eq!(after, expected);
        // The repaired table is the table of the trimmed requests.
        let trimmed = [
            request(512, 4096, 0),
            request(2 * 4096, 4 * 4096, 0),
            request(2 * 4096, 3 * 4096 + 100, 0),
        ];
        let rebuilt = region_table(&trimmed, 4096);
        for (key, features) in &rebuilt {
            assert_eq!(&table[key], features, "{key:?}");
        }
    }
}
