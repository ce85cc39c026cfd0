//! The transmission phase (proto.md, "Transmission phase", simple replies): requests are read
//! and served in order, one connection per thread; answers are batched into one write while
//! more requests are already waiting. A bad request gets its errno and the connection goes on;
//! only a broken request header closes it.
//!
//! A throttled volume says when each answer is due; those answers go out from a second thread
//! at their time, so a connection keeps many requests in flight as the emulated devices allow.

use std::collections::BinaryHeap;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::sync::mpsc;
use std::time::Instant;

use heterarchy_device::backend::wait_until;
use heterarchy_volume::Volume;

use super::protocol::*;
use crate::listen::Stream;

/// Answers batched per write: a few 64 KiB reads, or a hundred 4 KiB ones.
const OUTBOX_BYTES: usize = 512 * 1024;

/// One request header: 28 bytes.
struct Header {
    flags: u16,
    command: u16,
    cookie: u64,
    offset: u64,
    length: u32,
}

fn parse_header(bytes: &[u8; 28]) -> Option<Header> {
    let field = |range: std::ops::Range<usize>| &bytes[range];
    let magic = u32::from_be_bytes(field(0..4).try_into().ok()?);
    (magic == REQUEST_MAGIC).then(|| Header {
        flags: u16::from_be_bytes([bytes[4], bytes[5]]),
        command: u16::from_be_bytes([bytes[6], bytes[7]]),
        cookie: u64::from_be_bytes(field(8..16).try_into().expect("8 bytes")),
        offset: u64::from_be_bytes(field(16..24).try_into().expect("8 bytes")),
        length: u32::from_be_bytes(field(24..28).try_into().expect("4 bytes")),
    })
}

/// The errno an NBD client understands for a volume error.
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

fn reply_header(cookie: u64, error: u32) -> [u8; 16] {
    let mut header = [0u8; 16];
    header[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    header[4..8].copy_from_slice(&error.to_be_bytes());
    header[8..].copy_from_slice(&cookie.to_be_bytes());
    header
}

/// Where answers go: into the batch for the socket, or to the thread that sends them when due.
enum Replies {
    Inline(Outbox),
    Delayed(mpsc::Sender<(Instant, Vec<u8>)>),
}

impl Replies {
    fn send(
        &mut self,
        cookie: u64,
        error: u32,
        data: &[u8],
        due: Option<Instant>,
    ) -> io::Result<()> {
        let header = reply_header(cookie, error);
        match self {
            Replies::Inline(outbox) => {
                outbox.write(&header)?;
                outbox.write(data)
            }
            Replies::Delayed(sender) => {
                let mut message = Vec::with_capacity(16 + data.len());
                message.extend_from_slice(&header);
                message.extend_from_slice(data);
                sender
                    .send((due.unwrap_or_else(Instant::now), message))
                    .map_err(|_| io::ErrorKind::BrokenPipe.into())
            }
        }
    }

    /// Answers a READ, reading straight into the outgoing batch where it fits.
    fn read(&mut self, volume: &Volume, header: &Header, scratch: &mut Vec<u8>) -> io::Result<()> {
        let length = header.length as usize;
        if let Replies::Inline(outbox) = self {
            if let Some(room) = outbox.reserve(16 + length)? {
                let (head, data) = room.split_at_mut(16);
                match volume.read(header.offset, data) {
                    Ok(_) => {
                        head.copy_from_slice(&reply_header(header.cookie, 0));
                        return Ok(());
                    }
                    Err(error) => {
                        outbox.len -= 16 + length;
                        return self.send(header.cookie, errno(&error), &[], None);
                    }
                }
            }
        }
        scratch.resize(length, 0);
        match volume.read(header.offset, scratch) {
            Ok(due) => self.send(header.cookie, 0, scratch, due),
            Err(error) => self.send(header.cookie, errno(&error), &[], None),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Replies::Inline(outbox) => outbox.flush(),
            Replies::Delayed(_) => Ok(()),
        }
    }
}

/// Serves requests on `stream` (after negotiation) until the client disconnects.
pub fn serve(input: BufReader<Stream>, output: Stream, volume: &Volume) -> io::Result<()> {
    if !volume.is_throttled() {
        let outbox = Outbox::new(output, OUTBOX_BYTES);
        return serve_requests(input, Replies::Inline(outbox), volume);
    }
    let output = BufWriter::with_capacity(OUTBOX_BYTES, output);
    let (sender, receiver) = mpsc::channel();
    std::thread::scope(|scope| {
        let sending = scope.spawn(move || send_when_due(receiver, output));
        let served = serve_requests(input, Replies::Delayed(sender), volume);
        let sent = sending.join().unwrap_or(Ok(()));
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

fn serve_requests(
    mut input: BufReader<Stream>,
    mut replies: Replies,
    volume: &Volume,
) -> io::Result<()> {
    let mut header_bytes = [0u8; 28];
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        if input.buffer().is_empty() {
            replies.flush()?;
            if input.fill_buf()?.is_empty() {
                return Ok(());
            }
        }
        input.read_exact(&mut header_bytes)?;
        let Some(header) = parse_header(&header_bytes) else {
            replies.flush()?;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad request magic",
            ));
        };
        let fua = header.flags & CMD_FLAG_FUA != 0;
        let length = u64::from(header.length);
        match header.command {
            CMD_READ => {
                if header.length > MAX_PAYLOAD_BYTES {
                    replies.send(header.cookie, EINVAL, &[], None)?;
                    continue;
                }
                replies.read(volume, &header, &mut buffer)?;
            }
            CMD_WRITE => {
                if header.length > MAX_PAYLOAD_BYTES {
                    // Read past the payload in bounded pieces, so the connection stays usable.
                    io::copy(&mut (&mut input).take(length), &mut io::sink())?;
                    replies.send(header.cookie, EINVAL, &[], None)?;
                    continue;
                }
                let length = header.length as usize;
                let result = if input.buffer().len() >= length {
                    // The payload is already buffered: no copy on the way to the volume.
                    let result = volume.write(header.offset, &input.buffer()[..length], fua);
                    input.consume(length);
                    result
                } else {
                    buffer.resize(length, 0);
                    input.read_exact(&mut buffer)?;
                    volume.write(header.offset, &buffer, fua)
                };
                answer(&mut replies, header.cookie, result)?;
            }
            CMD_WRITE_ZEROES => {
                let result = volume.write_zeroes(header.offset, length, fua);
                answer(&mut replies, header.cookie, result)?;
            }
            CMD_TRIM => {
                let result = volume.trim(header.offset, length).map(|()| None);
                answer(&mut replies, header.cookie, result)?;
            }
            CMD_FLUSH => {
                let result = volume.flush().map(|()| None);
                answer(&mut replies, header.cookie, result)?;
            }
            CMD_DISC => {
                replies.flush()?;
                return Ok(());
            }
            _ => replies.send(header.cookie, EINVAL, &[], None)?,
        }
    }
}

fn answer(
    replies: &mut Replies,
    cookie: u64,
    result: io::Result<Option<Instant>>,
) -> io::Result<()> {
    match result {
        Ok(due) => replies.send(cookie, 0, &[], due),
        Err(error) => replies.send(cookie, errno(&error), &[], None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_need_the_request_magic() {
        let mut bytes = [0u8; 28];
        bytes[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        bytes[6..8].copy_from_slice(&CMD_WRITE.to_be_bytes());
        bytes[24..28].copy_from_slice(&4096u32.to_be_bytes());
        let header = parse_header(&bytes).unwrap();
        assert_eq!((header.command, header.length), (CMD_WRITE, 4096));
        bytes[0] ^= 1;
        assert!(parse_header(&bytes).is_none());
    }
}
