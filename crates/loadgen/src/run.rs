//! A run: open the connections, prefill, then load the server from one event loop per thread
//! over a shared measured window, and merge what the threads measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::thread;
use std::time::Instant;

use heterarchy_trace::generate::mix64;
use mio::{Events, Poll, Token};

use crate::config::{Config, ServerAddr};
use crate::connection::Connection;
use crate::error::LoadError;
use crate::interval::{Board, IntervalReport};
use crate::report::{Report, Tally};
use crate::verify::Oracle;
use crate::workload::{Load, Prefill, Status, Window, Wire, Workload};

/// Set bytes in flight per connection during the prefill: deep enough to keep the server busy,
/// shallow enough that large values do not pile up in socket buffers.
const PREFILL_BYTES_IN_FLIGHT: usize = 256 << 10;
/// Most sets in flight per connection during the prefill.
const PREFILL_DEPTH_MAX: usize = 64;
/// One read buffer per thread, shared by its connections; the parser keeps each connection's
/// place between reads.
const READ_BUFFER_BYTES: usize = 64 << 10;
const EVENTS_PER_POLL: usize = 1024;

/// What a run is doing, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Setting every key once.
    Prefill,
    /// The warm-up and then the measured time.
    Load,
}

/// Runs `config` against its server and reports what the measured time saw. `on_phase` hears
/// when each phase begins.
pub fn run(config: &Config, on_phase: impl Fn(Phase) + Sync) -> Result<Report, LoadError> {
    let mut reports = run_together(std::slice::from_ref(config), on_phase)?;
    Ok(reports.pop().expect("one report per config"))
}

/// Runs every config at once, each against its own server with its own mix, sizes, threads
/// and rate (tenants side by side, seed 000 §5.3): each connects and prefills, then all load
/// over one shared measured time, so that their series line up. One report per config, in
/// order; the first error of any ends the run for all.
pub fn run_together(
    configs: &[Config],
    on_phase: impl Fn(Phase) + Sync,
) -> Result<Vec<Report>, LoadError> {
    run_streaming(configs, on_phase, None)
}

/// [`run_together`], also handing `on_interval` each interval of each config's series (with the
/// config's position) as soon as every thread of the config is done with it: a long run shows
/// its figures as it goes.
pub fn run_streaming(
    configs: &[Config],
    on_phase: impl Fn(Phase) + Sync,
    on_interval: Option<&(dyn Fn(usize, IntervalReport) + Sync)>,
) -> Result<Vec<Report>, LoadError> {
    for config in configs {
        config.validate()?;
    }
    if configs.iter().any(|config| config.prefill) {
        on_phase(Phase::Prefill);
    }
    let ready = Barrier::new(configs.len());
    let failed = AtomicBool::new(false);
    let start = OnceLock::new();
    let target = |(position, config): (usize, &Config)| -> Result<Report, LoadError> {
        let oracle = config
            .verify
            .then(|| Mutex::new(Oracle::new(config.keys, config.value_bytes)));
        let emit = |interval: IntervalReport| {
            if let Some(on_interval) = on_interval {
                on_interval(position, interval);
            }
        };
        let board = match (config.interval, on_interval) {
            (Some(interval), Some(_)) => {
                Some(Board::new(interval, config.duration, config.threads, &emit))
            }
            _ => None,
        };
        let prepared = prepare(config, oracle.as_ref());
        if prepared.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        // Everyone waits for everyone, so that a target that failed releases the others.
        ready.wait();
        let (connections, wire) = prepared?;
        if failed.load(Ordering::Relaxed) {
            return Err(LoadError::AnotherTargetFailed);
        }
        let start = *start.get_or_init(|| {
            on_phase(Phase::Load);
            Instant::now()
        });
        let mut report = load(
            config,
            connections,
            &wire,
            start,
            oracle.as_ref(),
            board.as_ref(),
        )?;
        if let Some(oracle) = &oracle {
            report.verified = Some(oracle.lock().unwrap_or_else(|p| p.into_inner()).verified);
        }
        Ok(report)
    };
    let results = on_threads(
        configs.iter().enumerate().collect(),
        "loadgen-target",
        |_, config| target(config),
    );
    // The error that caused the others', not "another target failed first".
    if let Some(position) = results.iter().position(|result| {
        result
            .as_ref()
            .is_err_and(|error| !matches!(error, LoadError::AnotherTargetFailed))
    }) {
        return Err(results
            .into_iter()
            .nth(position)
            .expect("found")
            .expect_err("an error"));
    }
    results.into_iter().collect()
}

/// Opens `config`'s connections and prefills its keys (with a verified run's `oracle`).
fn prepare(
    config: &Config,
    oracle: Option<&Mutex<Oracle>>,
) -> Result<(Vec<Connection>, Wire), LoadError> {
    let resolved = config.server.resolve()?;
    let mut connections = (0..config.connections)
        .map(|number| Connection::open(&config.server, &resolved, number, config.verify))
        .collect::<Result<Vec<_>, _>>()?;
    let wire = Wire::new(config);
    if config.prefill {
        let depth = (PREFILL_BYTES_IN_FLIGHT / wire.set_bytes()).clamp(1, PREFILL_DEPTH_MAX);
        let mut prefill = Prefill::new(&wire, &config.server, config.keys, oracle);
        drive(&config.server, &mut connections, &mut prefill, depth)?;
    }
    Ok((connections, wire))
}

/// Loads `config`'s server over its connections from `start`: the warm-up, then the measured
/// time; one event loop per thread, their tallies merged. A verified run checks replies
/// against `oracle`; with a `board`, the threads hand it each interval once done with it.
fn load(
    config: &Config,
    connections: Vec<Connection>,
    wire: &Wire,
    start: Instant,
    oracle: Option<&Mutex<Oracle>>,
    board: Option<&Board>,
) -> Result<Report, LoadError> {
    let measure_from = start + config.warmup;
    let window = Window {
        measure_from,
        measure_until: measure_from + config.duration,
    };
    let mut groups: Vec<Vec<Connection>> = (0..config.threads).map(|_| Vec::new()).collect();
    for (number, connection) in connections.into_iter().enumerate() {
        groups[number % config.threads].push(connection);
    }
    let load_group = |thread: usize, mut group: Vec<Connection>| {
        let seed = mix64(config.seed.wrapping_add(thread as u64));
        let share = group.len() as f64 / config.connections as f64;
        let mut load = Load::new(config, wire, window, seed, share, oracle, board);
        drive(&config.server, &mut group, &mut load, config.pipeline)?;
        Ok(load.into_tally())
    };
    let tallies = on_threads(groups, "loadgen", load_group);
    let mut total = Tally::new(config.interval, config.duration);
    for tally in tallies {
        total.merge(tally?);
    }
    Ok(total.report(config.duration, config.connections, config.pipeline))
}

/// `work` on each item, each on a thread of its own named `name-INDEX` but the first, which
/// runs on this one (so that one item spawns nothing); the results in order.
fn on_threads<I: Send, R: Send>(
    items: Vec<I>,
    name: &str,
    work: impl Fn(usize, I) -> Result<R, LoadError> + Sync,
) -> Vec<Result<R, LoadError>> {
    thread::scope(|scope| {
        let work = &work;
        let mut items = items.into_iter().enumerate();
        let Some((_, first)) = items.next() else {
            return Vec::new();
        };
        let spawned: Vec<_> = items
            .map(|(index, item)| {
                thread::Builder::new()
                    .name(format!("{name}-{index}"))
                    .spawn_scoped(scope, move || work(index, item))
            })
            .collect();
        let mut results = vec![work(0, first)];
        for handle in spawned {
            results.push(match handle {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(error) => Err(LoadError::EventLoop(error)),
            });
        }
        results
    })
}

/// Runs `workload` over `connections` with at most `depth` requests outstanding on each, until
/// it is done; the connections are free for another event loop afterwards.
fn drive(
    server: &ServerAddr,
    connections: &mut [Connection],
    workload: &mut impl Workload,
    depth: usize,
) -> Result<(), LoadError> {
    let mut poll = Poll::new().map_err(LoadError::EventLoop)?;
    for (index, connection) in connections.iter_mut().enumerate() {
        connection
            .register(poll.registry(), Token(index))
            .map_err(LoadError::EventLoop)?;
    }
    let outcome = event_loop(server, &mut poll, connections, workload, depth);
    for connection in connections.iter_mut() {
        connection
            .deregister(poll.registry())
            .map_err(LoadError::EventLoop)?;
    }
    outcome
}

fn event_loop(
    server: &ServerAddr,
    poll: &mut Poll,
    connections: &mut [Connection],
    workload: &mut impl Workload,
    depth: usize,
) -> Result<(), LoadError> {
    let mut events = Events::with_capacity(EVENTS_PER_POLL);
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    // Every phase starts with nothing outstanding: a phase is done only once all is answered.
    let mut outstanding = 0;
    for connection in connections.iter_mut() {
        outstanding += connection.send(workload, depth, server)?;
    }
    loop {
        let wake_within = match workload.status(Instant::now(), outstanding)? {
            Status::Done => return Ok(()),
            Status::Running { wake_within } => wake_within,
        };
        if let Err(error) = poll.poll(&mut events, Some(wake_within)) {
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LoadError::EventLoop(error));
        }
        for event in events.iter() {
            let connection = &mut connections[event.token().0];
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                outstanding -= connection.receive(&mut buffer, workload, server)?;
            }
            outstanding += connection.send(workload, depth, server)?;
        }
        if workload.paced() {
            // Requests fall due with the clock, not only with replies.
            for connection in connections.iter_mut() {
                outstanding += connection.send(workload, depth, server)?;
            }
        }
        let now = Instant::now();
        if workload.closing_due(now) {
            let oldest = connections.iter().filter_map(Connection::oldest_sent).min();
            workload.close_intervals(now, oldest);
        }
    }
}
