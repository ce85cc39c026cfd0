//! Any reply a client receives in transmission (proto.md "Transmission"): a simple reply or a
//! structured reply chunk, told apart by their magic. Two levels: [`parse_reply_header`] stops
//! after the header so that a client can read a large payload straight into its destination,
//! and [`parse_reply`] takes the whole message when it is all in the buffer.

use crate::constants::*;
use crate::parse::{Fields, Parsed, ProtocolError};
use crate::transmission::structured::{parse_chunk_payload, ChunkHeader, ChunkPayload};

/// The header of one reply message (proto.md "Simple reply message", "Structured reply chunk
/// message").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyHeader {
    /// 16 bytes; a successful READ's data follows, as long as the client's request said.
    Simple { cookie: u64, error: u32 },
    /// 20 bytes; `length` bytes of payload follow. Its length already fits its type.
    Chunk(ChunkHeader),
}

impl ReplyHeader {
    /// The cookie of the request this answers.
    pub fn cookie(&self) -> u64 {
        match self {
            ReplyHeader::Simple { cookie, .. } => *cookie,
            ReplyHeader::Chunk(header) => header.cookie,
        }
    }
}

/// Parses the reply header at the front of `input`; `consumed` is the header's 16 or 20 bytes.
/// A structured chunk's length is checked against its type here (see
/// [`parse_chunk_payload`]), before any payload is read.
pub fn parse_reply_header(input: &[u8]) -> Result<Parsed<ReplyHeader>, ProtocolError> {
    let mut fields = Fields::new(input);
    let Some(magic) = fields.u32() else {
        return Ok(Parsed::NeedMore);
    };
    let header = match magic {
        SIMPLE_REPLY_MAGIC => {
            let (Some(error), Some(cookie)) = (fields.u32(), fields.u64()) else {
                return Ok(Parsed::NeedMore);
            };
            ReplyHeader::Simple { cookie, error }
        }
        STRUCTURED_REPLY_MAGIC => {
            let (Some(flags), Some(chunk_type), Some(cookie), Some(length)) =
                (fields.u16(), fields.u16(), fields.u64(), fields.u32())
            else {
                return Ok(Parsed::NeedMore);
            };
            let header = ChunkHeader {
                flags,
                chunk_type,
                cookie,
                length,
            };
            header.check()?;
            ReplyHeader::Chunk(header)
        }
        other => {
            return Err(ProtocolError::new(
                "reply magic",
                format!(
                    "expected {SIMPLE_REPLY_MAGIC:#010x} (simple) or \
                     {STRUCTURED_REPLY_MAGIC:#010x} (structured), found {other:#010x}"
                ),
            ))
        }
    };
    Ok(Parsed::Found {
        value: header,
        consumed: fields.consumed(),
    })
}

/// One whole reply message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<'a> {
    /// A simple reply; `data` is a successful READ's data, empty otherwise.
    Simple {
        cookie: u64,
        error: u32,
        data: &'a [u8],
    },
    /// One structured reply chunk.
    Chunk {
        header: ChunkHeader,
        payload: ChunkPayload<'a>,
    },
}

/// Parses the whole reply at the front of `input`. A simple reply does not say how much data
/// follows it, so `read_length(cookie)` says: the length of the READ sent with that cookie,
/// `Some(0)` for any other request in flight, `None` for a cookie that is not in flight (a
/// protocol error). It is called only for a simple reply without error.
pub fn parse_reply(
    input: &[u8],
    read_length: impl FnOnce(u64) -> Option<u32>,
) -> Result<Parsed<Reply<'_>>, ProtocolError> {
    let Some((header, header_bytes)) = parse_reply_header(input)?.found() else {
        return Ok(Parsed::NeedMore);
    };
    let (payload_bytes, cookie) = match header {
        ReplyHeader::Simple { cookie, error: 0 } => {
            let length = read_length(cookie).ok_or_else(|| {
                ProtocolError::new(
                    "simple reply cookie",
                    format!("{cookie:#x} is no request in flight"),
                )
            })?;
            (length as usize, cookie)
        }
        ReplyHeader::Simple { cookie, .. } => (0, cookie),
        ReplyHeader::Chunk(chunk) => (chunk.length as usize, chunk.cookie),
    };
    let Some(payload) = input.get(header_bytes..header_bytes + payload_bytes) else {
        return Ok(Parsed::NeedMore);
    };
    let reply = match header {
        ReplyHeader::Simple { error, .. } => Reply::Simple {
            cookie,
            error,
            data: payload,
        },
        ReplyHeader::Chunk(header) => Reply::Chunk {
            header,
            payload: parse_chunk_payload(&header, payload)?,
        },
    };
    Ok(Parsed::Found {
        value: reply,
        consumed: header_bytes + payload_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transmission::simple::compose_simple_reply;
    use crate::transmission::structured::{compose_error, compose_offset_data};

    #[test]
    fn simple_reads_take_the_length_the_client_remembers() {
        let mut input = Vec::new();
        compose_simple_reply(&mut input, 7, 0);
        input.extend_from_slice(b"data");
        input.push(0xff); // the next message's first byte
        let parsed = parse_reply(&input, |cookie| (cookie == 7).then_some(4)).unwrap();
        assert_eq!(
            parsed,
            Parsed::Found {
                value: Reply::Simple {
                    cookie: 7,
                    error: 0,
                    data: b"data"
                },
                consumed: 20
            }
        );
        assert_eq!(parse_reply(&input[..19], |_| Some(4)), Ok(Parsed::NeedMore));
        let error = parse_reply(&input, |_| None).unwrap_err();
        assert_eq!(error.field, "simple reply cookie");
    }

    #[test]
    fn failed_simple_replies_carry_no_data() {
        let mut input = Vec::new();
        compose_simple_reply(&mut input, 7, EINVAL);
        let parsed = parse_reply(&input, |_| panic!("no length needed for a failed reply"));
        assert_eq!(
            parsed.unwrap().found().unwrap().1,
            SIMPLE_REPLY_HEADER_BYTES
        );
    }

    #[test]
    fn chunks_parse_whole_and_headers_alone() {
        let mut input = Vec::new();
        compose_offset_data(&mut input, 2, 512, &[1; 100], false);
        compose_error(&mut input, 2, EIO, "gone", true);
        let (first, consumed) = parse_reply(&input, |_| None).unwrap().found().unwrap();
        assert!(matches!(
            first,
            Reply::Chunk {
                payload: ChunkPayload::OffsetData { offset: 512, data },
                ..
            } if data == [1; 100]
        ));
        let (second, rest) = parse_reply(&input[consumed..], |_| None)
            .unwrap()
            .found()
            .unwrap();
        assert_eq!(consumed + rest, input.len());
        assert!(matches!(second, Reply::Chunk { header, .. } if header.done()));
        let (header, header_bytes) = parse_reply_header(&input).unwrap().found().unwrap();
        assert_eq!(header_bytes, STRUCTURED_REPLY_HEADER_BYTES);
        assert_eq!(header.cookie(), 2);
    }

    #[test]
    fn an_unknown_magic_is_an_error() {
        let error = parse_reply_header(&[0x25, 0x60, 0x95, 0x13]).unwrap_err();
        assert_eq!(error.field, "reply magic");
        assert_eq!(parse_reply_header(&[0x67, 0x44]), Ok(Parsed::NeedMore));
    }
}
