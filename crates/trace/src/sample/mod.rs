//! Block-trace sampling (seed 002 ch. 5; docs/simulation.md, "Sampling block traces"): random
//! sampling and BlkSample, each writing a sample that is itself a block trace.
//!
//! Both hash each region of `4 KiB << bits` bytes (with its volume) and keep it when the hash
//! falls below the rate, so every access to a region is kept or dropped together (§5.2.1).
//! Within each source I/O, every maximal run of kept regions becomes one sample I/O, with the
//! source's time and op and the part of its byte range the run covers (§5.2.2, Step 1).
//! Spatial sampling stops there (with `bits` 0 it is the thesis' random spatial sampling);
//! BlkSample (`bits` 4 by default, 64 KiB regions) then post-processes the sample
//! (`postprocess.rs`): greedy removal of regions against the eight counters of the full trace.

mod counters;
mod postprocess;

use counters::Counting;
pub use counters::{
    feature_errors, mean_error, op_index, percent_error, FeatureError, WorkloadCounters,
    FEATURE_COUNT, FEATURE_NAMES, REQUEST_RATIO,
};

use serde::Serialize;

use crate::block_stats::{page_misalignment, PAGE_BYTES};
use crate::generate::{mix64, unit_from_bits};
use crate::read::{BlockRecord, BlockRecordSource};
use crate::{Op, TraceError};

/// The largest number of ignored address bits: 4 GiB regions.
pub const MAX_BITS: u32 = 20;
/// Post-processing iterations unless told otherwise; the thesis' error curves flatten well
/// before (Figs. 5.6–5.7), and the hit rate suffers from removing too much (§5.3.3).
pub const DEFAULT_ITERATIONS: u32 = 200;

/// How to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleMethod {
    /// Random spatial sampling of regions, nothing more (§5.2.1).
    Spatial,
    /// Spatial sampling of regions, then post-processing (§5.2.2).
    BlkSample,
}

impl SampleMethod {
    /// The name `--method` takes.
    pub fn name(self) -> &'static str {
        match self {
            SampleMethod::Spatial => "spatial",
            SampleMethod::BlkSample => "blksample",
        }
    }

    /// Ignored address bits unless told otherwise: the thesis' plain spatial sampling uses
    /// 4 KiB regions, BlkSample's replay study 64 KiB (§5.3.4).
    pub fn default_bits(self) -> u32 {
        match self {
            SampleMethod::Spatial => 0,
            SampleMethod::BlkSample => 4,
        }
    }
}

/// The parameters of one sampling run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SampleOptions {
    pub method: SampleMethod,
    /// Share of regions kept, in (0, 1].
    pub rate: f64,
    /// Low-order bits of the 4 KiB block address ignored: regions of `4 KiB << bits`.
    pub bits: u32,
    /// Seeds the region hash.
    pub seed: u64,
    /// Post-processing iterations at most (BlkSample only).
    pub iterations: u32,
}

/// Sampling options out of range, named by their command-line flag.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// A rate outside (0, 1].
    #[error("--rate {0}: expected a sampling rate in (0, 1]")]
    Rate(f64),
    /// More ignored bits than a region can have.
    #[error("--bits {0}: expected at most {MAX_BITS} ignored bits")]
    Bits(u32),
}

impl SampleOptions {
    /// `method` at `rate` with its default bits, seed 1 and the default iterations.
    pub fn new(method: SampleMethod, rate: f64) -> SampleOptions {
        SampleOptions {
            method,
            rate,
            bits: method.default_bits(),
            seed: 1,
            iterations: DEFAULT_ITERATIONS,
        }
    }

    /// Bytes per region.
    pub fn region_bytes(&self) -> u64 {
        PAGE_BYTES << self.bits
    }

    /// A one-line error naming the argument that is out of range.
    pub fn validate(&self) -> Result<(), SampleError> {
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            return Err(SampleError::Rate(self.rate));
        }
        if self.bits > MAX_BITS {
            return Err(SampleError::Bits(self.bits));
        }
        Ok(())
    }

    /// Whether the region hash keeps `region` of `volume`.
    fn keeps(&self, volume: u32, region: u64) -> bool {
        let hash = mix64(mix64(self.seed ^ u64::from(volume)) ^ region);
        unit_from_bits(hash) < self.rate
    }
}

/// One I/O of a sample: part of a source I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SampleRequest {
    pub(crate) time_ns: u64,
    pub(crate) volume: u32,
    /// 0 read, 1 write.
    pub(crate) op_index: usize,
    pub(crate) start_byte: u64,
    pub(crate) end_byte: u64,
}

impl SampleRequest {
    /// The first and the last region the request touches.
    pub(crate) fn regions(&self, region_bytes: u64) -> (u64, u64) {
        (
            self.start_byte / region_bytes,
            (self.end_byte - 1) / region_bytes,
        )
    }

    /// Partial-page bytes at its front and rear.
    pub(crate) fn page_misalignment(&self) -> (u64, u64) {
        page_misalignment(self.start_byte, self.end_byte)
    }

    fn record(&self) -> BlockRecord {
        let op = if self.op_index == 0 {
            Op::Read
        } else {
            Op::Write
        };
        BlockRecord::in_bytes(
            self.time_ns,
            self.volume,
            self.start_byte,
            self.end_byte - self.start_byte,
            op,
        )
    }

    /// The parts of this request over runs of regions `keep` says yes to, in order.
    fn runs(&self, region_bytes: u64, mut keep: impl FnMut(u64) -> bool, out: &mut Vec<Self>) {
        let (first, last) = self.regions(region_bytes);
        let mut run_start = None;
        for region in first..=last + 1 {
            let kept = region <= last && keep(region);
            match (kept, run_start) {
                (true, None) => run_start = Some(region),
                (false, Some(start)) => {
                    out.push(SampleRequest {
                        start_byte: self.start_byte.max(start * region_bytes),
                        end_byte: self.end_byte.min(region * region_bytes),
                        ..*self
                    });
                    run_start = None;
                }
                _ => {}
            }
        }
    }
}

/// What a sampling run did and what it measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleReport {
    pub options: SampleOptions,
    pub region_bytes: u64,
    /// Reads and writes of the full trace (other ops and empty I/Os are not sampled).
    pub full_requests: u64,
    /// I/Os of the sample before post-processing (Step 1's temporary sample).
    pub sampled_requests: u64,
    /// I/Os of the sample written.
    pub sample_requests: u64,
    /// Regions the post-processing removed.
    pub regions_removed: u64,
    /// The full trace's eight counters.
    pub full: WorkloadCounters,
    /// The written sample's counters, its gaps scaled by the rate (what `trace compare`
    /// measures).
    pub sample: WorkloadCounters,
    /// Mean feature error (percent) the loop predicted before post-processing and after each
    /// removal; one entry, the sample's, for spatial sampling.
    pub iteration_errors: Vec<f64>,
}

/// A sample and its report.
pub struct Sample {
    /// The sample's I/Os in trace order.
    pub records: Vec<BlockRecord>,
    pub report: SampleReport,
}

/// Samples every record of `source` (seed 002 §5.2).
pub fn sample_block_trace(
    source: &mut dyn BlockRecordSource,
    options: &SampleOptions,
) -> Result<Sample, TraceError> {
    options
        .validate()
        .map_err(|error| TraceError::file(source.path(), error.to_string()))?;
    let region_bytes = options.region_bytes();
    let mut full = Counting::new(1.0);
    let mut sampled = Vec::new();
    while let Some(record) = source.next_record()? {
        let Some(op_index) = op_index(record.op) else {
            continue;
        };
        if record.length_bytes == 0 {
            continue;
        }
        let end_byte = record
            .offset_bytes
            .checked_add(record.length_bytes)
            .ok_or_else(|| {
                TraceError::new(
                    source.path(),
                    source.location(),
                    "an I/O past the end of a 64-bit address space: expected offset + length \
                     below 2^64",
                )
            })?;
        let whole = SampleRequest {
            time_ns: record.time_ns,
            volume: record.volume,
            op_index,
            start_byte: record.offset_bytes,
            end_byte,
        };
        full.add(&record);
        for _ in 0..record.repeat {
            whole.runs(
                region_bytes,
                |region| options.keeps(record.volume, region),
                &mut sampled,
            );
        }
    }
    let full = full.counters;
    let sampled_requests = sampled.len() as u64;
    let (kept, regions_removed, iteration_errors) = match options.method {
        SampleMethod::Spatial => (sampled, 0, Vec::new()),
        SampleMethod::BlkSample => {
            let removal = postprocess::greedy_removal(
                &sampled,
                &full,
                options.rate,
                region_bytes,
                options.iterations,
            );
            let mut kept = Vec::with_capacity(sampled.len());
            for request in &sampled {
                request.runs(
                    region_bytes,
                    |region| removal.kept.contains_key(&(request.volume, region)),
                    &mut kept,
                );
            }
            let removed = removal.iteration_errors.len() as u64 - 1;
            debug_assert_eq!(counters_of(&kept), removal.counters);
            (kept, removed, removal.iteration_errors)
        }
    };
    let records: Vec<BlockRecord> = kept.iter().map(SampleRequest::record).collect();
    let sample = WorkloadCounters::of_records(records.iter().copied(), options.rate);
    let iteration_errors = if iteration_errors.is_empty() {
        vec![mean_error(&feature_errors(&full, &sample, options.rate))]
    } else {
        iteration_errors
    };
    let report = SampleReport {
        options: *options,
        region_bytes,
        full_requests: full.total_requests() as u64,
        sampled_requests,
        sample_requests: kept.len() as u64,
        regions_removed,
        full,
        sample,
        iteration_errors,
    };
    Ok(Sample { records, report })
}

/// The counters of sample requests, IATs left 0 (the loop's prediction, to check it).
fn counters_of(requests: &[SampleRequest]) -> WorkloadCounters {
    let mut counters = WorkloadCounters::default();
    for request in requests {
        counters.add(request.op_index, request.start_byte, request.end_byte, 0);
    }
    counters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_kept_regions_become_requests() {
        let request = SampleRequest {
            time_ns: 5,
            volume: 0,
            op_index: 0,
            start_byte: 512,
            end_byte: 11 * 4096,
        };
        // The thesis' example (§5.2.1): blocks 0–10 keeping {0, 1, 3, 5, 6} give 3 requests.
        let mut out = Vec::new();
        request.runs(4096, |block| [0, 1, 3, 5, 6].contains(&block), &mut out);
        let ranges: Vec<(u64, u64)> = out.iter().map(|r| (r.start_byte, r.end_byte)).collect();
        assert_eq!(
            ranges,
            vec![(512, 2 * 4096), (3 * 4096, 4 * 4096), (5 * 4096, 7 * 4096)]
        );
    }

    #[test]
    fn rates_and_bits_out_of_range_are_refused() {
        for (rate, bits) in [(0.0, 0), (1.5, 0), (f64::NAN, 0), (0.1, 21)] {
            let options = SampleOptions {
                bits,
                ..SampleOptions::new(SampleMethod::Spatial, rate)
            };
            let err = options.validate().unwrap_err().to_string();
            assert!(err.starts_with("--"), "{err}");
        }
        assert!(SampleOptions::new(SampleMethod::BlkSample, 1.0)
            .validate()
            .is_ok());
    }
}
