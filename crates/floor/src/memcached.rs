//! Just enough of memcached's text protocol (memcached doc/protocol.txt, "Retrieval command",
//! "Storage commands") for `heterarchy loadgen kv`: `get` answers every key with one constant
//! value, `set` discards its data block and answers `STORED`, `quit` closes; any other line is
//! answered `ERROR`. One `write` per request; requests are read into one buffer per connection,
//! so that a client with one request outstanding costs one `read` per request.

use std::io;

use crate::link::Link;

/// The longest command line taken (memcached's own limit is 2048 bytes); a longer one is
/// answered `CLIENT_ERROR` and the connection closed, as memcached does.
const LINE_MAX_BYTES: usize = 2048;
/// Bytes read at once: room for many pipelined `get`s or a `set` of a few KiB.
const READ_BUFFER_BYTES: usize = 64 << 10;

/// One connection's requests: bytes read and not yet answered, and the data of a `set` still
/// to discard.
pub struct Session {
    /// A hit's answer after its key: ` 0 <bytes>\r\n<value>\r\n`.
    hit_tail: std::sync::Arc<[u8]>,
    input: Vec<u8>,
    /// `input[start..end]` is unanswered.
    start: usize,
    end: usize,
    /// Bytes of a `set`'s data block (with its `\r\n`) still to arrive and be dropped, and
    /// whether to answer it.
    discarding: usize,
    answer_set: bool,
    answer: Vec<u8>,
}

/// What [`answer_line`] made of one command line.
enum Line {
    /// Answered: go on.
    Served,
    /// A `set`: drop its data block of `bytes`, then answer `STORED` if `answer`.
    Discard { bytes: usize, answer: bool },
    /// `quit`, or a line that ends the connection.
    Close,
}

impl Session {
    /// A session answering every key of a `get` with the value [`hit_tail`] composed.
    pub fn new(hit_tail: std::sync::Arc<[u8]>) -> Session {
        Session {
            hit_tail,
            input: vec![0; READ_BUFFER_BYTES],
            start: 0,
            end: 0,
            discarding: 0,
            answer_set: false,
            answer: Vec::new(),
        }
    }

    /// Reads and answers requests until the socket has no more or the client must first take
    /// its answers; `Ok(false)` when the connection should close.
    pub fn serve(&mut self, link: &mut Link) -> io::Result<bool> {
        loop {
            if link.blocked() {
                return Ok(true);
            }
            if self.start == self.end {
                (self.start, self.end) = (0, 0);
            } else if self.end == self.input.len() {
                self.input.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            }
            let room = self.input.len() - self.end;
            let Some(count) = link.read(&mut self.input[self.end..])? else {
                return Ok(true);
            };
            if count == 0 {
                return Ok(false);
            }
            self.end += count;
            if !self.answer_buffered(link)? {
                return Ok(false);
            }
            // Edge-triggered: a read that did not fill the room emptied the socket, and bytes
            // arriving later raise a new event, so the read that would only find nothing is
            // skipped.
            if count < room {
                return Ok(true);
            }
        }
    }

    /// Answers every whole request in the buffer; `Ok(false)` when the connection should close.
    fn answer_buffered(&mut self, link: &mut Link) -> io::Result<bool> {
        while self.start < self.end {
            if self.discarding > 0 {
                let dropped = self.discarding.min(self.end - self.start);
                self.start += dropped;
                self.discarding -= dropped;
                if self.discarding == 0 && self.answer_set {
                    link.answer(b"STORED\r\n")?;
                }
                continue;
            }
            let pending = &self.input[self.start..self.end];
            let Some(newline) = pending.iter().position(|&byte| byte == b'\n') else {
                if pending.len() > LINE_MAX_BYTES {
                    link.answer(b"CLIENT_ERROR line too long\r\n")?;
                    return Ok(false);
                }
                return Ok(true);
            };
            let line_end = self.start + newline;
            let line_start = self.start;
            self.start = line_end + 1;
            if newline > LINE_MAX_BYTES {
                link.answer(b"CLIENT_ERROR line too long\r\n")?;
                return Ok(false);
            }
            let mut line = &self.input[line_start..line_end];
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            match answer_line(line, &self.hit_tail, &mut self.answer, link)? {
                Line::Served => {}
                Line::Discard { bytes, answer } => {
                    self.discarding = bytes;
                    self.answer_set = answer;
                }
                Line::Close => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// Answers one command line (without its line end), composing a hit's answer in `answer`.
fn answer_line(
    line: &[u8],
    hit_tail: &[u8],
    answer: &mut Vec<u8>,
    link: &mut Link,
) -> io::Result<Line> {
    let mut words = line
        .split(|&byte| byte == b' ')
        .filter(|word| !word.is_empty());
    match words.next() {
        Some(b"get" | b"gets") => {
            answer.clear();
            for key in words {
                answer.extend_from_slice(b"VALUE ");
                answer.extend_from_slice(key);
                answer.extend_from_slice(hit_tail);
            }
            if answer.is_empty() {
                link.answer(b"ERROR\r\n")?;
            } else {
                answer.extend_from_slice(b"END\r\n");
                link.answer(answer)?;
            }
            Ok(Line::Served)
        }
        Some(b"set") => {
            // set <key> <flags> <exptime> <bytes> [noreply]
            let (Some(_key), Some(_flags), Some(_exptime), Some(bytes)) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                link.answer(b"ERROR\r\n")?;
                return Ok(Line::Served);
            };
            let noreply = match (words.next(), words.next()) {
                (None, _) => false,
                (Some(b"noreply"), None) => true,
                _ => {
                    link.answer(b"CLIENT_ERROR bad command line format\r\n")?;
                    return Ok(Line::Served);
                }
            };
            let Some(bytes) = std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse::<usize>().ok())
            else {
                link.answer(b"CLIENT_ERROR bad command line format\r\n")?;
                return Ok(Line::Served);
            };
            Ok(Line::Discard {
                // The data block and its \r\n.
                bytes: bytes.saturating_add(2),
                answer: !noreply,
            })
        }
        Some(b"quit") => Ok(Line::Close),
        _ => {
            link.answer(b"ERROR\r\n")?;
            Ok(Line::Served)
        }
    }
}

/// The bytes of a hit that follow its key, ` 0 <bytes>\r\n<value>\r\n`, composed once for
/// every answer.
pub fn hit_tail(value_bytes: usize) -> std::sync::Arc<[u8]> {
    let mut tail = format!(" 0 {value_bytes}\r\n").into_bytes();
    tail.extend((b'a'..=b'z').cycle().take(value_bytes));
    tail.extend_from_slice(b"\r\n");
    tail.into()
}
