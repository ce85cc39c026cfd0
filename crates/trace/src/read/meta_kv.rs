//! Meta key-value cache traces (CacheLib's `kvcache` trace replay): CSV with the header
//! `op_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase`, the time in
//! seconds. A row with `op_count` n stands for n requests. Keys are hashed with
//! [`stable_key_hash`](super::stable_key_hash); the size is `key_size + size` (the value size);
//! `usecase` is the tenant. Ops: `GET`/`GET_LEASE` get, `SET`/`SET_LEASE` set, `DELETE` delete,
//! and any of our op names.

use super::source::TraceInput;

use super::text::{fold_to_u32, quote, stable_key_hash, LineSource};
use super::TraceReader;
use crate::{Op, Request, TraceError};

const LAYOUT: &str = "op_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase";

/// The start of the header line.
pub(crate) const HEADER_START: &[u8] = b"op_time,key,";

fn op_of(name: &[u8]) -> Option<Op> {
    let name = std::str::from_utf8(name).ok()?;
    match name.to_ascii_uppercase().as_str() {
        "GET" | "GET_LEASE" => Some(Op::Get),
        "SET" | "SET_LEASE" => Some(Op::Set),
        "DELETE" => Some(Op::Delete),
        _ => Op::from_name(name),
    }
}

/// Streams a Meta key-value trace.
pub(crate) struct MetaKvReader {
    lines: LineSource,
    /// A row with requests still owed, and how many.
    repeat: Option<(Request, u32)>,
}

impl MetaKvReader {
    /// Opens `path` (optionally compressed), skipping the header if present.
    pub(crate) fn open(input: &TraceInput) -> Result<MetaKvReader, TraceError> {
        let mut lines = LineSource::open(input)?;
        lines.skip_header(|line| line.starts_with(HEADER_START))?;
        Ok(MetaKvReader {
            lines,
            repeat: None,
        })
    }
}

impl TraceReader for MetaKvReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            if let Some((request, left)) = &mut self.repeat {
                let request = *request;
                *left -= 1;
                if *left == 0 {
                    self.repeat = None;
                }
                return Ok(Some(request));
            }
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            let [time, key, key_size, op, op_count, size, cache_hits, ttl, usecase, _] =
                line.exact_fields::<10>(b',', LAYOUT)?;
            let time_ns = line.parse_seconds_ns(time, 1, "op_time")?;
            let key_size = line.parse_u32(key_size, 3, "key_size")?;
            let op = op_of(op).ok_or_else(|| {
                line.error(format!(
                    "column 4 (op): unknown op \"{}\"; expected GET, GET_LEASE, SET, SET_LEASE or \
                     DELETE",
                    quote(op)
                ))
            })?;
            let count = line.parse_u32(op_count, 5, "op_count")?;
            let value_size = line.parse_u32(size, 6, "size")?;
            line.parse_u64(cache_hits, 7, "cache_hits")?;
            line.parse_u64(ttl, 8, "ttl")?;
            let tenant = fold_to_u32(line.parse_u64(usecase, 9, "usecase")?);
            let size = key_size
                .checked_add(value_size)
                .ok_or_else(|| line.error("key_size + size overflows a 32-bit object size"))?;
            if count > 0 {
                let request = Request {
                    time_ns,
                    key: stable_key_hash(key),
                    size,
                    tenant,
                    op,
                    ..Request::default()
                };
                self.repeat = Some((request, count));
            }
        }
    }
}
