//! Plain key lists, one key per line (libCacheSim's `txt` traces such as `cloudPhysicsIO.txt`):
//! numeric keys (decimal or `0x` hex) are used as they are, anything else is hashed with
//! [`stable_key_hash`](super::stable_key_hash). Every request has size 1, no time and no op, so
//! cache sizes count objects. Blank lines are skipped.

use super::source::TraceInput;

use super::text::{parse_integer, stable_key_hash, LineSource};
use super::TraceReader;
use crate::{Request, TraceError};

/// Streams a key list.
pub(crate) struct TxtReader {
    lines: LineSource,
}

impl TxtReader {
    /// Opens `path` (optionally compressed).
    pub(crate) fn open(input: &TraceInput) -> Result<TxtReader, TraceError> {
        Ok(TxtReader {
            lines: LineSource::open(input)?,
        })
    }
}

impl TraceReader for TxtReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.lines.next_line()?.map(|line| {
            let key = parse_integer(line.text).unwrap_or_else(|| stable_key_hash(line.text));
            Request::new(key, 1)
        }))
    }
}
