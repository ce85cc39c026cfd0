//! MSR Cambridge block traces (Narayanan et al., FAST'08; SNIA IOTTA): CSV without header,
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, the timestamp a Windows
//! FILETIME (100 ns ticks since 1601), `Type` `Read` or `Write`, offset and size in bytes.
//! heterarchy also writes and reads `Flush` (size 0), which the published traces lack: a trace
//! captured below a file system keeps its flushes for the staged simulator.
//!
//! The volume is the disk number. The host name is not folded into it: each published MSR file
//! holds one host, and mixing hosts in one stream would need a wider volume field than block
//! keys have.

use super::source::TraceInput;

use super::block::{BlockRecord, BlockRecordSource, TextBlockSource};
use super::csv::unknown_op;
use super::text::{parse_op_name, Line, LineSource};
use crate::TraceError;

const LAYOUT: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";
/// Nanoseconds per FILETIME tick.
const FILETIME_TICK_NS: u64 = 100;

/// Parses one MSR line.
pub(crate) fn parse_line(line: &Line<'_>) -> Result<BlockRecord, TraceError> {
    let [timestamp, _host, disk, kind, offset, size, response] =
        line.exact_fields::<7>(b',', LAYOUT)?;
    let ticks = line.parse_u64(timestamp, 1, "Timestamp")?;
    let time_ns = ticks.checked_mul(FILETIME_TICK_NS).ok_or_else(|| {
        line.expected(timestamp, 1, "Timestamp", "a FILETIME before the year 2185")
    })?;
    let volume = line.parse_u32(disk, 3, "DiskNumber")?;
    let op = parse_op_name(kind).ok_or_else(|| unknown_op(line, kind, 4))?;
    let offset_bytes = line.parse_u64(offset, 5, "Offset")?;
    let length_bytes = line.parse_u64(size, 6, "Size")?;
    line.parse_u64(response, 7, "ResponseTime")?;
    Ok(BlockRecord::in_bytes(
        time_ns,
        volume,
        offset_bytes,
        length_bytes,
        op,
    ))
}

/// Opens a trace of this format as its block records.
pub(crate) fn records(input: &TraceInput) -> Result<impl BlockRecordSource + 'static, TraceError> {
    Ok(TextBlockSource::new(
        LineSource::open(input)?,
        |line: &Line<'_>| parse_line(line),
    ))
}
