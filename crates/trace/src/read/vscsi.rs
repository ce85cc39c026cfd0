//! CloudPhysics vscsi binary block traces (Waldspurger et al., FAST'15), both record versions,
//! with the layouts and the version test of libCacheSim's vscsi reader
//! (`traceReader/customizedReader/vscsi.h`). All fields little-endian:
//!
//! - version 1, 32 bytes: `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`
//! - version 2, 40 bytes: `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`
//!
//! `ver >> 8` is the version; a trace is version 2 if its first two records say so when read as
//! version 2, else version 1 if they say so when read as version 1. `len` is in bytes, `lbn` in
//! 512-byte sectors, `ts` in microseconds, `cmd` the SCSI opcode. The whole trace is one volume
//! (0), so unsplit keys are the plain lbn as in libCacheSim.

use super::source::TraceInput;
use std::path::Path;

use super::binary::RecordStream;
use super::block::{BlockRecord, BlockRecordSource};
use super::source::read_head;
use crate::{Location, Op, TraceError};

/// Bytes of a version 1 record.
pub(crate) const V1_RECORD_BYTES: usize = 32;
/// Bytes of a version 2 record.
pub(crate) const V2_RECORD_BYTES: usize = 40;
/// Records that must agree on the version, as in libCacheSim.
const VERSION_PROBE_RECORDS: usize = 2;
/// Bytes per lbn unit.
const SECTOR_BYTES: u64 = 512;

/// The two vscsi record layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VscsiVersion {
    V1,
    V2,
}

impl VscsiVersion {
    /// Bytes per record of this version.
    pub(crate) fn record_bytes(self) -> usize {
        match self {
            VscsiVersion::V1 => V1_RECORD_BYTES,
            VscsiVersion::V2 => V2_RECORD_BYTES,
        }
    }

    /// The version the first records of a trace announce, or `None` if neither layout's version
    /// field matches in all of the first two records (libCacheSim's `test_vscsi_version`).
    pub(crate) fn detect(head: &[u8]) -> Option<VscsiVersion> {
        let agrees = |version: VscsiVersion, field_offset: usize, expected: u8| {
            let size = version.record_bytes();
            head.len() >= size * VERSION_PROBE_RECORDS
                && (0..VERSION_PROBE_RECORDS).all(|i| {
                    // `ver >> 8` of a little-endian u16 is its second byte.
                    head[i * size + field_offset + 1] == expected
                })
        };
        if agrees(VscsiVersion::V2, 2, 2) {
            Some(VscsiVersion::V2)
        } else if agrees(VscsiVersion::V1, 14, 1) {
            Some(VscsiVersion::V1)
        } else {
            None
        }
    }
}

/// The op of a SCSI opcode: READ(6/10/12/16), WRITE(6/10/12/16), UNMAP; anything else (cache
/// syncs, inquiries) is `Other`.
fn scsi_op(cmd: u16) -> Op {
    match cmd {
        0x08 | 0x28 | 0xa8 | 0x88 => Op::Read,
        0x0a | 0x2a | 0xaa | 0x8a => Op::Write,
        0x42 => Op::Trim,
        _ => Op::Other,
    }
}

fn u16_at(record: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([record[at], record[at + 1]])
}

fn u32_at(record: &[u8], at: usize) -> u32 {
    let mut bytes = [0; 4];
    bytes.copy_from_slice(&record[at..at + 4]);
    u32::from_le_bytes(bytes)
}

fn u64_at(record: &[u8], at: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&record[at..at + 8]);
    u64::from_le_bytes(bytes)
}

/// Parses vscsi records into block records.
pub(crate) struct VscsiRecords {
    stream: RecordStream,
    version: VscsiVersion,
}

impl VscsiRecords {
    /// Opens `path` (optionally compressed) and detects its version from the first records.
    pub(crate) fn open(input: &TraceInput) -> Result<VscsiRecords, TraceError> {
        let path = input.name();
        let (head, _) = read_head(input, V2_RECORD_BYTES * VERSION_PROBE_RECORDS)?;
        let version = VscsiVersion::detect(&head).ok_or_else(|| {
            if head.len() < V1_RECORD_BYTES * VERSION_PROBE_RECORDS {
                TraceError::file(
                    path,
                    format!(
                        "too short for a vscsi trace: {} bytes, expected at least two records",
                        head.len()
                    ),
                )
            } else {
                TraceError::file(
                    path,
                    "not a vscsi trace: the version field of the first two records is neither 1 \
                     (32-byte records) nor 2 (40-byte records)",
                )
            }
        })?;
        Ok(VscsiRecords {
            stream: RecordStream::open(input, version.record_bytes(), "vscsi")?,
            version,
        })
    }
}

impl BlockRecordSource for VscsiRecords {
    fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
        let version = self.version;
        let Some(record) = self.stream.next_record()? else {
            return Ok(None);
        };
        let (cmd, len, lbn, ts_us) = match version {
            VscsiVersion::V1 => (
                u16_at(record, 12),
                u32_at(record, 4),
                u64_at(record, 16),
                u64_at(record, 24),
            ),
            VscsiVersion::V2 => (
                u16_at(record, 0),
                u32_at(record, 8),
                u64_at(record, 16),
                u64_at(record, 24),
            ),
        };
        let offset_bytes = lbn.checked_mul(SECTOR_BYTES).ok_or_else(|| {
            TraceError::new(
                self.stream.path(),
                self.location(),
                format!("lbn {lbn} overflows a 64-bit byte offset"),
            )
        })?;
        Ok(Some(BlockRecord {
            time_ns: ts_us.saturating_mul(1000),
            volume: 0,
            offset_bytes,
            length_bytes: u64::from(len),
            unsplit_id: lbn,
            op: scsi_op(cmd),
            repeat: 1,
        }))
    }

    fn path(&self) -> &Path {
        self.stream.path()
    }

    fn location(&self) -> Location {
        let record_bytes = self.version.record_bytes() as u64;
        Location::Offset(self.stream.offset().saturating_sub(record_bytes))
    }
}

/// Opens a vscsi trace as its block records.
pub(crate) fn records(input: &TraceInput) -> Result<VscsiRecords, TraceError> {
    VscsiRecords::open(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_versions_like_libcachesim() {
        let mut v1 = vec![0u8; 64];
        v1[15] = 1;
        v1[32 + 15] = 1;
        assert_eq!(VscsiVersion::detect(&v1), Some(VscsiVersion::V1));
        let mut v2 = vec![0u8; 80];
        v2[3] = 2;
        v2[40 + 3] = 2;
        assert_eq!(VscsiVersion::detect(&v2), Some(VscsiVersion::V2));
        v2[40 + 3] = 1;
        assert_eq!(VscsiVersion::detect(&v2), None);
        assert_eq!(VscsiVersion::detect(&v1[..40]), None);
    }
}
