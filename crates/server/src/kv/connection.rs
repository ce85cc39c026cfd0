//! One client connection: bytes in, requests parsed and executed in order (pipelined), answers
//! out in one write per batch. A declared value too large is streamed past, never buffered; a
//! client that does not read its answers is not read from until it does. On a tenant with an
//! auth file every request is refused until the client authenticates ([`super::auth`]).

use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use heterarchy_device::backend::wait_until;
use heterarchy_kvstore::Storage;
use heterarchy_memcache::{compose, parse, Limits, ParseError, Request, StoreMode};

use crate::socket::Socket;

use super::auth::{self, Gate};
use super::counters::add;
use super::execute::{execute, Outcome};
use super::tenant::{unix_now_secs, Tenant};

/// Bytes read per system call at least.
const READ_CHUNK: usize = 64 * 1024;
/// Device waits this short are spun in place rather than held: holding an answer and coming
/// back to it costs the worker a poll and a pass over its due answers, microseconds on a
/// virtual machine, and a wait this short holds up the worker's other connections no longer
/// than serving one request does (a get over TCP takes tens of microseconds there).
const SPIN_IN_PLACE: Duration = Duration::from_micros(10);
/// Answers waiting beyond this stop the reading of more requests.
const OUTPUT_HIGH_WATER: usize = 4 << 20;

/// A client of one tenant.
pub struct Connection {
    socket: Socket,
    tenant: Arc<Tenant>,
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
}

/// An answer not yet due: `output[from..]` waits until `until`, and so does every request
/// after it on this connection. The worker serves other connections meanwhile.
#[derive(Clone, Copy, Debug)]
struct Hold {
    until: Instant,
    from: usize,
}

impl Connection {
    pub fn new(socket: Socket, tenant: Arc<Tenant>) -> Connection {
        let limits = Limits {
            max_value_bytes: tenant.store_config.item_max_bytes as usize,
            ..Limits::default()
        };
        Connection {
            socket,
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
            closing: false,
            hold: None,
            received: Instant::now(),
            authenticated: tenant.auth.is_none(),
            tenant,
        }
    }

    pub fn socket_mut(&mut self) -> &mut Socket {
        &mut self.socket
    }

    /// Until when an answer is held, if one is: the worker calls [`on_ready`] again then.
    ///
    /// [`on_ready`]: Connection::on_ready
    pub fn held_until(&self) -> Option<Instant> {
        self.hold.map(|hold| hold.until)
    }

    /// Reads, serves and answers all it can; false when the connection is done.
    pub fn on_ready(&mut self) -> bool {
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
            // Requests left buffered when answers piled up are served before reading more.
            if self.waiting_for_room {
                self.serve();
                continue;
            }
            match self.read_in() {
                Ok(Some(short)) => {
                    self.serve();
                    if short && !self.waiting_for_room {
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
            match self.socket.write(&self.output[self.written..due]) {
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
        if self.hold.is_some() {
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
                self.input.resize(self.input.len() * 2, 0);
            }
        }
        loop {
            match self.socket.read(&mut self.input[self.end..]) {
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
        while !self.closing {
            if self.output.len() >= OUTPUT_HIGH_WATER {
                self.waiting_for_room = true;
                break;
            }
            if self.skip_bytes > 0 {
                let dropped = self.skip_bytes.min((self.end - self.start) as u64);
                self.start += dropped as usize;
                self.skip_bytes -= dropped;
                if self.skip_bytes > 0 {
                    break;
                }
                if let Some(reply) = self.after_skip.take() {
                    self.protocol_error(reply, false);
                }
            }
            if self.start == self.end {
                break;
            }
            match parse(&self.input[self.start..self.end], &self.limits) {
                Ok(parsed) if !self.authenticated => {
                    self.authenticated = authenticate(&tenant, &parsed.request, &mut self.output);
                    self.start += parsed.consumed;
                }
                Err(ParseError::Invalid { consumed, .. }) if !self.authenticated => {
                    // memcached: whatever it is, it is not allowed yet.
                    self.protocol_error(auth::UNAUTHENTICATED, false);
                    self.start += consumed;
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
                    let outcome = execute(
                        &parsed.request,
                        &tenant,
                        &mut **store,
                        now_secs,
                        self.keys_done,
                        OUTPUT_HIGH_WATER,
                        &mut self.output,
                    );
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
                    if self.hold.is_some() {
                        break;
                    }
                }
                Err(ParseError::Incomplete) => {
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
    }

    /// Room for the longest request the limits allow, once part of one has arrived.
    fn grow_for_a_whole_request(&mut self) {
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

    /// Leaves the tenant's connection count.
    pub fn close(&mut self) {
        self.tenant
            .counters
            .curr_connections
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// Answers a request of a client of `tenant` not yet authenticated: a `set` carrying "user
/// password" authenticates (answered even with `noreply`, as memcached does); anything else is
/// refused. Returns whether the client is authenticated now.
fn authenticate(tenant: &Tenant, request: &Request, output: &mut Vec<u8>) -> bool {
    let Some(auth) = &tenant.auth else {
        return true;
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
    let (line, accepted) = match auth::admit(auth, request) {
        Gate::Accepted(line) => (line, true),
        Gate::Refused(line) => {
            add(&counters.protocol_errors, 1);
            if attempt {
                add(&counters.auth_errors, 1);
            }
            (line, false)
        }
    };
    compose::line(output, line);
    accepted
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
