//! Tencent Cloud Block Storage traces (Zhang et al., ATC'20; SNIA IOTTA): CSV without header,
//! `Timestamp,Offset,Size,IOType,VolumeID`, the timestamp in seconds, offset and size in
//! 512-byte sectors, `IOType` 0 for read and 1 for write. The volume id becomes the volume.

use super::source::TraceInput;

use super::block::{BlockRecord, BlockRecordSource, TextBlockSource};
use super::text::{Line, LineSource};
use crate::{Op, TraceError};

const LAYOUT: &str = "Timestamp,Offset,Size,IOType,VolumeID";
const SECTOR_BYTES: u64 = 512;

/// Parses one Tencent line.
pub(crate) fn parse_line(line: &Line<'_>) -> Result<BlockRecord, TraceError> {
    let [timestamp, offset, size, io_type, volume] = line.exact_fields::<5>(b',', LAYOUT)?;
    let time_ns = line.parse_seconds_ns(timestamp, 1, "Timestamp")?;
    let offset_sectors = line.parse_u64(offset, 2, "Offset")?;
    let size_sectors = line.parse_u64(size, 3, "Size")?;
    let op = match io_type {
        b"0" => Op::Read,
        b"1" => Op::Write,
        _ => return Err(line.expected(io_type, 4, "IOType", "0 (read) or 1 (write)")),
    };
    let volume = line.parse_u32(volume, 5, "VolumeID")?;
    let too_far = || line.expected(offset, 2, "Offset", "a sector range below 2^64 bytes");
    let offset_bytes = offset_sectors
        .checked_mul(SECTOR_BYTES)
        .ok_or_else(too_far)?;
    let length_bytes = size_sectors.checked_mul(SECTOR_BYTES).ok_or_else(too_far)?;
    Ok(BlockRecord {
        unsplit_id: offset_sectors,
        ..BlockRecord::in_bytes(time_ns, volume, offset_bytes, length_bytes, op)
    })
}

/// Opens a trace of this format as its block records.
pub(crate) fn records(input: &TraceInput) -> Result<impl BlockRecordSource + 'static, TraceError> {
    Ok(TextBlockSource::new(
        LineSource::open(input)?,
        |line: &Line<'_>| parse_line(line),
    ))
}
