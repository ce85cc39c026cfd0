//! Structured reply chunks (proto.md "Structured reply chunk message", "Structured reply
//! types"): a 20-byte header of magic, flags, type, cookie and payload length, then the
//! payload. Servers compose the chunks a server of this crate sends (NONE, OFFSET_DATA,
//! OFFSET_HOLE, ERROR); clients parse every chunk type they may legally receive.

use crate::constants::*;
use crate::parse::{Fields, ProtocolError};

/// A structured reply chunk's header (proto.md "Structured reply chunk message").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Reply flags (proto.md "Structured reply flags"): `REPLY_FLAG_DONE` on the last chunk.
    pub flags: u16,
    /// The chunk type (proto.md "Structured reply types"): `REPLY_TYPE_*`.
    pub chunk_type: u16,
    /// The cookie of the request this chunk answers.
    pub cookie: u64,
    /// The payload's length in bytes.
    pub length: u32,
}

impl ChunkHeader {
    /// Whether this is the reply's last chunk (`NBD_REPLY_FLAG_DONE`).
    pub fn done(&self) -> bool {
        self.flags & REPLY_FLAG_DONE != 0
    }

    /// Whether the chunk reports an error (proto.md: "All error chunk types have bit 15 set").
    pub fn is_error(&self) -> bool {
        self.chunk_type & REPLY_TYPE_FLAG_ERROR != 0
    }

    /// The 20 header bytes.
    pub fn encode(&self) -> [u8; STRUCTURED_REPLY_HEADER_BYTES] {
        let mut header = [0u8; STRUCTURED_REPLY_HEADER_BYTES];
        header[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        header[4..6].copy_from_slice(&self.flags.to_be_bytes());
        header[6..8].copy_from_slice(&self.chunk_type.to_be_bytes());
        header[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        header[16..20].copy_from_slice(&self.length.to_be_bytes());
        header
    }

    /// Checks the payload length against what proto.md's "Structured reply types" requires of
    /// the chunk's type, before any payload is read, so that a client never buffers a payload
    /// it would refuse. Types this crate never negotiates (BLOCK_STATUS) and unknown non-error
    /// types are errors: proto.md says to hard-disconnect on them.
    pub(crate) fn check(&self) -> Result<(), ProtocolError> {
        let length = self.length;
        let fits = match self.chunk_type {
            REPLY_TYPE_NONE => {
                if !self.done() {
                    return Err(ProtocolError::new(
                        "structured reply flags",
                        "expected NBD_REPLY_FLAG_DONE on an NBD_REPLY_TYPE_NONE chunk",
                    ));
                }
                length == 0
            }
            REPLY_TYPE_OFFSET_DATA => (9..=MAX_PAYLOAD_BYTES + 8).contains(&length),
            REPLY_TYPE_OFFSET_HOLE => length == 12,
            REPLY_TYPE_ERROR => (6..=6 + MAX_STRING_BYTES as u32).contains(&length),
            REPLY_TYPE_ERROR_OFFSET => (14..=14 + MAX_STRING_BYTES as u32).contains(&length),
            // proto.md: an unknown error type is an error of the reply, not of the stream,
            // as long as its message fits.
            other if other & REPLY_TYPE_FLAG_ERROR != 0 => (6..=MAX_OPTION_BYTES).contains(&length),
            other => {
                return Err(ProtocolError::new(
                    "structured reply type",
                    format!(
                        "expected NONE, OFFSET_DATA, OFFSET_HOLE or an error type, found {other}"
                    ),
                ))
            }
        };
        if fits {
            Ok(())
        } else {
            Err(ProtocolError::new(
                "structured reply length",
                format!(
                    "{length} bytes does not fit a chunk of type {:#06x}",
                    self.chunk_type
                ),
            ))
        }
    }
}

/// A structured reply chunk's payload, decoded (proto.md "Structured reply types").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkPayload<'a> {
    /// `NBD_REPLY_TYPE_NONE`: the reply ends here.
    None,
    /// `NBD_REPLY_TYPE_OFFSET_DATA`: `data` is the export's content at `offset`.
    OffsetData { offset: u64, data: &'a [u8] },
    /// `NBD_REPLY_TYPE_OFFSET_HOLE`: `length` bytes at `offset` read as zeroes.
    OffsetHole { offset: u64, length: u32 },
    /// `NBD_REPLY_TYPE_ERROR`, `NBD_REPLY_TYPE_ERROR_OFFSET` (with `offset`), or an unknown
    /// error type (proto.md: the reply failed, the connection goes on).
    Error {
        error: u32,
        message: &'a [u8],
        offset: Option<u64>,
    },
}

/// Decodes the payload of the chunk `header` introduces; `payload` must be exactly its
/// `length` bytes. Errors name the field that breaks proto.md's rules.
pub fn parse_chunk_payload<'a>(
    header: &ChunkHeader,
    payload: &'a [u8],
) -> Result<ChunkPayload<'a>, ProtocolError> {
    header.check()?;
    if payload.len() != header.length as usize {
        return Err(ProtocolError::new(
            "structured reply payload",
            format!(
                "expected the header's {} bytes, given {}",
                header.length,
                payload.len()
            ),
        ));
    }
    // `check` has bounded every length below, so none of these reads can run out.
    let mut fields = Fields::new(payload);
    let short = || ProtocolError::new("structured reply payload", "shorter than its type needs");
    match header.chunk_type {
        REPLY_TYPE_NONE => Ok(ChunkPayload::None),
        REPLY_TYPE_OFFSET_DATA => {
            let offset = fields.u64().ok_or_else(short)?;
            let data = fields.bytes(fields.remaining()).ok_or_else(short)?;
            Ok(ChunkPayload::OffsetData { offset, data })
        }
        REPLY_TYPE_OFFSET_HOLE => {
            let offset = fields.u64().ok_or_else(short)?;
            let length = fields.u32().ok_or_else(short)?;
            if length == 0 {
                return Err(ProtocolError::new(
                    "hole size",
                    "expected a nonzero NBD_REPLY_TYPE_OFFSET_HOLE size",
                ));
            }
            Ok(ChunkPayload::OffsetHole { offset, length })
        }
        chunk_type => {
            let error = fields.u32().ok_or_else(short)?;
            let message_bytes = fields.u16().ok_or_else(short)?;
            if error == 0 {
                return Err(ProtocolError::new(
                    "error chunk error",
                    "expected a nonzero error value",
                ));
            }
            let trailer = if chunk_type == REPLY_TYPE_ERROR_OFFSET {
                8
            } else {
                0
            };
            if usize::from(message_bytes) + trailer > fields.remaining() {
                return Err(ProtocolError::new(
                    "error chunk message length",
                    format!(
                        "{message_bytes} bytes does not fit the chunk's {} bytes",
                        header.length
                    ),
                ));
            }
            let message = fields.bytes(usize::from(message_bytes)).ok_or_else(short)?;
            let offset = match chunk_type {
                REPLY_TYPE_ERROR_OFFSET => Some(fields.u64().ok_or_else(short)?),
                _ => None,
            };
            Ok(ChunkPayload::Error {
                error,
                message,
                offset,
            })
        }
    }
}

fn flags(done: bool) -> u16 {
    if done {
        REPLY_FLAG_DONE
    } else {
        0
    }
}

/// The 28 bytes that start an `NBD_REPLY_TYPE_OFFSET_DATA` chunk of `data_bytes` bytes at
/// `offset` (the chunk header and the offset), for a caller that writes the data after them
/// itself, such as a read straight into a send buffer. `data_bytes` must be 1 to 32 MiB
/// (proto.md: "*length* MUST be at least 9").
pub fn offset_data_header(
    cookie: u64,
    offset: u64,
    data_bytes: usize,
    done: bool,
) -> [u8; STRUCTURED_REPLY_HEADER_BYTES + OFFSET_DATA_PREFIX_BYTES] {
    debug_assert!((1..=MAX_PAYLOAD_BYTES as usize).contains(&data_bytes));
    let header = ChunkHeader {
        flags: flags(done),
        chunk_type: REPLY_TYPE_OFFSET_DATA,
        cookie,
        length: u32::try_from(OFFSET_DATA_PREFIX_BYTES + data_bytes)
            .expect("an OFFSET_DATA chunk holds at most 32 MiB"),
    };
    let mut bytes = [0u8; STRUCTURED_REPLY_HEADER_BYTES + OFFSET_DATA_PREFIX_BYTES];
    bytes[..STRUCTURED_REPLY_HEADER_BYTES].copy_from_slice(&header.encode());
    bytes[STRUCTURED_REPLY_HEADER_BYTES..].copy_from_slice(&offset.to_be_bytes());
    bytes
}

/// Appends an `NBD_REPLY_TYPE_OFFSET_DATA` chunk: `data` read at `offset` (1 byte to 32 MiB).
pub fn compose_offset_data(
    output: &mut Vec<u8>,
    cookie: u64,
    offset: u64,
    data: &[u8],
    done: bool,
) {
    output.extend_from_slice(&offset_data_header(cookie, offset, data.len(), done));
    output.extend_from_slice(data);
}

/// Appends an `NBD_REPLY_TYPE_OFFSET_HOLE` chunk: `hole_bytes` (nonzero) at `offset` read as
/// zeroes.
pub fn compose_offset_hole(
    output: &mut Vec<u8>,
    cookie: u64,
    offset: u64,
    hole_bytes: u32,
    done: bool,
) {
    debug_assert_ne!(hole_bytes, 0);
    let header = ChunkHeader {
        flags: flags(done),
        chunk_type: REPLY_TYPE_OFFSET_HOLE,
        cookie,
        length: 12,
    };
    output.extend_from_slice(&header.encode());
    output.extend_from_slice(&offset.to_be_bytes());
    output.extend_from_slice(&hole_bytes.to_be_bytes());
}

/// Appends an `NBD_REPLY_TYPE_ERROR` chunk: `error` (a nonzero proto.md error value) and
/// `message` for people, cut at a character boundary to proto.md's 4096-byte string limit.
pub fn compose_error(output: &mut Vec<u8>, cookie: u64, error: u32, message: &str, done: bool) {
    debug_assert_ne!(error, 0);
    let mut end = message.len().min(MAX_STRING_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let message = &message.as_bytes()[..end];
    let header = ChunkHeader {
        flags: flags(done),
        chunk_type: REPLY_TYPE_ERROR,
        cookie,
        length: 6 + message.len() as u32,
    };
    output.extend_from_slice(&header.encode());
    output.extend_from_slice(&error.to_be_bytes());
    output.extend_from_slice(&(message.len() as u16).to_be_bytes());
    output.extend_from_slice(message);
}

/// Appends an `NBD_REPLY_TYPE_NONE` chunk, which always ends a reply.
pub fn compose_none(output: &mut Vec<u8>, cookie: u64) {
    let header = ChunkHeader {
        flags: REPLY_FLAG_DONE,
        chunk_type: REPLY_TYPE_NONE,
        cookie,
        length: 0,
    };
    output.extend_from_slice(&header.encode());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header and payload of the one chunk in `bytes`.
    fn split(bytes: &[u8]) -> (ChunkHeader, &[u8]) {
        let mut fields = Fields::new(bytes);
        assert_eq!(fields.u32(), Some(STRUCTURED_REPLY_MAGIC));
        let header = ChunkHeader {
            flags: fields.u16().unwrap(),
            chunk_type: fields.u16().unwrap(),
            cookie: fields.u64().unwrap(),
            length: fields.u32().unwrap(),
        };
        let payload = fields.bytes(fields.remaining()).unwrap();
        assert_eq!(payload.len(), header.length as usize);
        (header, payload)
    }

    #[test]
    fn offset_data_round_trips_with_or_without_done() {
        for done in [false, true] {
            let mut output = Vec::new();
            compose_offset_data(&mut output, 9, 4096, b"abc", done);
            let (header, payload) = split(&output);
            assert_eq!(header.done(), done);
            assert_eq!(
                (header.chunk_type, header.cookie, header.length),
                (1, 9, 11)
            );
            assert_eq!(
                parse_chunk_payload(&header, payload),
                Ok(ChunkPayload::OffsetData {
                    offset: 4096,
                    data: b"abc"
                })
            );
        }
    }

    #[test]
    fn errors_carry_their_message_cut_to_the_string_limit() {
        let mut output = Vec::new();
        compose_error(&mut output, 3, EIO, "disk on fire", true);
        let (header, payload) = split(&output);
        assert!(header.done() && header.is_error());
        assert_eq!(
            parse_chunk_payload(&header, payload),
            Ok(ChunkPayload::Error {
                error: EIO,
                message: b"disk on fire",
                offset: None
            })
        );
        let long = "é".repeat(3000);
        let mut output = Vec::new();
        compose_error(&mut output, 3, EIO, &long, true);
        let (header, payload) = split(&output);
        let ChunkPayload::Error { message, .. } = parse_chunk_payload(&header, payload).unwrap()
        else {
            panic!("not an error chunk");
        };
        assert_eq!(message.len(), MAX_STRING_BYTES);
        assert!(
            std::str::from_utf8(message).is_ok(),
            "cut inside a character"
        );
    }

    #[test]
    fn none_and_holes_round_trip() {
        let mut output = Vec::new();
        compose_none(&mut output, 5);
        let (header, payload) = split(&output);
        assert!(header.done());
        assert_eq!(
            parse_chunk_payload(&header, payload),
            Ok(ChunkPayload::None)
        );
        let mut output = Vec::new();
        compose_offset_hole(&mut output, 5, 512, 1024, false);
        let (header, payload) = split(&output);
        assert_eq!(
            parse_chunk_payload(&header, payload),
            Ok(ChunkPayload::OffsetHole {
                offset: 512,
                length: 1024
            })
        );
    }

    #[test]
    fn lengths_that_break_the_chunk_types_rules_are_refused() {
        let header = |chunk_type, flags, length| ChunkHeader {
            flags,
            chunk_type,
            cookie: 1,
            length,
        };
        let refused = [
            (header(REPLY_TYPE_NONE, 0, 0), "structured reply flags"),
            (header(REPLY_TYPE_NONE, 1, 4), "structured reply length"),
            (
                header(REPLY_TYPE_OFFSET_DATA, 1, 8),
                "structured reply length",
            ),
            (
                header(REPLY_TYPE_OFFSET_HOLE, 1, 13),
                "structured reply length",
            ),
            (header(REPLY_TYPE_ERROR, 1, 5), "structured reply length"),
            (
                header(REPLY_TYPE_BLOCK_STATUS, 1, 12),
                "structured reply type",
            ),
            (header(77, 1, 0), "structured reply type"),
        ];
        for (header, field) in refused {
            assert_eq!(header.check().unwrap_err().field, field, "{header:?}");
        }
        // An error chunk whose message overruns it, and one with error 0.
        let mut payload = EIO.to_be_bytes().to_vec();
        payload.extend_from_slice(&5u16.to_be_bytes());
        payload.extend_from_slice(b"abc");
        let overrun = header(REPLY_TYPE_ERROR, 1, 9);
        assert_eq!(
            parse_chunk_payload(&overrun, &payload).unwrap_err().field,
            "error chunk message length"
        );
        let zero = [0, 0, 0, 0, 0, 0];
        assert_eq!(
            parse_chunk_payload(&header(REPLY_TYPE_ERROR, 1, 6), &zero)
                .unwrap_err()
                .field,
            "error chunk error"
        );
        // An unknown error type is the reply's failure, not the stream's.
        let mut payload = EIO.to_be_bytes().to_vec();
        payload.extend_from_slice(&0u16.to_be_bytes());
        assert!(matches!(
            parse_chunk_payload(&header(0x8077, 1, 6), &payload),
            Ok(ChunkPayload::Error {
                error: EIO,
                offset: None,
                ..
            })
        ));
    }

    #[test]
    fn error_offsets_come_after_the_message() {
        let mut payload = EIO.to_be_bytes().to_vec();
        payload.extend_from_slice(&2u16.to_be_bytes());
        payload.extend_from_slice(b"no");
        payload.extend_from_slice(&4096u64.to_be_bytes());
        let header = ChunkHeader {
            flags: REPLY_FLAG_DONE,
            chunk_type: REPLY_TYPE_ERROR_OFFSET,
            cookie: 1,
            length: payload.len() as u32,
        };
        assert_eq!(
            parse_chunk_payload(&header, &payload),
            Ok(ChunkPayload::Error {
                error: EIO,
                message: b"no",
                offset: Some(4096)
            })
        );
        assert!(parse_chunk_payload(&header, &payload[1..]).is_err());
    }
}
