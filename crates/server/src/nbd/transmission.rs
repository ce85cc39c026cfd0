//! The transmission phase (proto.md "Transmission"): requests are read and served in order,
//! one connection per thread; answers are batched into one write while more requests are
//! already waiting. Request headers are parsed and replies composed by `heterarchy-nbd`. With
//! structured replies negotiated, a READ is answered by one `NBD_REPLY_TYPE_OFFSET_DATA` chunk
//! (or `NBD_REPLY_TYPE_NONE` for no bytes), and every failure by an `NBD_REPLY_TYPE_ERROR`
//! chunk carrying the reason; successes of other commands stay 16-byte simple replies, which
//! proto.md allows. A bad request gets its error and the connection goes on; only a broken
//! request header closes it.
//!
//! A throttled volume says when each answer is due; those answers go out from a second thread
//! at their time, so a connection keeps many requests in flight as the emulated devices allow.

use std::collections::BinaryHeap;
use std::io::{self, BufRead, BufWriter, Read, Write};
use std::sync::mpsc;
use std::time::Instant;

use heterarchy_device::backend::wait_until;
use heterarchy_nbd::constants::*;
use heterarchy_nbd::transmission::{
    compose_error, compose_none, compose_simple_reply, offset_data_header, simple_reply_header,
};
use heterarchy_nbd::{Command, Parsed, Request};
use heterarchy_volume::Volume;

use super::{panic_message, Input};
use crate::listen::Stream;

/// Answers batched per write: a few 64 KiB reads, or a hundred 4 KiB ones.
const OUTBOX_BYTES: usize = 512 * 1024;

/// The error an NBD client understands for a volume error (proto.md "Error values").
fn errno(error: &io::Error) -> u32 {
    match error.kind() {
        io::ErrorKind::InvalidInput => EINVAL,
        io::ErrorKind::ConnectionAborted => ESHUTDOWN,
        _ => EIO,
    }
}

/// Answers gathered for one write system call, in a buffer reads are copied into directly.
struct Outbox {
    stream: Stream,
    bytes: Vec<u8>,
    len: usize,
}

impl Outbox {
    fn new(stream: Stream, capacity: usize) -> Outbox {
        Outbox {
            stream,
            bytes: vec![0; capacity],
            len: 0,
        }
    }

    /// `count` bytes at the end of the batch, flushing first if they do not fit; `None` when
    /// they never fit.
    fn reserve(&mut self, count: usize) -> io::Result<Option<&mut [u8]>> {
        if count > self.bytes.len() {
            return Ok(None);
        }
        if self.len + count > self.bytes.len() {
            self.flush()?;
        }
        let start = self.len;
        self.len += count;
        Ok(Some(&mut self.bytes[start..start + count]))
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self.reserve(data.len())? {
            Some(room) => room.copy_from_slice(data),
            None => {
                self.flush()?;
                self.stream.write_all(data)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let result = self.stream.write_all(&self.bytes[..self.len]);
        self.len = 0;
        result
    }
}

/// Where answers go: into the batch for the socket, or to the thread that sends them when due.
enum Sink {
    Inline(Outbox),
    Delayed(mpsc::Sender<(Instant, Vec<u8>)>),
}

/// Composes the answers of one connection, simple or structured as negotiated.
struct Replies {
    sink: Sink,
    structured: bool,
    /// Room to compose a small answer in.
    composed: Vec<u8>,
}

impl Replies {
    /// Sends an answer composed whole, at `due` when answers are delayed.
    fn push(&mut self, answer: &[u8], due: Option<Instant>) -> io::Result<()> {
        match &mut self.sink {
            Sink::Inline(outbox) => outbox.write(answer),
            Sink::Delayed(sender) => sender
                .send((due.unwrap_or_else(Instant::now), answer.to_vec()))
                .map_err(|_| io::ErrorKind::BrokenPipe.into()),
        }
    }

    /// A success without data: a simple reply, also when structured replies were negotiated.
    fn success(&mut self, cookie: u64, due: Option<Instant>) -> io::Result<()> {
        self.push(&simple_reply_header(cookie, 0), due)
    }

    /// A failure: an `NBD_REPLY_TYPE_ERROR` chunk with `reason` when structured replies were
    /// negotiated, else a simple reply with the error alone.
    fn failure(&mut self, cookie: u64, error: u32, reason: &str) -> io::Result<()> {
        let mut answer = std::mem::take(&mut self.composed);
        answer.clear();
        if self.structured {
            compose_error(&mut answer, cookie, error, reason, true);
        } else {
            compose_simple_reply(&mut answer, cookie, error);
        }
        let result = self.push(&answer, None);
        self.composed = answer;
        result
    }

    fn answer(&mut self, cookie: u64, result: io::Result<Option<Instant>>) -> io::Result<()> {
        match result {
            Ok(due) => self.success(cookie, due),
            Err(error) => self.failure(cookie, errno(&error), &error.to_string()),
        }
    }

    /// Bytes before a READ's data: the simple reply header, or the OFFSET_DATA chunk's header
    /// and offset.
    fn read_header_bytes(&self) -> usize {
        if self.structured {
            STRUCTURED_REPLY_HEADER_BYTES + OFFSET_DATA_PREFIX_BYTES
        } else {
            SIMPLE_REPLY_HEADER_BYTES
        }
    }

    fn write_read_header(&self, head: &mut [u8], request: &Request) {
        if self.structured {
            let header = offset_data_header(
                request.cookie,
                request.offset,
                request.length as usize,
                true,
            );
            head.copy_from_slice(&header);
        } else {
            head.copy_from_slice(&simple_reply_header(request.cookie, 0));
        }
    }

    /// Answers a READ, reading straight into the outgoing batch where it fits.
    fn read(
        &mut self,
        volume: &Volume,
        request: &Request,
        scratch: &mut Vec<u8>,
    ) -> io::Result<()> {
        let length = request.length as usize;
        if length == 0 {
            // An OFFSET_DATA chunk holds at least one byte; NONE says "done, nothing more".
            return match volume.read(request.offset, &mut []) {
                Ok(due) if self.structured => {
                    let mut answer = Vec::with_capacity(STRUCTURED_REPLY_HEADER_BYTES);
                    compose_none(&mut answer, request.cookie);
                    self.push(&answer, due)
                }
                result => self.answer(request.cookie, result),
            };
        }
        let header_bytes = self.read_header_bytes();
        let mut header = [0u8; STRUCTURED_REPLY_HEADER_BYTES + OFFSET_DATA_PREFIX_BYTES];
        let header = &mut header[..header_bytes];
        self.write_read_header(header, request);
        if let Sink::Inline(outbox) = &mut self.sink {
            if let Some(room) = outbox.reserve(header_bytes + length)? {
                let (head, data) = room.split_at_mut(header_bytes);
                match volume.read(request.offset, data) {
                    Ok(_) => {
                        head.copy_from_slice(header);
                        return Ok(());
                    }
                    Err(error) => {
                        outbox.len -= header_bytes + length;
                        return self.failure(request.cookie, errno(&error), &error.to_string());
                    }
                }
            }
        }
        scratch.resize(header_bytes + length, 0);
        let (head, data) = scratch.split_at_mut(header_bytes);
        match volume.read(request.offset, data) {
            Ok(due) => {
                head.copy_from_slice(header);
                self.push(scratch, due)
            }
            Err(error) => self.failure(request.cookie, errno(&error), &error.to_string()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Inline(outbox) => outbox.flush(),
            Sink::Delayed(_) => Ok(()),
        }
    }
}

/// Serves requests (after negotiation) until the client disconnects.
pub fn serve(input: Input, output: Stream, volume: &Volume, structured: bool) -> io::Result<()> {
    if !volume.is_throttled() {
        let replies = Replies {
            sink: Sink::Inline(Outbox::new(output, OUTBOX_BYTES)),
            structured,
            composed: Vec::new(),
        };
        return serve_requests(input, replies, volume);
    }
    let output = BufWriter::with_capacity(OUTBOX_BYTES, output);
    let (sender, receiver) = mpsc::channel();
    std::thread::scope(|scope| {
        let sending = scope.spawn(move || send_when_due(receiver, output));
        let replies = Replies {
            sink: Sink::Delayed(sender),
            structured,
            composed: Vec::new(),
        };
        let served = serve_requests(input, replies, volume);
        let sent = sending.join().unwrap_or_else(|panic| {
            Err(io::Error::other(format!(
                "the thread sending delayed replies panicked: {}",
                panic_message(panic.as_ref())
            )))
        });
        served.and(sent)
    })
}

/// Sends each answer at its due time, earliest first, until the request loop hangs up.
fn send_when_due(
    receiver: mpsc::Receiver<(Instant, Vec<u8>)>,
    mut output: BufWriter<Stream>,
) -> io::Result<()> {
    // Min-heap by due time; the sequence number keeps equal times in arrival order.
    let mut waiting: BinaryHeap<std::cmp::Reverse<(Instant, u64, Vec<u8>)>> = BinaryHeap::new();
    let mut sequence = 0u64;
    let mut open = true;
    while open || !waiting.is_empty() {
        let next_due = waiting.peek().map(|entry| entry.0 .0);
        let received = match next_due {
            None => receiver
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(due) => receiver.recv_timeout(due.saturating_duration_since(Instant::now())),
        };
        match received {
            Ok((due, message)) => {
                waiting.push(std::cmp::Reverse((due, sequence, message)));
                sequence += 1;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        while let Some(entry) = waiting.peek() {
            let due = entry.0 .0;
            if due > Instant::now() && open {
                break;
            }
            wait_until(due);
            let std::cmp::Reverse((_, _, message)) = waiting.pop().expect("peeked");
            output.write_all(&message)?;
        }
        output.flush()?;
    }
    Ok(())
}

fn serve_requests(mut input: Input, mut replies: Replies, volume: &Volume) -> io::Result<()> {
    let mut header_bytes = [0u8; REQUEST_HEADER_BYTES];
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        if input.buffer().is_empty() {
            replies.flush()?;
            if input.fill_buf()?.is_empty() {
                return Ok(());
            }
        }
        input.read_exact(&mut header_bytes)?;
        let request = match Request::parse(&header_bytes) {
            Ok(Parsed::Found { value, .. }) => value,
            Ok(Parsed::NeedMore) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Err(error) => {
                replies.flush()?;
                return Err(error.into());
            }
        };
        let cookie = request.cookie;
        let length = u64::from(request.length);
        match request.command {
            Command::Read => {
                if request.length > MAX_PAYLOAD_BYTES {
                    replies.failure(cookie, EINVAL, &too_large(&request))?;
                    continue;
                }
                replies.read(volume, &request, &mut buffer)?;
            }
            Command::Write => {
                if request.length > MAX_PAYLOAD_BYTES {
                    // Read past the payload in bounded pieces, so the connection stays usable.
                    io::copy(&mut (&mut input).take(length), &mut io::sink())?;
                    replies.failure(cookie, EINVAL, &too_large(&request))?;
                    continue;
                }
                let length = request.length as usize;
                let result = if input.buffer().len() >= length {
                    // The payload is already buffered: no copy on the way to the volume.
                    let result =
                        volume.write(request.offset, &input.buffer()[..length], request.fua());
                    input.consume(length);
                    result
                } else {
                    buffer.resize(length, 0);
                    input.read_exact(&mut buffer)?;
                    volume.write(request.offset, &buffer, request.fua())
                };
                replies.answer(cookie, result)?;
            }
            Command::WriteZeroes => {
                let result = volume.write_zeroes(request.offset, length, request.fua());
                replies.answer(cookie, result)?;
            }
            Command::Trim => {
                let result = volume.trim(request.offset, length).map(|()| None);
                replies.answer(cookie, result)?;
            }
            Command::Flush => {
                let result = volume.flush().map(|()| None);
                replies.answer(cookie, result)?;
            }
            Command::Disconnect => {
                replies.flush()?;
                return Ok(());
            }
            other => replies.failure(cookie, EINVAL, &format!("unsupported command {other:?}"))?,
        }
    }
}

fn too_large(request: &Request) -> String {
    format!(
        "{:?} of {} bytes is over the {MAX_PAYLOAD_BYTES}-byte maximum",
        request.command, request.length
    )
}
