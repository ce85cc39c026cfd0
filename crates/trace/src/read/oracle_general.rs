//! libCacheSim's oracleGeneral binary format: packed little-endian records
//! `{u32 clock_time_s; u64 obj_id; u32 obj_size; i64 next_access_vtime}` (24 bytes). The
//! simulator's fast path: records are decoded straight out of the read buffer.
//!
//! libCacheSim counts virtual time from 1 (`traceConvOracleGeneral.cpp`: "reference count starts
//! with 1"), so `next_access_vtime` is the 0-based index of the next access plus one, and -1
//! means never. [`Request::next_access`] is the 0-based index, so the reader subtracts one (and
//! the writer adds it back).

use super::source::TraceInput;

use super::binary::{RecordStream, RequestRecord, RequestRecords};
use crate::request::NEXT_ACCESS_NEVER;
use crate::{Op, Request, TraceError};

/// Bytes per oracleGeneral record.
pub const RECORD_BYTES: usize = 24;

/// One oracleGeneral record.
pub struct OracleGeneralRecord;

/// Streams an oracleGeneral trace.
pub type OracleGeneralReader = RequestRecords<OracleGeneralRecord>;

impl OracleGeneralReader {
    /// Opens `path` (optionally compressed).
    pub fn open(input: impl Into<TraceInput>) -> Result<OracleGeneralReader, TraceError> {
        let input = &input.into();
        Ok(RequestRecords::new(RecordStream::open(
            input,
            RECORD_BYTES,
            "oracleGeneral",
        )?))
    }
}

impl RequestRecord for OracleGeneralRecord {
    /// Decodes one record; the slice holds exactly [`RECORD_BYTES`].
    #[inline(always)]
    fn decode(record: &[u8]) -> Request {
        let record: &[u8; RECORD_BYTES] = record.try_into().expect("callers pass whole records");
        let [t0, t1, t2, t3, k0, k1, k2, k3, k4, k5, k6, k7, s0, s1, s2, s3, n0, n1, n2, n3, n4, n5, n6, n7] =
            *record;
        let time_s = u32::from_le_bytes([t0, t1, t2, t3]);
        let key = u64::from_le_bytes([k0, k1, k2, k3, k4, k5, k6, k7]);
        let size = u32::from_le_bytes([s0, s1, s2, s3]);
        let next_vtime = i64::from_le_bytes([n0, n1, n2, n3, n4, n5, n6, n7]);
        Request {
            time_ns: u64::from(time_s) * 1_000_000_000,
            key,
            size,
            tenant: 0,
            op: Op::Unknown,
            // 0 cannot be a 1-based next access; like a negative value it means none is known.
            next_access: if next_vtime <= 0 {
                NEXT_ACCESS_NEVER
            } else {
                next_vtime - 1
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Location, TraceReader};
    use std::io::Write;

    fn record(time: u32, key: u64, size: u32, next: i64) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&time.to_le_bytes());
        bytes.extend_from_slice(&key.to_le_bytes());
        bytes.extend_from_slice(&size.to_le_bytes());
        bytes.extend_from_slice(&next.to_le_bytes());
        bytes
    }

    #[test]
    fn reads_records_and_maps_vtime_to_index() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        // Request 0's next access is request 1, which libCacheSim writes as vtime 2.
        file.write_all(&record(1, 42, 4096, 2)).unwrap();
        file.write_all(&record(2, 42, 4096, -1)).unwrap();
        let mut reader = OracleGeneralReader::open(file.path()).unwrap();
        let first = reader.next_request().unwrap().unwrap();
        assert_eq!((first.key, first.size, first.next_access), (42, 4096, 1));
        assert_eq!(first.time_ns, 1_000_000_000);
        let second = reader.next_request().unwrap().unwrap();
        assert_eq!(second.next_access, NEXT_ACCESS_NEVER);
        assert!(reader.next_request().unwrap().is_none());
    }

    #[test]
    fn truncated_record_names_offset() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&record(1, 42, 4096, 1)).unwrap();
        file.write_all(&record(2, 43, 4096, -1)[..10]).unwrap();
        let mut reader = OracleGeneralReader::open(file.path()).unwrap();
        let mut batch = Vec::new();
        let err = reader.read_batch(&mut batch, 10).unwrap_err();
        assert_eq!(err.location, Location::Offset(24));
        assert!(err.to_string().contains("truncated record"), "{err}");
    }
}
