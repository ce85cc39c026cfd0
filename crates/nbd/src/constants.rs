//! Every number of the NBD protocol this crate speaks, as proto.md (NetworkBlockDevice/nbd
//! `doc/proto.md`) names them without their `NBD_` prefix, the sizes of the fixed-length
//! messages, and the limits both sides enforce. Every field on the wire is big-endian.

// Magic numbers.

/// proto.md "Newstyle negotiation": the server's first 8 bytes, ASCII `NBDMAGIC` (`INIT_PASSWD`).
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// proto.md "Newstyle negotiation": the server's second 8 bytes and the start of every option
/// the client sends, ASCII `IHAVEOPT`.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// proto.md "Fixed newstyle negotiation": the start of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// proto.md "Request message": `NBD_REQUEST_MAGIC`.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// proto.md "Simple reply message": `NBD_SIMPLE_REPLY_MAGIC`.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// proto.md "Structured reply chunk message": `NBD_STRUCTURED_REPLY_MAGIC`.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags: proto.md "Handshake flags", "Client flags".

/// proto.md "Handshake flags": the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// proto.md "Handshake flags": the server may omit the 124 zero bytes after
/// `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// proto.md "Client flags": the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// proto.md "Client flags": the client wants no 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags: proto.md "Transmission flags".

/// proto.md "Transmission flags": always set.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
/// proto.md "Transmission flags": the export refuses writes.
pub const FLAG_READ_ONLY: u16 = 1 << 1;
/// proto.md "Transmission flags": `NBD_CMD_FLUSH` is understood.
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
/// proto.md "Transmission flags": `NBD_CMD_FLAG_FUA` is understood.
pub const FLAG_SEND_FUA: u16 = 1 << 3;
/// proto.md "Transmission flags": the export behaves like a rotational disk.
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
/// proto.md "Transmission flags": `NBD_CMD_TRIM` is understood.
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
/// proto.md "Transmission flags": `NBD_CMD_WRITE_ZEROES` is understood.
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// proto.md "Transmission flags": `NBD_CMD_FLAG_DF` is understood on reads.
pub const FLAG_SEND_DF: u16 = 1 << 7;
/// proto.md "Transmission flags": flushes cover writes answered on every connection.
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// proto.md "Transmission flags": `NBD_CMD_CACHE` is understood.
pub const FLAG_SEND_CACHE: u16 = 1 << 10;
/// proto.md "Transmission flags": `NBD_CMD_FLAG_FAST_ZERO` is understood.
pub const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

// Options: proto.md "Option types".

/// proto.md "Option types": choose an export and enter transmission, with no way to refuse.
pub const OPT_EXPORT_NAME: u32 = 1;
/// proto.md "Option types": end the session (soft disconnect).
pub const OPT_ABORT: u32 = 2;
/// proto.md "Option types": list the exports.
pub const OPT_LIST: u32 = 3;
/// proto.md "Option types": start TLS.
pub const OPT_STARTTLS: u32 = 5;
/// proto.md "Option types": describe one export.
pub const OPT_INFO: u32 = 6;
/// proto.md "Option types": describe one export and enter transmission.
pub const OPT_GO: u32 = 7;
/// proto.md "Option types": use structured replies in transmission.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// proto.md "Option types": list metadata contexts.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// proto.md "Option types": select metadata contexts.
pub const OPT_SET_META_CONTEXT: u32 = 10;

// Option reply types: proto.md "Option reply types".

/// proto.md "Option reply types": the option succeeded, or a list ended.
pub const REP_ACK: u32 = 1;
/// proto.md "Option reply types": one export of `NBD_OPT_LIST`.
pub const REP_SERVER: u32 = 2;
/// proto.md "Option reply types": one item of information about an export.
pub const REP_INFO: u32 = 3;
/// proto.md "Option reply types": bit 31 marks every error reply.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// proto.md "Option reply types": the option is unknown to the server.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// proto.md "Option reply types": the server's policy forbids the option.
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// proto.md "Option reply types": the option's data is malformed.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// proto.md "Option reply types": the option is unsupported on this platform.
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// proto.md "Option reply types": TLS must come first.
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// proto.md "Option reply types": no such export.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// proto.md "Option reply types": the server is shutting down.
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// proto.md "Option reply types": the client must ask for block sizes first.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// proto.md "Option reply types": the request or its reply is too large.
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

// Information types of NBD_REP_INFO: proto.md "Option reply types", `NBD_REP_INFO`.

/// proto.md `NBD_INFO_EXPORT`: size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// proto.md `NBD_INFO_NAME`: the export's canonical name.
pub const INFO_NAME: u16 = 1;
/// proto.md `NBD_INFO_DESCRIPTION`: a description for people.
pub const INFO_DESCRIPTION: u16 = 2;
/// proto.md `NBD_INFO_BLOCK_SIZE`: minimum, preferred and maximum block sizes.
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and command flags: proto.md "Request types", "Command flags".

/// proto.md "Request types": read *length* bytes at *offset*.
pub const CMD_READ: u16 = 0;
/// proto.md "Request types": write the *length* bytes that follow the header.
pub const CMD_WRITE: u16 = 1;
/// proto.md "Request types": disconnect; no reply.
pub const CMD_DISC: u16 = 2;
/// proto.md "Request types": make every answered write durable.
pub const CMD_FLUSH: u16 = 3;
/// proto.md "Request types": the range is no longer needed.
pub const CMD_TRIM: u16 = 4;
/// proto.md "Request types": the range will be read soon.
pub const CMD_CACHE: u16 = 5;
/// proto.md "Request types": write zeroes over the range, with no payload.
pub const CMD_WRITE_ZEROES: u16 = 6;
/// proto.md "Request types": report the range's metadata.
pub const CMD_BLOCK_STATUS: u16 = 7;
/// proto.md "Command flags": answer only once the command's writes are durable.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// proto.md "Command flags": write zeroes without making a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// proto.md "Command flags": at most one content chunk in a structured read reply.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// proto.md "Command flags": one extent per metadata context.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// proto.md "Command flags": fail at once unless zeroing is faster than writing.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// Structured replies: proto.md "Structured reply flags", "Structured reply types".

/// proto.md "Structured reply flags": the last chunk of a reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// proto.md "Structured reply types": no payload; ends a reply.
pub const REPLY_TYPE_NONE: u16 = 0;
/// proto.md "Structured reply types": an offset and the data found there.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// proto.md "Structured reply types": an offset and a length that read as zeroes.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// proto.md "Structured reply types": metadata extents.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// proto.md "Structured reply types": bit 15 marks every error chunk.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// proto.md "Structured reply types": an error, with a message.
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
/// proto.md "Structured reply types": an error at an offset, with a message.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

// Error values: proto.md "Error values".

/// proto.md "Error values": operation not permitted.
pub const EPERM: u32 = 1;
/// proto.md "Error values": input/output error.
pub const EIO: u32 = 5;
/// proto.md "Error values": cannot allocate memory.
pub const ENOMEM: u32 = 12;
/// proto.md "Error values": invalid argument.
pub const EINVAL: u32 = 22;
/// proto.md "Error values": no space left on device.
pub const ENOSPC: u32 = 28;
/// proto.md "Error values": value too large.
pub const EOVERFLOW: u32 = 75;
/// proto.md "Error values": operation not supported.
pub const ENOTSUP: u32 = 95;
/// proto.md "Error values": the server is shutting down.
pub const ESHUTDOWN: u32 = 108;

// Sizes of the fixed-length messages.

/// proto.md "Newstyle negotiation": `NBDMAGIC`, `IHAVEOPT` and the handshake flags.
pub const GREETING_BYTES: usize = 18;
/// proto.md "Newstyle negotiation": the client flags.
pub const CLIENT_FLAGS_BYTES: usize = 4;
/// proto.md "Newstyle negotiation": `IHAVEOPT`, option, data length.
pub const OPTION_HEADER_BYTES: usize = 16;
/// proto.md "Fixed newstyle negotiation": magic, option, reply type, data length.
pub const OPTION_REPLY_HEADER_BYTES: usize = 20;
/// proto.md "Newstyle negotiation": the reply to `NBD_OPT_EXPORT_NAME` without its zeroes.
pub const EXPORT_NAME_REPLY_BYTES: usize = 10;
/// proto.md "Newstyle negotiation": the zeroes after the reply to `NBD_OPT_EXPORT_NAME`
/// unless both sides set NO_ZEROES.
pub const EXPORT_NAME_ZEROES_BYTES: usize = 124;
/// proto.md "Request message": magic, flags, type, cookie, offset, length.
pub const REQUEST_HEADER_BYTES: usize = 28;
/// proto.md "Simple reply message": magic, error, cookie.
pub const SIMPLE_REPLY_HEADER_BYTES: usize = 16;
/// proto.md "Structured reply chunk message": magic, flags, type, cookie, length.
pub const STRUCTURED_REPLY_HEADER_BYTES: usize = 20;
/// proto.md `NBD_REPLY_TYPE_OFFSET_DATA`: the offset before the data.
pub const OFFSET_DATA_PREFIX_BYTES: usize = 8;

// Limits.

/// proto.md "Block size constraints": the largest READ or WRITE payload a client that
/// negotiated nothing may send (2^25), and the largest either side here accepts.
pub const MAX_PAYLOAD_BYTES: u32 = 32 << 20;
/// proto.md "Conventions": the longest string (export names, error messages).
pub const MAX_STRING_BYTES: usize = 4096;
/// Option data, or option reply data, longer than this is skipped in pieces (server) or
/// refused (client), never buffered: every option this crate knows fits in a few strings.
pub const MAX_OPTION_BYTES: u32 = 64 * 1024;

/// The option's proto.md name, for messages.
pub fn option_name(option: u32) -> &'static str {
    match option {
        OPT_EXPORT_NAME => "NBD_OPT_EXPORT_NAME",
        OPT_ABORT => "NBD_OPT_ABORT",
        OPT_LIST => "NBD_OPT_LIST",
        OPT_STARTTLS => "NBD_OPT_STARTTLS",
        OPT_INFO => "NBD_OPT_INFO",
        OPT_GO => "NBD_OPT_GO",
        OPT_STRUCTURED_REPLY => "NBD_OPT_STRUCTURED_REPLY",
        OPT_LIST_META_CONTEXT => "NBD_OPT_LIST_META_CONTEXT",
        OPT_SET_META_CONTEXT => "NBD_OPT_SET_META_CONTEXT",
        _ => "an unknown option",
    }
}

/// The option reply type's proto.md name, for messages.
pub fn reply_type_name(reply_type: u32) -> &'static str {
    match reply_type {
        REP_ACK => "NBD_REP_ACK",
        REP_SERVER => "NBD_REP_SERVER",
        REP_INFO => "NBD_REP_INFO",
        REP_ERR_UNSUP => "NBD_REP_ERR_UNSUP",
        REP_ERR_POLICY => "NBD_REP_ERR_POLICY",
        REP_ERR_INVALID => "NBD_REP_ERR_INVALID",
        REP_ERR_PLATFORM => "NBD_REP_ERR_PLATFORM",
        REP_ERR_TLS_REQD => "NBD_REP_ERR_TLS_REQD",
        REP_ERR_UNKNOWN => "NBD_REP_ERR_UNKNOWN",
        REP_ERR_SHUTDOWN => "NBD_REP_ERR_SHUTDOWN",
        REP_ERR_BLOCK_SIZE_REQD => "NBD_REP_ERR_BLOCK_SIZE_REQD",
        REP_ERR_TOO_BIG => "NBD_REP_ERR_TOO_BIG",
        _ if reply_type & REP_FLAG_ERROR != 0 => "an unknown error reply",
        _ => "an unknown reply",
    }
}

/// The error value's proto.md name, for messages.
pub fn error_name(error: u32) -> &'static str {
    match error {
        0 => "success",
        EPERM => "NBD_EPERM",
        EIO => "NBD_EIO",
        ENOMEM => "NBD_ENOMEM",
        EINVAL => "NBD_EINVAL",
        ENOSPC => "NBD_ENOSPC",
        EOVERFLOW => "NBD_EOVERFLOW",
        ENOTSUP => "NBD_ENOTSUP",
        ESHUTDOWN => "NBD_ESHUTDOWN",
        _ => "an unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_spell_their_ascii_names() {
        assert_eq!(&NBDMAGIC.to_be_bytes(), b"NBDMAGIC");
        assert_eq!(&IHAVEOPT.to_be_bytes(), b"IHAVEOPT");
    }

    #[test]
    fn error_replies_and_chunks_carry_their_error_bit() {
        for reply in [
            REP_ERR_UNSUP,
            REP_ERR_INVALID,
            REP_ERR_UNKNOWN,
            REP_ERR_TOO_BIG,
        ] {
            assert_ne!(reply & REP_FLAG_ERROR, 0, "{}", reply_type_name(reply));
        }
        assert_eq!(REP_ERR_TOO_BIG, 0x8000_0009);
        assert_eq!(REPLY_TYPE_ERROR, 0x8001);
        assert_eq!(
            reply_type_name(REP_FLAG_ERROR | 77),
            "an unknown error reply"
        );
        assert_eq!(option_name(OPT_GO), "NBD_OPT_GO");
        assert_eq!(error_name(EINVAL), "NBD_EINVAL");
    }
}
