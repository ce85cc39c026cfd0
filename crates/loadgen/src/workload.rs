//! What each phase of a run sends, how it accounts for the replies, and when it is over: the
//! prefill sets every key once; the load mixes gets and sets until the measured time ends, and
//! counts only the requests sent during it.

use std::time::{Duration, Instant};

use crate::config::{Config, ServerAddr};
use crate::connection::{Kind, Pending};
use crate::error::LoadError;
use crate::keys::{KeyChooser, KeySpace};
use crate::reply::Reply;
use crate::report::Tally;
use crate::schedule::RateSchedule;

/// How long the prefill may go without any reply before the server counts as stalled.
const PREFILL_STALL: Duration = Duration::from_secs(10);
/// How long replies still owed when the measured time ends may take to arrive.
const DRAIN: Duration = Duration::from_secs(2);
/// How far behind its rate a paced load may fall and still catch up.
const CATCH_UP: Duration = Duration::from_millis(5);

/// Whether a phase goes on.
pub(crate) enum Status {
    /// Call again within this long, even if nothing happens.
    Running {
        wake_within: Duration,
    },
    Done,
}

/// One phase of a run, as the event loop drives it.
pub(crate) trait Workload {
    /// Appends the next request to `out` and says what it is, or returns `None` when no more
    /// requests should be sent now.
    fn next(&mut self, out: &mut Vec<u8>) -> Option<(Kind, u64)>;

    /// Accounts for the reply to `request`, parsed at `now`.
    fn complete(&mut self, request: &Pending, reply: Reply, now: Instant) -> Result<(), LoadError>;

    /// Whether the phase goes on at `now`, with `outstanding` requests unanswered.
    fn status(&mut self, now: Instant, outstanding: usize) -> Result<Status, LoadError>;

    /// Whether requests may be due with no reply arriving (a paced load): then every
    /// connection is offered requests each time the loop wakes.
    fn paced(&self) -> bool {
        false
    }
}

/// The bytes of requests: `get <key>\r\n` and `set <key> 0 0 <bytes>\r\n<value>\r\n`, with
/// everything but the key composed once.
pub(crate) struct Wire {
    keyspace: KeySpace,
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
            keyspace: KeySpace::new(config.keys, config.key_bytes),
            set_header_tail: format!(" 0 0 {}\r\n", config.value_bytes).into_bytes(),
            value_line,
        }
    }

    fn append_get(&self, key: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(b"get ");
        self.keyspace.append(key, out);
        out.extend_from_slice(b"\r\n");
    }

    fn append_set(&self, key: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(b"set ");
        self.keyspace.append(key, out);
        out.extend_from_slice(&self.set_header_tail);
        out.extend_from_slice(&self.value_line);
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
}

impl<'a> Prefill<'a> {
    /// The prefill of `keys` keys.
    pub(crate) fn new(wire: &'a Wire, server: &'a ServerAddr, keys: u64) -> Prefill<'a> {
        Prefill {
            wire,
            server,
            keys,
            next_key: 0,
            last_reply: Instant::now(),
        }
    }
}

impl Workload for Prefill<'_> {
    fn next(&mut self, out: &mut Vec<u8>) -> Option<(Kind, u64)> {
        if self.next_key == self.keys {
            return None;
        }
        let key = self.next_key;
        self.wire.append_set(key, out);
        self.next_key += 1;
        Some((Kind::Set, key))
    }

    fn complete(&mut self, request: &Pending, reply: Reply, now: Instant) -> Result<(), LoadError> {
        self.last_reply = now;
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

/// Gets and sets in `get_ratio` proportion on keys drawn from the distribution, until the
/// measured time ends; then no new requests, and the outstanding ones drain.
pub(crate) struct Load<'a> {
    wire: &'a Wire,
    server: &'a ServerAddr,
    chooser: KeyChooser,
    get_ratio: f64,
    value_bytes: u64,
    window: Window,
    sending: bool,
    tally: Tally,
    /// With a rate: its schedule, this loop's share of it, and when the next request is due.
    pacing: Option<(&'a RateSchedule, f64, Instant)>,
}

impl<'a> Load<'a> {
    /// The load of `config` over `window`, its random choices from the stream of `seed`; with
    /// a rate, this loop's share of it is `share` (its part of the connections).
    pub(crate) fn new(
        config: &'a Config,
        wire: &'a Wire,
        window: Window,
        seed: u64,
        share: f64,
    ) -> Load<'a> {
        Load {
            wire,
            server: &config.server,
            chooser: KeyChooser::new(config.keys, config.distribution, seed),
            get_ratio: config.get_ratio,
            value_bytes: config.value_bytes as u64,
            window,
            sending: true,
            tally: Tally::new(config.interval),
            pacing: config
                .rate
                .as_ref()
                .map(|schedule| (schedule, share, Instant::now())),
        }
    }

    /// What was measured.
    pub(crate) fn into_tally(self) -> Tally {
        self.tally
    }
}

impl Workload for Load<'_> {
    fn next(&mut self, out: &mut Vec<u8>) -> Option<(Kind, u64)> {
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
        let key = self.chooser.next_key();
        if self.chooser.unit() < self.get_ratio {
            self.wire.append_get(key, out);
            Some((Kind::Get, key))
        } else {
            self.wire.append_set(key, out);
            Some((Kind::Set, key))
        }
    }

    fn complete(&mut self, request: &Pending, reply: Reply, now: Instant) -> Result<(), LoadError> {
        if !self.window.measures(request.sent_at) {
            return Ok(());
        }
        let tally = &mut self.tally;
        tally.record_latency(
            request.sent_at - self.window.measure_from,
            now.saturating_duration_since(request.sent_at),
        );
        match request.kind {
            Kind::Get => tally.gets += 1,
            Kind::Set => tally.sets += 1,
        }
        match (request.kind, reply) {
            (Kind::Get, Reply::Values { count: 0, .. }) => tally.get_misses += 1,
            (
                Kind::Get,
                Reply::Values {
                    count: 1,
                    first_bytes,
                },
            ) if first_bytes == self.value_bytes => tally.get_hits += 1,
            (Kind::Get, Reply::Values { count, first_bytes }) => tally.record_error(|| {
                format!(
                    "get of key #{} returned {count} value(s), the first of {first_bytes} bytes, \
                     where sets write one of {} bytes",
                    request.key, self.value_bytes
                )
            }),
            (Kind::Set, Reply::Stored) => {}
            (_, reply) => tally.record_error(|| describe(&reply)),
        }
        Ok(())
    }

    fn status(&mut self, now: Instant, outstanding: usize) -> Result<Status, LoadError> {
        if now < self.window.measure_until {
            let until = match self.pacing {
                Some((_, _, due)) => due.min(self.window.measure_until),
                None => self.window.measure_until,
            };
            return Ok(Status::Running {
                wake_within: until.saturating_duration_since(now),
            });
        }
        self.sending = false;
        if outstanding == 0 {
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
