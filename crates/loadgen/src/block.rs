//! `loadgen block` (docs/block-volumes.md, "loadgen block"; seed 001 §5.1's fio runs): random
//! 4 KiB writes and reads against a block device — in this process (a staged PM device, whose
//! write outcomes it also counts) or over NBD through the project's NBD client — as fio drives
//! a device: jobs, each with `iodepth` requests in flight, a flush after every N writes of a
//! job (`fsync=N`) or on a timer (the file system's journal commit). It reports throughput,
//! latency percentiles, the three write outcomes (seed 001 Fig 6c) and a latency series for
//! scatter plots (Fig 5b).
//!
//! In process, a job's requests in flight are threads of their own (a block call blocks), at
//! most [`MAX_THREADS`] in all; over NBD a job is one connection with `iodepth` requests
//! pipelined.
//!
//! With `verify`, every write is a self-describing block (block number, version, checksum:
//! `heterarchy_device::backend::self_describing_block`, the crash tests' oracle) and every read
//! of a block the run wrote must return the version last acknowledged. Each job (each thread in
//! process) keeps to blocks of its own and never has two requests of one block in flight, so
//! that the version a read must return is exact. A request the device fails, and a read that
//! returns anything else, count as errors and the run goes on; a connection that breaks ends it.
//! With `interval`, throughput, p99 and errors for each interval, by when requests were sent;
//! [`run_block_streaming`] also hands each interval out as soon as every job is done with it.

use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use heterarchy_blockdev::StagedExport;
use heterarchy_device::backend::{self_described_version, self_describing_block};
use heterarchy_device::BlockDevice;
use heterarchy_engine::staging::StagingStats;
use heterarchy_nbd::{Client, ClientError, Command};
use serde::Serialize;

use crate::error::ArgError;
use crate::interval::{Board, IntervalReport, Series};

/// Threads of an in-process run at most.
pub const MAX_THREADS: usize = 256;
const BLOCK: usize = 4096;
const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// What a block load is run against.
pub enum BlockTarget {
    /// A staged device in this process.
    InProcess(Arc<StagedExport>),
    /// `nbd://HOST:PORT/EXPORT`.
    Nbd { address: String, export: String },
}

impl BlockTarget {
    /// Parses `nbd://HOST:PORT/EXPORT` (the export may be empty: the server's default).
    pub fn nbd(url: &str) -> Result<BlockTarget, ArgError> {
        let (address, export) = parse_nbd_url(url)?;
        Ok(BlockTarget::Nbd { address, export })
    }
}

/// The address and export of `nbd://HOST:PORT/EXPORT` (the export may be empty: the server's
/// default).
pub(crate) fn parse_nbd_url(url: &str) -> Result<(String, String), ArgError> {
    let bad = || ArgError::bad("target", url, "expected nbd://HOST:PORT/EXPORT");
    let rest = url.strip_prefix("nbd://").ok_or_else(bad)?;
    let (address, export) = rest.split_once('/').unwrap_or((rest, ""));
    if !address.contains(':') {
        return Err(bad());
    }
    Ok((address.to_string(), export.to_string()))
}

/// The load.
#[derive(Clone, Debug)]
pub struct BlockLoad {
    pub jobs: usize,
    pub iodepth: usize,
    pub duration: Duration,
    /// Percent of requests that are reads.
    pub read_percent: u32,
    /// Each job flushes after every so many writes.
    pub fsync_every: Option<u32>,
    /// A flush on a timer, besides the jobs' requests.
    pub flush_interval: Option<Duration>,
    /// Bytes of the device written and read, from its start (all of it when 0).
    pub span_bytes: u64,
    pub seed: u64,
    /// Completions kept as (µs since the start, latency µs) for a scatter plot.
    pub series: usize,
    /// Check every read of a block the run wrote against the version last written.
    pub verify: bool,
    /// Report throughput, p99 and errors for each interval this long.
    pub interval: Option<Duration>,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BlockReport {
    pub target: String,
    pub jobs: usize,
    pub iodepth: usize,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub duration_secs: f64,
    pub iops: f64,
    pub mean_latency_us: f64,
    pub p50_latency_us: f64,
    pub p90_latency_us: f64,
    pub p99_latency_us: f64,
    pub p999_latency_us: f64,
    pub p9999_latency_us: f64,
    pub max_latency_us: f64,
    /// The write outcomes of seed 001 Fig 6c, in process only.
    pub write_hits: Option<u64>,
    pub write_fills: Option<u64>,
    pub bypasses: Option<u64>,
    pub stalled_writes: Option<u64>,
    pub flushes: u64,
    pub mean_flush_latency_us: f64,
    /// (µs since the start, latency µs) of the first completions.
    pub series: Vec<(f64, f64)>,
    /// Requests the device failed, and with `verify` reads that returned the wrong data.
    pub errors: u64,
    /// The first of them.
    pub first_error: Option<String>,
    /// With `verify`: reads of blocks the run wrote, found to hold the version last written.
    pub verified_reads: Option<u64>,
    /// Each interval, with `interval`.
    pub intervals: Vec<IntervalReport>,
}

/// One thread's tallies.
struct Tally {
    latency_ns: Histogram<u64>,
    reads: u64,
    writes: u64,
    flushes: u64,
    flush_ns: u64,
    series: Vec<(f64, f64)>,
    errors: u64,
    first_error: Option<String>,
    verified_reads: u64,
    intervals: Option<Series>,
}

impl Tally {
    fn new(load: &BlockLoad) -> Tally {
        Tally {
            latency_ns: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid bounds"),
            reads: 0,
            writes: 0,
            flushes: 0,
            flush_ns: 0,
            series: Vec::new(),
            errors: 0,
            first_error: None,
            verified_reads: 0,
            intervals: load
                .interval
                .map(|interval| Series::new(interval, load.duration)),
        }
    }

    fn merge(&mut self, other: Tally) {
        let _ = self.latency_ns.add(&other.latency_ns);
        self.reads += other.reads;
        self.writes += other.writes;
        self.flushes += other.flushes;
        self.flush_ns += other.flush_ns;
        self.series.extend(other.series);
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
        self.verified_reads += other.verified_reads;
        if let (Some(mine), Some(theirs)) = (&mut self.intervals, &other.intervals) {
            mine.merge(theirs);
        }
    }

    /// Counts a failed or wrong request started `sent_after` into the run.
    fn error(&mut self, sent_after: Duration, describe: impl FnOnce() -> String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(describe());
        }
        if let Some(series) = &mut self.intervals {
            series.record_error(sent_after);
        }
    }

    /// Hands `board` the intervals that ended before `answered_before` into the run (none:
    /// all of them, the thread is done).
    fn close(&mut self, answered_before: Option<Duration>, board: Option<&Board>) {
        if let (Some(series), Some(board)) = (&mut self.intervals, board) {
            if answered_before.is_none_or(|before| series.closing_due(before)) {
                series.close_until(answered_before, board);
            }
        }
    }
}

/// What a job (a thread in process) knows of its blocks, with `verify`: the version each block
/// it wrote holds, and which have a request in flight.
struct Blocks {
    job: u64,
    jobs: u64,
    /// Blocks of the job: `job + jobs * n` for n below this.
    own: u64,
    versions: std::collections::HashMap<u64, u64>,
    in_flight: std::collections::HashSet<u64>,
    next_version: u64,
}

impl Blocks {
    /// Job `job` of `jobs` over a device of `blocks`.
    fn new(job: u64, jobs: u64, blocks: u64) -> Blocks {
        Blocks {
            job,
            jobs,
            own: (blocks.saturating_sub(job)).div_ceil(jobs),
            versions: Default::default(),
            in_flight: Default::default(),
            next_version: 1,
        }
    }

    /// The job's block that `choice` (a block of the whole device) stands for.
    fn own_block(&self, choice: u64) -> u64 {
        self.job + self.jobs * (choice % self.own.max(1))
    }

    /// Whether `op` may start now (no request of its block in flight); it is then in flight.
    fn start(&mut self, op: Op) -> bool {
        match op {
            Op::Read(block) | Op::Write(block) => self.in_flight.insert(block),
            Op::Flush => true,
        }
    }

    /// Accounts for a finished request: `Ok(data)` (a read's) or the device's error message;
    /// `written` is the version a write wrote. The error says what went wrong.
    fn finish(
        &mut self,
        op: Op,
        written: u64,
        result: Result<&[u8], String>,
    ) -> Result<bool, String> {
        if let Op::Read(block) | Op::Write(block) = op {
            self.in_flight.remove(&block);
        }
        match (op, result) {
            (Op::Write(block), Ok(_)) => {
                self.versions.insert(block, written);
                Ok(false)
            }
            (Op::Write(block), Err(error)) => {
                // It may or may not have reached the device.
                self.versions.remove(&block);
                Err(format!("write of block {block} failed: {error}"))
            }
            (Op::Read(block), Ok(data)) => {
                let Some(&expected) = self.versions.get(&block) else {
                    return Ok(false);
                };
                match self_described_version(data, block) {
                    Ok(found) if found == expected => Ok(true),
                    Ok(found) => Err(format!(
                        "read of block {block} returned version {found} where version {expected} \
                         was written"
                    )),
                    Err(why) => Err(format!(
                        "read of block {block} where version {expected} was written: {why}"
                    )),
                }
            }
            (Op::Read(block), Err(error)) => Err(format!("read of block {block} failed: {error}")),
            (Op::Flush, Ok(_)) => Ok(false),
            (Op::Flush, Err(error)) => Err(format!("flush failed: {error}")),
        }
    }

    /// The data of the job's next write of `block`, and its version.
    fn write_data(&mut self, block: u64) -> (Vec<u8>, u64) {
        let version = self.next_version;
        self.next_version += 1;
        (self_describing_block(block, version, BLOCK), version)
    }
}

/// What one request is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read(u64),
    Write(u64),
    Flush,
}

/// A job's choice of requests: seeded, random blocks, a flush after every N writes.
struct Chooser {
    state: u64,
    blocks: u64,
    read_percent: u32,
    fsync_every: Option<u32>,
    writes_since_flush: u32,
}

impl Chooser {
    fn next(&mut self) -> Op {
        if self
            .fsync_every
            .is_some_and(|every| self.writes_since_flush >= every)
        {
            self.writes_since_flush = 0;
            return Op::Flush;
        }
        // SplitMix64.
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let block = z % self.blocks;
        if (z >> 40) % 100 < u64::from(self.read_percent) {
            Op::Read(block)
        } else {
            self.writes_since_flush += 1;
            Op::Write(block)
        }
    }
}

/// A block's buffer on a page of its own, as fio aligns its I/O buffers (and O_DIRECT needs):
/// a copy into or out of it never splits a cache line.
#[repr(C, align(4096))]
struct AlignedBlock([u8; BLOCK]);

fn record(tally: &mut Tally, op: Op, start: Instant, began: Instant, keep: usize) {
    let latency = start.elapsed();
    let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
    tally.latency_ns.saturating_record(ns);
    if let Some(series) = &mut tally.intervals {
        series.record(start.saturating_duration_since(began), ns);
    }
    match op {
        Op::Read(_) => tally.reads += 1,
        Op::Write(_) => tally.writes += 1,
        Op::Flush => {
            tally.flushes += 1;
            tally.flush_ns += ns;
        }
    }
    if tally.series.len() < keep {
        let at = start.duration_since(began).as_secs_f64() * 1e6;
        tally.series.push((at, ns as f64 / 1e3));
    }
}

/// Runs `load` against `target`.
pub fn run_block(target: &BlockTarget, load: &BlockLoad) -> io::Result<BlockReport> {
    run_block_streaming(target, load, None)
}

/// [`run_block`], also handing `on_interval` each interval (with `load.interval`) as soon as
/// every job is done with it.
pub fn run_block_streaming(
    target: &BlockTarget,
    load: &BlockLoad,
    on_interval: Option<&(dyn Fn(IntervalReport) + Sync)>,
) -> io::Result<BlockReport> {
    let size = match target {
        BlockTarget::InProcess(device) => device.size_bytes(),
        BlockTarget::Nbd { address, export } => connect(address, export)?.negotiated().size_bytes,
    };
    let span = if load.span_bytes == 0 {
        size
    } else {
        load.span_bytes.min(size)
    };
    let blocks = span / BLOCK as u64;
    if blocks == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the device holds no {BLOCK} B block ({size} bytes)"),
        ));
    }
    let before = staging_stats(target);
    let jobs = load.jobs.max(1);
    let iodepth = load.iodepth.max(1);
    let workers = match target {
        BlockTarget::InProcess(_) => (jobs * iodepth).min(MAX_THREADS),
        BlockTarget::Nbd { .. } => jobs,
    };
    if load.verify && blocks < 2 * (jobs * iodepth) as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "verifying needs at least two {BLOCK} B blocks per request in flight: the device \
                 holds {blocks} for {} in flight",
                jobs * iodepth
            ),
        ));
    }
    let emit = |interval: IntervalReport| {
        if let Some(on_interval) = on_interval {
            on_interval(interval);
        }
    };
    let board = match (load.interval, on_interval) {
        (Some(interval), Some(_)) => Some(Board::new(
            interval,
            load.duration,
            workers + usize::from(load.flush_interval.is_some()),
            &emit,
        )),
        _ => None,
    };
    let board = board.as_ref();
    let stop = AtomicBool::new(false);
    let total = Mutex::new(Tally::new(load));
    let first_error = Mutex::new(None::<io::Error>);
    let chooser = |job: usize, lane: usize| Chooser {
        state: load.seed ^ ((job * 1024 + lane + 1) as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
        blocks,
        read_percent: load.read_percent,
        fsync_every: load.fsync_every,
        writes_since_flush: 0,
    };
    let began = Instant::now();
    let keep = load.series / (jobs * iodepth).max(1) + 1;
    std::thread::scope(|scope| {
        let (stop, total, first_error) = (&stop, &total, &first_error);
        let fail = move |error: io::Error| {
            first_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(error);
            stop.store(true, Ordering::SeqCst);
        };
        match target {
            BlockTarget::InProcess(device) => {
                for thread in 0..workers {
                    let mut choose = chooser(thread / iodepth, thread % iodepth);
                    let device = device.as_ref();
                    scope.spawn(move || {
                        let mut tally = Tally::new(load);
                        let mut buffer = Box::new(AlignedBlock([0; BLOCK]));
                        let data = &mut buffer.0;
                        // One request at a time: the thread's blocks are its own.
                        let mut own = load
                            .verify
                            .then(|| Blocks::new(thread as u64, workers as u64, blocks));
                        while !stop.load(Ordering::Relaxed) {
                            let op = match (choose.next(), &own) {
                                (Op::Read(block), Some(own)) => Op::Read(own.own_block(block)),
                                (Op::Write(block), Some(own)) => Op::Write(own.own_block(block)),
                                (op, _) => op,
                            };
                            let mut version = 0;
                            let start = Instant::now();
                            let result = match op {
                                Op::Read(block) => device.read(block * BLOCK as u64, data),
                                Op::Write(block) => {
                                    match &mut own {
                                        Some(own) => {
                                            let written;
                                            (written, version) = own.write_data(block);
                                            data.copy_from_slice(&written);
                                        }
                                        None => data[..8].copy_from_slice(&block.to_le_bytes()),
                                    }
                                    device.write(block * BLOCK as u64, data, false)
                                }
                                Op::Flush => device.flush(),
                            };
                            let sent_after = start.saturating_duration_since(began);
                            let outcome = match &mut own {
                                Some(own) => own.finish(
                                    op,
                                    version,
                                    result.map(|()| &data[..]).map_err(|e| e.to_string()),
                                ),
                                None => result.map(|()| false).map_err(|e| e.to_string()),
                            };
                            record(&mut tally, op, start, began, keep);
                            match outcome {
                                Ok(verified) => tally.verified_reads += u64::from(verified),
                                Err(message) => tally.error(sent_after, || message),
                            }
                            tally.close(Some(began.elapsed()), board);
                        }
                        tally.close(None, board);
                        total.lock().unwrap_or_else(|p| p.into_inner()).merge(tally);
                    });
                }
            }
            BlockTarget::Nbd { address, export } => {
                for job in 0..jobs {
                    let mut choose = chooser(job, 0);
                    let mut own = load
                        .verify
                        .then(|| Blocks::new(job as u64, jobs as u64, blocks));
                    scope.spawn(move || {
                        let mut tally = Tally::new(load);
                        let job = NbdJob {
                            address,
                            export,
                            iodepth,
                            stop,
                            began,
                            keep,
                            board,
                        };
                        let outcome = job.run(&mut choose, own.as_mut(), &mut tally);
                        tally.close(None, board);
                        total.lock().unwrap_or_else(|p| p.into_inner()).merge(tally);
                        if let Err(error) = outcome {
                            fail(error);
                        }
                    });
                }
            }
        }
        if let Some(interval) = load.flush_interval {
            scope.spawn(move || {
                let mut tally = Tally::new(load);
                let mut next = Instant::now() + interval;
                while !stop.load(Ordering::Relaxed) {
                    if Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    next += interval;
                    let start = Instant::now();
                    let result = match target {
                        BlockTarget::InProcess(device) => device.flush(),
                        BlockTarget::Nbd { address, export } => connect(address, export)
                            .and_then(|mut client| client.flush().map_err(io::Error::other)),
                    };
                    record(&mut tally, Op::Flush, start, began, 0);
                    if let Err(error) = result {
                        tally.error(start.saturating_duration_since(began), || {
                            format!("flush failed: {error}")
                        });
                    }
                    tally.close(Some(began.elapsed()), board);
                }
                tally.close(None, board);
                total.lock().unwrap_or_else(|p| p.into_inner()).merge(tally);
            });
        }
        std::thread::sleep(load.duration);
        stop.store(true, Ordering::SeqCst);
    });
    let elapsed = began.elapsed().as_secs_f64();
    if let Some(error) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error);
    }
    let after = staging_stats(target);
    let mut tally = total.into_inner().unwrap_or_else(|p| p.into_inner());
    tally.series.sort_by(|a, b| a.0.total_cmp(&b.0));
    tally.series.truncate(load.series);
    let requests = tally.latency_ns.len();
    let us = |q: f64| tally.latency_ns.value_at_quantile(q) as f64 / 1e3;
    let outcome = |pick: fn(&StagingStats) -> u64| match (&before, &after) {
        (Some(before), Some(after)) => Some(pick(after) - pick(before)),
        _ => None,
    };
    Ok(BlockReport {
        target: match target {
            BlockTarget::InProcess(device) => device.device().describe().to_string(),
            BlockTarget::Nbd { address, export } => format!("nbd://{address}/{export}"),
        },
        jobs,
        iodepth,
        requests,
        reads: tally.reads,
        writes: tally.writes,
        duration_secs: elapsed,
        iops: requests as f64 / elapsed,
        mean_latency_us: tally.latency_ns.mean() / 1e3,
        p50_latency_us: us(0.5),
        p90_latency_us: us(0.9),
        p99_latency_us: us(0.99),
        p999_latency_us: us(0.999),
        p9999_latency_us: us(0.9999),
        max_latency_us: tally.latency_ns.max() as f64 / 1e3,
        write_hits: outcome(|s| s.write_hits),
        write_fills: outcome(|s| s.write_fills),
        bypasses: outcome(|s| s.bypasses),
        stalled_writes: outcome(|s| s.stalled_writes),
        flushes: tally.flushes,
        mean_flush_latency_us: if tally.flushes == 0 {
            0.0
        } else {
            tally.flush_ns as f64 / tally.flushes as f64 / 1e3
        },
        series: tally.series,
        errors: tally.errors,
        first_error: tally.first_error,
        verified_reads: load.verify.then_some(tally.verified_reads),
        intervals: tally
            .intervals
            .as_ref()
            .map_or_else(Vec::new, Series::report),
    })
}

fn staging_stats(target: &BlockTarget) -> Option<StagingStats> {
    match target {
        BlockTarget::InProcess(device) => Some(device.device().stats()),
        BlockTarget::Nbd { .. } => None,
    }
}

/// A client of `export` at `address`, Nagle off (requests are small and latency-bound).
pub(crate) fn connect(address: &str, export: &str) -> io::Result<Client<TcpStream>> {
    let stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    Client::connect(stream, export, false).map_err(io::Error::other)
}

/// One job over NBD: a connection with `iodepth` requests in flight until told to stop.
struct NbdJob<'a> {
    address: &'a str,
    export: &'a str,
    iodepth: usize,
    stop: &'a AtomicBool,
    began: Instant,
    keep: usize,
    board: Option<&'a Board<'a>>,
}

impl NbdJob<'_> {
    /// Runs the job's requests, chosen by `choose` (on its `own` blocks when verifying), into
    /// `tally`; a connection that fails or breaks the protocol ends it.
    fn run(
        &self,
        choose: &mut Chooser,
        mut own: Option<&mut Blocks>,
        tally: &mut Tally,
    ) -> io::Result<()> {
        let mut client = connect(self.address, self.export)?;
        // Cookie -> the request, when it started, and the version a write wrote.
        let mut started: std::collections::HashMap<u64, (Op, Instant, u64)> = Default::default();
        let mut data = vec![0u8; BLOCK];
        loop {
            while !self.stop.load(Ordering::Relaxed) && client.in_flight() < self.iodepth {
                let op = self.next_op(choose, own.as_deref_mut());
                let mut version = 0;
                let cookie = match op {
                    Op::Read(block) => client.submit_read(block * BLOCK as u64, BLOCK as u32),
                    Op::Write(block) => {
                        match own.as_deref_mut() {
                            Some(own) => {
                                let written;
                                (written, version) = own.write_data(block);
                                data.copy_from_slice(&written);
                            }
                            None => data[..8].copy_from_slice(&block.to_le_bytes()),
                        }
                        client.submit_write(block * BLOCK as u64, &data, false)
                    }
                    Op::Flush => client.submit_flush(),
                }
                .map_err(io::Error::other)?;
                started.insert(cookie, (op, Instant::now(), version));
            }
            if client.in_flight() == 0 {
                return Ok(());
            }
            let done = client.complete().map_err(io::Error::other)?;
            let Some((op, start, version)) = started.remove(&done.cookie) else {
                continue;
            };
            debug_assert!(matches!(
                (op, done.command),
                (Op::Read(_), Command::Read)
                    | (Op::Write(_), Command::Write)
                    | (Op::Flush, Command::Flush)
            ));
            record(tally, op, start, self.began, self.keep);
            let result = done
                .result
                .as_deref()
                .map_err(|error| ClientError::Request(error.clone()).to_string());
            let outcome = match own.as_deref_mut() {
                Some(own) => own.finish(op, version, result),
                None => result.map(|_| false),
            };
            match outcome {
                Ok(verified) => tally.verified_reads += u64::from(verified),
                Err(message) => {
                    tally.error(start.saturating_duration_since(self.began), || message)
                }
            }
            if self.board.is_some() {
                let oldest = started.values().map(|&(_, at, _)| at).min();
                let answered_before = oldest.unwrap_or_else(Instant::now);
                tally.close(
                    Some(answered_before.saturating_duration_since(self.began)),
                    self.board,
                );
            }
        }
    }

    /// The next request: `choose`'s, kept to the job's own blocks and to blocks with no request
    /// in flight when verifying.
    fn next_op(&self, choose: &mut Chooser, own: Option<&mut Blocks>) -> Op {
        let Some(own) = own else {
            return choose.next();
        };
        loop {
            let op = match choose.next() {
                Op::Read(block) => Op::Read(own.own_block(block)),
                Op::Write(block) => Op::Write(own.own_block(block)),
                Op::Flush => Op::Flush,
            };
            if own.start(op) {
                return op;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_blockdev::StagedConfig;
    use heterarchy_device::backend::Throttles;
    use heterarchy_engine::staging::StagingScheme;

    /// Caiti's staged device over 16 MiB of RAM, one evictor.
    fn staged_device() -> Arc<StagedExport> {
        let config = StagedConfig {
            staging_size: 1 << 20,
            evictors: Some(1),
            ..StagedConfig::new("pm", "ram:16m".parse().unwrap(), StagingScheme::CAITI)
        };
        Arc::new(StagedExport::open(&config, &Throttles::default()).unwrap())
    }

    #[test]
    fn an_in_process_run_counts_requests_outcomes_and_flushes() {
        let device = staged_device();
        let load = BlockLoad {
            jobs: 1,
            iodepth: 2,
            duration: Duration::from_millis(300),
            read_percent: 20,
            fsync_every: Some(64),
            flush_interval: Some(Duration::from_millis(100)),
            span_bytes: 0,
            seed: 7,
            series: 100,
            verify: false,
            interval: None,
        };
        let report = run_block(&BlockTarget::InProcess(device), &load).unwrap();
        assert!(report.requests > 100, "{report:?}");
        assert_eq!(
            report.requests,
            report.reads + report.writes + report.flushes
        );
        let outcomes =
            report.write_hits.unwrap() + report.write_fills.unwrap() + report.bypasses.unwrap();
        // Every write is one of the three outcomes (stalled ones end as one too).
        assert!(
            outcomes >= report.writes,
            "{outcomes} outcomes, {} writes",
            report.writes
        );
        assert!(report.flushes >= report.writes / 64, "{report:?}");
        assert!(report.p50_latency_us <= report.p9999_latency_us);
        assert_eq!(report.series.len(), 100);
        assert!(report.series.windows(2).all(|pair| pair[0].0 <= pair[1].0));
    }

    #[test]
    fn targets_parse_or_say_what_was_expected() {
        assert!(matches!(
            BlockTarget::nbd("nbd://127.0.0.1:10809/pm0").unwrap(),
            BlockTarget::Nbd { ref address, ref export } if address == "127.0.0.1:10809" && export == "pm0"
        ));
        assert!(BlockTarget::nbd("127.0.0.1:10809")
            .err()
            .unwrap()
            .to_string()
            .contains("nbd://HOST:PORT/EXPORT"));
        assert!(BlockTarget::nbd("nbd://localhost/x").is_err());
    }

    #[test]
    fn verified_blocks_catch_stale_misplaced_and_torn_reads() {
        let mut own = Blocks::new(1, 2, 100);
        // Job 1 of 2 keeps to odd blocks.
        assert_eq!(own.own_block(0), 1);
        assert_eq!(own.own_block(7), 15);
        let (first, v1) = own.write_data(15);
        assert!(own.start(Op::Write(15)));
        assert!(!own.start(Op::Read(15)), "one request of a block in flight");
        assert_eq!(own.finish(Op::Write(15), v1, Ok(&[])), Ok(false));
        let (second, v2) = own.write_data(15);
        own.start(Op::Write(15));
        own.finish(Op::Write(15), v2, Ok(&[])).unwrap();
        own.start(Op::Read(15));
        assert_eq!(own.finish(Op::Read(15), 0, Ok(&second)), Ok(true));
        let mut torn = second.clone();
        torn[100] ^= 1;
        let misplaced = self_describing_block(17, v2, BLOCK);
        for (data, expected) in [
            (&first, "returned version 1 where version 2"),
            (&misplaced, "holds block 17"),
            (&torn, "torn"),
        ] {
            own.start(Op::Read(15));
            let error = own
                .finish(Op::Read(15), 0, Ok(data))
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error}");
        }
        // A block the run never wrote holds whatever it held.
        own.start(Op::Read(13));
        assert_eq!(own.finish(Op::Read(13), 0, Ok(&[7u8; BLOCK])), Ok(false));
        // A failed write leaves its block unknown, and is an error.
        own.start(Op::Write(15));
        assert!(own.finish(Op::Write(15), 3, Err("EIO".into())).is_err());
        own.start(Op::Read(15));
        assert_eq!(own.finish(Op::Read(15), 0, Ok(&first)), Ok(false));
    }

    #[test]
    fn a_verified_in_process_run_reads_back_what_it_wrote_and_reports_each_interval() {
        let device = staged_device();
        let load = BlockLoad {
            jobs: 2,
            iodepth: 2,
            duration: Duration::from_millis(600),
            read_percent: 50,
            fsync_every: Some(32),
            flush_interval: None,
            span_bytes: 256 * BLOCK as u64,
            seed: 3,
            series: 0,
            verify: true,
            interval: Some(Duration::from_millis(200)),
        };
        let streamed = Mutex::new(Vec::new());
        let emit = |interval: IntervalReport| streamed.lock().unwrap().push(interval);
        let report =
            run_block_streaming(&BlockTarget::InProcess(device), &load, Some(&emit)).unwrap();
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        let verified = report.verified_reads.unwrap();
        // 256 blocks, so most reads after the first few find a block the run wrote.
        assert!(
            verified > report.reads / 4,
            "{verified} of {} reads",
            report.reads
        );
        let streamed = streamed.into_inner().unwrap();
        assert_eq!(streamed.len(), 3);
        assert_eq!(
            streamed.iter().map(|i| i.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(
            streamed.iter().map(|i| i.ops).sum::<u64>(),
            report.intervals.iter().map(|i| i.ops).sum::<u64>()
        );
        assert!(streamed.iter().all(|interval| interval.ops > 0));
    }
}
