//! The eight workload counters BlkSample keeps (seed 002 §5.2.3; the six of §5.2.2 plus the
//! misalignment totals) and the mean features they give, with the per-feature error the thesis
//! reports (`100 · |sample − full| / full`).

use serde::Serialize;

use crate::block_stats::page_misalignment;
use crate::read::{BlockRecord, BlockRecordSource};
use crate::{Op, TraceError};

/// Totals over a block trace's reads and writes, by op (index 0 reads, 1 writes).
///
/// Signed so that Algorithm 3 can take a region's share out of a sample's totals without
/// reasoning about order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkloadCounters {
    pub requests: [i64; 2],
    pub bytes: [i64; 2],
    /// Sum of the requests' inter-arrival times, ns: each read's gap to the read before it,
    /// each write's to the write before it (the first of each op counts 0). Per op rather
    /// than to whatever I/O came before (as `trace stats` shows it) because a sample keeps the
    /// per-op arrival process, scaled by the rate, while the interleaving of ops it thins
    /// unevenly.
    pub iat_ns: [i64; 2],
    /// Sum of the bytes of partial 4 KiB pages outside the requests, front and rear.
    pub misaligned_bytes: [i64; 2],
}

/// Index of an op in the counters: reads 0, writes 1; other ops are not counted.
pub fn op_index(op: Op) -> Option<usize> {
    match op {
        Op::Read => Some(0),
        Op::Write => Some(1),
        _ => None,
    }
}

impl WorkloadCounters {
    /// Counts one I/O of `op_index` covering `[start_byte, end_byte)` that came `iat_ns` after
    /// the one before it.
    pub fn add(&mut self, op_index: usize, start_byte: u64, end_byte: u64, iat_ns: u64) {
        let (front, rear) = page_misalignment(start_byte, end_byte);
        self.requests[op_index] += 1;
        self.bytes[op_index] += (end_byte - start_byte) as i64;
        self.iat_ns[op_index] += iat_ns as i64;
        self.misaligned_bytes[op_index] += (front + rear) as i64;
    }

    /// Counts every read and write of `records`, each one's IAT the gap to the I/O of the same
    /// op before it (see [`WorkloadCounters::iat_ns`]); the gaps are multiplied by
    /// `iat_scale` (a sample at rate r is a workload r times as sparse: its gaps times r
    /// compare with the full trace's).
    pub fn of_records(
        records: impl IntoIterator<Item = BlockRecord>,
        iat_scale: f64,
    ) -> WorkloadCounters {
        let mut counting = Counting::new(iat_scale);
        records.into_iter().for_each(|record| counting.add(&record));
        counting.counters
    }

    /// The same over every record of `source`.
    pub fn of_source(
        source: &mut dyn BlockRecordSource,
        iat_scale: f64,
    ) -> Result<WorkloadCounters, TraceError> {
        let mut counting = Counting::new(iat_scale);
        while let Some(record) = source.next_record()? {
            counting.add(&record);
        }
        Ok(counting.counters)
    }

    /// Reads and writes together.
    pub fn total_requests(&self) -> i64 {
        self.requests[0] + self.requests[1]
    }

    /// The mean features the counters give, in [`FEATURE_NAMES`] order.
    pub fn features(&self) -> [f64; FEATURE_COUNT] {
        let per = |total: i64, count: i64| {
            if count > 0 {
                total as f64 / count as f64
            } else {
                0.0
            }
        };
        [
            per(self.bytes[0], self.requests[0]),
            per(self.bytes[1], self.requests[1]),
            per(self.iat_ns[0], self.requests[0]) / 1000.0,
            per(self.iat_ns[1], self.requests[1]) / 1000.0,
            per(self.misaligned_bytes[0], self.requests[0]),
            per(self.misaligned_bytes[1], self.requests[1]),
            per(self.requests[1], self.total_requests()),
        ]
    }
}

/// Counters being filled from a trace in order.
pub(crate) struct Counting {
    pub(crate) counters: WorkloadCounters,
    /// The last read's and the last write's time.
    previous_ns: [Option<u64>; 2],
    iat_scale: f64,
}

impl Counting {
    pub(crate) fn new(iat_scale: f64) -> Counting {
        Counting {
            counters: WorkloadCounters::default(),
            previous_ns: [None; 2],
            iat_scale,
        }
    }

    /// Counts `record` (`repeat` times) unless it is empty or neither a read nor a write.
    pub(crate) fn add(&mut self, record: &BlockRecord) {
        let Some(op) = op_index(record.op) else {
            return;
        };
        if record.length_bytes == 0 {
            return;
        }
        let gap_ns =
            self.previous_ns[op].map_or(0, |previous| record.time_ns.saturating_sub(previous));
        self.previous_ns[op] = Some(record.time_ns);
        let gap_ns = (gap_ns as f64 * self.iat_scale).round() as u64;
        let end = record.offset_bytes.saturating_add(record.length_bytes);
        for _ in 0..record.repeat {
            self.counters.add(op, record.offset_bytes, end, gap_ns);
        }
    }
}

/// How many mean features the counters give.
pub const FEATURE_COUNT: usize = 7;

/// The features' names, as `trace compare` prints them.
pub const FEATURE_NAMES: [&str; FEATURE_COUNT] = [
    "read_size_mean_bytes",
    "write_size_mean_bytes",
    "read_iat_mean_us",
    "write_iat_mean_us",
    "read_misalignment_mean_bytes",
    "write_misalignment_mean_bytes",
    "write_ratio",
];

/// The name of the request-count feature: the sample's requests over the full trace's,
/// against the sampling rate.
pub const REQUEST_RATIO: &str = "request_ratio";

/// `100 · |sample − full| / full`; 0 when both are 0, 100 when only the full one is.
pub fn percent_error(full: f64, sample: f64) -> f64 {
    if full == 0.0 {
        if sample == 0.0 {
            0.0
        } else {
            100.0
        }
    } else {
        100.0 * (sample - full).abs() / full.abs()
    }
}

/// One feature of a sample against the full trace's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FeatureError {
    pub name: &'static str,
    pub full: f64,
    pub sample: f64,
    /// Percent.
    pub error: f64,
}

/// Every feature's error, the request ratio first (its full value is the sampling rate).
pub fn feature_errors(
    full: &WorkloadCounters,
    sample: &WorkloadCounters,
    rate: f64,
) -> Vec<FeatureError> {
    let ratio = if full.total_requests() > 0 {
        sample.total_requests() as f64 / full.total_requests() as f64
    } else {
        0.0
    };
    let mut errors = vec![FeatureError {
        name: REQUEST_RATIO,
        full: rate,
        sample: ratio,
        error: percent_error(rate, ratio),
    }];
    for ((name, full), sample) in FEATURE_NAMES
        .iter()
        .zip(full.features())
        .zip(sample.features())
    {
        errors.push(FeatureError {
            name,
            full,
            sample,
            error: percent_error(full, sample),
        });
    }
    errors
}

/// The mean of the errors, percent.
pub fn mean_error(errors: &[FeatureError]) -> f64 {
    if errors.is_empty() {
        return 0.0;
    }
    errors.iter().map(|e| e.error).sum::<f64>() / errors.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sizes_gaps_and_misalignment_by_op() {
        let records = [
            BlockRecord::in_bytes(0, 0, 0, 4096, Op::Read),
            BlockRecord::in_bytes(1_000, 0, 512, 1024, Op::Write),
            BlockRecord::in_bytes(4_000, 0, 8192, 8192, Op::Read),
            BlockRecord::in_bytes(5_000, 0, 0, 4096, Op::Trim),
        ];
        let counters = WorkloadCounters::of_records(records, 2.0);
        assert_eq!(counters.requests, [2, 1]);
        assert_eq!(counters.bytes, [12288, 1024]);
        assert_eq!(counters.iat_ns, [8_000, 0]);
        assert_eq!(counters.misaligned_bytes, [0, 512 + 2560]);
        let features = counters.features();
        assert_eq!(features[0], 6144.0);
        assert_eq!(features[6], 1.0 / 3.0);
        assert_eq!(page_misalignment(0, 4096), (0, 0));
        assert_eq!(page_misalignment(100, 4000), (100, 96));
    }

    #[test]
    fn errors_are_percent_of_the_full_value() {
        assert_eq!(percent_error(10.0, 12.0), 20.0);
        assert_eq!(percent_error(0.0, 0.0), 0.0);
        assert_eq!(percent_error(0.0, 1.0), 100.0);
        let full = WorkloadCounters {
            requests: [10, 10],
            ..WorkloadCounters::default()
        };
        let sample = WorkloadCounters {
            requests: [1, 1],
            ..WorkloadCounters::default()
        };
        let errors = feature_errors(&full, &sample, 0.1);
        assert_eq!(errors[0].name, REQUEST_RATIO);
        assert!(errors[0].error.abs() < 1e-9);
        assert_eq!(errors.len(), 1 + FEATURE_COUNT);
    }
}
