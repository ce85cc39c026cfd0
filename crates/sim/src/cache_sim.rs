//! The fast hit-ratio simulator: every (policy, size) pair over one decode of a trace, spread
//! over threads. Plays the role of libCacheSim's `cachesim`.

use std::path::Path;

use std::sync::Mutex;

use heterarchy_policy::{EvictionPolicy, PolicyError, PolicySpec, SimCounters};
use heterarchy_trace::generate::{generator, WorkloadSpec};
use heterarchy_trace::read::{for_each_batch, TraceInput};
use heterarchy_trace::request::NEXT_ACCESS_UNKNOWN;
use heterarchy_trace::write::annotate_next_access;
use heterarchy_trace::{open, ReaderOptions, Request, TraceError, TraceReader};
use serde::Serialize;

use crate::parallel::map_parallel;

pub use heterarchy_trace::read::BATCH;

/// One simulation to run.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// The policy with its parameters and admission filter.
    pub policy: PolicySpec,
    /// Capacity in bytes, or in objects when sizes are ignored.
    pub cache_size: u64,
}

impl SimJob {
    /// A job of the policy written as `policy` (`"s3fifo:small-size-ratio=0.2"`).
    pub fn new(policy: &str, cache_size: u64) -> Result<SimJob, SimError> {
        let policy = PolicySpec::parse(policy, None)?;
        Ok(SimJob { policy, cache_size })
    }

    /// Every (policy, size) pair, policy by policy, sizes in the order given.
    pub fn grid(policies: &[PolicySpec], sizes: &[u64]) -> Vec<SimJob> {
        policies
            .iter()
            .flat_map(|policy| {
                sizes.iter().map(move |&cache_size| SimJob {
                    policy: policy.clone(),
                    cache_size,
                })
            })
            .collect()
    }
}

/// How every job of a run counts the trace.
#[derive(Clone, Debug, Default)]
pub struct SimSettings {
    /// Every object counts as size 1, so capacities are object counts (`--ignore-obj-size`).
    pub ignore_obj_size: bool,
    /// Requests at the start that warm the cache but are not counted.
    pub warmup_requests: u64,
    /// Decode the trace on the thread that plays it rather than on a second one, so that a
    /// one-thread run takes one core (`--inline-decode`: sweeps spread whole runs over the cores).
    pub inline_decode: bool,
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
            policy: job.policy.label().to_string(),
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
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace cannot be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The policy as written cannot be built.
    #[error(transparent)]
    Policy(#[from] PolicyError),
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
    /// The trace's bytes: a file, or what standard input gave.
    pub input: TraceInput,
    pub options: ReaderOptions,
}

impl TraceSource for TraceFile {
    fn open(&self) -> Result<Box<dyn TraceReader>, TraceError> {
        open(&self.input, &self.options)
    }
}

/// A seeded synthetic workload, generated afresh for each job.
#[derive(Clone, Debug)]
pub struct GeneratedTrace(pub WorkloadSpec);

impl TraceSource for GeneratedTrace {
    fn open(&self) -> Result<Box<dyn TraceReader>, TraceError> {
        generator(&self.0)
            .map_err(|e| TraceError::file(Path::new("<generated workload>"), e.to_string()))
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

/// How many requests one decoded chunk holds: every job plays a chunk before the next replaces
/// it, so a run holds at most two chunks (the one played and the one being decoded) whatever the
/// trace's length. 2^19 requests of 40 bytes: 20 MiB each.
pub const CHUNK: usize = 1 << 19;

/// Runs one job on the trace, streaming it. `progress` is called with the number of requests
/// just processed.
pub fn run_job(
    source: &dyn TraceSource,
    settings: &SimSettings,
    job: &SimJob,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimResult, SimError> {
    let mut results = run_jobs(source, settings, std::slice::from_ref(job), 1, progress)?;
    Ok(results.remove(0))
}

/// One job's cache and counts while the trace streams past it.
struct Running {
    policy: Box<dyn EvictionPolicy>,
    counters: SimCounters,
    warmup_left: u64,
}

/// Runs every job over one decode of the trace (as the Caffeine simulator broadcasts each read to
/// all its policies): the trace is decoded a chunk at a time while the jobs play the chunk before,
/// each job single-threaded on one of `threads` threads. Results come back in job order.
pub fn run_jobs(
    source: &dyn TraceSource,
    settings: &SimSettings,
    jobs: &[SimJob],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, SimError> {
    let running: Vec<Running> = jobs
        .iter()
        .map(|job| {
            let policy = job.policy.build(job.cache_size)?;
            Ok(Running {
                policy,
                counters: SimCounters::default(),
                warmup_left: settings.warmup_requests,
            })
        })
        .collect::<Result<_, SimError>>()?;
    let needs_future = running.iter().any(|job| job.policy.needs_next_access());
    let running: Vec<Mutex<Running>> = running.into_iter().map(Mutex::new).collect();
    let mut reader = source.open()?;
    let read_chunk = |reader: &mut dyn TraceReader| -> Result<Vec<Request>, SimError> {
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut batch = Vec::with_capacity(BATCH);
        while chunk.len() < CHUNK {
            reader.read_batch(&mut batch, BATCH.min(CHUNK - chunk.len()))?;
            if batch.is_empty() {
                break;
            }
            chunk.extend_from_slice(&batch);
        }
        if settings.ignore_obj_size {
            chunk.iter_mut().for_each(|request| request.size = 1);
        }
        Ok(chunk)
    };
    let mut chunk = read_chunk(reader.as_mut())?;
    let lacks_future = chunk
        .first()
        .is_some_and(|request| request.next_access == NEXT_ACCESS_UNKNOWN);
    if needs_future && lacks_future {
        // An oracle needs every request's next access, which only the whole trace tells.
        loop {
            let more = read_chunk(reader.as_mut())?;
            if more.is_empty() {
                break;
            }
            chunk.extend_from_slice(&more);
        }
        annotate_next_access(&mut chunk);
        play_chunk(&running, &chunk, threads, progress);
    } else if settings.inline_decode {
        while !chunk.is_empty() {
            play_chunk(&running, &chunk, threads, progress);
            chunk = read_chunk(reader.as_mut())?;
        }
    } else {
        while !chunk.is_empty() {
            let next = std::thread::scope(|scope| {
                scope.spawn(|| play_chunk(&running, &chunk, threads, progress));
                read_chunk(reader.as_mut())
            })?;
            chunk = next;
        }
    }
    Ok(jobs
        .iter()
        .zip(running)
        .map(|(job, running)| {
            let running = running.into_inner().expect("no job panicked");
            SimResult::new(job, &running.counters)
        })
        .collect())
}

/// Plays `chunk` through every job, each job on one thread; a shared counter hands out the next
/// job, so long and short jobs balance themselves.
fn play_chunk(
    running: &[Mutex<Running>],
    chunk: &[Request],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) {
    map_parallel(running, threads, |job| {
        let mut job = job.lock().expect("one thread per job");
        let Running {
            policy,
            counters,
            warmup_left,
        } = &mut *job;
        for batch in chunk.chunks(BATCH) {
            policy.simulate(batch, warmup_left, counters);
            progress(batch.len() as u64);
        }
    });
}
