//! The handshake's messages (proto.md "Newstyle negotiation", "Fixed newstyle negotiation",
//! "Option types", "Option reply types"): the greeting, client flags, options and option
//! replies, and the data of `NBD_OPT_INFO`/`NBD_OPT_GO`, `NBD_REP_INFO` and `NBD_REP_SERVER`.
//! Each is composed and parsed here, for both state machines.

use crate::constants::*;
use crate::parse::{Fields, Parsed, ProtocolError};

/// The server's first message (proto.md "Newstyle negotiation"): `NBDMAGIC`, `IHAVEOPT`, and
/// the handshake flags.
pub fn greeting(handshake_flags: u16) -> [u8; GREETING_BYTES] {
    let mut bytes = [0u8; GREETING_BYTES];
    bytes[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    bytes[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    bytes[16..18].copy_from_slice(&handshake_flags.to_be_bytes());
    bytes
}

/// Parses the greeting (proto.md "Newstyle negotiation") and returns the handshake flags.
/// Oldstyle servers (a `cliserv_magic` after `NBDMAGIC`) are refused: proto.md's reference
/// implementation dropped them in 3.10.
pub fn parse_greeting(input: &[u8]) -> Result<Parsed<u16>, ProtocolError> {
    let mut fields = Fields::new(input);
    let Some(magic) = fields.u64() else {
        return Ok(Parsed::NeedMore);
    };
    if magic != NBDMAGIC {
        return Err(ProtocolError::new(
            "greeting magic",
            format!("expected NBDMAGIC ({NBDMAGIC:#x}), found {magic:#x}"),
        ));
    }
    let Some(newstyle) = fields.u64() else {
        return Ok(Parsed::NeedMore);
    };
    if newstyle != IHAVEOPT {
        return Err(ProtocolError::new(
            "greeting second magic",
            format!(
                "expected IHAVEOPT ({IHAVEOPT:#x}) of newstyle negotiation, found {newstyle:#x}"
            ),
        ));
    }
    let Some(flags) = fields.u16() else {
        return Ok(Parsed::NeedMore);
    };
    Ok(Parsed::Found {
        value: flags,
        consumed: fields.consumed(),
    })
}

/// An option's header (proto.md "Newstyle negotiation"); `length` bytes of data follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    /// `OPT_*`.
    pub option: u32,
    /// The option data's length in bytes.
    pub length: u32,
}

/// Appends an option with its data (proto.md "Newstyle negotiation"): `IHAVEOPT`, option,
/// length, data. `data` is at most [`MAX_OPTION_BYTES`] long.
pub fn compose_option(output: &mut Vec<u8>, option: u32, data: &[u8]) {
    output.extend_from_slice(&IHAVEOPT.to_be_bytes());
    output.extend_from_slice(&option.to_be_bytes());
    output.extend_from_slice(&(data.len() as u32).to_be_bytes());
    output.extend_from_slice(data);
}

/// Parses an option's 16-byte header (proto.md "Newstyle negotiation"); its data is the
/// caller's to take, or to skip when it is too large.
pub fn parse_option_header(input: &[u8]) -> Result<Parsed<OptionHeader>, ProtocolError> {
    let mut fields = Fields::new(input);
    let Some(magic) = fields.u64() else {
        return Ok(Parsed::NeedMore);
    };
    if magic != IHAVEOPT {
        return Err(ProtocolError::new(
            "option magic",
            format!("expected IHAVEOPT ({IHAVEOPT:#x}), found {magic:#x}"),
        ));
    }
    let (Some(option), Some(length)) = (fields.u32(), fields.u32()) else {
        return Ok(Parsed::NeedMore);
    };
    Ok(Parsed::Found {
        value: OptionHeader { option, length },
        consumed: fields.consumed(),
    })
}

/// One option reply (proto.md "Fixed newstyle negotiation").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionReply<'a> {
    /// The option this answers.
    pub option: u32,
    /// `REP_*`; bit 31 marks errors.
    pub reply_type: u32,
    /// The reply's data: for an error, a message for people.
    pub data: &'a [u8],
}

impl OptionReply<'_> {
    /// Whether this is an error reply (proto.md: "all of which are denoted by having bit 31
    /// set").
    pub fn is_error(&self) -> bool {
        self.reply_type & REP_FLAG_ERROR != 0
    }
}

/// Appends an option reply (proto.md "Fixed newstyle negotiation"): magic, option, reply
/// type, length, data.
pub fn compose_option_reply(output: &mut Vec<u8>, option: u32, reply_type: u32, data: &[u8]) {
    output.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    output.extend_from_slice(&option.to_be_bytes());
    output.extend_from_slice(&reply_type.to_be_bytes());
    output.extend_from_slice(&(data.len() as u32).to_be_bytes());
    output.extend_from_slice(data);
}

/// Parses a whole option reply (proto.md "Fixed newstyle negotiation"). Replies longer than [`MAX_OPTION_BYTES`] are refused rather
/// than buffered: none this crate asks for comes near it.
pub fn parse_option_reply(input: &[u8]) -> Result<Parsed<OptionReply<'_>>, ProtocolError> {
    let mut fields = Fields::new(input);
    let Some(magic) = fields.u64() else {
        return Ok(Parsed::NeedMore);
    };
    if magic != OPTION_REPLY_MAGIC {
        return Err(ProtocolError::new(
            "option reply magic",
            format!("expected {OPTION_REPLY_MAGIC:#x}, found {magic:#x}"),
        ));
    }
    let (Some(option), Some(reply_type), Some(length)) = (fields.u32(), fields.u32(), fields.u32())
    else {
        return Ok(Parsed::NeedMore);
    };
    if length > MAX_OPTION_BYTES {
        return Err(ProtocolError::new(
            "option reply length",
            format!("{length} bytes; expected at most {MAX_OPTION_BYTES}"),
        ));
    }
    let Some(data) = fields.bytes(length as usize) else {
        return Ok(Parsed::NeedMore);
    };
    Ok(Parsed::Found {
        value: OptionReply {
            option,
            reply_type,
            data,
        },
        consumed: fields.consumed(),
    })
}

/// The data of `NBD_OPT_INFO` and `NBD_OPT_GO` (proto.md "Option types"): an export name and
/// the information requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest<'a> {
    /// The export's name; empty for the default export.
    pub name: &'a [u8],
    /// The `INFO_*` types requested, two bytes each.
    requests: &'a [u8],
}

impl<'a> InfoRequest<'a> {
    /// The `INFO_*` types requested, in the client's order (proto.md "Option types":
    /// "16 bits x n - list of `NBD_INFO` information requests").
    pub fn requests(&self) -> impl Iterator<Item = u16> + 'a {
        self.requests
            .chunks_exact(2)
            .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
    }

    /// Whether the client asked for `info_type`.
    pub fn asks_for(&self, info_type: u16) -> bool {
        self.requests().any(|requested| requested == info_type)
    }
}

/// Appends the data of an `NBD_OPT_INFO` or `NBD_OPT_GO` option (proto.md "Option types"):
/// name length, name, number of requests, requests.
pub fn compose_info_request(data: &mut Vec<u8>, name: &[u8], requests: &[u16]) {
    data.extend_from_slice(&(name.len() as u32).to_be_bytes());
    data.extend_from_slice(name);
    data.extend_from_slice(&(requests.len() as u16).to_be_bytes());
    for request in requests {
        data.extend_from_slice(&request.to_be_bytes());
    }
}

/// Parses the whole data of an `NBD_OPT_INFO` or `NBD_OPT_GO` option; every byte must be
/// accounted for.
pub fn parse_info_request(data: &[u8]) -> Result<InfoRequest<'_>, ProtocolError> {
    let mut fields = Fields::new(data);
    let short = |field| {
        ProtocolError::new(
            field,
            format!("the option's {} bytes end before it", data.len()),
        )
    };
    let name_bytes = fields
        .u32()
        .ok_or_else(|| short("info request name length"))?;
    let name = fields
        .bytes(name_bytes as usize)
        .ok_or_else(|| short("info request name"))?;
    let count = fields.u16().ok_or_else(|| short("info request count"))?;
    if fields.remaining() != 2 * usize::from(count) {
        return Err(ProtocolError::new(
            "info requests",
            format!(
                "expected {count} requests of 2 bytes, found {} bytes",
                fields.remaining()
            ),
        ));
    }
    let requests = fields
        .bytes(fields.remaining())
        .ok_or_else(|| short("info requests"))?;
    Ok(InfoRequest { name, requests })
}

/// An export's block size constraints (proto.md "Block size constraints",
/// `NBD_INFO_BLOCK_SIZE`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSizes {
    /// The smallest length and alignment a request may use.
    pub minimum: u32,
    /// The smallest length at which aligned requests are efficient.
    pub preferred: u32,
    /// The largest length one request may use.
    pub maximum: u32,
}

impl BlockSizes {
    /// proto.md "Block size constraints"'s defaults for a server: any alignment (1), 4 KiB
    /// preferred; the maximum bounded by the 32 MiB that READ and WRITE payloads are held to.
    pub const DEFAULT: BlockSizes = BlockSizes {
        minimum: 1,
        preferred: 4096,
        maximum: MAX_PAYLOAD_BYTES,
    };
}

/// One `NBD_REP_INFO` item (proto.md "Option reply types", `NBD_REP_INFO`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Info<'a> {
    /// `NBD_INFO_EXPORT`.
    Export {
        size_bytes: u64,
        transmission_flags: u16,
    },
    /// `NBD_INFO_NAME`: the export's canonical name.
    Name(&'a [u8]),
    /// `NBD_INFO_DESCRIPTION`.
    Description(&'a [u8]),
    /// `NBD_INFO_BLOCK_SIZE`.
    BlockSize(BlockSizes),
    /// A type this crate does not know (proto.md: the client "MUST ignore" it).
    Unknown { info_type: u16, data: &'a [u8] },
}

impl Info<'_> {
    /// Appends the item as an `NBD_REP_INFO` reply's data: its type, then its fields.
    pub fn compose(&self, data: &mut Vec<u8>) {
        match self {
            Info::Export {
                size_bytes,
                transmission_flags,
            } => {
                data.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                data.extend_from_slice(&size_bytes.to_be_bytes());
                data.extend_from_slice(&transmission_flags.to_be_bytes());
            }
            Info::Name(name) => {
                data.extend_from_slice(&INFO_NAME.to_be_bytes());
                data.extend_from_slice(name);
            }
            Info::Description(text) => {
                data.extend_from_slice(&INFO_DESCRIPTION.to_be_bytes());
                data.extend_from_slice(text);
            }
            Info::BlockSize(sizes) => {
                data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
                for size in [sizes.minimum, sizes.preferred, sizes.maximum] {
                    data.extend_from_slice(&size.to_be_bytes());
                }
            }
            Info::Unknown {
                info_type,
                data: rest,
            } => {
                data.extend_from_slice(&info_type.to_be_bytes());
                data.extend_from_slice(rest);
            }
        }
    }

    /// Parses an `NBD_REP_INFO` reply's data; the lengths proto.md fixes (12 for EXPORT, 14
    /// for BLOCK_SIZE) are checked.
    pub fn parse(data: &[u8]) -> Result<Info<'_>, ProtocolError> {
        let mut fields = Fields::new(data);
        let info_type = fields.u16().ok_or_else(|| {
            ProtocolError::new(
                "info type",
                "expected 2 bytes of NBD_INFO type, found fewer",
            )
        })?;
        let exact = |expected: usize| {
            if data.len() == expected {
                Ok(())
            } else {
                Err(ProtocolError::new(
                    "info length",
                    format!(
                        "NBD_INFO type {info_type} must be {expected} bytes, found {}",
                        data.len()
                    ),
                ))
            }
        };
        let rest = &data[2..];
        Ok(match info_type {
            INFO_EXPORT => {
                exact(12)?;
                Info::Export {
                    size_bytes: fields.u64().unwrap_or_default(),
                    transmission_flags: fields.u16().unwrap_or_default(),
                }
            }
            INFO_NAME => Info::Name(rest),
            INFO_DESCRIPTION => Info::Description(rest),
            INFO_BLOCK_SIZE => {
                exact(14)?;
                Info::BlockSize(BlockSizes {
                    minimum: fields.u32().unwrap_or_default(),
                    preferred: fields.u32().unwrap_or_default(),
                    maximum: fields.u32().unwrap_or_default(),
                })
            }
            info_type => Info::Unknown {
                info_type,
                data: rest,
            },
        })
    }
}

/// Appends the data of an `NBD_REP_SERVER` reply (proto.md "Option reply types"): name length,
/// name.
pub fn compose_server_entry(data: &mut Vec<u8>, name: &[u8]) {
    data.extend_from_slice(&(name.len() as u32).to_be_bytes());
    data.extend_from_slice(name);
}

/// Parses an `NBD_REP_SERVER` reply's data and returns the export name (any details after it
/// are for people, and dropped).
pub fn parse_server_entry(data: &[u8]) -> Result<&[u8], ProtocolError> {
    let mut fields = Fields::new(data);
    let length = fields.u32().ok_or_else(|| {
        ProtocolError::new("server entry name length", "expected 4 bytes, found fewer")
    })?;
    fields.bytes(length as usize).ok_or_else(|| {
        ProtocolError::new(
            "server entry name length",
            format!(
                "{length} bytes does not fit the reply's {} bytes",
                data.len()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings_round_trip_and_oldstyle_is_refused() {
        let bytes = greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        assert_eq!(&bytes[..16], b"NBDMAGICIHAVEOPT");
        assert_eq!(
            parse_greeting(&bytes),
            Ok(Parsed::Found {
                value: 3,
                consumed: 18
            })
        );
        assert_eq!(parse_greeting(&bytes[..17]), Ok(Parsed::NeedMore));
        let mut oldstyle = bytes.to_vec();
        oldstyle[8..16].copy_from_slice(&0x0000_4202_8186_1253_u64.to_be_bytes());
        assert_eq!(
            parse_greeting(&oldstyle).unwrap_err().field,
            "greeting second magic"
        );
        assert_eq!(
            parse_greeting(b"GET / HTTP/1.1\r\n").unwrap_err().field,
            "greeting magic"
        );
    }

    #[test]
    fn options_and_replies_round_trip() {
        let mut output = Vec::new();
        compose_option(&mut output, OPT_LIST, b"xy");
        assert_eq!(
            parse_option_header(&output),
            Ok(Parsed::Found {
                value: OptionHeader {
                    option: OPT_LIST,
                    length: 2
                },
                consumed: 16
            })
        );
        assert_eq!(&output[16..], b"xy");
        output[0] = b'i';
        assert_eq!(
            parse_option_header(&output).unwrap_err().field,
            "option magic"
        );

        let mut output = Vec::new();
        compose_option_reply(&mut output, OPT_GO, REP_ERR_UNKNOWN, b"no such export");
        let (reply, consumed) = parse_option_reply(&output).unwrap().found().unwrap();
        assert_eq!(consumed, output.len());
        assert!(reply.is_error());
        assert_eq!(reply.data, b"no such export");
        assert_eq!(
            parse_option_reply(&output[..consumed - 1]),
            Ok(Parsed::NeedMore)
        );
    }

    #[test]
    fn option_replies_too_long_to_buffer_are_refused() {
        let mut output = Vec::new();
        compose_option_reply(&mut output, OPT_LIST, REP_SERVER, &[]);
        output[16..20].copy_from_slice(&(MAX_OPTION_BYTES + 1).to_be_bytes());
        assert_eq!(
            parse_option_reply(&output).unwrap_err().field,
            "option reply length"
        );
    }

    #[test]
    fn info_requests_are_parsed_strictly() {
        let mut data = Vec::new();
        compose_info_request(&mut data, b"vol", &[INFO_NAME, INFO_BLOCK_SIZE]);
        let request = parse_info_request(&data).unwrap();
        assert_eq!(request.name, b"vol");
        assert_eq!(
            request.requests().collect::<Vec<_>>(),
            [INFO_NAME, INFO_BLOCK_SIZE]
        );
        assert!(request.asks_for(INFO_NAME) && !request.asks_for(INFO_DESCRIPTION));
        assert_eq!(
            parse_info_request(&data[..data.len() - 1])
                .unwrap_err()
                .field,
            "info requests"
        );
        assert_eq!(
            parse_info_request(&[0, 0, 1, 0]).unwrap_err().field,
            "info request name"
        );
        assert_eq!(
            parse_info_request(&[]).unwrap_err().field,
            "info request name length"
        );
        let mut trailing = data.clone();
        trailing.extend_from_slice(&[0, 0]);
        assert!(parse_info_request(&trailing).is_err());
    }

    #[test]
    fn info_items_round_trip_and_fixed_lengths_are_checked() {
        let items = [
            Info::Export {
                size_bytes: 64 << 20,
                transmission_flags: FLAG_HAS_FLAGS | FLAG_SEND_FLUSH,
            },
            Info::Name(b"vol"),
            Info::Description(b"a volume"),
            Info::BlockSize(BlockSizes {
                minimum: 1,
                preferred: 4096,
                maximum: MAX_PAYLOAD_BYTES,
            }),
            Info::Unknown {
                info_type: 99,
                data: b"?",
            },
        ];
        for item in items {
            let mut data = Vec::new();
            item.compose(&mut data);
            assert_eq!(Info::parse(&data), Ok(item.clone()));
            if matches!(item, Info::Export { .. } | Info::BlockSize(_)) {
                data.push(0);
                assert_eq!(Info::parse(&data).unwrap_err().field, "info length");
            }
        }
        assert_eq!(Info::parse(&[0]).unwrap_err().field, "info type");
    }

    #[test]
    fn server_entries_round_trip_and_overruns_are_refused() {
        let mut data = Vec::new();
        compose_server_entry(&mut data, b"vol");
        assert_eq!(parse_server_entry(&data), Ok(&b"vol"[..]));
        data.extend_from_slice(b" for people");
        assert_eq!(parse_server_entry(&data), Ok(&b"vol"[..]));
        assert!(parse_server_entry(&[0, 0, 0, 9, b'a']).is_err());
        assert!(parse_server_entry(&[0, 0]).is_err());
    }
}
