//! A small blocking NBD client over any `Read + Write` stream (proto.md "Transmission"), made
//! of this crate's pieces: the client handshake, request composing and reply parsing. One call
//! per command for simple use, and a pipelined mode for load: [`Client::submit`] many requests,
//! then [`Client::complete`] collects the replies by cookie in whatever order the server sends
//! them, reassembling structured READ replies from their chunks.
//!
//! The client is single-threaded: while it writes requests it reads no replies. Keep the bytes
//! in flight (requests plus the replies they ask for) within what the socket buffers hold, as a
//! queue depth does, or a server that also blocks on writing can deadlock with it.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, Read, Write};

use crate::constants::*;
use crate::handshake::{ClientEvent, ClientHandshake, Negotiated, Refusal};
use crate::parse::{Parsed, ProtocolError};
use crate::transmission::{
    parse_chunk_payload, parse_reply_header, ChunkHeader, ChunkPayload, Command, ReplyHeader,
    Request,
};

/// Bytes asked of the stream per read while looking for a header.
const RECEIVE_BYTES: usize = 64 * 1024;

/// A request the server answered with an error (proto.md "Error values"; structured replies
/// add a message for people).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    /// The error value, `E*` of [`crate::constants`].
    pub error: u32,
    /// The server's message (empty in a simple reply).
    pub message: String,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", error_name(self.error), self.error)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for RequestError {}

/// Why a client call failed (proto.md "Terminating the transmission phase": after the first
/// three the connection is done; after a request's error it goes on).
#[derive(Debug)]
pub enum ClientError {
    /// The stream failed or closed; the connection is unusable.
    Io(io::Error),
    /// The server broke the protocol; the connection is unusable (proto.md: hard disconnect).
    Protocol(ProtocolError),
    /// The server refused the export or the list during the handshake.
    Refused(Refusal),
    /// The server answered this one request with an error; the connection goes on.
    Request(RequestError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(error) => write!(f, "NBD connection: {error}"),
            ClientError::Protocol(error) => error.fmt(f),
            ClientError::Refused(refusal) => refusal.fmt(f),
            ClientError::Request(error) => write!(f, "NBD request failed: {error}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(error: io::Error) -> ClientError {
        ClientError::Io(error)
    }
}

impl From<ProtocolError> for ClientError {
    fn from(error: ProtocolError) -> ClientError {
        ClientError::Protocol(error)
    }
}

/// A request's answer (proto.md "Transmission": a simple reply, or a structured reply's
/// chunks up to `NBD_REPLY_FLAG_DONE`), collected by [`Client::complete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The cookie [`Client::submit`] returned.
    pub cookie: u64,
    /// The request's command.
    pub command: Command,
    /// A READ's data, or no bytes for any other command; or the server's error.
    pub result: Result<Vec<u8>, RequestError>,
}

/// A request sent and not yet fully answered.
struct Pending {
    request: Request,
    /// A READ's data, sized at its first data; empty until then.
    data: Vec<u8>,
    /// Byte ranges of the READ that structured chunks covered so far, as (start, end) offsets
    /// into `data` (proto.md: chunks "MUST NOT overlap").
    covered: Vec<(usize, usize)>,
    /// The first error chunk's error.
    error: Option<RequestError>,
}

impl Pending {
    /// Marks `length` bytes at export offset `offset` as covered by a chunk and returns where
    /// they go in `data`, refusing ranges outside the request or over earlier chunks.
    fn cover(&mut self, offset: u64, length: usize) -> Result<(usize, usize), ProtocolError> {
        let request = self.request;
        let start = offset
            .checked_sub(request.offset)
            .map(|start| start as usize);
        let end = start.and_then(|start| start.checked_add(length));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(outside(offset, length, &request));
        };
        if end > request.length as usize || length == 0 {
            return Err(outside(offset, length, &request));
        }
        if self
            .covered
            .iter()
            .any(|&(seen_start, seen_end)| start < seen_end && seen_start < end)
        {
            return Err(ProtocolError::new(
                "structured reply offset",
                format!("{length} bytes at {offset} overlap an earlier chunk of the same reply"),
            ));
        }
        self.covered.push((start, end));
        if self.data.len() != request.length as usize {
            self.data.resize(request.length as usize, 0);
        }
        Ok((start, end))
    }
}

fn outside(offset: u64, length: usize, request: &Request) -> ProtocolError {
    ProtocolError::new(
        "structured reply offset",
        format!(
            "{length} bytes at {offset} lie outside the READ of {} bytes at {}",
            request.length, request.offset
        ),
    )
}

/// A connected NBD client in the transmission phase (proto.md "Transmission").
pub struct Client<S> {
    stream: S,
    negotiated: Negotiated,
    /// Bytes received; those from `received_start` on are not consumed yet.
    received: Vec<u8>,
    received_start: usize,
    /// Requests composed and not yet written.
    outgoing: Vec<u8>,
    next_cookie: u64,
    in_flight: HashMap<u64, Pending>,
    /// Answers collected while waiting for another one.
    finished: VecDeque<Completion>,
}

impl<S: Read + Write> Client<S> {
    /// Negotiates `export_name` (empty: the default export) on `stream`, asking for structured
    /// replies if `structured_replies` (proto.md "Fixed newstyle negotiation", `NBD_OPT_GO`).
    pub fn connect(
        stream: S,
        export_name: &str,
        structured_replies: bool,
    ) -> Result<Client<S>, ClientError> {
        let mut client = Client::before_handshake(stream);
        match client.handshake(ClientHandshake::go(export_name, structured_replies))? {
            ClientEvent::Ready(negotiated) => {
                client.negotiated = negotiated;
                Ok(client)
            }
            ClientEvent::Refused(refusal) => Err(ClientError::Refused(refusal)),
            other => Err(ProtocolError::new(
                "handshake",
                format!("expected the export to be ready, came to {other:?}"),
            )
            .into()),
        }
    }

    /// The names of the exports the server on `stream` offers (proto.md `NBD_OPT_LIST`); the
    /// session is then aborted.
    pub fn list(stream: S) -> Result<Vec<String>, ClientError> {
        let mut client = Client::before_handshake(stream);
        match client.handshake(ClientHandshake::list())? {
            ClientEvent::Listed(names) => Ok(names),
            ClientEvent::Refused(refusal) => Err(ClientError::Refused(refusal)),
            other => Err(ProtocolError::new(
                "handshake",
                format!("expected the export list, came to {other:?}"),
            )
            .into()),
        }
    }

    fn before_handshake(stream: S) -> Client<S> {
        Client {
            stream,
            negotiated: Negotiated {
                size_bytes: 0,
                transmission_flags: 0,
                block_sizes: None,
                structured_replies: false,
            },
            received: Vec::new(),
            received_start: 0,
            outgoing: Vec::new(),
            next_cookie: 1,
            in_flight: HashMap::new(),
            finished: VecDeque::new(),
        }
    }

    /// Drives `handshake` to its end, writing what it says to send.
    fn handshake(&mut self, mut handshake: ClientHandshake) -> Result<ClientEvent, ClientError> {
        let mut output = Vec::new();
        loop {
            let step = handshake.receive(&self.received[self.received_start..], &mut output)?;
            if !output.is_empty() {
                self.stream.write_all(&output)?;
                self.stream.flush()?;
                output.clear();
            }
            match step {
                Parsed::NeedMore => self.receive_more()?,
                Parsed::Found { value, consumed } => {
                    self.received_start += consumed;
                    if value != ClientEvent::Negotiating {
                        return Ok(value);
                    }
                }
            }
        }
    }

    /// What the handshake established (proto.md `NBD_INFO_EXPORT`, `NBD_INFO_BLOCK_SIZE`,
    /// `NBD_OPT_STRUCTURED_REPLY`). The client asked for block sizes, so its requests must
    /// keep to them (proto.md "Block size constraints").
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// Requests sent (or composed) whose answers have not been collected (proto.md: each
    /// known by its cookie until its reply is whole).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.finished.len()
    }

    /// Composes one request and returns its cookie; it is written at the next
    /// [`send`](Self::send) or [`complete`](Self::complete). `payload` is a WRITE's data
    /// (`length` bytes), empty for every other command. A command or flag the server did not
    /// offer (proto.md "Transmission flags": the client MUST NOT use it) is refused here.
    pub fn submit(
        &mut self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> Result<u64, ClientError> {
        let offered = self.negotiated.transmission_flags;
        let needs = match command {
            Command::Flush => FLAG_SEND_FLUSH,
            Command::Trim => FLAG_SEND_TRIM,
            Command::WriteZeroes => FLAG_SEND_WRITE_ZEROES,
            _ => 0,
        } | if flags & CMD_FLAG_FUA != 0 {
            FLAG_SEND_FUA
        } else {
            0
        };
        if offered & needs != needs {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "the server's transmission flags {offered:#x} do not offer {command:?} with \
                     flags {flags:#x}"
                ),
            )
            .into());
        }
        let expected_payload = if command == Command::Write {
            length as usize
        } else {
            0
        };
        if payload.len() != expected_payload {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{command:?} of {length} bytes takes {expected_payload} bytes of payload, \
                     given {}",
                    payload.len()
                ),
            )
            .into());
        }
        while self.in_flight.contains_key(&self.next_cookie) {
            self.next_cookie = self.next_cookie.wrapping_add(1);
        }
        let cookie = self.next_cookie;
        self.next_cookie = self.next_cookie.wrapping_add(1);
        let request = Request {
            flags,
            command,
            cookie,
            offset,
            length,
        };
        request.compose(&mut self.outgoing);
        self.outgoing.extend_from_slice(payload);
        if command != Command::Disconnect {
            self.in_flight.insert(
                cookie,
                Pending {
                    request,
                    data: Vec::new(),
                    covered: Vec::new(),
                    error: None,
                },
            );
        }
        Ok(cookie)
    }

    /// Composes a READ of `length` bytes at `offset` (proto.md `NBD_CMD_READ`).
    pub fn submit_read(&mut self, offset: u64, length: u32) -> Result<u64, ClientError> {
        self.submit(Command::Read, 0, offset, length, &[])
    }

    /// Composes a WRITE of `data` at `offset`, durable before its answer if `fua` (proto.md
    /// `NBD_CMD_WRITE`, `NBD_CMD_FLAG_FUA`).
    pub fn submit_write(
        &mut self,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<u64, ClientError> {
        let length = u32::try_from(data.len()).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "a WRITE holds less than 4 GiB")
        })?;
        self.submit(Command::Write, fua_flag(fua), offset, length, data)
    }

    /// Composes a FLUSH (proto.md `NBD_CMD_FLUSH`).
    pub fn submit_flush(&mut self) -> Result<u64, ClientError> {
        self.submit(Command::Flush, 0, 0, 0, &[])
    }

    /// Composes a TRIM of `length` bytes at `offset` (proto.md `NBD_CMD_TRIM`).
    pub fn submit_trim(&mut self, offset: u64, length: u32) -> Result<u64, ClientError> {
        self.submit(Command::Trim, 0, offset, length, &[])
    }

    /// Composes a WRITE_ZEROES of `length` bytes at `offset`, durable before its answer if
    /// `fua` (proto.md `NBD_CMD_WRITE_ZEROES`).
    pub fn submit_write_zeroes(
        &mut self,
        offset: u64,
        length: u32,
        fua: bool,
    ) -> Result<u64, ClientError> {
        self.submit(Command::WriteZeroes, fua_flag(fua), offset, length, &[])
    }

    /// Writes every request composed so far (proto.md "Request message").
    pub fn send(&mut self) -> Result<(), ClientError> {
        if !self.outgoing.is_empty() {
            self.stream.write_all(&self.outgoing)?;
            self.stream.flush()?;
            self.outgoing.clear();
        }
        Ok(())
    }

    /// Sends what is composed, then returns the next request to be fully answered, whichever
    /// the server answers first (proto.md: "Replies need not be sent in the same order as
    /// requests").
    pub fn complete(&mut self) -> Result<Completion, ClientError> {
        if let Some(done) = self.finished.pop_front() {
            return Ok(done);
        }
        if self.in_flight.is_empty() {
            return Err(
                io::Error::new(io::ErrorKind::InvalidInput, "no request is in flight").into(),
            );
        }
        self.send()?;
        loop {
            if let Some(done) = self.receive_reply()? {
                return Ok(done);
            }
        }
    }

    /// Sends what is composed, then waits for the answer to `cookie` (proto.md: the reply
    /// carries the request's cookie), keeping the others for [`complete`](Self::complete).
    pub fn wait(&mut self, cookie: u64) -> Result<Completion, ClientError> {
        if let Some(at) = self.finished.iter().position(|done| done.cookie == cookie) {
            return Ok(self.finished.remove(at).expect("found at this position"));
        }
        if !self.in_flight.contains_key(&cookie) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cookie {cookie:#x} is not in flight"),
            )
            .into());
        }
        self.send()?;
        loop {
            if let Some(done) = self.receive_reply()? {
                if done.cookie == cookie {
                    return Ok(done);
                }
                self.finished.push_back(done);
            }
        }
    }

    /// Waits for the answer to `cookie`; a server error is [`ClientError::Request`].
    fn wait_ok(&mut self, cookie: u64) -> Result<Vec<u8>, ClientError> {
        self.wait(cookie)?.result.map_err(ClientError::Request)
    }

    /// Reads `buffer.len()` bytes at `offset` (proto.md `NBD_CMD_READ`).
    pub fn read(&mut self, offset: u64, buffer: &mut [u8]) -> Result<(), ClientError> {
        let length = u32::try_from(buffer.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a READ asks for less than 4 GiB",
            )
        })?;
        let cookie = self.submit_read(offset, length)?;
        let data = self.wait_ok(cookie)?;
        buffer.copy_from_slice(&data);
        Ok(())
    }

    /// Writes `data` at `offset`, durable before the answer if `fua` (proto.md
    /// `NBD_CMD_WRITE`, `NBD_CMD_FLAG_FUA`).
    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), ClientError> {
        let cookie = self.submit_write(offset, data, fua)?;
        self.wait_ok(cookie).map(drop)
    }

    /// Makes every answered write durable (proto.md `NBD_CMD_FLUSH`).
    pub fn flush(&mut self) -> Result<(), ClientError> {
        let cookie = self.submit_flush()?;
        self.wait_ok(cookie).map(drop)
    }

    /// Tells the server `length` bytes at `offset` are no longer needed (proto.md
    /// `NBD_CMD_TRIM`).
    pub fn trim(&mut self, offset: u64, length: u32) -> Result<(), ClientError> {
        let cookie = self.submit_trim(offset, length)?;
        self.wait_ok(cookie).map(drop)
    }

    /// Writes `length` zero bytes at `offset` (proto.md `NBD_CMD_WRITE_ZEROES`).
    pub fn write_zeroes(&mut self, offset: u64, length: u32, fua: bool) -> Result<(), ClientError> {
        let cookie = self.submit_write_zeroes(offset, length, fua)?;
        self.wait_ok(cookie).map(drop)
    }

    /// Collects every answer still in flight, then ends the session with `NBD_CMD_DISC`
    /// (proto.md: the client "SHOULD wait until there are no inflight requests first") and
    /// returns the answers collected.
    pub fn disconnect(mut self) -> Result<Vec<Completion>, ClientError> {
        let mut answers = Vec::new();
        while self.in_flight() > 0 {
            answers.push(self.complete()?);
        }
        self.submit(Command::Disconnect, 0, 0, 0, &[])?;
        self.send()?;
        Ok(answers)
    }

    /// Reads at least one more byte into the receive buffer.
    fn receive_more(&mut self) -> Result<(), ClientError> {
        if self.received_start > 0 {
            self.received.drain(..self.received_start);
            self.received_start = 0;
        }
        let filled = self.received.len();
        self.received.resize(filled + RECEIVE_BYTES, 0);
        let count = loop {
            match self.stream.read(&mut self.received[filled..]) {
                Ok(count) => break count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    self.received.truncate(filled);
                    return Err(error.into());
                }
            }
        };
        self.received.truncate(filled + count);
        if count == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the NBD server closed the connection",
            )
            .into());
        }
        Ok(())
    }

    /// Fills `destination` with the next bytes: first those already received, then straight
    /// from the stream.
    fn take_into(&mut self, destination: &mut [u8]) -> Result<(), ClientError> {
        let buffered = &self.received[self.received_start..];
        let from_buffer = buffered.len().min(destination.len());
        destination[..from_buffer].copy_from_slice(&buffered[..from_buffer]);
        self.received_start += from_buffer;
        self.stream.read_exact(&mut destination[from_buffer..])?;
        Ok(())
    }

    /// The next `count` bytes, for small payloads.
    fn take(&mut self, count: usize) -> Result<Vec<u8>, ClientError> {
        let mut bytes = vec![0; count];
        self.take_into(&mut bytes)?;
        Ok(bytes)
    }

    /// Reads one reply message and applies it to its request; returns the request if that
    /// message finished it.
    fn receive_reply(&mut self) -> Result<Option<Completion>, ClientError> {
        let header = loop {
            match parse_reply_header(&self.received[self.received_start..])? {
                Parsed::NeedMore => self.receive_more()?,
                Parsed::Found { value, consumed } => {
                    self.received_start += consumed;
                    break value;
                }
            }
        };
        let cookie = header.cookie();
        let Some(mut pending) = self.in_flight.remove(&cookie) else {
            return Err(ProtocolError::new(
                "reply cookie",
                format!("{cookie:#x} is no request in flight"),
            )
            .into());
        };
        let is_read = pending.request.command == Command::Read;
        let chunk = match header {
            ReplyHeader::Simple { error, .. } => {
                if self.negotiated.structured_replies && is_read {
                    return Err(ProtocolError::new(
                        "reply magic",
                        "a simple reply to a READ, though structured replies were negotiated",
                    )
                    .into());
                }
                let result = if error != 0 {
                    Err(RequestError {
                        error,
                        message: String::new(),
                    })
                } else {
                    if is_read {
                        pending.data.resize(pending.request.length as usize, 0);
                        self.take_into(&mut pending.data)?;
                    }
                    Ok(pending.data)
                };
                return Ok(Some(Completion {
                    cookie,
                    command: pending.request.command,
                    result,
                }));
            }
            ReplyHeader::Chunk(chunk) => chunk,
        };
        if !self.negotiated.structured_replies {
            return Err(ProtocolError::new(
                "reply magic",
                "a structured reply chunk, though structured replies were not negotiated",
            )
            .into());
        }
        self.apply_chunk(&chunk, &mut pending)?;
        if !chunk.done() {
            self.in_flight.insert(cookie, pending);
            return Ok(None);
        }
        let result = match pending.error {
            Some(error) => Err(error),
            None if is_read => {
                let covered: usize = pending.covered.iter().map(|(start, end)| end - start).sum();
                if covered != pending.request.length as usize {
                    return Err(ProtocolError::new(
                        "structured reply",
                        format!(
                            "the READ's chunks covered {covered} of its {} bytes",
                            pending.request.length
                        ),
                    )
                    .into());
                }
                Ok(pending.data)
            }
            None => Ok(Vec::new()),
        };
        Ok(Some(Completion {
            cookie,
            command: pending.request.command,
            result,
        }))
    }

    /// Reads one chunk's payload into its request (proto.md "Structured reply types").
    fn apply_chunk(
        &mut self,
        chunk: &ChunkHeader,
        pending: &mut Pending,
    ) -> Result<(), ClientError> {
        let is_read = pending.request.command == Command::Read;
        if chunk.chunk_type == REPLY_TYPE_OFFSET_DATA {
            if !is_read {
                return Err(ProtocolError::new(
                    "structured reply type",
                    "NBD_REPLY_TYPE_OFFSET_DATA answers only a READ",
                )
                .into());
            }
            // The data goes straight to its place in the READ's buffer.
            let mut offset = [0u8; OFFSET_DATA_PREFIX_BYTES];
            self.take_into(&mut offset)?;
            let length = chunk.length as usize - OFFSET_DATA_PREFIX_BYTES;
            let (start, end) = pending.cover(u64::from_be_bytes(offset), length)?;
            return self.take_into(&mut pending.data[start..end]);
        }
        let payload = self.take(chunk.length as usize)?;
        match parse_chunk_payload(chunk, &payload)? {
            // OFFSET_DATA never gets here: its data was read in place above.
            ChunkPayload::None | ChunkPayload::OffsetData { .. } => {}
            ChunkPayload::OffsetHole { offset, length } => {
                if !is_read {
                    return Err(ProtocolError::new(
                        "structured reply type",
                        "NBD_REPLY_TYPE_OFFSET_HOLE answers only a READ",
                    )
                    .into());
                }
                let (start, end) = pending.cover(offset, length as usize)?;
                pending.data[start..end].fill(0);
            }
            ChunkPayload::Error { error, message, .. } => {
                pending.error.get_or_insert(RequestError {
                    error,
                    message: String::from_utf8_lossy(message).into_owned(),
                });
            }
        }
        Ok(())
    }
}

fn fua_flag(fua: bool) -> u16 {
    if fua {
        CMD_FLAG_FUA
    } else {
        0
    }
}
