//! heterarchy's own binary trace format, the fast path (docs/architecture.md, "Requests and traces"): every
//! field of [`Request`] in fixed 32-byte little-endian records, so that a batch decodes straight
//! out of the read buffer like oracleGeneral, without losing ops, tenants or nanosecond times.
//!
//! Layout (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | header 0..8 | magic `89 'H' 'T' 'R' '\r' '\n' 1a '\n'` (PNG-style: catches text-mode mangling) |
//! | header 8..12 | `u32` format version, 1 |
//! | header 12..16 | `u32` record size in bytes, 32 |
//! | record 0..8 | `u64 time_ns` |
//! | record 8..16 | `u64 key` |
//! | record 16..20 | `u32 size` |
//! | record 20..24 | `u32 tenant` |
//! | record 24..32 | `u64`: low 56 bits next access, high 8 bits [`Op`] discriminant |
//!
//! The next access field holds the 0-based index of the next request to the same key,
//! `2^56 - 1` for [`NEXT_ACCESS_NEVER`] and `2^56 - 2` for [`NEXT_ACCESS_UNKNOWN`]; 2^56 requests
//! is beyond any trace. Packing the op there keeps records at 32 bytes (two per 64-byte cache
//! line) where a separate op byte would pad them to 40. Op codes this version does not know read
//! as [`Op::Other`], so newer files stay readable.

use super::source::TraceInput;
use std::path::{Path, PathBuf};

use super::binary::{RecordStream, RequestRecord, RequestRecords};
use super::block::{BlockRecord, BlockRecordSource};
use super::TraceReader;
use crate::request::{NEXT_ACCESS_NEVER, NEXT_ACCESS_UNKNOWN};
use crate::{Location, Op, Request, TraceError};

/// The first eight bytes of every native trace.
pub const NATIVE_MAGIC: [u8; 8] = [0x89, b'H', b'T', b'R', b'\r', b'\n', 0x1a, b'\n'];
/// The format version this code reads and writes.
pub const NATIVE_VERSION: u32 = 1;
/// Bytes of the header before the first record.
pub const NATIVE_HEADER_BYTES: usize = 16;
/// Bytes per record.
pub const NATIVE_RECORD_BYTES: usize = 32;
/// The file-name extension native traces are written with (before any compression suffix).
pub const NATIVE_EXTENSION: &str = "htrace";

const NEXT_ACCESS_BITS: u32 = 56;
const NEXT_ACCESS_MASK: u64 = (1 << NEXT_ACCESS_BITS) - 1;
const NEXT_NEVER_CODE: u64 = NEXT_ACCESS_MASK;
const NEXT_UNKNOWN_CODE: u64 = NEXT_ACCESS_MASK - 1;

/// The header of a native trace.
pub fn native_header() -> [u8; NATIVE_HEADER_BYTES] {
    let mut header = [0; NATIVE_HEADER_BYTES];
    header[..8].copy_from_slice(&NATIVE_MAGIC);
    header[8..12].copy_from_slice(&NATIVE_VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&(NATIVE_RECORD_BYTES as u32).to_le_bytes());
    header
}

/// Encodes `request` as one record, or `None` if its next access index does not fit 56 bits.
pub fn encode_native_record(request: &Request) -> Option<[u8; NATIVE_RECORD_BYTES]> {
    let next_code = match request.next_access {
        NEXT_ACCESS_NEVER => NEXT_NEVER_CODE,
        NEXT_ACCESS_UNKNOWN => NEXT_UNKNOWN_CODE,
        index => u64::try_from(index)
            .ok()
            .filter(|&i| i < NEXT_UNKNOWN_CODE)?,
    };
    let mut record = [0; NATIVE_RECORD_BYTES];
    record[0..8].copy_from_slice(&request.time_ns.to_le_bytes());
    record[8..16].copy_from_slice(&request.key.to_le_bytes());
    record[16..20].copy_from_slice(&request.size.to_le_bytes());
    record[20..24].copy_from_slice(&request.tenant.to_le_bytes());
    let packed = next_code | (u64::from(request.op as u8) << NEXT_ACCESS_BITS);
    record[24..32].copy_from_slice(&packed.to_le_bytes());
    Some(record)
}

/// One native record.
pub struct NativeRecord;

impl RequestRecord for NativeRecord {
    /// Decodes one record; the slice holds exactly [`NATIVE_RECORD_BYTES`].
    #[inline(always)]
    fn decode(record: &[u8]) -> Request {
        // One length check up front lets every field below compile to a plain load.
        let record: &[u8; NATIVE_RECORD_BYTES] =
            record.try_into().expect("callers pass whole records");
        let word = |at: usize| {
            u64::from_le_bytes([
                record[at],
                record[at + 1],
                record[at + 2],
                record[at + 3],
                record[at + 4],
                record[at + 5],
                record[at + 6],
                record[at + 7],
            ])
        };
        let size_and_tenant = word(16);
        let packed = word(24);
        let next_access = match packed & NEXT_ACCESS_MASK {
            NEXT_NEVER_CODE => NEXT_ACCESS_NEVER,
            NEXT_UNKNOWN_CODE => NEXT_ACCESS_UNKNOWN,
            index => index as i64,
        };
        let op_code = (packed >> NEXT_ACCESS_BITS) as usize;
        Request {
            time_ns: word(0),
            key: word(8),
            size: size_and_tenant as u32,
            tenant: (size_and_tenant >> 32) as u32,
            op: if op_code < Op::ALL.len() {
                Op::ALL[op_code]
            } else {
                Op::Other
            },
            next_access,
        }
    }
}

/// Streams a native trace.
pub type NativeReader = RequestRecords<NativeRecord>;

impl NativeReader {
    /// Opens `path` (optionally compressed) and checks its header.
    pub fn open(input: impl Into<TraceInput>) -> Result<NativeReader, TraceError> {
        let input = &input.into();
        let path = input.name();
        let mut stream = RecordStream::open(input, NATIVE_RECORD_BYTES, "native")?;
        let mut header = [0; NATIVE_HEADER_BYTES];
        stream.read_header(&mut header, "native trace header")?;
        check_header(path, &header)?;
        Ok(RequestRecords::new(stream))
    }
}

/// True if `head` starts with the native magic.
pub(crate) fn has_native_magic(head: &[u8]) -> bool {
    head.starts_with(&NATIVE_MAGIC)
}

fn check_header(path: &Path, header: &[u8; NATIVE_HEADER_BYTES]) -> Result<(), TraceError> {
    if !has_native_magic(header) {
        return Err(TraceError::new(
            path,
            Location::Offset(0),
            "not a native heterarchy trace: expected the magic bytes 89 48 54 52 0d 0a 1a 0a",
        ));
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version != NATIVE_VERSION {
        return Err(TraceError::new(
            path,
            Location::Offset(8),
            format!("native trace version {version}: expected version {NATIVE_VERSION}"),
        ));
    }
    let record_bytes = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
    if record_bytes as usize != NATIVE_RECORD_BYTES {
        return Err(TraceError::new(
            path,
            Location::Offset(12),
            format!("native record size {record_bytes}: expected {NATIVE_RECORD_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// A native trace read as block records: each request an I/O at byte offset `key`, `size`
/// bytes long, on volume `tenant` (what [`create_block_writer`](crate::write::create_block_writer)
/// writes).
pub(crate) struct NativeBlockRecords {
    requests: NativeReader,
    path: PathBuf,
    /// Records returned so far.
    returned: u64,
}

/// Opens a native trace as block records.
pub(crate) fn records(input: &TraceInput) -> Result<NativeBlockRecords, TraceError> {
    let path = input.name();
    Ok(NativeBlockRecords {
        requests: NativeReader::open(input)?,
        path: path.to_path_buf(),
        returned: 0,
    })
}

impl BlockRecordSource for NativeBlockRecords {
    fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
        let Some(request) = self.requests.next_request()? else {
            return Ok(None);
        };
        self.returned += 1;
        Ok(Some(BlockRecord::in_bytes(
            request.time_ns,
            request.tenant,
            request.key,
            u64::from(request.size),
            request.op,
        )))
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn location(&self) -> Location {
        let index = self.returned.saturating_sub(1);
        Location::Offset(NATIVE_HEADER_BYTES as u64 + index * NATIVE_RECORD_BYTES as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_every_field() {
        for (op, next_access) in [
            (Op::Read, 0),
            (Op::Decr, 12345),
            (Op::Other, NEXT_ACCESS_NEVER),
            (Op::Unknown, NEXT_ACCESS_UNKNOWN),
            (Op::Trim, (1 << 56) - 3),
        ] {
            let request = Request {
                time_ns: u64::MAX - 1,
                key: 0x0123_4567_89ab_cdef,
                size: u32::MAX,
                tenant: 0xdead_beef,
                op,
                next_access,
            };
            let record = encode_native_record(&request).unwrap();
            assert_eq!(NativeRecord::decode(&record), request);
        }
    }

    #[test]
    fn unrepresentable_next_access_is_refused() {
        let request = Request {
            next_access: (1 << 56) - 2,
            ..Request::default()
        };
        assert!(encode_native_record(&request).is_none());
        let request = Request {
            next_access: -7,
            ..Request::default()
        };
        assert!(encode_native_record(&request).is_none());
    }

    #[test]
    fn unknown_op_codes_read_as_other() {
        let mut record = encode_native_record(&Request::default()).unwrap();
        record[31] = 200;
        assert_eq!(NativeRecord::decode(&record).op, Op::Other);
    }
}
