//! The block traces of the LIRS paper (Jiang & Zhang, SIGMETRICS'02) as the Caffeine simulator
//! stores them: one decimal block number per line; lines holding `*` and blank lines are
//! skipped. Each block is one object of size 1 (the paper counts cache sizes in blocks); there
//! is no time and no op.

use super::source::TraceInput;

use super::text::LineSource;
use super::TraceReader;
use crate::{Request, TraceError};

/// Streams a LIRS trace.
pub(crate) struct LirsReader {
    lines: LineSource,
}

impl LirsReader {
    /// Opens `path` (optionally compressed).
    pub(crate) fn open(input: &TraceInput) -> Result<LirsReader, TraceError> {
        Ok(LirsReader {
            lines: LineSource::open(input)?,
        })
    }
}

impl TraceReader for LirsReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        while let Some(line) = self.lines.next_line()? {
            if line.text.starts_with(b"*") {
                continue;
            }
            let block = line.parse_u64(line.text, 1, "block number")?;
            return Ok(Some(Request::new(block, 1)));
        }
        Ok(None)
    }
}
