//! libCacheSim's oracleGeneral binary format: packed little-endian records
//! `{u32 clock_time_s; u64 obj_id; u32 obj_size; i64 next_access_vtime}` (24 bytes), where a
//! next access of -1 means never. The simulator's fast path: records are decoded straight out of
//! the read buffer.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::{open_source, TraceReader};
use crate::request::NEXT_ACCESS_NEVER;
use crate::{Location, Op, Request, TraceError};

/// Bytes per oracleGeneral record.
pub const RECORD_BYTES: usize = 24;

/// Streams an oracleGeneral trace.
pub struct OracleGeneralReader {
    path: PathBuf,
    input: Box<dyn BufRead + Send>,
    /// Bytes of the decompressed stream consumed so far, for error offsets.
    offset: u64,
    /// A record split across two buffer refills.
    partial: Vec<u8>,
}

impl OracleGeneralReader {
    /// Opens `path` (optionally compressed).
    pub fn open(path: &Path) -> Result<OracleGeneralReader, TraceError> {
        let (input, _) = open_source(path)?;
        Ok(OracleGeneralReader {
            path: path.to_path_buf(),
            input,
            offset: 0,
            partial: Vec::with_capacity(RECORD_BYTES),
        })
    }

    fn truncated(&self) -> TraceError {
        TraceError::new(
            &self.path,
            Location::Offset(self.offset - self.partial.len() as u64),
            format!(
                "truncated record: {} of {RECORD_BYTES} bytes (oracleGeneral records are {RECORD_BYTES} bytes)",
                self.partial.len()
            ),
        )
    }

    fn io_error(&self, err: &std::io::Error) -> TraceError {
        TraceError::io(&self.path, Location::Offset(self.offset), err)
    }
}

/// Decodes one record; the buffer holds exactly [`RECORD_BYTES`].
#[inline]
fn decode(record: &[u8]) -> Request {
    let time_s = u32::from_le_bytes(record[0..4].try_into().unwrap());
    let key = u64::from_le_bytes(record[4..12].try_into().unwrap());
    let size = u32::from_le_bytes(record[12..16].try_into().unwrap());
    let next = i64::from_le_bytes(record[16..24].try_into().unwrap());
    Request {
        time_ns: u64::from(time_s) * 1_000_000_000,
        key,
        size,
        tenant: 0,
        op: Op::Unknown,
        next_access: if next < 0 { NEXT_ACCESS_NEVER } else { next },
    }
}

impl TraceReader for OracleGeneralReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        let mut one = Vec::with_capacity(1);
        self.read_batch(&mut one, 1)?;
        Ok(one.pop())
    }

    fn read_batch(&mut self, batch: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        batch.clear();
        while batch.len() < max {
            let buffer = match self.input.fill_buf() {
                Ok(buffer) => buffer,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(&e)),
            };
            if buffer.is_empty() {
                if !self.partial.is_empty() {
                    return Err(self.truncated());
                }
                break;
            }
            let mut used = 0;
            if !self.partial.is_empty() {
                let need = (RECORD_BYTES - self.partial.len()).min(buffer.len());
                self.partial.extend_from_slice(&buffer[..need]);
                used = need;
                if self.partial.len() == RECORD_BYTES {
                    batch.push(decode(&self.partial));
                    self.partial.clear();
                }
            }
            let whole = ((buffer.len() - used) / RECORD_BYTES).min(max - batch.len());
            for record in buffer[used..used + whole * RECORD_BYTES].chunks_exact(RECORD_BYTES) {
                batch.push(decode(record));
            }
            used += whole * RECORD_BYTES;
            if batch.len() < max && used < buffer.len() && buffer.len() - used < RECORD_BYTES {
                self.partial.extend_from_slice(&buffer[used..]);
                used = buffer.len();
            }
            self.input.consume(used);
            self.offset += used as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn reads_records_and_maps_never() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&record(1, 42, 4096, 1)).unwrap();
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
