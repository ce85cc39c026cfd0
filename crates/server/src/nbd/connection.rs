//! One NBD client on an event loop (proto.md "Fixed newstyle negotiation", "Transmission"):
//! the handshake driven by `heterarchy-nbd`'s state machine, then requests parsed as they
//! arrive and several in flight at once. A request that waits for nothing (a hit in memory) is
//! answered on the loop, straight into the outgoing bytes; the others go to the I/O workers
//! and their answers come back in any order, which proto.md allows (each carries its cookie).
//!
//! A bad request gets its error and the connection goes on; only a broken header closes it.
//! A client that sends faster than it reads its answers, keeps too many requests in flight, or
//! holds more bytes than its budget allows ([`super::budget`]), is not read from until it
//! catches up. Buffers shrink back when little of them is used, so many idle clients cost
//! little.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heterarchy_nbd::constants::*;
use heterarchy_nbd::{Command, Parsed, Request, ServerEvent, ServerHandshake, TlsMode};
use heterarchy_volume::{Attempt, Buffer, Command as VolumeCommand};

use super::budget::{Charge, ConnectionBudget, Wait};
use super::reply::{too_large, Replies};
use super::workers::{Back, Inbox, Task, Workers};
use super::{Export, Exports};
use crate::socket::Socket;
use crate::stopping::Stopping;
use crate::tls::{TlsServer, Transport};

/// Bytes asked of the socket per read, at least.
const READ_CHUNK: usize = 64 * 1024;
/// Requests of one connection in the workers at once, at most.
const MAX_IN_FLIGHT: usize = 512;
/// Bytes one connection may read in one turn of its loop; then the loop serves the others and
/// comes back to it, so that a client sending 32 MiB WRITEs as fast as it can delays the others
/// by about a millisecond at a time, not by its whole payload.
const TURN_BYTES: usize = 1 << 20;
/// Answers waiting to be sent beyond this stop the reading of requests.
const OUTPUT_HIGH_WATER: usize = 8 << 20;
/// An idle buffer larger than this is given back.
const IDLE_BUFFER_BYTES: usize = 256 * 1024;
/// READs longer than this go to a worker even when they hit in memory, and answers this long
/// are queued whole rather than copied into the outgoing bytes: the event loop's time per
/// request stays small whatever a client asks for (zeroing and copying 32 MiB takes it
/// milliseconds, during which its other clients wait).
const LARGE_BYTES: usize = 256 * 1024;
/// TRIM and WRITE ZEROES longer than this are planned a slice at a time, on a worker, so that
/// no one request holds a volume's lock or an event loop for long (4 GiB would be a million
/// jobs in one step with 4 KiB lines).
pub const SLICE_BYTES: u64 = 1 << 20;

/// What the loop gives a connection to work with.
pub struct Context<'a> {
    pub exports: &'a Exports,
    pub workers: &'a Arc<Workers>,
    /// Answers due later on paced devices, which the loop sends when due.
    pub later: &'a RefCell<Vec<(Instant, Vec<u8>, Charge)>>,
    pub inbox: &'a Arc<Inbox>,
    pub slot: usize,
    pub generation: u64,
    /// What a client that sends `NBD_OPT_STARTTLS` gets TLS with (none with TLS off).
    pub tls: Option<&'a TlsServer>,
    /// Whether requests may still start.
    pub stopping: &'a Arc<Stopping>,
}

enum Phase {
    Handshake(ServerHandshake),
    Transmission { export: Export, replies: Replies },
}

/// Why a connection ended.
pub enum End {
    /// The client left or disconnected cleanly.
    Closed,
    /// A protocol or I/O error, to be logged.
    Failed(io::Error),
}

/// One client.
pub struct Connection {
    transport: Transport,
    peer: String,
    phase: Phase,
    /// Received bytes, `start..end`; those before `start` are consumed. Its length is what
    /// has been zeroed, kept between reads: zeroing a 64 KiB read buffer for every 28-byte
    /// request cost 5% of a loop at queue depth 16.
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// Answers; those before `written` are sent.
    output: Vec<u8>,
    written: usize,
    /// Answers of [`LARGE_BYTES`] or more, sent after `output`, whole, the first from
    /// `large_written`.
    large: VecDeque<Vec<u8>>,
    large_written: usize,
    in_flight: usize,
    /// A long TRIM or WRITE ZEROES of this connection is with the workers: the next waits for
    /// it, so that one client keeps at most one worker busy with them.
    slicing: bool,
    /// Bytes of an oversized WRITE's payload still to be read past, and its cookie.
    skipping: Option<(u64, Request)>,
    /// No more requests are read: the client disconnected, sent NBD_CMD_DISC, or the input
    /// ended.
    draining: bool,
    /// The socket may have bytes to read: set by a readable event, cleared when a read finds
    /// none, so a wake-up for answers alone costs no read.
    readable: bool,
    /// `NBD_OPT_STARTTLS` was acknowledged: once the acknowledgement is out, TLS begins.
    starting_tls: bool,
    /// Bytes read in this turn of the loop.
    turn_bytes: usize,
    /// The turn ended with bytes perhaps still in the socket: the loop comes back without an
    /// event.
    yielded: bool,
    /// What this connection may hold in bytes.
    budget: ConnectionBudget,
    /// The charge of the request at the front of the input, taken when its header was read
    /// and kept while its payload arrives.
    front_charge: Option<Charge>,
    /// The charges of the answers in `output`, given back once they are sent.
    output_charge: Charge,
    /// The request at the front waits for this budget to have room.
    waiting: Option<Wait>,
    /// When the connection was accepted, for the handshake's deadline.
    accepted: Instant,
    /// When the client last sent a byte or was last answered, for the idle timeout.
    last_active: Instant,
}

impl Connection {
    /// A new client, offered TLS as `tls` says; its greeting is already queued.
    pub fn new(socket: Socket, peer: String, tls: TlsMode, budget: ConnectionBudget) -> Connection {
        let now = Instant::now();
        Connection {
            output_charge: budget.empty(),
            budget,
            front_charge: None,
            waiting: None,
            accepted: now,
            last_active: now,
            transport: Transport::plain(socket),
            peer,
            phase: Phase::Handshake(ServerHandshake::with_tls(tls)),
            input: Vec::new(),
            start: 0,
            end: 0,
            output: ServerHandshake::greeting().to_vec(),
            written: 0,
            large: VecDeque::new(),
            large_written: 0,
            in_flight: 0,
            slicing: false,
            skipping: None,
            draining: false,
            readable: true,
            starting_tls: false,
            turn_bytes: 0,
            yielded: false,
        }
    }

    /// The socket said it has bytes to read.
    pub fn mark_readable(&mut self) {
        self.readable = true;
    }

    pub fn socket_mut(&mut self) -> &mut Socket {
        self.transport.socket_mut()
    }

    pub fn socket(&self) -> &Socket {
        self.transport.socket()
    }

    /// Ends TLS cleanly if it is running; the loop closes the socket after.
    pub fn close(&mut self) {
        self.transport.close();
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// A worker's answer to one of this connection's requests, what it is charged, and
    /// whether it was planned a slice at a time.
    pub fn answered(&mut self, bytes: Vec<u8>, charge: Charge, sliced: bool) {
        self.in_flight -= 1;
        if sliced {
            assert!(self.slicing, "a sliced answer came for no sliced request");
            self.slicing = false;
        }
        if bytes.len() >= LARGE_BYTES {
            self.large.push_back(bytes);
        } else {
            self.output.extend_from_slice(&bytes);
        }
        self.output_charge.absorb(charge);
        self.last_active = Instant::now();
    }

    /// The request at the front waits for the server's budget (not only its own): the loop
    /// comes back to it, as another connection's answers may make room.
    pub fn waits_for_server(&self) -> bool {
        self.waiting == Some(Wait::Server)
    }

    /// Why the loop should close the connection now, if it should: the handshake took longer
    /// than `handshake`, or the client sent nothing and waits for nothing for `idle`.
    pub fn overdue(
        &self,
        now: Instant,
        handshake: Duration,
        idle: Option<Duration>,
    ) -> Option<String> {
        match self.phase {
            Phase::Handshake(_) if now.duration_since(self.accepted) > handshake => Some(format!(
                "no export chosen within the handshake's {} s",
                handshake.as_secs_f64()
            )),
            Phase::Transmission { .. } => {
                let idle = idle?;
                let quiet = self.in_flight == 0 && self.unsent_bytes() == 0;
                (quiet && now.duration_since(self.last_active) > idle)
                    .then(|| format!("idle for {} s", idle.as_secs_f64()))
            }
            Phase::Handshake(_) => None,
        }
    }

    /// Sends, reads and serves all it can; `Some(end)` when the connection is over.
    pub fn on_ready(&mut self, context: &Context) -> Option<End> {
        match self.pump(context) {
            Ok(true) => None,
            Ok(false) => Some(End::Closed),
            Err(error) => Some(End::Failed(error)),
        }
    }

    /// Serves every request already received before sending, so the answers to a burst leave
    /// in one send: on loopback a send also costs the sender the receiver's TCP work, more
    /// than half the loop's time at queue depth 64.
    fn pump(&mut self, context: &Context) -> io::Result<bool> {
        // The budget may have room now: the request at the front tries again.
        self.waiting = None;
        (self.turn_bytes, self.yielded) = (0, false);
        loop {
            // Whether serving stopped for want of bytes, rather than for answers piling up.
            let mut wants_bytes = false;
            while !self.draining && !self.is_full() {
                if !self.serve(context)? {
                    wants_bytes = true;
                    break;
                }
            }
            let sending_charged = self.output_charge.bytes() > 0;
            if !self.send()? {
                return Ok(true);
            }
            if self.starting_tls {
                self.start_tls(context)?;
                continue;
            }
            if self.draining {
                // Done once every answer is out.
                return Ok(self.in_flight > 0);
            }
            if self.is_full() {
                if self.waiting.is_some() && sending_charged {
                    // What was just sent gave bytes back: the request at the front tries again,
                    // as no event may come to say so.
                    self.waiting = None;
                    continue;
                }
                return Ok(true);
            }
            // Requests received while answers piled up are served before any more is read:
            // the socket may have nothing new to announce, and the client waits for them.
            if !wants_bytes {
                continue;
            }
            if self.readable && self.turn_bytes >= TURN_BYTES {
                self.yielded = true;
                return Ok(true);
            }
            if !self.readable || !self.receive()? {
                return Ok(true);
            }
        }
    }

    /// The last turn stopped before the socket was empty: serve it again soon, unasked.
    pub fn yielded(&self) -> bool {
        self.yielded
    }

    /// Enough requests in flight, answers waiting or bytes held: read no more until some are
    /// done.
    fn is_full(&self) -> bool {
        self.in_flight >= MAX_IN_FLIGHT
            || self.unsent_bytes() > OUTPUT_HIGH_WATER
            || self.waiting.is_some()
    }

    /// Bytes of answers not sent yet.
    fn unsent_bytes(&self) -> usize {
        let large: usize = self.large.iter().map(Vec::len).sum();
        self.output.len() - self.written + large - self.large_written
    }

    /// TLS begins: the bytes received after `NBD_OPT_STARTTLS` are its first records.
    fn start_tls(&mut self, context: &Context) -> io::Result<()> {
        self.starting_tls = false;
        let Some(config) = context.tls else {
            return Err(io::Error::other(
                "TLS was acknowledged with no TLS configured",
            ));
        };
        let received = &self.input[self.start..self.end];
        self.transport.start_tls(config, received)?;
        (self.start, self.end) = (0, 0);
        // The client's first records may all have come with the option: the socket may hold
        // nothing more to announce.
        self.readable = true;
        Ok(())
    }

    /// Writes pending answers; false when the socket is full.
    fn send(&mut self) -> io::Result<bool> {
        // A large answer begun goes on first: answers must not interleave.
        if self.large_written > 0 && !self.send_large()? {
            return Ok(false);
        }
        while self.written < self.output.len() {
            match self.transport.write(&self.output[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(count) => self.written += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        // Given back when what was just sent used little of it, or nothing more is coming: a
        // busy connection's batches (64 answers of 4 KiB pass 256 KiB) would otherwise regrow
        // it every time.
        if self.output.capacity() > IDLE_BUFFER_BYTES
            && (self.written < self.output.capacity() / 4 || self.in_flight == 0)
        {
            self.output.clear();
            self.output.shrink_to(READ_CHUNK);
        }
        self.output.clear();
        self.written = 0;
        while !self.large.is_empty() {
            if !self.send_large()? {
                return Ok(false);
            }
        }
        self.output_charge.release();
        // Under TLS, records may still wait for room in the socket.
        self.transport.flush()
    }

    /// Writes the first large answer; false when the socket is full before its end.
    fn send_large(&mut self) -> io::Result<bool> {
        let Some(answer) = self.large.front() else {
            return Ok(true);
        };
        while self.large_written < answer.len() {
            match self.transport.write(&answer[self.large_written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(count) => self.large_written += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        self.large.pop_front();
        self.large_written = 0;
        Ok(true)
    }

    /// Reads what the socket has; false when it has nothing now.
    fn receive(&mut self) -> io::Result<bool> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
            if self.input.len() > IDLE_BUFFER_BYTES {
                self.input.truncate(READ_CHUNK);
                self.input.shrink_to_fit();
            }
        } else if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let chunk = match &self.phase {
            // Handshake messages are small; idle clients should cost little.
            Phase::Handshake(_) => 4096,
            Phase::Transmission { .. } => READ_CHUNK,
        };
        if self.input.len() < self.end + chunk {
            self.input.resize(self.end + chunk, 0);
        }
        match self
            .transport
            .read(&mut self.input[self.end..self.end + chunk])
        {
            Ok(0) => {
                self.draining = true;
                Ok(true)
            }
            Ok(count) => {
                self.end += count;
                self.turn_bytes += count;
                self.last_active = Instant::now();
                // A short read emptied the socket; mio's edge-triggered events report what
                // comes next, so the read that would find nothing is skipped. Not so under
                // TLS, which takes records from the socket in pieces.
                self.readable = count == chunk || self.transport.is_tls();
                Ok(true)
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                self.readable = false;
                Ok(false)
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(error) => Err(error),
        }
    }

    /// Handles what is buffered; false when it needs more bytes.
    fn serve(&mut self, context: &Context) -> io::Result<bool> {
        if let Some((left, request)) = self.skipping {
            let skipped = (self.end - self.start).min(left as usize);
            self.start += skipped;
            let left = left - skipped as u64;
            if left > 0 {
                self.skipping = Some((left, request));
                return Ok(skipped > 0);
            }
            self.skipping = None;
            if let Phase::Transmission { replies, .. } = &self.phase {
                replies.failure(
                    &mut self.output,
                    request.cookie,
                    EINVAL,
                    &too_large(&request),
                );
            }
            return Ok(true);
        }
        if self.starting_tls {
            // The rest of the input is TLS records, for after the acknowledgement is out.
            return Ok(false);
        }
        match &mut self.phase {
            Phase::Handshake(handshake) => {
                let parsed = handshake.receive(
                    &self.input[self.start..self.end],
                    context.exports,
                    &mut self.output,
                )?;
                let Parsed::Found { value, consumed } = parsed else {
                    return Ok(false);
                };
                self.start += consumed;
                match value {
                    ServerEvent::Negotiating => {}
                    ServerEvent::Transmission {
                        export,
                        structured_replies,
                    } => {
                        self.phase = Phase::Transmission {
                            export,
                            replies: Replies {
                                structured: structured_replies,
                            },
                        };
                    }
                    ServerEvent::Closed => self.draining = true,
                    ServerEvent::StartTls => self.starting_tls = true,
                }
                Ok(true)
            }
            Phase::Transmission { .. } => self.request(context),
        }
    }

    /// Serves the request at the front of the input, if it is all there and its bytes fit the
    /// budget.
    fn request(&mut self, context: &Context) -> io::Result<bool> {
        let request = match Request::parse(&self.input[self.start..self.end])? {
            Parsed::Found { value, .. } => value,
            Parsed::NeedMore => return Ok(false),
        };
        let Phase::Transmission { export, replies } = &self.phase else {
            return Ok(false);
        };
        let (export, replies) = (export.clone(), *replies);
        let header_end = self.start + REQUEST_HEADER_BYTES;
        let cookie = request.cookie;
        if request.length > MAX_PAYLOAD_BYTES {
            match request.command {
                Command::Write => {
                    // Read past the payload as it comes, so the connection stays usable.
                    self.start = header_end;
                    self.skipping = Some((u64::from(request.length), request));
                    return Ok(true);
                }
                Command::Read => {
                    self.start = header_end;
                    replies.failure(&mut self.output, cookie, EINVAL, &too_large(&request));
                    return Ok(true);
                }
                _ => {}
            }
        }
        let sliced = matches!(request.command, Command::Trim | Command::WriteZeroes)
            && u64::from(request.length) > SLICE_BYTES
            && matches!(export, Export::Cached(_));
        if sliced && self.slicing {
            // One at a time: this one waits at the front of the input for the one before.
            self.waiting = Some(Wait::Connection);
            return Ok(false);
        }
        if self.front_charge.is_none() {
            let bytes = match request.command {
                Command::Read | Command::Write => request.length as usize,
                _ => 0,
            };
            match self.budget.charge(bytes) {
                Ok(charge) => self.front_charge = Some(charge),
                Err(wait) => {
                    // The payload stays in the client's socket until there is room.
                    self.waiting = Some(wait);
                    return Ok(false);
                }
            }
        }
        let payload_end = header_end + request.payload_bytes();
        if self.end < payload_end {
            // Room for the whole payload at once, so that the buffer is not copied as it grows.
            self.input
                .reserve(payload_end.saturating_sub(self.input.len()) + READ_CHUNK);
            return Ok(false);
        }
        self.start = payload_end;
        let charge = self.front_charge.take().expect("charged above");
        let command = match request.command {
            Command::Read => VolumeCommand::Read,
            Command::Write => VolumeCommand::Write { fua: request.fua() },
            Command::WriteZeroes => VolumeCommand::WriteZeroes { fua: request.fua() },
            Command::Trim => VolumeCommand::Trim,
            Command::Flush => VolumeCommand::Flush,
            Command::Disconnect => {
                self.draining = true;
                return Ok(true);
            }
            other => {
                let reason = format!("unsupported command {other:?}");
                replies.failure(&mut self.output, cookie, EINVAL, &reason);
                return Ok(true);
            }
        };
        let length = match command {
            VolumeCommand::Flush => 0,
            _ => u64::from(request.length),
        };
        // Refused before anything is written, whatever the export does with a range that
        // runs past its end.
        let size = export.device().size_bytes();
        if request
            .offset
            .checked_add(length)
            .is_none_or(|end| end > size)
        {
            let reason = format!(
                "{:?} of {length} bytes at {} runs past the export's end at {size}",
                request.command, request.offset
            );
            replies.failure(&mut self.output, cookie, EINVAL, &reason);
            return Ok(true);
        }
        let Some(running) = context.stopping.begin() else {
            let reason = "the server is shutting down";
            replies.failure(&mut self.output, cookie, ESHUTDOWN, reason);
            return Ok(true);
        };
        let payload = &self.input[header_end..payload_end];
        // Made only for a request that goes to a worker: one answered here needs no way back.
        let back = || Back {
            inbox: Arc::clone(context.inbox),
            slot: context.slot,
            generation: context.generation,
            running,
        };
        let volume = match export {
            Export::Cached(volume) => volume,
            Export::Device(device) => {
                // Carried out by blocking calls, on a worker.
                self.in_flight += 1;
                let task =
                    Task::on_device(device, request, payload.to_vec(), replies, charge, back());
                context.workers.push(task);
                self.give_back_input();
                return Ok(true);
            }
        };
        if sliced {
            // Planned a slice at a time by a worker.
            self.in_flight += 1;
            self.slicing = true;
            context.workers.push(Task::planned_by_worker(
                volume,
                request,
                command,
                Vec::new(),
                replies,
                charge,
                back(),
            ));
            return Ok(true);
        }
        if request.length as usize > LARGE_BYTES
            && matches!(request.command, Command::Read | Command::Write)
        {
            // Planned by a worker too: a large request's lines are many, and its volume's
            // lock may be held by the workers writing large requests through to a slow device.
            self.in_flight += 1;
            let payload = payload.to_vec();
            self.give_back_input();
            context.workers.push(Task::planned_by_worker(
                volume,
                request,
                command,
                payload,
                replies,
                charge,
                back(),
            ));
            return Ok(true);
        }
        let submission = match volume.submit(command, request.offset, length) {
            Ok(submission) => submission,
            Err(error) => {
                replies.outcome(&mut self.output, cookie, &Err::<(), _>(error));
                return Ok(true);
            }
        };
        // Answered here when nothing waits: straight into the outgoing bytes.
        let start = self.output.len();
        let attempt = match request.command {
            Command::Read => {
                let data = replies.begin_read(&mut self.output, &request);
                let attempt =
                    volume.try_complete(submission, Buffer::Read(&mut self.output[data..]));
                match &attempt {
                    Attempt::Done(result) => {
                        replies.end_read(&mut self.output, start, &request, result);
                    }
                    Attempt::WouldBlock(_) => self.output.truncate(start),
                }
                attempt
            }
            Command::Write => volume.try_complete(submission, Buffer::Write(payload)),
            _ => volume.try_complete(submission, Buffer::None),
        };
        let submission = match attempt {
            Attempt::Done(result) => {
                if request.command != Command::Read {
                    replies.outcome(&mut self.output, cookie, &result);
                }
                // On a paced device the answer waits for the model, not a thread.
                if let Ok(Some(due)) = result {
                    if due > Instant::now() {
                        let answer = self.output.split_off(start);
                        self.in_flight += 1;
                        context.later.borrow_mut().push((due, answer, charge));
                        self.give_back_input();
                        return Ok(true);
                    }
                }
                self.output_charge.absorb(charge);
                self.give_back_input();
                return Ok(true);
            }
            Attempt::WouldBlock(submission) => submission,
        };
        // Otherwise a worker carries it out once its turn has come.
        self.in_flight += 1;
        let workers = Arc::clone(context.workers);
        let payload = payload.to_vec();
        self.give_back_input();
        let back = back();
        submission.when_ready(move |submission| {
            workers.push(Task::on_volume(
                submission, volume, request, payload, replies, charge, back,
            ))
        });
        Ok(true)
    }

    /// Gives back a large input buffer as soon as the request that needed it is consumed and
    /// nothing follows it, rather than at the next read: a client that goes quiet after a
    /// 32 MiB WRITE would otherwise keep the buffer, uncharged, for as long as it stays.
    fn give_back_input(&mut self) {
        if self.start == self.end && self.input.len() > IDLE_BUFFER_BYTES {
            (self.start, self.end) = (0, 0);
            self.input.truncate(READ_CHUNK);
            self.input.shrink_to_fit();
        }
    }
}
