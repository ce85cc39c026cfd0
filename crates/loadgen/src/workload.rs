//! What each phase of a run sends, how it accounts for the replies, and when it is over: the
//! prefill sets every key once; the load mixes gets, sets and deletes until the measured time
//! ends, and counts only the requests sent during it (with `--verify`, every reply is also
//! checked against the [`Oracle`], whenever it was sent).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::{Config, ServerAddr};
use crate::connection::{Kind, Pending};
use crate::error::LoadError;
use crate::interval::Board;
use crate::keys::{KeyChooser, KeySpace};
use crate::reply::Reply;
use crate::report::Tally;
use crate::schedule::RateSchedule;
use crate::verify::{append_value, Oracle};

/// How long the prefill may go without any reply before the server counts as stalled.
const PREFILL_STALL: Duration = Duration::from_secs(10);
/// How long replies still owed when the measured time ends may take to arrive.
const DRAIN: Duration = Duration::from_secs(2);
/// The longest an event loop sleeps while it streams a series.
const LIVE_TICK: Duration = Duration::from_millis(100);
/// How far behind its rate a paced load may fall and still catch up: longer than a thread of
/// a loaded 2-core machine waits for a core (tens of milliseconds; a full test run's neighbours
/// have held one for over 50 ms, costing a 10,000/s target 5% of a second's requests), so that
/// such a wait costs no requests, and short enough that a saturated server does not save up a
/// long burst.
const CATCH_UP: Duration = Duration::from_millis(100);

/// Whether a phase goes on.
pub(crate) enum Status {
    /// Call again within this long, even if nothing happens.
    Running {
        wake_within: Duration,
    },
    Done,
}

/// A request a workload composed: its operation, key, and the version a verified set writes.
pub(crate) type Composed = (Kind, u64, u64);

/// One phase of a run, as the event loop drives it.
pub(crate) trait Workload {
    /// Appends the next request to `out` and says what it is, or returns `None` when no more
    /// requests should be sent now.
    fn next(&mut self, out: &mut Vec<u8>) -> Option<Composed>;

    /// Accounts for the reply to `request`, parsed at `now`.
    fn complete(&mut self, request: &Pending, reply: Reply, now: Instant) -> Result<(), LoadError>;

    /// Whether the phase goes on at `now`, with `outstanding` requests unanswered.
    fn status(&mut self, now: Instant, outstanding: usize) -> Result<Status, LoadError>;

    /// Whether requests may be due with no reply arriving (a paced load): then every
    /// connection is offered requests each time the loop wakes.
    fn paced(&self) -> bool {
        false
    }

    /// Whether an interval of a streamed series has ended at `now` and waits to be closed.
    fn closing_due(&self, _now: Instant) -> bool {
        false
    }

    /// Closes the intervals of a streamed series that ended before the oldest request still
    /// unanswered was sent (`oldest_outstanding`; none: before `now`).
    fn close_intervals(&mut self, _now: Instant, _oldest_outstanding: Option<Instant>) {}
}

/// The oracle of a verified run, locked.
fn lock(oracle: &Mutex<Oracle>) -> MutexGuard<'_, Oracle> {
    oracle
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The bytes of requests: `get <key>\r\n`, `delete <key>\r\n` and
/// `set <key> 0 0 <bytes>\r\n<value>\r\n`, with everything but the key composed once (and
/// the value of a verified set, which names its key and version).
pub(crate) struct Wire {
    keyspace: KeySpace,
    value_bytes: usize,
    /// ` 0 0 <bytes>\r\n`: no flags, no expiry.
    set_header_tail: Vec<u8>,
    /// The value of every set, with its `\r\n`.
    value_line: Vec<u8>,
}

impl Wire {
    /// The requests of `config`'s keys and values.
    pub(crate) fn new(config: &Config) -> Wire {
        let mut value_line: Vec<u8> = (b'a'..=b'z').cycle().take(config.value_bytes).collect();
        value_line.extend_from_slice(b"\r\n");
        Wire {
            // The keys of --miss-ratio follow the keys the run writes.
            keyspace: KeySpace::new(config.keyspace(), config.key_bytes),
            value_bytes: config.value_bytes,
            set_header_tail: format!(" 0 0 {}\r\n", config.value_bytes).into_bytes(),
            value_line,
        }
    }

    fn append_get(&self, key: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(b"get ");
        self.keyspace.append(key, out);
        out.extend_from_slice(b"\r\n");
    }

    fn append_delete(&self, key: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(b"delete ");
        self.keyspace.append(key, out);
        out.extend_from_slice(b"\r\n");
    }

    /// A set of `key`: the run's one value, or with `verified`, version `version` of the key.
    fn append_set(&self, key: u64, verified: bool, version: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(b"set ");
        self.keyspace.append(key, out);
        out.extend_from_slice(&self.set_header_tail);
        if verified {
            append_value(key, version, self.value_bytes, out);
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(&self.value_line);
        }
    }

    /// The length of one set request.
    pub(crate) fn set_bytes(&self) -> usize {
        b"set ".len()
            + self.keyspace.key_bytes()
            + self.set_header_tail.len()
            + self.value_line.len()
    }
}

/// Sets every key once, in order, over all connections; every reply must be `STORED`.
pub(crate) struct Prefill<'a> {
    wire: &'a Wire,
    server: &'a ServerAddr,
    keys: u64,
    next_key: u64,
    last_reply: Instant,
    oracle: Option<&'a Mutex<Oracle>>,
}

impl<'a> Prefill<'a> {
    /// The prefill of `keys` keys, each a version of its own for a verified run's `oracle`.
    pub(crate) fn new(
        wire: &'a Wire,
        server: &'a ServerAddr,
        keys: u64,
        oracle: Option<&'a Mutex<Oracle>>,
    ) -> Prefill<'a> {
        Prefill {
            wire,
            server,
            keys,
            next_key: 0,
            last_reply: Instant::now(),
            oracle,
        }
    }
}

impl Workload for Prefill<'_> {
    fn next(&mut self, out: &mut Vec<u8>) -> Option<Composed> {
        if self.next_key == self.keys {
            return None;
        }
        let key = self.next_key;
        let version = self.oracle.map_or(0, |oracle| lock(oracle).next_version());
        self.wire
            .append_set(key, self.oracle.is_some(), version, out);
        self.next_key += 1;
        Some((Kind::Set, key, version))
    }

    fn complete(&mut self, request: &Pending, reply: Reply, now: Instant) -> Result<(), LoadError> {
        self.last_reply = now;
        if let Some(oracle) = self.oracle {
            // Nothing else is outstanding on the key, so a STORED set is the state; anything
            // else fails the prefill below.
            let _ = lock(oracle).set_done(request.key, request.version, &reply);
        }
        if reply == Reply::Stored {
            return Ok(());
        }
        Err(LoadError::Prefill {
            server: self.server.to_string(),
            key: request.key,
            reply: describe(&reply),
        })
    }

    fn status(&mut self, now: Instant, outstanding: usize) -> Result<Status, LoadError> {
        if self.next_key == self.keys && outstanding == 0 {
            return Ok(Status::Done);
        }
        let stall = Stall {
            server: self.server,
            limit: PREFILL_STALL,
            phase: "prefill",
        };
        stall.running_until(self.last_reply + PREFILL_STALL, now, outstanding)
    }
}

/// When the measured time begins and ends, the same for every thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) measure_from: Instant,
    pub(crate) measure_until: Instant,
}

impl Window {
    fn measures(&self, sent_at: Instant) -> bool {
        self.measure_from <= sent_at && sent_at < self.measure_until
    }
}

/// Gets, deletes and sets in `get_ratio` and `delete_ratio` proportion on keys drawn from the
/// distribution (a `miss_ratio` of the gets on keys the run never writes), until the measured
/// time ends; then no new requests, and the outstanding ones drain.
pub(crate) struct Load<'a> {
    wire: &'a Wire,
    server: &'a ServerAddr,
    chooser: KeyChooser,
    keys: u64,
    get_ratio: f64,
    delete_ratio: f64,
    miss_ratio: f64,
    value_bytes: u64,
    window: Window,
    sending: bool,
    tally: Tally,
    /// With a rate: its schedule, this loop's share of it, and when the next request is due.
    pacing: Option<(&'a RateSchedule, f64, Instant)>,
    oracle: Option<&'a Mutex<Oracle>>,
    /// Where closed intervals go while the run goes on.
    board: Option<&'a Board<'a>>,
}

impl<'a> Load<'a> {
    /// The load of `config` over `window`, its random choices from the stream of `seed`; with
    /// a rate, this loop's share of it is `share` (its part of the connections).
    /// A verified run checks every reply against `oracle`; with a `board`, each interval of
    /// the series goes to it once closed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        config: &'a Config,
        wire: &'a Wire,
        window: Window,
        seed: u64,
        share: f64,
        oracle: Option<&'a Mutex<Oracle>>,
        board: Option<&'a Board<'a>>,
    ) -> Load<'a> {
        Load {
            wire,
            server: &config.server,
            chooser: KeyChooser::new(config.keys, config.distribution, seed),
            keys: config.keys,
            get_ratio: config.get_ratio,
            delete_ratio: config.delete_ratio,
            miss_ratio: config.miss_ratio,
            value_bytes: config.value_bytes as u64,
            window,
            sending: true,
            tally: Tally::new(config.interval, config.duration),
            pacing: config
                .rate
                .as_ref()
                .map(|schedule| (schedule, share, Instant::now())),
            oracle,
            board,
        }
    }

    /// How long after the start of the measured time `at` is (nothing before it).
    fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.window.measure_from)
    }

    /// Checks a verified run's reply against the oracle, counting what is wrong.
    fn verify(&mut self, request: &Pending, reply: &Reply) {
        let Some(oracle) = self.oracle else {
            return;
        };
        let mut oracle = lock(oracle);
        let outcome = match request.kind {
            Kind::Get if request.key >= self.keys => {
                oracle.get_done(request.key - self.keys, false, reply)
            }
            Kind::Get => oracle.get_done(request.key, true, reply),
            Kind::Set => oracle.set_done(request.key, request.version, reply),
            Kind::Delete => oracle.delete_done(request.key, reply),
        };
        drop(oracle);
        if let Err(message) = outcome {
            let sent_after = self.since_start(request.sent_at);
            self.tally.record_error(sent_after, || message);
        }
    }

    /// What was measured.
    pub(crate) fn into_tally(self) -> Tally {
        self.tally
    }
}

impl Workload for Load<'_> {
    fn next(&mut self, out: &mut Vec<u8>) -> Option<Composed> {
        if !self.sending {
            return None;
        }
        if let Some((schedule, share, due)) = &mut self.pacing {
            let now = Instant::now();
            if now < *due {
                return None;
            }
            let elapsed = now.saturating_duration_since(self.window.measure_from);
            let rate = schedule.rate_at(elapsed) * *share;
            let gap = Duration::from_secs_f64(1.0 / rate.max(1e-3));
            // Due times march on from the last, so that a loop woken late (the poll's timeout
            // is in milliseconds) catches up, but by at most `CATCH_UP`: a stretch with every
            // connection busy saves up no larger burst.
            *due = (*due).max(now - CATCH_UP) + gap;
        }
        let chooser = &mut self.chooser;
        let key = match self.oracle {
            // No two requests of one key outstanding, so that each reply has one right answer.
            Some(oracle) => lock(oracle).claim(|| chooser.next_key()),
            None => chooser.next_key(),
        };
        let unit = self.chooser.unit();
        if unit < self.get_ratio {
            if self.miss_ratio > 0.0 && self.chooser.unit() < self.miss_ratio {
                if let Some(oracle) = self.oracle {
                    lock(oracle).release(key);
                }
                // Its twin among the keys the run never writes.
                let never_set = self.keys + key;
                self.wire.append_get(never_set, out);
                return Some((Kind::Get, never_set, 0));
            }
            self.wire.append_get(key, out);
            Some((Kind::Get, key, 0))
        } else if unit < self.get_ratio + self.delete_ratio {
            self.wire.append_delete(key, out);
            Some((Kind::Delete, key, 0))
        } else {
            let version = self.oracle.map_or(0, |oracle| lock(oracle).next_version());
            self.wire
                .append_set(key, self.oracle.is_some(), version, out);
            Some((Kind::Set, key, version))
        }
    }

    fn complete(&mut self, request: &Pending, reply: Reply, now: Instant) -> Result<(), LoadError> {
        // Every reply of a verified run is checked, measured or not, so that the oracle's
        // state stays exact.
        self.verify(request, &reply);
        if !self.window.measures(request.sent_at) {
            return Ok(());
        }
        let sent_after = self.since_start(request.sent_at);
        let verified = self.oracle.is_some();
        let tally = &mut self.tally;
        tally.record_latency(sent_after, now.saturating_duration_since(request.sent_at));
        match request.kind {
            Kind::Get => tally.gets += 1,
            Kind::Set => tally.sets += 1,
            Kind::Delete => tally.deletes += 1,
        }
        match (request.kind, reply) {
            (Kind::Get, Reply::Values { count: 0, .. }) => tally.get_misses += 1,
            (
                Kind::Get,
                Reply::Values {
                    count: 1,
                    first_bytes,
                    ..
                },
            ) if first_bytes == self.value_bytes => tally.get_hits += 1,
            // The oracle has counted what a verified run got wrong.
            _ if verified => {}
            (
                Kind::Get,
                Reply::Values {
                    count, first_bytes, ..
                },
            ) => tally.record_error(sent_after, || {
                format!(
                    "get of key #{} returned {count} value(s), the first of {first_bytes} bytes, \
                     where sets write one of {} bytes",
                    request.key, self.value_bytes
                )
            }),
            (Kind::Set, Reply::Stored) => {}
            (Kind::Delete, Reply::Line(line)) if line == "DELETED" || line == "NOT_FOUND" => {}
            (_, reply) => tally.record_error(sent_after, || describe(&reply)),
        }
        Ok(())
    }

    fn status(&mut self, now: Instant, outstanding: usize) -> Result<Status, LoadError> {
        if now < self.window.measure_until {
            let mut until = match self.pacing {
                Some((_, _, due)) => due.min(self.window.measure_until),
                None => self.window.measure_until,
            };
            if self.board.is_some() {
                // Often enough that an interval goes out soon after it ends.
                until = until.min(now + LIVE_TICK);
            }
            return Ok(Status::Running {
                wake_within: until.saturating_duration_since(now),
            });
        }
        self.sending = false;
        if outstanding == 0 {
            if let Some(board) = self.board {
                self.tally.close_until(None, board);
            }
            return Ok(Status::Done);
        }
        let stall = Stall {
            server: self.server,
            limit: DRAIN,
            phase: "after the measured time",
        };
        stall.running_until(self.window.measure_until + DRAIN, now, outstanding)
    }

    fn paced(&self) -> bool {
        self.pacing.is_some()
    }

    fn closing_due(&self, now: Instant) -> bool {
        self.board.is_some() && self.tally.closing_due(self.since_start(now))
    }

    fn close_intervals(&mut self, now: Instant, oldest_outstanding: Option<Instant>) {
        if let Some(board) = self.board {
            let answered_before = self.since_start(oldest_outstanding.unwrap_or(now).min(now));
            self.tally.close_until(Some(answered_before), board);
        }
    }
}

/// A wait for replies that may last `limit`: past it the server counts as stalled.
struct Stall<'a> {
    server: &'a ServerAddr,
    limit: Duration,
    phase: &'static str,
}

impl Stall<'_> {
    /// Still running until `deadline`, stalled from then on.
    fn running_until(
        &self,
        deadline: Instant,
        now: Instant,
        outstanding: usize,
    ) -> Result<Status, LoadError> {
        if now >= deadline {
            return Err(LoadError::Stalled {
                server: self.server.to_string(),
                seconds: self.limit.as_secs(),
                outstanding,
                phase: self.phase,
            });
        }
        Ok(Status::Running {
            wake_within: deadline - now,
        })
    }
}

/// A reply as the report names it: its line, or what a values reply held.
fn describe(reply: &Reply) -> String {
    match reply {
        Reply::Stored => "STORED".to_string(),
        Reply::Values { count, .. } => format!("{count} VALUE block(s) and END"),
        Reply::Line(line) => line.clone(),
    }
}
