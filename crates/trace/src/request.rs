//! The one request model shared by the simulator, the engine and the servers.

use serde::{Deserialize, Serialize};

/// What a request does. Block traces use `Read`, `Write`, `Trim` and `Flush`; key-value traces
/// the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Op {
    /// The trace does not say (oracleGeneral, plain key lists).
    #[default]
    Unknown = 0,
    Read = 1,
    Write = 2,
    /// Block discard / trim.
    Trim = 3,
    Get = 4,
    Gets = 5,
    Set = 6,
    Add = 7,
    Replace = 8,
    Cas = 9,
    Append = 10,
    Prepend = 11,
    Delete = 12,
    Incr = 13,
    Decr = 14,
    Scan = 15,
    /// Any operation the trace names that none of the above fits.
    Other = 16,
    /// A block flush (NBD_CMD_FLUSH, SCSI SYNCHRONIZE CACHE): no data, everything written
    /// before it made durable. It gives no request to the cache simulators (block traces skip
    /// it when splitting); the staged simulator replays it (docs/pm-block-device.md).
    Flush = 17,
}

impl Op {
    /// Every op, in discriminant order, so `Op::ALL[op as usize] == op`.
    pub const ALL: [Op; 18] = [
        Op::Unknown,
        Op::Read,
        Op::Write,
        Op::Trim,
        Op::Get,
        Op::Gets,
        Op::Set,
        Op::Add,
        Op::Replace,
        Op::Cas,
        Op::Append,
        Op::Prepend,
        Op::Delete,
        Op::Incr,
        Op::Decr,
        Op::Scan,
        Op::Other,
        Op::Flush,
    ];

    /// Lower-case name, as in CSV and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Unknown => "unknown",
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Get => "get",
            Op::Gets => "gets",
            Op::Set => "set",
            Op::Add => "add",
            Op::Replace => "replace",
            Op::Cas => "cas",
            Op::Append => "append",
            Op::Prepend => "prepend",
            Op::Delete => "delete",
            Op::Incr => "incr",
            Op::Decr => "decr",
            Op::Scan => "scan",
            Op::Other => "other",
            Op::Flush => "flush",
        }
    }

    /// Parses a name as written by [`Op::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL
            .iter()
            .copied()
            .find(|op| op.name().eq_ignore_ascii_case(name))
    }

    /// True for ops that change the cached data (write, set, delete, ...), false for reads,
    /// lookups, flushes and unknown ops.
    pub fn is_write(self) -> bool {
        !matches!(
            self,
            Op::Unknown | Op::Read | Op::Get | Op::Gets | Op::Scan | Op::Other | Op::Flush
        )
    }
}

/// Marks a request whose next access is unknown (the trace does not carry it).
pub const NEXT_ACCESS_UNKNOWN: i64 = -2;
/// Marks a request whose key is never accessed again.
pub const NEXT_ACCESS_NEVER: i64 = i64::MAX;

/// One access to one object (a key-value item, or one cache line of a block volume).
///
/// Block traces are split into cache-line keys with the volume id in the key's high bits
/// ([`Request::block_key`]); `size` is then the cache-line size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Time since the trace's epoch, in nanoseconds.
    pub time_ns: u64,
    /// Object id.
    pub key: u64,
    /// Object size in bytes.
    pub size: u32,
    /// Tenant (volume, client, use case) the request belongs to; 0 when the trace has none.
    pub tenant: u32,
    /// What the request does.
    pub op: Op,
    /// Index (virtual time) of the next request to the same key, [`NEXT_ACCESS_NEVER`] if there
    /// is none, or [`NEXT_ACCESS_UNKNOWN`]. Only Belady uses it.
    pub next_access: i64,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            time_ns: 0,
            key: 0,
            size: 1,
            tenant: 0,
            op: Op::Unknown,
            next_access: NEXT_ACCESS_UNKNOWN,
        }
    }
}

/// Bits of a block key that hold the block number; the volume id sits above them.
pub const BLOCK_NUMBER_BITS: u32 = 44;

impl Request {
    /// A request for `key` of `size` bytes with everything else defaulted.
    pub fn new(key: u64, size: u32) -> Request {
        Request {
            key,
            size,
            ..Request::default()
        }
    }

    /// The key of cache line `block` of `volume`: the volume id in the top 20 bits, the block
    /// number in the low 44 (16 Ti blocks, 64 PiB at 4 KiB), so that volumes never collide.
    pub fn block_key(volume: u32, block: u64) -> u64 {
        (u64::from(volume) << BLOCK_NUMBER_BITS) | (block & ((1u64 << BLOCK_NUMBER_BITS) - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_round_trip() {
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
        assert_eq!(Op::from_name("READ"), Some(Op::Read));
        assert_eq!(Op::from_name("bogus"), None);
    }

    #[test]
    fn block_keys_of_different_volumes_differ() {
        assert_ne!(Request::block_key(1, 7), Request::block_key(2, 7));
        assert_eq!(Request::block_key(3, 7) >> BLOCK_NUMBER_BITS, 3);
        assert_eq!(Request::block_key(3, 7) & 0xffff, 7);
    }
}
