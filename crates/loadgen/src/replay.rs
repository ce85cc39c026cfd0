//! `heterarchy replay` (seed 002 §4.2; docs/block-volumes.md, "Replay"): a block trace's reads
//! and writes replayed against a live cached volume, in this process or over NBD through the
//! project's NBD client, with throughput, latency percentiles, and for an in-process volume the
//! hits of each tier and each device's bandwidth.
//!
//! Pacing: by timestamps divided by a speedup (open loop: an I/O is due at its scaled time and
//! its latency counts from then, so time spent waiting for a free lane is not hidden), with at
//! most `lanes` I/Os outstanding; or closed loop, `lanes` I/Os always outstanding and the
//! timestamps ignored (the thesis' replayer also skips idle time "if there are no pending block
//! requests", §5.2.4). Each lane is a thread with one I/O in flight: a volume call blocks, and
//! over NBD each lane is its own connection. Timed, one thread holds each I/O until it is due
//! and hands it to a free lane; in a closed loop each lane reads its next I/O from the trace
//! itself, so that no hand-over between threads is timed with the target.
//!
//! Offsets beyond the target's size fold back into it, keeping their place within a 4 KiB page
//! so that misalignment survives; an I/O longer than the target is cut to its size.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use heterarchy_device::backend::wait_until;
use heterarchy_trace::block_stats::PAGE_BYTES;
use heterarchy_trace::read::{BlockRecord, BlockRecordSource};
use heterarchy_trace::{Op, TraceError};
use heterarchy_volume::{Volume, VolumeStats};
use serde::Serialize;

use crate::block::{connect, parse_nbd_url};
use crate::error::ArgError;

/// Intervals of the throughput series.
const SERIES_INTERVALS: usize = 50;
const LATENCY_MAX_NS: u64 = 600_000_000_000;
/// How often a replay that skips idle time looks whether the target has gone idle.
const IDLE_POLL: Duration = Duration::from_micros(50);
/// Lanes at most: threads (and connections) of one replay.
pub const MAX_LANES: usize = 1024;
/// What a trace is replayed against.
pub enum ReplayTarget {
    /// A cached volume in this process.
    Volume(Arc<Volume>),
    /// `nbd://HOST:PORT/EXPORT`.
    Nbd { address: String, export: String },
}

impl ReplayTarget {
    /// Parses `nbd://HOST:PORT/EXPORT` (an empty export is the server's default).
    pub fn nbd(url: &str) -> Result<ReplayTarget, ArgError> {
        let (address, export) = parse_nbd_url(url)?;
        Ok(ReplayTarget::Nbd { address, export })
    }

    fn describe(&self) -> String {
        match self {
            ReplayTarget::Volume(volume) => format!("volume {}", volume.name()),
            ReplayTarget::Nbd { address, export } => format!("nbd://{address}/{export}"),
        }
    }
}

/// How I/Os are issued.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pacing {
    /// At their timestamps divided by `speedup`.
    Timed { speedup: f64 },
    /// As fast as the lanes complete them.
    ClosedLoop,
}

/// A replay's settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReplayOptions {
    pub pacing: Pacing,
    /// I/Os outstanding at most (closed loop: always).
    pub lanes: usize,
    /// Replay only the first so many I/Os.
    pub limit: Option<u64>,
    /// Timed pacing only: when no I/O is outstanding, issue the next at once instead of
    /// waiting for its time, and shift the rest of the schedule by the time skipped (the
    /// thesis' replayer, seed 002 §4.2.2: "if the application queue is empty, we ignore the
    /// IAT and issue the next request immediately").
    pub skip_idle: bool,
}

/// Latency percentiles of one kind of I/O, µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// One cache tier's share of a replay (in process only).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierReplay {
    pub tier: usize,
    pub storage: String,
    /// Line accesses whose highest copy was in this tier.
    pub hits: u64,
}

/// One device's traffic during a replay (in process only).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceReplay {
    pub role: String,
    pub storage: String,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    pub target: String,
    pub options: ReplayOptions,
    pub requests: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub duration_s: f64,
    pub iops: f64,
    /// Bytes read and written per second, MB (10⁶ B).
    pub mb_per_s: f64,
    pub all: LatencySummary,
    pub reads: LatencySummary,
    pub writes: LatencySummary,
    /// I/Os that started more than 1 ms after they were due (timed pacing): the target or the
    /// lanes could not keep up.
    pub late_requests: u64,
    /// `skip_idle` only: I/Os issued before their time because nothing was outstanding, and
    /// the time so skipped: the schedule ran that much shorter than the trace's timestamps.
    pub issued_early: u64,
    pub idle_skipped_s: f64,
    /// Line accesses the controller planned and those no tier held (in process only).
    pub line_requests: Option<u64>,
    pub misses: Option<u64>,
    pub tiers: Vec<TierReplay>,
    pub devices: Vec<DeviceReplay>,
    /// MB/s completed in each of up to 50 equal intervals: (interval's end, s; MB/s).
    pub throughput_series: Vec<(f64, f64)>,
}

/// Why a replay stopped.
#[derive(Debug)]
pub enum ReplayError {
    /// The trace could not be read.
    Trace(TraceError),
    /// The target failed an I/O or could not be reached.
    Target(io::Error),
    /// The options cannot be used; the message names the option.
    Options(String),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Trace(e) => e.fmt(f),
            ReplayError::Target(e) => write!(f, "replay target: {e}"),
            ReplayError::Options(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ReplayError {}

/// One I/O handed to a lane: where and what, and when it was due (`None` in a closed loop:
/// when a lane takes it).
#[derive(Clone, Copy)]
struct Task {
    op: Op,
    offset: u64,
    length: u64,
    due: Option<Instant>,
}

/// Where a trace's I/O lands on a target of `size` bytes: folded into it, keeping its place in
/// its page; cut to the target's size.
pub fn fold_into(offset: u64, length: u64, size: u64) -> (u64, u64) {
    let length = length.min(size);
    let room = size - length;
    if offset <= room {
        return (offset, length);
    }
    let within_page = offset % PAGE_BYTES;
    if within_page > room {
        return (room, length);
    }
    // Page starts p · 4 KiB with p · 4 KiB + within_page ≤ room.
    let pages = (room - within_page) / PAGE_BYTES + 1;
    (
        (offset / PAGE_BYTES % pages) * PAGE_BYTES + within_page,
        length,
    )
}

/// Replays every read and write of `records` (other ops are skipped) against `target`.
pub fn replay(
    records: &mut dyn BlockRecordSource,
    target: &ReplayTarget,
    options: &ReplayOptions,
) -> Result<ReplayReport, ReplayError> {
    if options.lanes == 0 || options.lanes > MAX_LANES {
        return Err(ReplayError::Options(format!(
            "--outstanding/--lanes {}: expected 1 to {MAX_LANES} I/Os",
            options.lanes
        )));
    }
    if let Pacing::Timed { speedup } = options.pacing {
        if !(speedup > 0.0 && speedup.is_finite()) {
            return Err(ReplayError::Options(format!(
                "--speedup {speedup}: expected a factor above 0"
            )));
        }
    }
    let size = match target {
        ReplayTarget::Volume(volume) => volume.size_bytes(),
        ReplayTarget::Nbd { address, export } => {
            connect(address, export)
                .map_err(ReplayError::Target)?
                .negotiated()
                .size_bytes
        }
    };
    if size == 0 {
        return Err(ReplayError::Target(io::Error::other(
            "the target holds no bytes",
        )));
    }
    let before = volume_stats(target);
    let tallies = Mutex::new(Vec::new());
    let first_error = Mutex::new(None::<io::Error>);
    let outstanding = AtomicUsize::new(0);
    let began = Instant::now();
    let lanes = Lanes {
        target,
        tallies: &tallies,
        first_error: &first_error,
        outstanding: &outstanding,
    };
    let (trace_error, idle_skipped, issued_early) = match options.pacing {
        Pacing::ClosedLoop => {
            let feed = Mutex::new(TraceFeed {
                records,
                size,
                began,
                options,
                first_time_ns: None,
                issued: 0,
                repeat: None,
                error: None,
            });
            std::thread::scope(|scope| lanes.spawn(scope, options.lanes, &Tasks::Trace(&feed)));
            let feed = feed.into_inner().unwrap_or_else(|p| p.into_inner());
            (feed.error, Duration::ZERO, 0)
        }
        Pacing::Timed { .. } => dispatch(records, size, began, options, &lanes),
    };
    let duration_s = began.elapsed().as_secs_f64();
    if let Some(error) = trace_error {
        return Err(ReplayError::Trace(error));
    }
    if let Some(error) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(ReplayError::Target(error));
    }
    let mut total = Tally::new();
    for tally in tallies.into_inner().unwrap_or_else(|p| p.into_inner()) {
        total.merge(tally);
    }
    let after = volume_stats(target);
    let series = throughput_series(&total.completions, began, duration_s);
    let mut report = report(target, options, total, duration_s, before, after);
    report.throughput_series = series;
    report.issued_early = issued_early;
    report.idle_skipped_s = idle_skipped.as_secs_f64();
    Ok(report)
}

/// Timed pacing: this thread holds each I/O until it is due, then hands it to a free lane
/// (a rendezvous, so that at most `lanes` are outstanding). Returns the trace's error, if it
/// had one, and, for `skip_idle`, the idle time skipped and the I/Os issued early.
fn dispatch(
    records: &mut dyn BlockRecordSource,
    size: u64,
    began: Instant,
    options: &ReplayOptions,
    lanes: &Lanes<'_>,
) -> (Option<TraceError>, Duration, u64) {
    let (sender, receiver) = sync_channel::<Task>(0);
    let outstanding = lanes.outstanding;
    let mut trace_error = None;
    let (skipped, issued_early) = std::thread::scope(|scope| {
        // Only the lanes hold the receiver: when every lane has failed, sending fails instead
        // of waiting for a lane that will never come.
        lanes.spawn(
            scope,
            options.lanes,
            &Tasks::Dispatched(Arc::new(Mutex::new(receiver))),
        );
        let mut first_time_ns = None;
        let mut issued = 0u64;
        // Time skipped while idle (`skip_idle`): every later I/O is due that much earlier.
        let mut skipped = Duration::ZERO;
        let mut issued_early = 0u64;
        loop {
            if options.limit.is_some_and(|limit| issued >= limit) {
                break;
            }
            let record = match records.next_record() {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(error) => {
                    trace_error = Some(error);
                    break;
                }
            };
            let Some(mut task) = task_of(&record, size, began, &mut first_time_ns, options) else {
                continue;
            };
            if let Some(due) = task.due {
                let mut due = due - skipped.min(due - began);
                loop {
                    let now = Instant::now();
                    if due <= now {
                        break;
                    }
                    if options.skip_idle && outstanding.load(Ordering::SeqCst) == 0 {
                        skipped += due - now;
                        issued_early += 1;
                        due = now;
                        break;
                    }
                    if !options.skip_idle {
                        wait_until(due);
                        break;
                    }
                    // Waiting in slices lets an idle target cut the wait short.
                    std::thread::sleep(IDLE_POLL.min(due - now));
                }
                task.due = Some(due);
            }
            for _ in 0..record.repeat {
                outstanding.fetch_add(1, Ordering::SeqCst);
                if sender.send(task).is_err() {
                    break; // every lane failed; the error is reported below
                }
                issued += 1;
            }
        }
        // Closing the channel ends the lanes once they have taken what was sent.
        drop(sender);
        (skipped, issued_early)
    });
    (trace_error, skipped, issued_early)
}

/// The task a record becomes, or `None` for ops that are not replayed.
fn task_of(
    record: &BlockRecord,
    size: u64,
    began: Instant,
    first_time_ns: &mut Option<u64>,
    options: &ReplayOptions,
) -> Option<Task> {
    if !matches!(record.op, Op::Read | Op::Write) || record.length_bytes == 0 {
        return None;
    }
    let first = *first_time_ns.get_or_insert(record.time_ns);
    let due = match options.pacing {
        Pacing::Timed { speedup } => {
            let scaled_ns = record.time_ns.saturating_sub(first) as f64 / speedup;
            Some(began + Duration::from_nanos(scaled_ns as u64))
        }
        Pacing::ClosedLoop => None,
    };
    let (offset, length) = fold_into(record.offset_bytes, record.length_bytes, size);
    Some(Task {
        op: record.op,
        offset,
        length,
        due,
    })
}

/// What one lane measured.
struct Tally {
    all_ns: Histogram<u64>,
    read_ns: Histogram<u64>,
    write_ns: Histogram<u64>,
    read_bytes: u64,
    write_bytes: u64,
    late: u64,
    /// (completion, bytes) of every I/O, for the throughput series.
    completions: Vec<(Instant, u64)>,
}

impl Tally {
    fn new() -> Tally {
        let histogram =
            || Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid histogram bounds");
        Tally {
            all_ns: histogram(),
            read_ns: histogram(),
            write_ns: histogram(),
            read_bytes: 0,
            write_bytes: 0,
            late: 0,
            completions: Vec::new(),
        }
    }

    fn merge(&mut self, other: Tally) {
        let _ = self.all_ns.add(&other.all_ns);
        let _ = self.read_ns.add(&other.read_ns);
        let _ = self.write_ns.add(&other.write_ns);
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
        self.late += other.late;
        self.completions.extend(other.completions);
    }
}

/// Where lanes take their next I/O.
#[derive(Clone)]
enum Tasks<'f, 't> {
    /// From the dispatcher, which holds each until it is due (timed pacing).
    Dispatched(Arc<Mutex<Receiver<Task>>>),
    /// Straight from the trace (closed loop): a lane reads the next record itself as soon as
    /// it is free, so no thread hands I/Os over and nothing but the target's answer stands
    /// between one I/O of a lane and its next.
    Trace(&'f Mutex<TraceFeed<'t>>),
}

impl Tasks<'_, '_> {
    /// The next I/O, or `None` once there is none (the trace ended, failed or reached the
    /// limit, or the dispatcher stopped).
    fn next(&self) -> Option<Task> {
        match self {
            Tasks::Dispatched(receiver) => receiver
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .recv()
                .ok(),
            Tasks::Trace(feed) => feed.lock().unwrap_or_else(|p| p.into_inner()).next(),
        }
    }
}

/// The trace read by the lanes of a closed loop.
struct TraceFeed<'a> {
    records: &'a mut dyn BlockRecordSource,
    size: u64,
    began: Instant,
    options: &'a ReplayOptions,
    first_time_ns: Option<u64>,
    issued: u64,
    /// The last record's I/O and how many more times it happened (Meta's `op_count`).
    repeat: Option<(Task, u32)>,
    /// Why the trace stopped early.
    error: Option<TraceError>,
}

impl TraceFeed<'_> {
    fn next(&mut self) -> Option<Task> {
        if self.options.limit.is_some_and(|limit| self.issued >= limit) {
            return None;
        }
        if let Some((task, left)) = self.repeat.take() {
            if left > 1 {
                self.repeat = Some((task, left - 1));
            }
            self.issued += 1;
            return Some(task);
        }
        loop {
            let record = match self.records.next_record() {
                Ok(Some(record)) => record,
                Ok(None) => return None,
                Err(error) => {
                    self.error = Some(error);
                    return None;
                }
            };
            let first_time_ns = &mut self.first_time_ns;
            if let Some(task) = task_of(&record, self.size, self.began, first_time_ns, self.options)
            {
                if record.repeat > 1 {
                    self.repeat = Some((task, record.repeat - 1));
                }
                self.issued += 1;
                return Some(task);
            }
        }
    }
}

/// What every lane shares: the target, and where each puts what it measured or why it failed.
struct Lanes<'a> {
    target: &'a ReplayTarget,
    tallies: &'a Mutex<Vec<Tally>>,
    first_error: &'a Mutex<Option<io::Error>>,
    outstanding: &'a AtomicUsize,
}

impl<'a> Lanes<'a> {
    /// Starts `count` lanes in `scope`, each taking from its own handle on `tasks`.
    fn spawn<'scope, 't: 'scope>(
        &'scope self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        count: usize,
        tasks: &Tasks<'scope, 't>,
    ) where
        'a: 'scope,
    {
        for _ in 0..count {
            let tasks = tasks.clone();
            scope.spawn(move || match lane(self.target, &tasks, self.outstanding) {
                Ok(tally) => self
                    .tallies
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(tally),
                Err(error) => {
                    self.first_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(error);
                }
            });
        }
    }
}

/// One lane: takes tasks until there are none, one in flight; counts each down in
/// `outstanding` once answered (the dispatcher counted it up).
fn lane(
    target: &ReplayTarget,
    tasks: &Tasks<'_, '_>,
    outstanding: &AtomicUsize,
) -> io::Result<Tally> {
    let mut client = match target {
        ReplayTarget::Nbd { address, export } => Some(connect(address, export)?),
        ReplayTarget::Volume(_) => None,
    };
    let mut tally = Tally::new();
    let mut buffer = Vec::new();
    let dispatched = matches!(tasks, Tasks::Dispatched(_));
    while let Some(task) = tasks.next() {
        let started = Instant::now();
        let due = task.due.unwrap_or(started);
        if started.duration_since(due) > Duration::from_millis(1) {
            tally.late += 1;
        }
        buffer.resize(task.length as usize, 0);
        let answered = match (target, client.as_mut()) {
            (ReplayTarget::Volume(volume), _) => {
                let due = match task.op {
                    Op::Read => volume.read(task.offset, &mut buffer)?,
                    _ => {
                        let stamp = buffer.len().min(8);
                        buffer[..stamp].copy_from_slice(&task.offset.to_le_bytes()[..stamp]);
                        volume.write(task.offset, &buffer, false)?
                    }
                };
                // A throttled volume answers when its device model says the I/O is done.
                if let Some(due) = due {
                    wait_until(due);
                }
                Instant::now()
            }
            (ReplayTarget::Nbd { .. }, Some(client)) => {
                match task.op {
                    Op::Read => client.read(task.offset, &mut buffer),
                    _ => client.write(task.offset, &buffer, false),
                }
                .map_err(io::Error::other)?;
                Instant::now()
            }
            (ReplayTarget::Nbd { .. }, None) => unreachable!("NBD lanes connect first"),
        };
        if dispatched {
            outstanding.fetch_sub(1, Ordering::SeqCst);
        }
        tally.completions.push((answered, task.length));
        let ns = u64::try_from(answered.duration_since(due).as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        tally.all_ns.saturating_record(ns);
        match task.op {
            Op::Read => {
                tally.read_ns.saturating_record(ns);
                tally.read_bytes += task.length;
            }
            _ => {
                tally.write_ns.saturating_record(ns);
                tally.write_bytes += task.length;
            }
        }
    }
    if let Some(client) = client {
        client.disconnect().map_err(io::Error::other)?;
    }
    Ok(tally)
}

fn volume_stats(target: &ReplayTarget) -> Option<VolumeStats> {
    match target {
        ReplayTarget::Volume(volume) => Some(volume.stats()),
        ReplayTarget::Nbd { .. } => None,
    }
}

/// MB/s completed in each of [`SERIES_INTERVALS`] equal intervals of the run.
fn throughput_series(
    completions: &[(Instant, u64)],
    began: Instant,
    duration_s: f64,
) -> Vec<(f64, f64)> {
    if completions.is_empty() || duration_s <= 0.0 {
        return Vec::new();
    }
    let width_s = duration_s / SERIES_INTERVALS as f64;
    let mut bytes = vec![0u64; SERIES_INTERVALS];
    for (at, length) in completions {
        let offset_s = at.duration_since(began).as_secs_f64();
        let interval = ((offset_s / width_s) as usize).min(SERIES_INTERVALS - 1);
        bytes[interval] += length;
    }
    bytes
        .iter()
        .enumerate()
        .map(|(interval, &bytes)| {
            (
                (interval + 1) as f64 * width_s,
                bytes as f64 / 1e6 / width_s,
            )
        })
        .collect()
}

fn summary(histogram: &Histogram<u64>) -> LatencySummary {
    if histogram.is_empty() {
        return LatencySummary::default();
    }
    let us = |ns: u64| ns as f64 / 1e3;
    LatencySummary {
        count: histogram.len(),
        mean_us: histogram.mean() / 1e3,
        p50_us: us(histogram.value_at_quantile(0.5)),
        p90_us: us(histogram.value_at_quantile(0.9)),
        p99_us: us(histogram.value_at_quantile(0.99)),
        p999_us: us(histogram.value_at_quantile(0.999)),
        max_us: us(histogram.max()),
    }
}

fn report(
    target: &ReplayTarget,
    options: &ReplayOptions,
    tally: Tally,
    duration_s: f64,
    before: Option<VolumeStats>,
    after: Option<VolumeStats>,
) -> ReplayReport {
    let requests = tally.all_ns.len();
    let seconds = duration_s.max(1e-9);
    let (line_requests, misses, tiers, devices) = match (&before, &after) {
        (Some(before), Some(after)) => (
            Some(after.line_requests - before.line_requests),
            Some(after.misses - before.misses),
            after
                .tiers
                .iter()
                .zip(&before.tiers)
                .map(|(now, then)| TierReplay {
                    tier: now.tier,
                    storage: now.storage.clone(),
                    hits: now.hits - then.hits,
                })
                .collect(),
            after
                .devices
                .iter()
                .zip(&before.devices)
                .map(|(now, then)| DeviceReplay {
                    role: now.role.clone(),
                    storage: now.storage.clone(),
                    read_mb_per_s: (now.read_bytes - then.read_bytes) as f64 / 1e6 / seconds,
                    write_mb_per_s: (now.write_bytes - then.write_bytes) as f64 / 1e6 / seconds,
                })
                .collect(),
        ),
        _ => (None, None, Vec::new(), Vec::new()),
    };
    ReplayReport {
        target: target.describe(),
        options: *options,
        requests,
        read_bytes: tally.read_bytes,
        write_bytes: tally.write_bytes,
        duration_s,
        iops: requests as f64 / seconds,
        mb_per_s: (tally.read_bytes + tally.write_bytes) as f64 / 1e6 / seconds,
        all: summary(&tally.all_ns),
        reads: summary(&tally.read_ns),
        writes: summary(&tally.write_ns),
        late_requests: tally.late,
        issued_early: 0,
        idle_skipped_s: 0.0,
        line_requests,
        misses,
        tiers,
        devices,
        throughput_series: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_volume::VolumeConfig;

    /// A volume of 1 MiB in RAM with a RAM cache.
    fn volume() -> Arc<Volume> {
        let config = VolumeConfig::with_tiers(
            "replayed",
            "ram:1m".parse().unwrap(),
            vec!["ram:256k".parse().unwrap()],
        );
        Arc::new(Volume::open(&config).unwrap())
    }

    /// A block-record source over a list.
    struct Listed(std::vec::IntoIter<BlockRecord>);

    impl BlockRecordSource for Listed {
        fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
            Ok(self.0.next())
        }
        fn path(&self) -> &std::path::Path {
            std::path::Path::new("listed")
        }
        fn location(&self) -> heterarchy_trace::Location {
            heterarchy_trace::Location::File
        }
    }

    fn records(count: u64) -> Listed {
        Listed(
            (0..count)
                .map(|i| BlockRecord::in_bytes(i * 1000, 0, (i % 200) * 4096, 4096, Op::Read))
                .collect::<Vec<_>>()
                .into_iter(),
        )
    }

    #[test]
    fn a_closed_loop_replays_every_io() {
        let options = ReplayOptions {
            pacing: Pacing::ClosedLoop,
            lanes: 4,
            limit: None,
            skip_idle: false,
        };
        let report = replay(&mut records(500), &ReplayTarget::Volume(volume()), &options).unwrap();
        assert_eq!(report.requests, 500);
        assert_eq!(report.read_bytes, 500 * 4096);
        assert_eq!(report.tiers.len(), 1);
    }

    #[test]
    fn a_target_failing_every_io_ends_the_replay_with_its_error() {
        let volume = volume();
        volume.shut_down().unwrap();
        let options = ReplayOptions {
            pacing: Pacing::ClosedLoop,
            lanes: 3,
            limit: None,
            skip_idle: false,
        };
        // Every lane fails on its first I/O; the dispatcher must not wait for them forever.
        let err = replay(&mut records(100), &ReplayTarget::Volume(volume), &options).unwrap_err();
        assert!(err.to_string().contains("shutting down"), "{err}");
    }

    #[test]
    fn offsets_fold_into_the_target_keeping_their_place_in_a_page() {
        let size = 1 << 20;
        assert_eq!(fold_into(4096, 8192, size), (4096, 8192));
        for offset in [
            size,
            size + 512,
            5 * size + 7 * 4096 + 1024,
            u64::MAX - 9000,
        ] {
            let (folded, length) = fold_into(offset, 8192, size);
            assert_eq!(length, 8192);
            assert!(folded + length <= size, "{offset} -> {folded}");
            assert_eq!(folded % 4096, offset % 4096, "{offset} -> {folded}");
        }
        // Longer than the target: cut to it, from its start.
        assert_eq!(fold_into(12_345, 2 * size, size), (0, size));
        // A target smaller than a page keeps what fits.
        let (folded, length) = fold_into(3000, 1000, 2048);
        assert!(folded + length <= 2048);
    }
}
