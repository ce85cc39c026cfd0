//! What a block trace's I/Os look like before they are split into cache lines (seed 002 §4.3,
//! BlkSample's features; docs/simulation.md, "Traces"): request sizes, inter-arrival times and
//! misalignment to 4 KiB pages, reads and writes apart.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::read::BlockRecordSource;
use crate::stats::{nearest_rank, summarise_sizes, SizeSummary};
use crate::{Op, TraceError};

/// The cache line misalignment is measured against (seed 002 §2.1.3).
pub const PAGE_BYTES: u64 = 4096;

/// Bytes of the page holding `start_byte` before it and of the page holding the last byte after
/// `end_byte` (seed 002 Algorithm 2's front and end misalignment; an aligned end counts
/// 0, where Algorithm 2's line 15 as printed counts a whole page).
pub fn page_misalignment(start_byte: u64, end_byte: u64) -> (u64, u64) {
    let front = start_byte % PAGE_BYTES;
    let rear = (PAGE_BYTES - end_byte % PAGE_BYTES) % PAGE_BYTES;
    (front, rear)
}

/// A distribution of times, µs; all zero when there is nothing to summarise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSummary {
    pub mean_us: f64,
    /// Nearest-rank percentiles.
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// One op's I/Os.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpBlockStats {
    pub requests: u64,
    pub sizes: SizeSummary,
    /// Time since the I/O before it, whatever that one's op (seed 002 §4.3's IAT).
    pub inter_arrival: TimeSummary,
    /// I/Os that start or end inside a page.
    pub misaligned_requests: u64,
    /// Bytes of those partial pages outside the I/O, front and rear (Algorithm 2's
    /// misalignment bytes, with the rear's aligned case 0).
    pub misaligned_bytes: u64,
}

/// A block trace's reads and writes (discards and other ops are counted, not described).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockStats {
    /// I/Os with data (zero-length commands left out), every op.
    pub records: u64,
    pub reads: OpBlockStats,
    pub writes: OpBlockStats,
}

/// The I/Os one op collects before summarising.
#[derive(Default)]
struct Collected {
    sizes: Vec<u32>,
    bytes: u64,
    gaps_ns: Vec<u64>,
    misaligned_requests: u64,
    misaligned_bytes: u64,
}

impl Collected {
    fn summary(mut self) -> OpBlockStats {
        OpBlockStats {
            requests: self.sizes.len() as u64,
            sizes: summarise_sizes(&mut self.sizes, self.bytes),
            inter_arrival: summarise_times(&mut self.gaps_ns),
            misaligned_requests: self.misaligned_requests,
            misaligned_bytes: self.misaligned_bytes,
        }
    }
}

/// Reads every record of `records`.
pub fn block_stats(records: &mut dyn BlockRecordSource) -> Result<BlockStats, TraceError> {
    let mut by_op = [Collected::default(), Collected::default()];
    let mut count = 0;
    let mut previous_ns = None;
    while let Some(record) = records.next_record()? {
        if record.length_bytes == 0 {
            continue;
        }
        count += u64::from(record.repeat);
        let gap_ns = previous_ns.map_or(0, |previous| record.time_ns.saturating_sub(previous));
        previous_ns = Some(record.time_ns);
        let collected = match record.op {
            Op::Read => &mut by_op[0],
            Op::Write => &mut by_op[1],
            _ => continue,
        };
        let end = record.offset_bytes.saturating_add(record.length_bytes);
        let (front, rear) = page_misalignment(record.offset_bytes, end);
        for _ in 0..record.repeat {
            collected
                .sizes
                .push(u32::try_from(record.length_bytes).unwrap_or(u32::MAX));
            collected.bytes += record.length_bytes;
            collected.gaps_ns.push(gap_ns);
            if front + rear > 0 {
                collected.misaligned_requests += 1;
                collected.misaligned_bytes += front + rear;
            }
        }
    }
    let [reads, writes] = by_op;
    Ok(BlockStats {
        records: count,
        reads: reads.summary(),
        writes: writes.summary(),
    })
}

/// Summarises `times_ns`, sorting them in place.
fn summarise_times(times_ns: &mut [u64]) -> TimeSummary {
    if times_ns.is_empty() {
        return TimeSummary::default();
    }
    times_ns.sort_unstable();
    let count = times_ns.len() as u64;
    let us = |ns: u64| ns as f64 / 1e3;
    let percentile = |thousandths: u64| us(nearest_rank(times_ns, thousandths));
    TimeSummary {
        mean_us: times_ns.iter().map(|&ns| ns as f64).sum::<f64>() / count as f64 / 1e3,
        p50_us: percentile(500),
        p90_us: percentile(900),
        p99_us: percentile(990),
        max_us: us(times_ns[times_ns.len() - 1]),
    }
}

impl BlockStats {
    /// Lines for people, after the request-level table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{:<22} {}", "block I/Os", self.records);
        for (name, op) in [("reads", &self.reads), ("writes", &self.writes)] {
            let _ = writeln!(
                out,
                "{:<22} {} I/Os; size mean {:.0} B, p50 {} B, p99 {} B; inter-arrival mean {:.1} us, \
                 p99 {:.1} us; misaligned {} ({} B)",
                format!("block {name}"),
                op.requests,
                op.sizes.mean_bytes,
                op.sizes.p50_bytes,
                op.sizes.p99_bytes,
                op.inter_arrival.mean_us,
                op.inter_arrival.p99_us,
                op.misaligned_requests,
                op.misaligned_bytes
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::BlockRecord;
    use crate::Location;
    use std::path::{Path, PathBuf};

    struct Records(std::vec::IntoIter<BlockRecord>, PathBuf);

    impl BlockRecordSource for Records {
        fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
            Ok(self.0.next())
        }
        fn path(&self) -> &Path {
            &self.1
        }
        fn location(&self) -> Location {
            Location::Line(1)
        }
    }

    #[test]
    fn sizes_gaps_and_misalignment_by_op() {
        let record = |time_us: u64, offset_bytes, length_bytes, op| {
            BlockRecord::in_bytes(time_us * 1000, 0, offset_bytes, length_bytes, op)
        };
        let mut records = Records(
            vec![
                record(0, 0, 8192, Op::Read),
                record(10, 100, 200, Op::Write), // front 100, rear 3796
                record(15, 0, 0, Op::Read),      // no data: left out
                record(40, 4096, 4096, Op::Write),
                record(41, 8192, 512, Op::Trim),
            ]
            .into_iter(),
            PathBuf::from("t"),
        );
        let stats = block_stats(&mut records).unwrap();
        assert_eq!(stats.records, 4);
        assert_eq!(stats.reads.requests, 1);
        assert_eq!(stats.reads.misaligned_requests, 0);
        assert_eq!(stats.writes.requests, 2);
        assert_eq!(stats.writes.sizes.mean_bytes, (200.0 + 4096.0) / 2.0);
        assert_eq!(
            (
                stats.writes.misaligned_requests,
                stats.writes.misaligned_bytes
            ),
            (1, 3896)
        );
        // Gaps: the write at 10 us after the read at 0, the one at 40 after the one at 10.
        assert_eq!(stats.writes.inter_arrival.mean_us, 20.0);
        assert_eq!(stats.writes.inter_arrival.max_us, 30.0);
        assert!(stats.to_table().contains("block writes"));
    }
}
