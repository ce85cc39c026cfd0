//! The fast hit-ratio simulator: every (policy, size) pair over one trace, spread over threads.
//! Plays the role of libCacheSim's `cachesim`.

use std::path::{Path, PathBuf};

use heterarchy_policy::{create, EvictionPolicy, SimCounters};
use heterarchy_trace::generate::{generator, WorkloadSpec};
use heterarchy_trace::read::for_each_batch;
use heterarchy_trace::request::NEXT_ACCESS_UNKNOWN;
use heterarchy_trace::write::annotate_next_access;
use heterarchy_trace::{open, ReaderOptions, Request, TraceError, TraceReader};
use serde::Serialize;

use crate::parallel::map_parallel;

pub use heterarchy_trace::read::BATCH;

/// One simulation to run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimJob {
    pub policy: String,
    /// Capacity in bytes, or in objects when sizes are ignored.
    pub cache_size: u64,
}

/// How every job of a run counts the trace.
#[derive(Clone, Debug, Default)]
pub struct SimSettings {
    /// Every object counts as size 1, so capacities are object counts (`--ignore-obj-size`).
    pub ignore_obj_size: bool,
    /// Requests at the start that warm the cache but are not counted.
    pub warmup_requests: u64,
}

/// The outcome of one job, in the shape of the `sim --format json` rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimResult {
    pub policy: String,
    pub cache_size: u64,
    pub requests: u64,
    pub misses: u64,
    pub miss_ratio: f64,
    pub bytes: u64,
    pub miss_bytes: u64,
    pub byte_miss_ratio: f64,
}

impl SimResult {
    fn new(job: &SimJob, counters: &SimCounters) -> SimResult {
        SimResult {
            policy: job.policy.clone(),
            cache_size: job.cache_size,
            requests: counters.requests,
            misses: counters.misses,
            miss_ratio: counters.miss_ratio(),
            bytes: counters.bytes,
            miss_bytes: counters.miss_bytes,
            byte_miss_ratio: counters.byte_miss_ratio(),
        }
    }
}

/// Why a simulation could not run.
#[derive(Debug)]
pub enum SimError {
    Trace(TraceError),
    Policy(String),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Trace(e) => e.fmt(f),
            SimError::Policy(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SimError {}

impl From<TraceError> for SimError {
    fn from(e: TraceError) -> Self {
        SimError::Trace(e)
    }
}

/// Something that can be read from the start as often as needed: a trace file or a generated
/// workload. Each simulation job opens its own stream, so jobs run independently.
pub trait TraceSource: Sync {
    /// A fresh reader positioned at the first request.
    fn open(&self) -> Result<Box<dyn TraceReader>, TraceError>;
}

/// A trace file and the options to read it with.
#[derive(Clone, Debug)]
pub struct TraceFile {
    pub path: PathBuf,
    pub options: ReaderOptions,
}

impl TraceSource for TraceFile {
    fn open(&self) -> Result<Box<dyn TraceReader>, TraceError> {
        open(&self.path, &self.options)
    }
}

/// A seeded synthetic workload, generated afresh for each job.
#[derive(Clone, Debug)]
pub struct GeneratedTrace(pub WorkloadSpec);

impl TraceSource for GeneratedTrace {
    fn open(&self) -> Result<Box<dyn TraceReader>, TraceError> {
        generator(&self.0).map_err(|e| TraceError::file(Path::new("<generated workload>"), e.0))
    }
}

/// The distinct objects of a trace: the base that fractional cache sizes refer to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkingSet {
    pub requests: u64,
    pub objects: u64,
    /// Sum of each distinct object's size at its first request (as libCacheSim counts it).
    pub bytes: u64,
}

/// Measures the working set of the trace at `path` in one streaming pass (memory grows with
/// the number of distinct keys, not requests).
pub fn working_set(
    source: &dyn TraceSource,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<WorkingSet, TraceError> {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut working_set = WorkingSet::default();
    for_each_batch(source.open()?.as_mut(), |batch| {
        working_set.requests += batch.len() as u64;
        for request in batch.iter() {
            if seen.insert(request.key) {
                working_set.objects += 1;
                working_set.bytes += u64::from(request.size);
            }
        }
        progress(batch.len() as u64);
        Ok::<(), TraceError>(())
    })?;
    Ok(working_set)
}

/// Runs one job on the trace, streaming it. `progress` is called with the number of requests
/// just processed.
pub fn run_job(
    source: &dyn TraceSource,
    settings: &SimSettings,
    job: &SimJob,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimResult, SimError> {
    let mut policy = create(&job.policy, job.cache_size).map_err(|e| SimError::Policy(e.0))?;
    let mut reader = source.open()?;
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut counters = SimCounters::default();
    let mut warmup_left = settings.warmup_requests;
    let mut play = |batch: &mut [Request], policy: &mut dyn EvictionPolicy| {
        if settings.ignore_obj_size {
            batch.iter_mut().for_each(|request| request.size = 1);
        }
        policy.simulate(batch, &mut warmup_left, &mut counters);
        progress(batch.len() as u64);
    };
    reader.read_batch(&mut batch, BATCH)?;
    let lacks_future = batch
        .first()
        .is_some_and(|request| request.next_access == NEXT_ACCESS_UNKNOWN);
    if policy.needs_next_access() && lacks_future {
        // An oracle needs every request's next access, which only the whole trace tells.
        let mut trace = std::mem::take(&mut batch);
        loop {
            reader.read_batch(&mut batch, BATCH)?;
            if batch.is_empty() {
                break;
            }
            trace.extend_from_slice(&batch);
        }
        annotate_next_access(&mut trace);
        for chunk in trace.chunks_mut(BATCH) {
            play(chunk, policy.as_mut());
        }
    } else {
        while !batch.is_empty() {
            play(&mut batch, policy.as_mut());
            reader.read_batch(&mut batch, BATCH)?;
        }
    }
    Ok(SimResult::new(job, &counters))
}

/// Runs every job on `threads` threads (each job single-threaded, streaming the trace on its
/// own) and returns the results in job order.
pub fn run_jobs(
    source: &dyn TraceSource,
    settings: &SimSettings,
    jobs: &[SimJob],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, SimError> {
    map_parallel(jobs, threads, |job| {
        run_job(source, settings, job, progress)
    })
    .into_iter()
    .collect()
}
