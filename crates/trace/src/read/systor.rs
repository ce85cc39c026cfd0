//! SNIA SYSTOR'17 block traces (Lee et al., SYSTOR'17): CSV with the header
//! `Timestamp,Response,IOType,LUN,Offset,Size`, the timestamp and response time in seconds with
//! decimals, `IOType` `R` or `W`, offset and size in bytes. The LUN becomes the volume. The header
//! is skipped when present.

use super::source::TraceInput;

use super::block::{BlockRecord, BlockRecordSource, TextBlockSource};
use super::csv::unknown_op;
use super::text::{parse_op_name, parse_seconds_ns, Line, LineSource};
use crate::TraceError;

const LAYOUT: &str = "Timestamp,Response,IOType,LUN,Offset,Size";

/// True for the SYSTOR header line.
pub(crate) fn is_header(line: &[u8]) -> bool {
    line.len() >= 9 && line[..9].eq_ignore_ascii_case(b"Timestamp")
}

/// Parses one SYSTOR data line.
pub(crate) fn parse_line(line: &Line<'_>) -> Result<BlockRecord, TraceError> {
    let [timestamp, response, io_type, lun, offset, size] = line.exact_fields::<6>(b',', LAYOUT)?;
    let time_ns = line.parse_seconds_ns(timestamp, 1, "Timestamp")?;
    // The response time is not part of a request, but a non-number there means a wrong format.
    if !response.is_empty() && parse_seconds_ns(response).is_none() {
        return Err(line.expected(response, 2, "Response", "a number of seconds"));
    }
    let op = parse_op_name(io_type).ok_or_else(|| unknown_op(line, io_type, 3))?;
    let volume = line.parse_u32(lun, 4, "LUN")?;
    let offset_bytes = line.parse_u64(offset, 5, "Offset")?;
    let length_bytes = line.parse_u64(size, 6, "Size")?;
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
    let mut lines = LineSource::open(input)?;
    lines.skip_header(is_header)?;
    Ok(TextBlockSource::new(lines, |line: &Line<'_>| {
        parse_line(line)
    }))
}
