//! Twitter production cache traces (Yang et al., OSDI'20; `twitter/cache-trace`): CSV without
//! header, `timestamp,key,key_size,value_size,client_id,operation,TTL`, the timestamp in
//! seconds. Keys are anonymised strings, hashed with [`stable_key_hash`](super::stable_key_hash);
//! since a key could hold commas, the fixed fields are taken from both ends of the line and the
//! key is what lies between. The size is `key_size + value_size` (libCacheSim's twr readers do
//! the same); the client id is the tenant.

use super::source::TraceInput;

use super::text::{quote, stable_key_hash, LineSource};
use super::TraceReader;
use crate::{Op, Request, TraceError};

const LAYOUT: &str = "timestamp,key,key_size,value_size,client_id,operation,TTL";
const FIELDS: usize = 7;

/// Streams a Twitter trace.
pub(crate) struct TwitterReader {
    lines: LineSource,
}

impl TwitterReader {
    /// Opens `path` (optionally compressed).
    pub(crate) fn open(input: &TraceInput) -> Result<TwitterReader, TraceError> {
        Ok(TwitterReader {
            lines: LineSource::open(input)?,
        })
    }
}

impl TraceReader for TwitterReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        let Some(line) = self.lines.next_line()? else {
            return Ok(None);
        };
        let text = line.text;
        let fields_found = text.iter().filter(|&&b| b == b',').count() + 1;
        let too_few = || line.field_count_error(FIELDS, fields_found, b',', LAYOUT);
        let first_comma = text.iter().position(|&b| b == b',').ok_or_else(too_few)?;
        let mut tail = text[first_comma + 1..].rsplitn(FIELDS - 1, |&b| b == b',');
        // rsplitn yields from the right: TTL, operation, client_id, value_size, key_size, key.
        let mut next = || tail.next().ok_or_else(too_few);
        let (ttl, operation, client, value_size, key_size, key) =
            (next()?, next()?, next()?, next()?, next()?, next()?);
        let time_ns = line.parse_seconds_ns(&text[..first_comma], 1, "timestamp")?;
        let key_size = line.parse_u32(key_size, 3, "key_size")?;
        let value_size = line.parse_u32(value_size, 4, "value_size")?;
        let tenant = line.parse_u32(client, 5, "client_id")?;
        let op = std::str::from_utf8(operation)
            .ok()
            .and_then(Op::from_name)
            .filter(|op| {
                !matches!(
                    op,
                    Op::Unknown | Op::Read | Op::Write | Op::Trim | Op::Other | Op::Flush
                )
            })
            .ok_or_else(|| {
                line.error(format!(
                    "column 6 (operation): unknown op \"{}\"; expected get, gets, set, add, \
                     replace, cas, append, prepend, delete, incr or decr",
                    quote(operation)
                ))
            })?;
        line.parse_u64(ttl, 7, "TTL")?;
        let size = key_size
            .checked_add(value_size)
            .ok_or_else(|| line.error("key_size + value_size overflows a 32-bit object size"))?;
        Ok(Some(Request {
            time_ns,
            key: stable_key_hash(key),
            size,
            tenant,
            op,
            ..Request::default()
        }))
    }
}
