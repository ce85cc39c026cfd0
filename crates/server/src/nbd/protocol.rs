//! The NBD protocol's numbers, as `doc/proto.md` of the NBD project defines them (fixed
//! newstyle negotiation, simple replies).

pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943; // "NBDMAGIC"
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054; // "IHAVEOPT"
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const CLIENT_NO_ZEROES: u32 = 1 << 1;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = 1 | 1 << 31;
pub const REP_ERR_INVALID: u32 = 3 | 1 << 31;
pub const REP_ERR_UNKNOWN: u32 = 6 | 1 << 31;
pub const REP_ERR_TOO_BIG: u32 = 9 | 1 << 31;

// NBD_REP_INFO types.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Transmission flags.
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

// Commands and their flags.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_FLAG_FUA: u16 = 1 << 0;

// Errors (errno values on the wire).
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ESHUTDOWN: u32 = 108;

/// The largest READ or WRITE payload: proto.md's "MUST NOT exceed 32 MiB" for clients that
/// negotiated no block size, and the maximum this server advertises.
pub const MAX_PAYLOAD_BYTES: u32 = 32 << 20;
/// Option data longer than this is read and dropped, never buffered (names are at most 4 KiB).
pub const MAX_OPTION_BYTES: u32 = 64 * 1024;
/// Block sizes advertised: any alignment works, 4 KiB is best.
pub const MIN_BLOCK_BYTES: u32 = 1;
pub const PREFERRED_BLOCK_BYTES: u32 = 4096;
