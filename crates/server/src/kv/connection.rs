//! One client connection: bytes in, requests parsed and executed in order (pipelined), answers
//! out in one write per batch. A declared value too large is streamed past, never buffered; a
//! client that does not read its answers is not read from until it does, and a multi-get stops
//! at [`OUTPUT_HIGH_WATER`] until they drain. On a tenant with an auth file every request is
//! refused until the client authenticates ([`super::auth`]); each wrong password is answered
//! after [`AUTH_FAILURE_PAUSE`], and the tenant's `max_auth_failures`-th closes the connection.
//!
//! What it holds is bounded (docs/reliability.md, "Limits on what a client can make a server
//! hold"): its input by the parser's limits (command lines, get lines, values), its output by
//! the high-water mark plus one answer; beyond their first 64 KiB each they draw on the halves of
//! the tenant's `client_buffers` budget ([`super::limits`]): while the answers' half is spent the
//! connection answers one request at a time, while the requests' half is spent it reads no
//! longer request (the worker's sweep retries it). The
//! worker's sweep ([`Connection::sweep`]) closes it past its deadlines. A request whose
//! execution panics is answered [`PANICKED`] and the connection closed.

use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use heterarchy_device::backend::wait_until;
use heterarchy_kvstore::Storage;
use heterarchy_memcache::{compose, parse, Limits, ParseError, Request, StoreMode};

use crate::socket::Socket;
use crate::tls::Transport;

use super::auth::{self, Gate};
use super::counters::add;
use super::execute::{execute, Outcome};
use super::limits::{Share, BASELINE_BYTES};
use super::tenant::{unix_now_secs, Tenant};
use crate::peers::PeerSlot;

/// Bytes read per system call at least.
const READ_CHUNK: usize = 64 * 1024;
/// Device waits this short are spun in place rather than held: holding an answer and coming
/// back to it costs the worker a poll and a pass over its due answers, microseconds on a
/// virtual machine, and a wait this short holds up the worker's other connections no longer
/// than serving one request does (a get over TCP takes tens of microseconds there).
const SPIN_IN_PLACE: Duration = Duration::from_micros(10);
/// Answers waiting beyond this stop the reading of more requests, and a multi-get's answering
/// of more keys until they drain.
pub const OUTPUT_HIGH_WATER: usize = 4 << 20;
/// Answers one connection makes in one turn before it yields the worker to the others: it
/// goes on after every other connection ready has had its turn, so that a flood of large
/// gets holds up another client by a round of turns, not by all it asked.
pub const TURN_BYTES: usize = 512 << 10;
/// How long the answer to a wrong password waits, holding up that connection alone.
pub const AUTH_FAILURE_PAUSE: Duration = Duration::from_millis(200);
/// The answer to a request whose execution panicked; the connection closes after it.
pub const PANICKED: &str = "SERVER_ERROR internal error";

/// What the worker's sweep makes of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swept {
    Keep,
    /// Past a deadline: close it.
    Close,
    /// Waiting for the tenant's buffer budget: serve it again.
    Retry,
}

/// A client of one tenant.
pub struct Connection {
    transport: Transport,
    tenant: Arc<Tenant>,
    /// Its place in the tenant's per-peer count, given back when the connection is dropped.
    _peer_slot: PeerSlot,
    limits: Limits,
    input: Vec<u8>,
    /// Parsed up to here.
    start: usize,
    /// Filled up to here.
    end: usize,
    output: Vec<u8>,
    /// Written up to here.
    written: usize,
    /// Bytes of an oversized value still to be discarded as they arrive.
    skip_bytes: u64,
    /// The answer to the oversized value, sent once it is discarded, as memcached does.
    after_skip: Option<&'static str>,
    /// Keys of the multi-get at the front of the input already answered.
    keys_done: usize,
    /// Serving stopped because answers piled up, not for want of input.
    waiting_for_room: bool,
    /// Answer what is queued, then close (quit, a fatal protocol error, end of input).
    closing: bool,
    /// An answer held until the throttled device would have completed its accesses.
    hold: Option<Hold>,
    /// When the last bytes arrived: the requests in them wait from then, behind a held
    /// answer too.
    received: Instant,
    /// The client may use the tenant: it authenticated, or the tenant needs no one to.
    authenticated: bool,
    /// Wrong passwords it sent.
    failed_auths: u32,
    /// When it was accepted, for `auth_timeout`.
    accepted: Instant,
    /// Requests answered so far (whole or refused), to tell a new partial request from the
    /// same one.
    completed: u64,
    /// Since when part of a request has waited for the rest, for `request_timeout`.
    partial_since: Option<Instant>,
    /// Reading stopped because the tenant's buffer budget is spent; the sweep retries.
    waiting_for_budget: bool,
    /// What its buffers count against the tenant's budget now.
    counted: Share,
    /// Answers made in this turn.
    turn_bytes: usize,
    /// The turn ended with requests still to serve: the worker comes back to it at once.
    yielded: bool,
}

/// An answer not yet due: `output[from..]` waits until `until`, and so does every request
/// after it on this connection. The worker serves other connections meanwhile.
#[derive(Clone, Copy, Debug)]
struct Hold {
    until: Instant,
    from: usize,
}

impl Connection {
    pub fn new(socket: Socket, tenant: Arc<Tenant>, peer_slot: PeerSlot) -> Connection {
        let limits = Limits {
            max_value_bytes: tenant.store_config.item_max_bytes as usize,
            ..Limits::default()
        };
        let now = Instant::now();
        let tls = match tenant.speaks_tls(&socket) {
            true => tenant.tls.as_ref().map(|tls| tls.current()),
            false => None,
        };
        let mut transport = Transport::plain(socket);
        // Only a failure to make a session can fail here: the client has sent nothing yet.
        let failed = tls.is_some_and(|server| transport.start_tls(&server, &[]).is_err());
        Connection {
            transport,
            _peer_slot: peer_slot,
            limits,
            input: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            output: Vec::with_capacity(READ_CHUNK),
            written: 0,
            skip_bytes: 0,
            after_skip: None,
            keys_done: 0,
            waiting_for_room: false,
            closing: failed,
            hold: None,
            received: now,
            authenticated: tenant.auth.is_none(),
            failed_auths: 0,
            accepted: now,
            completed: 0,
            partial_since: None,
            waiting_for_budget: false,
            counted: Share::default(),
            turn_bytes: 0,
            yielded: false,
            tenant,
        }
    }

    pub fn socket_mut(&mut self) -> &mut Socket {
        self.transport.socket_mut()
    }

    /// The worker's look at it at `now`, once a second: whether a deadline has passed (the
    /// tenant's `auth_timeout` unauthenticated, `request_timeout` with part of a request
    /// waiting, `idle_timeout` since its last byte; 0 is none), whether it waits for the
    /// buffer budget, and, at rest, its buffers shrunk back to their baseline.
    pub fn sweep(&mut self, now: Instant) -> Swept {
        let config = &self.tenant.config;
        let counters = &self.tenant.counters;
        let past = |since: Instant, secs: f64| {
            secs > 0.0 && now.saturating_duration_since(since).as_secs_f64() >= secs
        };
        if !self.authenticated && past(self.accepted, config.auth_timeout) {
            add(&counters.auth_timeouts, 1);
            return Swept::Close;
        }
        let handshake_late =
            self.transport.is_handshaking() && past(self.accepted, config.request_timeout);
        if handshake_late
            || self
                .partial_since
                .is_some_and(|since| past(since, config.request_timeout))
        {
            add(&counters.request_timeouts, 1);
            return Swept::Close;
        }
        if past(self.received, config.idle_timeout) {
            add(&counters.idle_kicks, 1);
            return Swept::Close;
        }
        if self.waiting_for_budget {
            return Swept::Retry;
        }
        if self.output.is_empty() && self.output.capacity() > BASELINE_BYTES {
            self.output = Vec::with_capacity(BASELINE_BYTES);
        }
        if self.start == self.end && self.skip_bytes == 0 && self.input.len() > READ_CHUNK {
            self.input = vec![0; READ_CHUNK];
            self.start = 0;
            self.end = 0;
        }
        self.account();
        Swept::Keep
    }

    /// Brings the tenant's budget up to date with what its buffers hold now.
    fn account(&mut self) {
        let now = Share::of(self.input.capacity(), self.output.capacity());
        self.tenant.buffers.change(self.counted, now);
        self.counted = now;
    }

    /// Whether the answers side of the tenant's buffer budget is spent, this connection's
    /// own growth counted.
    fn output_over_budget(&mut self) -> bool {
        self.account();
        self.tenant.buffers.output_spent()
    }

    /// Whether the requests side of the budget is spent, this connection's own counted.
    fn input_over_budget(&mut self) -> bool {
        self.account();
        self.tenant.buffers.input_spent()
    }

    /// Whether its last turn ended with requests still to serve: the worker calls
    /// [`on_ready`] again once the others ready have had theirs.
    ///
    /// [`on_ready`]: Connection::on_ready
    pub fn yielded(&self) -> bool {
        self.yielded
    }

    /// Until when an answer is held, if one is: the worker calls [`on_ready`] again then.
    ///
    /// [`on_ready`]: Connection::on_ready
    pub fn held_until(&self) -> Option<Instant> {
        self.hold.map(|hold| hold.until)
    }

    /// Reads, serves and answers all it can; false when the connection is done.
    pub fn on_ready(&mut self) -> bool {
        self.turn_bytes = 0;
        self.yielded = false;
        let open = self.work();
        self.account();
        open
    }

    fn work(&mut self) -> bool {
        if let Some(hold) = self.hold {
            if Instant::now() < hold.until {
                // The answers before the held one may go.
                return self.write_out().is_ok();
            }
            self.hold = None;
            // The requests that arrived behind the held answer.
            self.serve();
        }
        loop {
            if self.hold.is_some() {
                return self.write_out().is_ok();
            }
            match self.write_out() {
                Ok(true) => {}
                Ok(false) => return true,
                Err(_) => return false,
            }
            if self.closing {
                return false;
            }
            if self.yielded {
                return true;
            }
            // Requests left buffered when answers piled up are served before reading more.
            if self.waiting_for_room {
                self.serve();
                continue;
            }
            match self.read_in() {
                Ok(Some(short)) => {
                    self.serve();
                    // A TLS session takes records in pieces: a short read leaves no promise
                    // that the socket is empty, so only `WouldBlock` ends the reading.
                    if short && !self.waiting_for_room && !self.transport.is_tls() {
                        // Nothing more is waiting: answer, and wait for the next event.
                        return match self.write_out() {
                            Ok(true) => !self.closing,
                            Ok(false) => true,
                            Err(_) => false,
                        };
                    }
                }
                Ok(None) => return true,
                Err(_) => {
                    if self.transport.is_handshaking() {
                        // A plaintext client on a TLS port, or a failed handshake: the alert
                        // that says why went out, and the connection closes.
                        add(&self.tenant.counters.ssl_handshake_errors, 1);
                        return false;
                    }
                    // End of input or a broken socket: answer what was asked, then close
                    // (reading again finds the end again once there is room to answer).
                    self.serve();
                    self.closing = !self.waiting_for_room;
                }
            }
        }
    }

    /// Writes queued answers; true when all are out.
    fn write_out(&mut self) -> io::Result<bool> {
        let due = self.hold.map_or(self.output.len(), |hold| hold.from);
        while self.written < due {
            match self.transport.write(&self.output[self.written..due]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(count) => {
                    self.written += count;
                    add(&self.tenant.counters.bytes_written, count as u64);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        // Records a TLS session still holds for the socket are answers not yet out.
        if !self.transport.flush()? || self.hold.is_some() {
            return Ok(false);
        }
        self.output.clear();
        self.written = 0;
        Ok(true)
    }

    /// Reads what has arrived: `Some(short)` after a read (`short` when it did not fill the
    /// buffer, so nothing more is waiting), `None` when nothing was there, an error at the end
    /// of input.
    fn read_in(&mut self) -> io::Result<Option<bool>> {
        self.waiting_for_budget = false;
        if self.start > 0 && self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.input.len() - self.end < READ_CHUNK / 2 {
            if self.start > 0 {
                self.input.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.input.len() - self.end < READ_CHUNK / 2 {
                if self.input_over_budget() {
                    self.waiting_for_budget = true;
                    return Ok(None);
                }
                self.input.resize(self.input.len() * 2, 0);
            }
        }
        loop {
            match self.transport.read(&mut self.input[self.end..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(count) => {
                    let short = self.end + count < self.input.len();
                    self.end += count;
                    self.received = Instant::now();
                    add(&self.tenant.counters.bytes_read, count as u64);
                    return Ok(Some(short));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Parses and executes every whole request buffered, in order.
    fn serve(&mut self) {
        let now_secs = unix_now_secs();
        let tenant = Arc::clone(&self.tenant);
        let mut store = None;
        self.waiting_for_room = false;
        let completed_before = self.completed;
        let mut incomplete = false;
        while !self.closing {
            // Past the budget, a connection holding more than its baseline answers no more
            // until that drains; one that holds less may answer one request.
            let tight = self.output.len() >= BASELINE_BYTES && self.output_over_budget();
            if self.output.len() >= OUTPUT_HIGH_WATER || tight {
                self.waiting_for_room = true;
                break;
            }
            if self.turn_bytes >= TURN_BYTES {
                self.waiting_for_room = true;
                self.yielded = true;
                break;
            }
            if self.skip_bytes > 0 {
                let dropped = self.skip_bytes.min((self.end - self.start) as u64);
                self.start += dropped as usize;
                self.skip_bytes -= dropped;
                if self.skip_bytes > 0 {
                    break;
                }
                self.completed += 1;
                if let Some(reply) = self.after_skip.take() {
                    self.protocol_error(reply, false);
                }
            }
            if self.start == self.end {
                break;
            }
            if let (true, Some(tls)) = (self.authenticated, &tenant.tls) {
                if let Some((consumed, noreply)) = refresh_certs(&self.input[self.start..self.end])
                {
                    let answer = match tls.reload() {
                        Ok(()) => "OK".to_string(),
                        Err(error) => format!("SERVER_ERROR {error}").replace(['\r', '\n'], " "),
                    };
                    if !noreply {
                        compose::line(&mut self.output, &answer);
                    }
                    self.start += consumed;
                    self.completed += 1;
                    continue;
                }
            }
            match parse(&self.input[self.start..self.end], &self.limits) {
                Ok(parsed) if !self.authenticated => {
                    let answer_from = self.output.len();
                    let admission = authenticate(&tenant, &parsed.request, &mut self.output);
                    self.start += parsed.consumed;
                    self.completed += 1;
                    match admission {
                        Admission::Accepted => self.authenticated = true,
                        Admission::Refused => {}
                        Admission::WrongPassword => {
                            self.failed_auths += 1;
                            if self.failed_auths >= tenant.config.max_auth_failures {
                                add(&tenant.counters.auth_closes, 1);
                                self.closing = true;
                            } else {
                                // A guesser waits; the worker serves everyone else meanwhile.
                                self.hold = self.hold.or(Some(Hold {
                                    until: Instant::now() + AUTH_FAILURE_PAUSE,
                                    from: answer_from,
                                }));
                                break;
                            }
                        }
                    }
                }
                Err(ParseError::Invalid { consumed, .. }) if !self.authenticated => {
                    // memcached: whatever it is, it is not allowed yet.
                    self.protocol_error(auth::UNAUTHENTICATED, false);
                    self.start += consumed;
                    self.completed += 1;
                }
                Err(ParseError::TooLarge {
                    consumed,
                    skip_bytes,
                    unlink_key,
                    ..
                }) if !self.authenticated => {
                    // Streamed past as any value too large, and nothing is unlinked.
                    self.after_skip = Some(match unlink_key {
                        Some(_) => auth::BAD_TOKEN,
                        None => auth::UNAUTHENTICATED,
                    });
                    self.start += consumed;
                    self.skip_bytes = skip_bytes;
                }
                Ok(parsed) => {
                    let store = store.get_or_insert_with(|| tenant.store());
                    let answer_from = self.output.len();
                    let output_limit = match tight || tenant.buffers.output_spent() {
                        true => BASELINE_BYTES,
                        false => OUTPUT_HIGH_WATER,
                    }
                    .min(answer_from + TURN_BYTES - self.turn_bytes);
                    let executed = catch_unwind(AssertUnwindSafe(|| {
                        execute(
                            &parsed.request,
                            &tenant,
                            &mut **store,
                            now_secs,
                            self.keys_done,
                            output_limit,
                            &mut self.output,
                        )
                    }));
                    let outcome = executed.unwrap_or_else(|_| {
                        // The panic's message went to stderr through the panic hook.
                        eprintln!(
                            "heterarchy: kv {}: a request panicked; its connection is closed",
                            tenant.name()
                        );
                        add(&tenant.counters.request_panics, 1);
                        self.output.truncate(answer_from);
                        compose::line(&mut self.output, PANICKED);
                        self.keys_done = 0;
                        Outcome::Close
                    });
                    self.turn_bytes += self.output.len().saturating_sub(answer_from);
                    self.hold = self.hold.or(held_for_device(&mut **store, answer_from));
                    let answered = self.hold.map_or_else(Instant::now, |hold| hold.until);
                    tenant.record_request(
                        answered,
                        answered.saturating_duration_since(self.received),
                    );
                    match outcome {
                        Outcome::Paused { keys_done } => {
                            self.keys_done = keys_done;
                            self.waiting_for_room = true;
                            break;
                        }
                        Outcome::Continue => {}
                        Outcome::Close => self.closing = true,
                    }
                    self.keys_done = 0;
                    self.start += parsed.consumed;
                    self.completed += 1;
                    if self.hold.is_some() {
                        break;
                    }
                }
                Err(ParseError::Incomplete) => {
                    incomplete = true;
                    self.grow_for_a_whole_request();
                    break;
                }
                Err(ParseError::Invalid {
                    reply,
                    consumed,
                    noreply,
                }) => {
                    self.protocol_error(reply, noreply);
                    self.start += consumed;
                    self.completed += 1;
                }
                Err(ParseError::TooLarge {
                    reply,
                    consumed,
                    skip_bytes,
                    noreply,
                    unlink_key,
                }) => {
                    if let Some(key) = unlink_key {
                        let store = store.get_or_insert_with(|| tenant.store());
                        let answer_from = self.output.len();
                        if let Err(error) = store.discard(now_secs, &key) {
                            compose::line(&mut self.output, &format!("SERVER_ERROR {error}"));
                        }
                        self.hold = self.hold.or(held_for_device(&mut **store, answer_from));
                    }
                    match noreply {
                        true => add(&self.tenant.counters.protocol_errors, 1),
                        false => self.after_skip = Some(reply),
                    }
                    self.start += consumed;
                    self.skip_bytes = skip_bytes;
                }
                Err(ParseError::Fatal { reply }) => {
                    // memcached closes such a connection without a word.
                    self.protocol_error(reply, true);
                    self.closing = true;
                }
            }
        }
        // A request's deadline runs from when its first bytes were found waiting for more.
        if incomplete || self.skip_bytes > 0 {
            if self.partial_since.is_none() || self.completed != completed_before {
                self.partial_since = Some(Instant::now());
            }
        } else {
            self.partial_since = None;
        }
    }

    /// Room for the longest request the limits allow, once part of one has arrived.
    fn grow_for_a_whole_request(&mut self) {
        if self.tenant.buffers.input_spent() {
            // Grown as bytes arrive instead, if the budget allows then (`read_in`).
            return;
        }
        let longest = self.limits.max_value_bytes + self.limits.max_line_bytes + 2;
        if self.input.len() < longest + READ_CHUNK && self.end - self.start > READ_CHUNK / 2 {
            let wanted = (self.end - self.start + READ_CHUNK).min(longest + READ_CHUNK);
            if self.input.len() < wanted {
                self.input.resize(wanted.next_power_of_two(), 0);
            }
        }
    }

    fn protocol_error(&mut self, reply: &str, noreply: bool) {
        add(&self.tenant.counters.protocol_errors, 1);
        if !noreply {
            self.output.extend_from_slice(reply.as_bytes());
            self.output.extend_from_slice(b"\r\n");
        }
    }

    /// Ends TLS cleanly if it carries the bytes, and gives back the connection's places in
    /// the tenant's count and budget (its peer's slot goes when it is dropped).
    pub fn close(&mut self) {
        self.transport.close();
        self.tenant.buffers.change(self.counted, Share::default());
        self.counted = Share::default();
        self.tenant
            .counters
            .curr_connections
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// memcached's `refresh_certs [...] [noreply]` line at the front of `input`, whole: its length
/// and whether it ends with `noreply`. Other arguments are ignored, as memcached ignores them.
fn refresh_certs(input: &[u8]) -> Option<(usize, bool)> {
    const COMMAND: &[u8] = b"refresh_certs";
    let rest = input.strip_prefix(COMMAND)?;
    if !matches!(rest.first(), Some(b' ' | b'\r' | b'\n')) {
        return None;
    }
    let newline = rest.iter().position(|&byte| byte == b'\n')?;
    let line = &rest[..newline];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let noreply = line
        .split(|&byte| byte == b' ')
        .rev()
        .find(|word| !word.is_empty())
        == Some(&b"noreply"[..]);
    Some((COMMAND.len() + newline + 1, noreply))
}

/// What an unauthenticated connection's request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admission {
    Accepted,
    /// Refused for its form (not a `set`, a token without its space): no guess was made.
    Refused,
    /// A token naming no user or the wrong password.
    WrongPassword,
}

/// Answers a request of a client of `tenant` not yet authenticated: a `set` carrying "user
/// password" authenticates (answered even with `noreply`, as memcached does); anything else is
/// refused.
fn authenticate(tenant: &Tenant, request: &Request, output: &mut Vec<u8>) -> Admission {
    let Some(auth) = &tenant.auth else {
        return Admission::Accepted;
    };
    let attempt = matches!(
        request,
        Request::Store {
            mode: StoreMode::Set,
            ..
        }
    );
    let counters = &tenant.counters;
    if attempt {
        add(&counters.auth_cmds, 1);
    }
    let (line, admission) = match auth::admit(auth, request) {
        Gate::Accepted(line) => (line, Admission::Accepted),
        Gate::Refused(line) => {
            add(&counters.protocol_errors, 1);
            if attempt {
                add(&counters.auth_errors, 1);
            }
            match line {
                auth::FAILED => (line, Admission::WrongPassword),
                _ => (line, Admission::Refused),
            }
        }
    };
    compose::line(output, line);
    admission
}

/// A hold of the answers from `answer_from` on while the throttled device would still be
/// carrying out the accesses the request made. A wait shorter than a hold costs the loop
/// ([`SPIN_IN_PLACE`]) is spun here instead, as a PM access stalls its core.
fn held_for_device(store: &mut dyn Storage, answer_from: usize) -> Option<Hold> {
    let until = store.take_device_deadline()?;
    let left = until.saturating_duration_since(Instant::now());
    if left <= SPIN_IN_PLACE {
        wait_until(until);
        return None;
    }
    Some(Hold {
        until,
        from: answer_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::config::TenantConfig;
    use crate::kv::execute::PANIC_KEY;
    use crate::peers::Peer;
    use heterarchy_device::backend::Throttles;
    use std::os::unix::net::UnixStream;

    fn tenant(config: TenantConfig) -> Arc<Tenant> {
        let config = TenantConfig {
            memory: Some("4m".to_string()),
            ..config
        };
        Arc::new(Tenant::open(&config, None, &Throttles::default()).unwrap())
    }

    /// A connection of `tenant` as the acceptor hands it over, and the client's end.
    fn connect(tenant: &Arc<Tenant>) -> (Connection, UnixStream) {
        let (server, client) = UnixStream::pair().unwrap();
        server.set_nonblocking(true).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        tenant
            .counters
            .curr_connections
            .fetch_add(1, Ordering::SeqCst);
        let slot = tenant.peers.admit(Peer::Uid(0)).expect("a place");
        let socket = Socket::Unix(mio::net::UnixStream::from_std(server));
        (Connection::new(socket, Arc::clone(tenant), slot), client)
    }

    /// Sends `request`, serves it, and reads `expected_len` bytes of answer.
    fn ask(connection: &mut Connection, client: &mut UnixStream, request: &[u8]) -> Vec<u8> {
        client.write_all(request).unwrap();
        let open = connection.on_ready();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        client
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        while let Ok(count) = client.read(&mut chunk) {
            if count == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..count]);
        }
        assert_eq!(open, !answer.ends_with(PANICKED.as_bytes()) || !open);
        answer
    }

    #[test]
    fn refresh_certs_is_found_whole_with_its_noreply() {
        assert_eq!(refresh_certs(b"refresh_certs\r\nmn\r\n"), Some((15, false)));
        assert_eq!(refresh_certs(b"refresh_certs\n"), Some((14, false)));
        assert_eq!(refresh_certs(b"refresh_certs a b\r\n"), Some((19, false)));
        assert_eq!(
            refresh_certs(b"refresh_certs noreply\r\n"),
            Some((23, true))
        );
        assert_eq!(refresh_certs(b"refresh_certs"), None);
        assert_eq!(refresh_certs(b"refresh_certs noreply"), None);
        assert_eq!(refresh_certs(b"refresh_certsx\r\n"), None);
        assert_eq!(refresh_certs(b"get refresh_certs\r\n"), None);
    }

    #[test]
    fn a_panicking_request_is_answered_and_closes_its_connection_alone() {
        let tenant = tenant(TenantConfig::default());
        let (mut first, mut client) = connect(&tenant);
        let mut request = b"get ".to_vec();
        request.extend_from_slice(PANIC_KEY);
        request.extend_from_slice(b"\r\nget k\r\n");
        client.write_all(&request).unwrap();
        assert!(!first.on_ready(), "the connection stays open after a panic");
        first.close();
        drop(first);
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"SERVER_ERROR internal error\r\n");
        let counts = tenant.counters.snapshot();
        assert_eq!((counts.request_panics, counts.curr_connections), (1, 0));
        assert_eq!(tenant.peers.held_by(Peer::Uid(0)), 0);
        // The store was not poisoned: the next client is served.
        let (mut second, mut client) = connect(&tenant);
        let answer = ask(&mut second, &mut client, b"set k 0 0 1\r\nx\r\nget k\r\n");
        assert_eq!(answer, b"STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n");
    }

    #[test]
    fn the_sweep_closes_connections_past_their_deadlines() {
        let short = TenantConfig {
            request_timeout: 0.01,
            idle_timeout: 0.2,
            ..TenantConfig::default()
        };
        let tenant = tenant(short);
        let (mut partial, mut client) = connect(&tenant);
        client.write_all(b"get k").unwrap();
        assert!(partial.on_ready());
        assert_eq!(partial.sweep(Instant::now()), Swept::Keep);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(partial.sweep(Instant::now()), Swept::Close);
        // Once whole, the request is no longer late, and idleness counts from its last byte.
        let (mut whole, mut client) = connect(&tenant);
        assert_eq!(ask(&mut whole, &mut client, b"mn\r\n"), b"MN\r\n");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(whole.sweep(Instant::now()), Swept::Keep);
        assert_eq!(
            whole.sweep(Instant::now() + Duration::from_millis(300)),
            Swept::Close
        );
        let counts = tenant.counters.snapshot();
        assert_eq!((counts.request_timeouts, counts.idle_kicks), (1, 1));
        partial.close();
        whole.close();
    }

    #[test]
    fn an_unauthenticated_client_has_auth_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("auth");
        std::fs::write(&auth, "alice:secret\n").unwrap();
        let tenant = tenant(TenantConfig {
            auth_file: Some(auth),
            auth_timeout: 0.05,
            ..TenantConfig::default()
        });
        let (mut waiting, _client) = connect(&tenant);
        let (mut member, mut client) = connect(&tenant);
        let answer = ask(
            &mut member,
            &mut client,
            b"set a 0 0 12\r\nalice secret\r\n",
        );
        assert_eq!(answer, b"STORED\r\n");
        let later = Instant::now() + Duration::from_millis(60);
        assert_eq!(waiting.sweep(later), Swept::Close);
        assert_eq!(member.sweep(later), Swept::Keep);
        assert_eq!(tenant.counters.snapshot().auth_timeouts, 1);
    }

    #[test]
    fn a_pipeline_of_large_answers_yields_its_turn_and_is_bounded_by_the_budget() {
        let tenant = tenant(TenantConfig {
            client_buffers: "1m".to_string(),
            ..TenantConfig::default()
        });
        let (mut conn, mut client) = connect(&tenant);
        let mut set = b"set big 0 0 600000\r\n".to_vec();
        set.extend_from_slice(&[b'v'; 600_000]);
        set.extend_from_slice(b"\r\n");
        // More than the socket holds: written beside the serving.
        let mut writer = client.try_clone().unwrap();
        let writing = std::thread::spawn(move || writer.write_all(&set).unwrap());
        loop {
            assert!(conn.on_ready());
            if writing.is_finished() && conn.start == conn.end && conn.end > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        writing.join().unwrap();
        let mut stored = [0u8; 8];
        client.read_exact(&mut stored).unwrap();
        assert_eq!(&stored, b"STORED\r\n");
        // Ten gets of 600 kB that the client does not read: one turn answers one.
        client.write_all(&b"get big\r\n".repeat(10)).unwrap();
        assert!(conn.on_ready());
        assert!(conn.yielded() || conn.waiting_for_room);
        for _ in 0..20 {
            conn.on_ready();
        }
        // Unread, the answers stop at the high-water mark, and past the budget at one.
        assert!(
            conn.output.len() <= OUTPUT_HIGH_WATER + 700_000,
            "{}",
            conn.output.len()
        );
        assert!(
            conn.start < conn.end,
            "every get was answered into the buffer"
        );
        conn.close();
        assert_eq!(tenant.buffers.held(), 0);
    }
}
