//! Just enough NBD (proto.md of the NetworkBlockDevice project) for fio's nbd engine and the
//! project's NBD client: fixed newstyle negotiation by the project's own [`ServerHandshake`]
//! (`NBD_OPT_GO`, `NBD_OPT_EXPORT_NAME`, `NBD_OPT_INFO`, `NBD_OPT_LIST`,
//! `NBD_OPT_STRUCTURED_REPLY`; other options get `NBD_REP_ERR_UNSUP`), then one read-only export
//! of zeros: `NBD_CMD_READ` gets its zeros in a simple reply, or in one `NBD_REPLY_TYPE_OFFSET_DATA`
//! chunk when the client negotiated structured replies (as libnbd, and so fio, does: proto.md
//! then forbids a simple reply to a read), the same answer heterarchy's server sends;
//! `NBD_CMD_DISC` closes; anything else gets `NBD_EPERM` (a write, whose payload is dropped) or
//! `NBD_EINVAL`.
//!
//! Negotiation runs once per connection on a thread of its own with blocking I/O, so that the
//! event loop holds only transmission, where each request costs one `read` (its 28-byte
//! header) and one `write` (the reply header and data together).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use heterarchy_nbd::constants::{
    EINVAL, EPERM, FLAG_HAS_FLAGS, FLAG_READ_ONLY, REQUEST_HEADER_BYTES, SIMPLE_REPLY_HEADER_BYTES,
};
use heterarchy_nbd::transmission::{compose_error, offset_data_header, simple_reply_header};
use heterarchy_nbd::{
    BlockSizes, Command, ExportInfo, Parsed, Request, ServerEvent, ServerHandshake,
};

use crate::link::Link;

/// The export's name; the empty name reaches it too.
pub const EXPORT_NAME: &str = "floor";
/// How long a client may take over any step of negotiation.
const NEGOTIATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The one export of `size_bytes` zeros, read-only.
pub fn export(size_bytes: u64) -> ExportInfo {
    ExportInfo {
        name: EXPORT_NAME.to_string(),
        size_bytes,
        transmission_flags: FLAG_HAS_FLAGS | FLAG_READ_ONLY,
        block_sizes: BlockSizes::DEFAULT,
    }
}

/// How a client chose to go on to transmission.
#[derive(Debug)]
pub struct Chosen {
    /// Bytes the client sent after its last option, the start of transmission.
    pub early: Vec<u8>,
    /// proto.md `NBD_OPT_STRUCTURED_REPLY` was negotiated.
    pub structured_replies: bool,
}

/// Negotiates with a new client over the blocking `stream` (proto.md "Fixed newstyle
/// negotiation"): `Ok(Some(_))` when transmission begins, `Ok(None)` when the client left.
pub fn negotiate(stream: &mut TcpStream, export: &ExportInfo) -> io::Result<Option<Chosen>> {
    stream.set_read_timeout(Some(NEGOTIATION_TIMEOUT))?;
    stream.set_write_timeout(Some(NEGOTIATION_TIMEOUT))?;
    stream.write_all(&ServerHandshake::greeting())?;
    let catalog = std::slice::from_ref(export);
    let mut handshake = ServerHandshake::new();
    let mut input = Vec::new();
    let mut output = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut consumed_total = 0;
        let mut outcome = None;
        loop {
            let parsed = handshake
                .receive(&input[consumed_total..], catalog, &mut output)
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error.to_string()))?;
            let Parsed::Found { value, consumed } = parsed else {
                break;
            };
            consumed_total += consumed;
            match value {
                ServerEvent::Negotiating => {}
                ServerEvent::Transmission {
                    structured_replies, ..
                } => {
                    outcome = Some(Some(structured_replies));
                    break;
                }
                // The floor offers no TLS, so a handshake made with `new` never asks for it.
                ServerEvent::Closed | ServerEvent::StartTls => {
                    outcome = Some(None);
                    break;
                }
            }
        }
        input.drain(..consumed_total);
        if !output.is_empty() {
            stream.write_all(&output)?;
            output.clear();
        }
        match outcome {
            Some(Some(structured_replies)) => {
                stream.set_read_timeout(None)?;
                stream.set_write_timeout(None)?;
                return Ok(Some(Chosen {
                    early: input,
                    structured_replies,
                }));
            }
            Some(None) => return Ok(None),
            None => {}
        }
        let count = stream.read(&mut chunk)?;
        if count == 0 {
            return Ok(None);
        }
        input.extend_from_slice(&chunk[..count]);
    }
}

/// One connection in transmission.
pub struct Session {
    size_bytes: u64,
    header: [u8; REQUEST_HEADER_BYTES],
    /// Bytes of `header` received.
    filled: usize,
    /// Bytes the client sent with its last negotiation message, served before the socket.
    early: Vec<u8>,
    /// A write's payload still to arrive and be dropped.
    discarding: u64,
    structured_replies: bool,
    /// A read's reply header followed by zeros, as long as the longest read so far.
    reply: Vec<u8>,
    /// The bytes of answers without data.
    error_reply: Vec<u8>,
}

/// The length of a read's reply header: a simple reply's, or an `OFFSET_DATA` chunk's with its
/// offset.
fn read_header_bytes(structured_replies: bool) -> usize {
    if structured_replies {
        offset_data_header(0, 0, 1, true).len()
    } else {
        SIMPLE_REPLY_HEADER_BYTES
    }
}

impl Session {
    /// Transmission over an export of `size_bytes`, as the client chose it.
    pub fn new(size_bytes: u64, chosen: Chosen) -> Session {
        Session {
            size_bytes,
            header: [0; REQUEST_HEADER_BYTES],
            filled: 0,
            early: chosen.early,
            discarding: 0,
            structured_replies: chosen.structured_replies,
            reply: vec![0; read_header_bytes(chosen.structured_replies) + 4096],
            error_reply: Vec::new(),
        }
    }

    /// Reads and answers requests until the socket has no more or the client must first take
    /// its answers; `Ok(false)` when the connection should close (`NBD_CMD_DISC`, the client
    /// left, or a request header without the request magic, which proto.md lets a server
    /// answer by closing).
    pub fn serve(&mut self, link: &mut Link) -> io::Result<bool> {
        let mut scratch = [0u8; 4096];
        loop {
            if link.blocked() {
                return Ok(true);
            }
            // One read per request: a header's bytes and no more, so that each request is
            // read by a call of its own, as the floor's definition says.
            let buffer = if self.discarding > 0 {
                let wanted = self.discarding.min(scratch.len() as u64) as usize;
                &mut scratch[..wanted]
            } else {
                &mut self.header[self.filled..]
            };
            let count = if self.early.is_empty() {
                match link.read(buffer)? {
                    None => return Ok(true),
                    Some(0) => return Ok(false),
                    Some(count) => count,
                }
            } else {
                let count = buffer.len().min(self.early.len());
                buffer[..count].copy_from_slice(&self.early[..count]);
                self.early.drain(..count);
                count
            };
            if self.discarding > 0 {
                self.discarding -= count as u64;
                continue;
            }
            self.filled += count;
            if self.filled < REQUEST_HEADER_BYTES {
                continue;
            }
            self.filled = 0;
            let request = match Request::parse(&self.header) {
                Ok(Parsed::Found { value, .. }) => value,
                Ok(Parsed::NeedMore) => return Ok(false),
                Err(error) => {
                    eprintln!("heterarchy-floor: closing a connection: {error}");
                    return Ok(false);
                }
            };
            if !self.answer(&request, link)? {
                return Ok(false);
            }
        }
    }

    /// Answers one request; `Ok(false)` on `NBD_CMD_DISC`.
    fn answer(&mut self, request: &Request, link: &mut Link) -> io::Result<bool> {
        let error = match request.command {
            Command::Read => {
                let length = u64::from(request.length);
                let inside = request
                    .offset
                    .checked_add(length)
                    .is_some_and(|end| end <= self.size_bytes);
                if inside && request.length > 0 && request.length <= BlockSizes::DEFAULT.maximum {
                    let header_bytes = read_header_bytes(self.structured_replies);
                    let reply_bytes = header_bytes + request.length as usize;
                    if self.reply.len() < reply_bytes {
                        self.reply.resize(reply_bytes, 0);
                    }
                    let header = &mut self.reply[..header_bytes];
                    if self.structured_replies {
                        header.copy_from_slice(&offset_data_header(
                            request.cookie,
                            request.offset,
                            request.length as usize,
                            true,
                        ));
                    } else {
                        header.copy_from_slice(&simple_reply_header(request.cookie, 0));
                    }
                    link.answer(&self.reply[..reply_bytes])?;
                    return Ok(true);
                }
                EINVAL
            }
            Command::Disconnect => return Ok(false),
            Command::Write => {
                self.discarding = u64::from(request.length);
                EPERM
            }
            _ => EINVAL,
        };
        self.error_reply.clear();
        if self.structured_replies {
            compose_error(&mut self.error_reply, request.cookie, error, "", true);
        } else {
            self.error_reply
                .extend_from_slice(&simple_reply_header(request.cookie, error));
        }
        link.answer(&self.error_reply)?;
        Ok(true)
    }
}
