//! Block stacks on persistent memory in the timed simulator (seed 001 §4): raw PM, the BTT
//! alone, and the BTT under each staging cache of `engine::staging`, run with virtual cores,
//! client jobs and evictor threads against a PM device model, so that seed 001's figures (a
//! 36-core machine, 128 to 1024 requests outstanding) can be reproduced on any machine. The
//! staging decisions are the engine's, the same code the live staged device runs
//! (docs/architecture.md, "Staging caches").
//!
//! The model of seed 001's machine: a block driver on the BTT is bio-based, so a request is
//! carried out on the thread that submits it, start to end; a fio job is one such thread, and
//! its `iodepth` requests wait their turn in order. A thread runs on a core for each step (CPU
//! work and the PM accesses it makes, which stall its core); background threads (Caiti's
//! evictors, PMBD-70's syncer, Co-Active's cleaner, the file system's 5 s journal flush) take
//! cores as the jobs do. A thread that must wait for a slot (`Wait`) sleeps until the cache
//! changes.
//!
//! The jobs issue random 4 KiB requests (fio's `randwrite`, `randrw`), or replay a block trace
//! ([`StagedConfig::trace`]): an application's requests captured below its file system, each
//! taken in order by the next job with a request free, its blocks carried out one after the
//! other as the BTT driver does a bio's, its flushes writing the cache back as the live
//! device's FLUSH does. The trace's timestamps are not kept: the replay is a closed loop.

mod costs;
mod run;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use heterarchy_device::spec::DeviceSpec;
use heterarchy_engine::staging::{StagingScheme, StagingStats, STAGING_NAMES};
use heterarchy_engine::NameError;
use heterarchy_trace::read::BlockRecord;
use heterarchy_trace::Op;
use serde::Serialize;

pub use costs::{measure_costs, StackCosts, WriteDecisionCosts};
pub use run::run_staged;

/// A block stack on persistent memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stack {
    /// Blocks written in place, not atomically (seed 001's "PMem").
    RawPm,
    /// The BTT under a staging cache (`StagingScheme::None`: the BTT alone).
    Btt(StagingScheme),
}

impl Stack {
    /// Seed 001 Fig 5's stacks, ablations last.
    pub fn all() -> Vec<Stack> {
        std::iter::once(Stack::RawPm)
            .chain(StagingScheme::ALL.into_iter().map(Stack::Btt))
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Stack::RawPm => "raw-pm",
            Stack::Btt(StagingScheme::None) => "btt",
            Stack::Btt(scheme) => scheme.name(),
        }
    }

    /// The staging cache, if any.
    pub fn staging(self) -> StagingScheme {
        match self {
            Stack::RawPm => StagingScheme::None,
            Stack::Btt(scheme) => scheme,
        }
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stack {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Stack, NameError> {
        match text {
            "raw-pm" => Ok(Stack::RawPm),
            "btt" => Ok(Stack::Btt(StagingScheme::None)),
            _ => text.parse().map(Stack::Btt).map_err(|_| NameError {
                what: "stack",
                text: text.to_string(),
                expected: format!("raw-pm, btt or one of {STAGING_NAMES}"),
            }),
        }
    }
}

/// One simulated run.
#[derive(Clone, Debug)]
pub struct StagedConfig {
    pub stack: Stack,
    /// Client threads (fio's `numjobs`).
    pub jobs: u32,
    /// Requests each job keeps outstanding.
    pub iodepth: u32,
    /// Cores of the machine (seed 001 §4.1: 36).
    pub cores: u32,
    /// Caiti's evictor threads (PMBD-70's syncer and Co-Active's cleaner are one thread each).
    pub evictors: u32,
    pub cache_bytes: u64,
    /// The device's size; random requests go to uniformly random blocks of it, and a trace's
    /// must lie inside it.
    pub device_bytes: u64,
    /// Requests to replay in order instead of random ones; the jobs stop at its end.
    pub trace: Option<Arc<[TracedRequest]>>,
    /// Jobs stop issuing after this much virtual time.
    pub duration_ns: u64,
    /// Or after this many requests each, whichever comes first.
    pub requests_per_job: Option<u64>,
    /// The file system's periodic journal flush (Ext4: 5 s).
    pub flush_interval_ns: Option<u64>,
    /// Each job flushes after every so many writes (fio's `fsync=N`).
    pub fsync_every: Option<u32>,
    /// Percent of random requests that are reads.
    pub read_percent: u32,
    /// The persistent memory's model (seed 001 §4.1: 768 GB of Optane DC PM, six DIMMs).
    pub pm: DeviceSpec,
    pub costs: StackCosts,
    pub seed: u64,
    /// Completions kept as (time, latency) for scatter plots (Fig 5b: 50,000).
    pub series: usize,
}

/// Seed 001's block size.
pub const BLOCK_BYTES: u32 = 4096;

/// One request of a replayed trace: `blocks` consecutive 4 KiB blocks from `lba` (at least
/// one; 0 counts as 1), read or written, or a flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracedRequest {
    Read { lba: u64, blocks: u32 },
    Write { lba: u64, blocks: u32 },
    Flush,
}

impl TracedRequest {
    /// What a block trace's record asks of a stack: every block it touches, or a flush; `None`
    /// for a record the stacks have nothing to do for (a trim, which the BTT does not pass on
    /// to the PM, an unknown op, no bytes) or one longer than 4 Gi blocks.
    pub fn from_record(record: &BlockRecord) -> Option<TracedRequest> {
        let block = u64::from(BLOCK_BYTES);
        let span = |offset: u64, length: u64| {
            let first = offset / block;
            let last = offset.checked_add(length - 1)? / block;
            Some((first, u32::try_from(last - first + 1).ok()?))
        };
        match record.op {
            Op::Flush => Some(TracedRequest::Flush),
            Op::Read | Op::Write if record.length_bytes > 0 => {
                let (lba, blocks) = span(record.offset_bytes, record.length_bytes)?;
                Some(if record.op == Op::Read {
                    TracedRequest::Read { lba, blocks }
                } else {
                    TracedRequest::Write { lba, blocks }
                })
            }
            _ => None,
        }
    }

    /// The block past the last one it touches (0 for a flush).
    pub fn end_lba(self) -> u64 {
        match self {
            TracedRequest::Read { lba, blocks } | TracedRequest::Write { lba, blocks } => {
                lba + u64::from(blocks)
            }
            TracedRequest::Flush => 0,
        }
    }
}

/// What a run measured: one JSON row of the `caiti-*` experiments.
#[derive(Clone, Debug, Serialize)]
pub struct StagedResult {
    pub stack: String,
    pub jobs: u32,
    pub iodepth: u32,
    pub cores: u32,
    pub cache_bytes: u64,
    pub requests: u64,
    pub elapsed_ns: u64,
    pub iops: f64,
    pub mean_latency_us: f64,
    pub p50_latency_us: f64,
    pub p99_latency_us: f64,
    pub p9999_latency_us: f64,
    /// What the cache did: the write outcomes (hits, fills, bypasses, stalled writes) and the
    /// write-backs by kind.
    pub staging: StagingStats,
    pub flushes: u64,
    pub mean_flush_latency_us: f64,
    /// Job threads' time by category (seed 001 Fig 6a), ns.
    pub time_ns: Vec<(String, u64)>,
    /// The cache's DRAM metadata per slot in seed 001 §4.1's accounting.
    pub metadata_bytes_per_slot: u32,
    /// (completion ns, latency ns) of the first completions.
    #[serde(skip)]
    pub series: Vec<(u64, u64)>,
}

impl StagedConfig {
    /// Seed 001 §4's fio run for `stack`: one job at iodepth 128 on 36 cores, random 4 KiB
    /// writes over 64 GiB, a 512 MiB cache, Ext4's flush every 5 s, six Optane DIMMs; evictors
    /// on every core the jobs leave. Runs 6 virtual seconds (the paper: 30 minutes).
    pub fn seed001(stack: Stack) -> StagedConfig {
        StagedConfig {
            stack,
            jobs: 1,
            iodepth: 128,
            cores: 36,
            evictors: 35,
            cache_bytes: 512 << 20,
            device_bytes: 64 << 30,
            trace: None,
            duration_ns: 6_000_000_000,
            requests_per_job: None,
            flush_interval_ns: Some(5_000_000_000),
            fsync_every: None,
            read_percent: 0,
            pm: heterarchy_device::presets::preset("optane-pm-x6").expect("a built-in preset"),
            costs: StackCosts::default(),
            seed: 1,
            series: 0,
        }
    }
}
