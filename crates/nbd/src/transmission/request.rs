//! The transmission request header (proto.md "Request message"): 28 bytes, composed by
//! clients and parsed by servers. A WRITE's payload follows the header; it is not part of it,
//! so that a server can hand a buffered payload to storage without copying it.

use crate::constants::*;
use crate::parse::{Fields, Parsed, ProtocolError};

/// A request's type (proto.md "Request types").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// `NBD_CMD_READ`.
    Read,
    /// `NBD_CMD_WRITE`: *length* bytes of payload follow the header.
    Write,
    /// `NBD_CMD_DISC`: no reply; the server closes.
    Disconnect,
    /// `NBD_CMD_FLUSH`.
    Flush,
    /// `NBD_CMD_TRIM`.
    Trim,
    /// `NBD_CMD_CACHE`.
    Cache,
    /// `NBD_CMD_WRITE_ZEROES`.
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS`.
    BlockStatus,
    /// A type proto.md does not define (never one of the numbers above): servers answer
    /// `NBD_EINVAL` ("Error values").
    Unknown(u16),
}

impl Command {
    /// The command a type number stands for.
    pub fn from_wire(command: u16) -> Command {
        match command {
            CMD_READ => Command::Read,
            CMD_WRITE => Command::Write,
            CMD_DISC => Command::Disconnect,
            CMD_FLUSH => Command::Flush,
            CMD_TRIM => Command::Trim,
            CMD_CACHE => Command::Cache,
            CMD_WRITE_ZEROES => Command::WriteZeroes,
            CMD_BLOCK_STATUS => Command::BlockStatus,
            other => Command::Unknown(other),
        }
    }

    /// The type number sent on the wire.
    pub fn to_wire(self) -> u16 {
        match self {
            Command::Read => CMD_READ,
            Command::Write => CMD_WRITE,
            Command::Disconnect => CMD_DISC,
            Command::Flush => CMD_FLUSH,
            Command::Trim => CMD_TRIM,
            Command::Cache => CMD_CACHE,
            Command::WriteZeroes => CMD_WRITE_ZEROES,
            Command::BlockStatus => CMD_BLOCK_STATUS,
            Command::Unknown(other) => other,
        }
    }
}

/// One request header (proto.md "Request message").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags (proto.md "Command flags"): `CMD_FLAG_FUA`, ...
    pub flags: u16,
    /// The request's type.
    pub command: Command,
    /// The client's tag, echoed in every reply to this request (proto.md calls it *handle* in
    /// older revisions).
    pub cookie: u64,
    /// Where in the export, in bytes.
    pub offset: u64,
    /// How many bytes: read, written (the payload's length), trimmed or zeroed.
    pub length: u32,
}

impl Request {
    /// Whether the client asked for the data to be durable before the reply
    /// (`NBD_CMD_FLAG_FUA`).
    pub fn fua(&self) -> bool {
        self.flags & CMD_FLAG_FUA != 0
    }

    /// The bytes of payload that follow this header on the wire: *length* for a WRITE, none
    /// otherwise.
    pub fn payload_bytes(&self) -> usize {
        match self.command {
            Command::Write => self.length as usize,
            _ => 0,
        }
    }

    /// The 28 header bytes.
    pub fn encode(&self) -> [u8; REQUEST_HEADER_BYTES] {
        let mut header = [0u8; REQUEST_HEADER_BYTES];
        header[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        header[4..6].copy_from_slice(&self.flags.to_be_bytes());
        header[6..8].copy_from_slice(&self.command.to_wire().to_be_bytes());
        header[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        header[16..24].copy_from_slice(&self.offset.to_be_bytes());
        header[24..28].copy_from_slice(&self.length.to_be_bytes());
        header
    }

    /// Appends the header to `output` (a WRITE's payload goes after it).
    pub fn compose(&self, output: &mut Vec<u8>) {
        output.extend_from_slice(&self.encode());
    }

    /// Parses the header at the front of `input`; `consumed` is always 28. Only the magic can
    /// be wrong: every other field takes any value, and what to answer is the server's call.
    pub fn parse(input: &[u8]) -> Result<Parsed<Request>, ProtocolError> {
        let mut fields = Fields::new(input);
        let Some(magic) = fields.u32() else {
            return Ok(Parsed::NeedMore);
        };
        if magic != REQUEST_MAGIC {
            return Err(ProtocolError::new(
                "request magic",
                format!("expected {REQUEST_MAGIC:#010x}, found {magic:#010x}"),
            ));
        }
        let (Some(flags), Some(command), Some(cookie), Some(offset), Some(length)) = (
            fields.u16(),
            fields.u16(),
            fields.u64(),
            fields.u64(),
            fields.u32(),
        ) else {
            return Ok(Parsed::NeedMore);
        };
        Ok(Parsed::Found {
            value: Request {
                flags,
                command: Command::from_wire(command),
                cookie,
                offset,
                length,
            },
            consumed: fields.consumed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_request() -> Request {
        Request {
            flags: CMD_FLAG_FUA,
            command: Command::Write,
            cookie: 0x0102_0304_0506_0708,
            offset: 1 << 40,
            length: 4096,
        }
    }

    #[test]
    fn headers_round_trip_and_lay_fields_out_as_proto_md_does() {
        let request = write_request();
        let bytes = request.encode();
        assert_eq!(&bytes[..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(&bytes[4..8], &[0, 1, 0, 1], "flags FUA, then type WRITE");
        assert_eq!(&bytes[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[24..], &[0, 0, 0x10, 0]);
        let parsed = Request::parse(&bytes).unwrap();
        assert_eq!(
            parsed,
            Parsed::Found {
                value: request,
                consumed: 28
            }
        );
        assert!(request.fua());
        assert_eq!(request.payload_bytes(), 4096);
    }

    #[test]
    fn short_input_needs_more_and_a_bad_magic_is_an_error() {
        let bytes = write_request().encode();
        for end in 0..bytes.len() {
            assert_eq!(
                Request::parse(&bytes[..end]),
                Ok(Parsed::NeedMore),
                "{end} bytes"
            );
        }
        let mut bad = bytes;
        bad[0] ^= 1;
        let error = Request::parse(&bad).unwrap_err();
        assert_eq!(error.field, "request magic");
        assert!(error.message.contains("0x25609513"), "{error}");
    }

    #[test]
    fn unknown_types_are_kept_for_the_server_to_refuse() {
        let request = Request {
            command: Command::Unknown(99),
            ..write_request()
        };
        let (parsed, _) = Request::parse(&request.encode()).unwrap().found().unwrap();
        assert_eq!(parsed.command, Command::Unknown(99));
        assert_eq!(parsed.payload_bytes(), 0);
        for wire in 0..=8 {
            assert_eq!(Command::from_wire(wire).to_wire(), wire);
        }
    }
}
