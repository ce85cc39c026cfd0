//! An incremental parser of memcached text-protocol replies. Bytes are fed as they arrive, cut
//! anywhere; values are counted and skipped rather than copied, and only a line split between
//! two reads is buffered, so parsing allocates nothing once that buffer has grown to the
//! longest line.

use crate::verify::{digest, DIGEST_START, NAMED_BYTES};

/// The longest reply line accepted; memcached's lines are far shorter (a `VALUE` line with the
/// longest key is under 300 bytes), so a longer one means the stream is not memcached's.
const LINE_MAX: usize = 4096;

/// One complete reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `VALUE <key> <flags> <bytes>[ <cas>]` blocks closed by `END`: how many values and the
    /// length of the first (a miss is no value at all), and, from a capturing parser, what the
    /// first held.
    Values {
        count: u32,
        first_bytes: u64,
        first: Option<Captured>,
    },
    /// `STORED`.
    Stored,
    /// Any other line, without its `\r\n`: `NOT_STORED`, `EXISTS`, `ERROR`, `CLIENT_ERROR ...`,
    /// `SERVER_ERROR ...`. Only these replies allocate, and a healthy run has none.
    Line(String),
}

/// What a capturing parser keeps of a reply's first value: its first bytes (those that name
/// a verified value's key and version) and a hash of all of it (`verify::digest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Captured {
    pub prefix: [u8; NAMED_BYTES],
    pub digest: u64,
}

/// Bytes that cannot be memcached's replies, with what was found: the reply stream is lost
/// from there on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// A value not followed by `\r\n`.
    #[error("a value is followed by {0:?} instead of \\r\\n")]
    AfterValue(char),
    /// A line longer than any reply's.
    #[error("a reply line is longer than {LINE_MAX} bytes")]
    LineTooLong,
    /// A line ending in `\n` alone.
    #[error("the reply line \"{0}\" ends without \\r")]
    NoCarriageReturn(String),
    /// A `VALUE` line without a readable length.
    #[error("malformed value header \"{0}\"")]
    ValueHeader(String),
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Reading a line (it may have begun in an earlier read, then it is in `line`).
    Line,
    /// Skipping this many more bytes of a value.
    Data { remaining: u64 },
    /// Expecting the `\r\n` after a value; `matched` of its bytes have arrived.
    DataEnd { matched: usize },
}

/// The parser of one connection's reply stream.
#[derive(Debug)]
pub struct ReplyParser {
    state: State,
    /// The beginning of a line cut by the end of a read.
    line: Vec<u8>,
    /// Values of the `VALUE ... END` reply under way.
    values: u32,
    first_bytes: u64,
    /// Whether to keep what the first value holds, and what is kept so far: its bytes seen,
    /// first bytes and hash.
    capture: bool,
    first_seen: u64,
    first: Captured,
}

impl ReplyParser {
    /// A parser at the start of a stream.
    pub fn new() -> ReplyParser {
        ReplyParser {
            state: State::Line,
            line: Vec::new(),
            values: 0,
            first_bytes: 0,
            capture: false,
            first_seen: 0,
            first: Captured {
                prefix: [0; NAMED_BYTES],
                digest: DIGEST_START,
            },
        }
    }

    /// A parser that also keeps what each reply's first value holds ([`Captured`]).
    pub fn capturing() -> ReplyParser {
        ReplyParser {
            capture: true,
            ..ReplyParser::new()
        }
    }

    /// Consumes bytes of `input` up to the end of the first reply they complete. Returns how
    /// many bytes it consumed and that reply; with no reply, all of `input` was consumed and
    /// the parser remembers where it is. Call again with the rest of `input` for more replies.
    pub fn parse(&mut self, input: &[u8]) -> Result<(usize, Option<Reply>), ReplyError> {
        let mut used = 0;
        while used < input.len() {
            let rest = &input[used..];
            match self.state {
                State::Line => {
                    let Some(newline) = rest.iter().position(|&byte| byte == b'\n') else {
                        self.keep_partial_line(rest)?;
                        return Ok((input.len(), None));
                    };
                    used += newline + 1;
                    let reply = if self.line.is_empty() {
                        self.end_line(&rest[..=newline])?
                    } else {
                        self.keep_partial_line(&rest[..=newline])?;
                        let line = std::mem::take(&mut self.line);
                        let reply = self.end_line(&line);
                        // Keep the grown buffer for the next split line.
                        self.line = line;
                        self.line.clear();
                        reply?
                    };
                    if reply.is_some() {
                        return Ok((used, reply));
                    }
                }
                State::Data { remaining } => {
                    let skipped = remaining.min(rest.len() as u64);
                    if self.capture && self.values == 1 {
                        let data = &rest[..skipped as usize];
                        let seen = self.first_seen as usize;
                        if seen < NAMED_BYTES {
                            let copied = data.len().min(NAMED_BYTES - seen);
                            self.first.prefix[seen..seen + copied].copy_from_slice(&data[..copied]);
                        }
                        self.first.digest = digest(self.first.digest, data);
                        self.first_seen += skipped;
                    }
                    used += skipped as usize;
                    self.state = match remaining - skipped {
                        0 => State::DataEnd { matched: 0 },
                        remaining => State::Data { remaining },
                    };
                }
                State::DataEnd { matched } => {
                    if rest[0] != b"\r\n"[matched] {
                        return Err(ReplyError::AfterValue(char::from(rest[0])));
                    }
                    used += 1;
                    self.state = match matched {
                        0 => State::DataEnd { matched: 1 },
                        _ => State::Line,
                    };
                }
            }
        }
        Ok((used, None))
    }

    fn keep_partial_line(&mut self, bytes: &[u8]) -> Result<(), ReplyError> {
        if self.line.len() + bytes.len() > LINE_MAX {
            return Err(ReplyError::LineTooLong);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// Interprets one whole line (with its `\n`): a reply, or `None` when it opens a value.
    fn end_line(&mut self, line: &[u8]) -> Result<Option<Reply>, ReplyError> {
        let Some(text) = line.strip_suffix(b"\r\n") else {
            return Err(ReplyError::NoCarriageReturn(
                String::from_utf8_lossy(line).trim_end().to_string(),
            ));
        };
        if let Some(fields) = text.strip_prefix(b"VALUE ") {
            let bytes = value_length(fields).ok_or_else(|| {
                ReplyError::ValueHeader(String::from_utf8_lossy(text).to_string())
            })?;
            if self.values == 0 {
                self.first_bytes = bytes;
            }
            self.values = self.values.saturating_add(1);
            self.state = State::Data { remaining: bytes };
            return Ok(None);
        }
        let reply = match text {
            b"END" => Reply::Values {
                count: self.values,
                first_bytes: self.first_bytes,
                first: (self.capture && self.values > 0).then_some(self.first),
            },
            b"STORED" => Reply::Stored,
            other => Reply::Line(String::from_utf8_lossy(other).into_owned()),
        };
        self.values = 0;
        self.first_bytes = 0;
        self.first_seen = 0;
        self.first = Captured {
            prefix: [0; NAMED_BYTES],
            digest: DIGEST_START,
        };
        Ok(Some(reply))
    }
}

/// The `<bytes>` of `<key> <flags> <bytes>[ <cas>]`.
fn value_length(fields: &[u8]) -> Option<u64> {
    let mut words = fields.split(|&byte| byte == b' ');
    let (_key, _flags, bytes) = (words.next()?, words.next()?, words.next()?);
    let cas = words.next();
    if words.next().is_some() || cas.is_some_and(<[u8]>::is_empty) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reply in `chunks` fed in order, checking that each call either completes a reply
    /// or consumes its whole input.
    fn replies<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<Reply>, ReplyError> {
        let mut parser = ReplyParser::new();
        let mut out = Vec::new();
        for mut chunk in chunks {
            while !chunk.is_empty() {
                let (used, reply) = parser.parse(chunk)?;
                assert!(used > 0 && (reply.is_some() || used == chunk.len()));
                out.extend(reply);
                chunk = &chunk[used..];
            }
        }
        Ok(out)
    }

    /// Replies of every kind back to back, and what they parse into: a value of newlines, a
    /// miss, a value that looks like `END` with a CAS, a multi-get, a value of no bytes, and
    /// error lines.
    fn stream() -> (Vec<u8>, Vec<Reply>) {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"VALUE key1 0 7\r\n\n\n\n\n\n\n\n\r\nEND\r\n");
        bytes.extend_from_slice(b"END\r\nSTORED\r\n");
        bytes.extend_from_slice(b"VALUE k 4294967295 3 12345\r\nEND\r\nEND\r\n");
        bytes.extend_from_slice(b"VALUE a 0 2\r\nab\r\nVALUE b 0 0\r\n\r\nEND\r\n");
        bytes.extend_from_slice(b"SERVER_ERROR object too large for cache\r\n");
        bytes.extend_from_slice(b"ERROR\r\nCLIENT_ERROR bad data chunk\r\nNOT_STORED\r\n");
        let values = |count, first_bytes| Reply::Values {
            count,
            first_bytes,
            first: None,
        };
        let expected = vec![
            values(1, 7),
            values(0, 0),
            Reply::Stored,
            values(1, 3),
            values(2, 2),
            Reply::Line("SERVER_ERROR object too large for cache".into()),
            Reply::Line("ERROR".into()),
            Reply::Line("CLIENT_ERROR bad data chunk".into()),
            Reply::Line("NOT_STORED".into()),
        ];
        (bytes, expected)
    }

    #[test]
    fn replies_split_at_every_byte_parse_the_same() {
        let (bytes, expected) = stream();
        assert_eq!(replies([bytes.as_slice()]), Ok(expected.clone()));
        for cut in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(cut);
            assert_eq!(replies([head, tail]), Ok(expected.clone()), "cut at {cut}");
        }
        assert_eq!(replies(bytes.chunks(1)), Ok(expected));
    }

    #[test]
    fn broken_streams_are_errors_wherever_they_are_cut() {
        let long_line = [b'x'; LINE_MAX + 1];
        let broken: [&[u8]; 5] = [
            b"VALUE k 0 3\r\nabcX\r\nEND\r\n",
            b"STORED\n",
            b"VALUE k 0 three\r\n",
            b"VALUE k 0 3 1 2\r\n",
            &long_line,
        ];
        for bytes in broken {
            assert!(
                replies([bytes]).is_err(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
            for cut in 0..=bytes.len() {
                let (head, tail) = bytes.split_at(cut);
                assert!(replies([head, tail]).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_capturing_parser_keeps_the_first_values_start_and_hash_however_it_is_cut() {
        let mut value = Vec::new();
        crate::verify::append_value(7, 3, 100, &mut value);
        let mut bytes = b"VALUE k 0 100\r\n".to_vec();
        bytes.extend_from_slice(&value);
        bytes.extend_from_slice(b"\r\nVALUE k2 0 2\r\nzz\r\nEND\r\nEND\r\n");
        let expected_first = Captured {
            prefix: value[..NAMED_BYTES].try_into().unwrap(),
            digest: crate::verify::digest_of(&value),
        };
        for cut in 0..=bytes.len() {
            let mut parser = ReplyParser::capturing();
            let (head, tail) = bytes.split_at(cut);
            let mut replies = Vec::new();
            for mut chunk in [head, tail] {
                while !chunk.is_empty() {
                    let (used, reply) = parser.parse(chunk).unwrap();
                    replies.extend(reply);
                    chunk = &chunk[used..];
                }
            }
            assert_eq!(
                replies,
                [
                    Reply::Values {
                        count: 2,
                        first_bytes: 100,
                        first: Some(expected_first)
                    },
                    Reply::Values {
                        count: 0,
                        first_bytes: 0,
                        first: None
                    }
                ],
                "cut at {cut}"
            );
        }
    }
}
