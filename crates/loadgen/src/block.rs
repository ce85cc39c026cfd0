//! `loadgen block` (issue 17, item 6): random 4 KiB writes and reads against a block device —
//! in this process (a staged PM device, whose write outcomes it also counts) or over NBD
//! through the project's NBD client — as fio drives a device: jobs, each with `iodepth`
//! requests in flight, a flush after every N writes of a job (`fsync=N`) or on a timer (the
//! file system's journal commit). It reports throughput, latency percentiles, the three write
//! outcomes (seed 001 Fig 6c) and a latency series for scatter plots (Fig 5b).
//!
//! In process, a job's requests in flight are threads of their own (a block call blocks), at
//! most [`MAX_THREADS`] in all; over NBD a job is one connection with `iodepth` requests
//! pipelined.

use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use heterarchy_blockdev::{BlockDevice, StagedExport};
use heterarchy_engine::staging::StagingStats;
use heterarchy_nbd::{Client, Command};
use serde::Serialize;

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
    pub fn nbd(url: &str) -> Result<BlockTarget, String> {
        let (address, export) = parse_nbd_url(url)?;
        Ok(BlockTarget::Nbd { address, export })
    }
}

/// The address and export of `nbd://HOST:PORT/EXPORT` (the export may be empty: the server's
/// default).
pub(crate) fn parse_nbd_url(url: &str) -> Result<(String, String), String> {
    let bad = || format!("bad target \"{url}\": expected nbd://HOST:PORT/EXPORT");
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
}

/// One thread's tallies.
struct Tally {
    latency_ns: Histogram<u64>,
    reads: u64,
    writes: u64,
    flushes: u64,
    flush_ns: u64,
    series: Vec<(f64, f64)>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latency_ns: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid bounds"),
            reads: 0,
            writes: 0,
            flushes: 0,
            flush_ns: 0,
            series: Vec::new(),
        }
    }

    fn merge(&mut self, other: Tally) {
        let _ = self.latency_ns.add(&other.latency_ns);
        self.reads += other.reads;
        self.writes += other.writes;
        self.flushes += other.flushes;
        self.flush_ns += other.flush_ns;
        self.series.extend(other.series);
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
    let stop = AtomicBool::new(false);
    let total = Mutex::new(Tally::new());
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
                let threads = (jobs * iodepth).min(MAX_THREADS);
                for thread in 0..threads {
                    let mut choose = chooser(thread / iodepth, thread % iodepth);
                    let device = device.as_ref();
                    scope.spawn(move || {
                        let mut tally = Tally::new();
                        let mut buffer = Box::new(AlignedBlock([0; BLOCK]));
                        let data = &mut buffer.0;
                        while !stop.load(Ordering::Relaxed) {
                            let op = choose.next();
                            let start = Instant::now();
                            let result = match op {
                                Op::Read(block) => device.read(block * BLOCK as u64, data),
                                Op::Write(block) => {
                                    data[..8].copy_from_slice(&block.to_le_bytes());
                                    device.write(block * BLOCK as u64, data, false)
                                }
                                Op::Flush => device.flush(),
                            };
                            if let Err(error) = result {
                                return fail(error);
                            }
                            record(&mut tally, op, start, began, keep);
                        }
                        total.lock().unwrap_or_else(|p| p.into_inner()).merge(tally);
                    });
                }
            }
            BlockTarget::Nbd { address, export } => {
                for job in 0..jobs {
                    let mut choose = chooser(job, 0);
                    scope.spawn(move || {
                        if let Err(error) = nbd_job(
                            address,
                            export,
                            iodepth,
                            &mut choose,
                            stop,
                            total,
                            began,
                            keep,
                        ) {
                            fail(error);
                        }
                    });
                }
            }
        }
        if let Some(interval) = load.flush_interval {
            scope.spawn(move || {
                let mut tally = Tally::new();
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
                    if let Err(error) = result {
                        return fail(error);
                    }
                    record(&mut tally, Op::Flush, start, began, 0);
                }
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
#[allow(clippy::too_many_arguments)]
fn nbd_job(
    address: &str,
    export: &str,
    iodepth: usize,
    choose: &mut Chooser,
    stop: &AtomicBool,
    total: &Mutex<Tally>,
    began: Instant,
    keep: usize,
) -> io::Result<()> {
    let mut client = connect(address, export)?;
    let mut tally = Tally::new();
    let mut started: std::collections::HashMap<u64, (Op, Instant)> = Default::default();
    let mut data = vec![0u8; BLOCK];
    loop {
        while !stop.load(Ordering::Relaxed) && client.in_flight() < iodepth {
            let op = choose.next();
            let cookie = match op {
                Op::Read(block) => client.submit_read(block * BLOCK as u64, BLOCK as u32),
                Op::Write(block) => {
                    data[..8].copy_from_slice(&block.to_le_bytes());
                    client.submit_write(block * BLOCK as u64, &data, false)
                }
                Op::Flush => client.submit_flush(),
            }
            .map_err(io::Error::other)?;
            started.insert(cookie, (op, Instant::now()));
        }
        if client.in_flight() == 0 {
            break;
        }
        let done = client.complete().map_err(io::Error::other)?;
        if let Err(error) = done.result {
            return Err(io::Error::other(format!(
                "{:?} failed: {error}",
                done.command
            )));
        }
        if let Some((op, start)) = started.remove(&done.cookie) {
            debug_assert!(matches!(
                (op, done.command),
                (Op::Read(_), Command::Read)
                    | (Op::Write(_), Command::Write)
                    | (Op::Flush, Command::Flush)
            ));
            record(&mut tally, op, start, began, keep);
        }
    }
    total.lock().unwrap_or_else(|p| p.into_inner()).merge(tally);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_blockdev::StagedConfig;
    use heterarchy_device::backend::Throttles;
    use heterarchy_engine::staging::StagingScheme;

    #[test]
    fn an_in_process_run_counts_requests_outcomes_and_flushes() {
        let config = StagedConfig {
            staging_size: 1 << 20,
            evictors: Some(1),
            ..StagedConfig::new("pm", "ram:16m".parse().unwrap(), StagingScheme::CAITI)
        };
        let device = Arc::new(StagedExport::open(&config, &Throttles::default()).unwrap());
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
            .contains("nbd://HOST:PORT/EXPORT"));
        assert!(BlockTarget::nbd("nbd://localhost/x").is_err());
    }
}
