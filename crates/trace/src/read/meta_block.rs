//! Meta Tectonic block/chunk storage traces (CacheLib's `block_chunk` trace replay): CSV with the
//! header `op_time,block_id,block_id_size,io_size,io_offset,user_name,user_namespace,op_name,
//! op_count,host_name,rs_shard_id`, the time in seconds, `io_offset` and `io_size` in bytes
//! within the chunk `block_id`, `op_name` such as `getChunkData.Permanent` or `putChunk.*`, and
//! `op_count` the number of times the I/O happened (each becomes its own request, as with the
//! Meta key-value traces).
//!
//! Each chunk is a volume: the volume id is the top 20 bits of the stable hash of `block_id`
//! (block keys hold 20 volume bits), so two chunks collide with probability 2^-20 per pair; the
//! tenant is that same id.

use super::source::TraceInput;

use super::block::{BlockRecord, BlockRecordSource, TextBlockSource};
use super::text::{quote, stable_key_hash, Line, LineSource};
use crate::request::BLOCK_NUMBER_BITS;
use crate::{Op, TraceError};

const LAYOUT: &str = "op_time,block_id,block_id_size,io_size,io_offset,user_name,user_namespace,\
                      op_name,op_count,host_name,rs_shard_id";

/// The first field of the header line.
pub(crate) const HEADER_START: &[u8] = b"op_time,block_id,";

/// The op of an `op_name`: the part before the first dot decides (`get…` read, `put…` write,
/// `delete…`/`remove…` trim).
fn op_of(name: &[u8]) -> Option<Op> {
    let verb = name
        .split(|&b| b == b'.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if verb.starts_with(b"get") || verb.starts_with(b"read") {
        Some(Op::Read)
    } else if verb.starts_with(b"put") || verb.starts_with(b"write") {
        Some(Op::Write)
    } else if verb.starts_with(b"delete") || verb.starts_with(b"remove") {
        Some(Op::Trim)
    } else {
        None
    }
}

/// Parses one Meta block data line.
pub(crate) fn parse_line(line: &Line<'_>) -> Result<BlockRecord, TraceError> {
    let [time, block_id, _, io_size, io_offset, _, _, op_name, op_count, _, _] =
        line.exact_fields::<11>(b',', LAYOUT)?;
    let time_ns = line.parse_seconds_ns(time, 1, "op_time")?;
    let length_bytes = line.parse_u64(io_size, 4, "io_size")?;
    let offset_bytes = line.parse_u64(io_offset, 5, "io_offset")?;
    let op = op_of(op_name).ok_or_else(|| {
        line.error(format!(
            "column 8 (op_name): unknown op \"{}\"; expected a name starting with get, put or delete",
            quote(op_name)
        ))
    })?;
    let repeat = line.parse_u32(op_count, 9, "op_count")?;
    let volume = (stable_key_hash(block_id) >> BLOCK_NUMBER_BITS) as u32;
    Ok(BlockRecord {
        repeat,
        ..BlockRecord::in_bytes(time_ns, volume, offset_bytes, length_bytes, op)
    })
}

/// Opens a trace of this format as its block records.
pub(crate) fn records(input: &TraceInput) -> Result<impl BlockRecordSource + 'static, TraceError> {
    let mut lines = LineSource::open(input)?;
    lines.skip_header(|line| line.starts_with(HEADER_START))?;
    Ok(TextBlockSource::new(lines, |line: &Line<'_>| {
        parse_line(line)
    }))
}
