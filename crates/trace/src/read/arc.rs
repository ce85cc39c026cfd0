//! The `.lis` traces of the ARC paper (Megiddo & Modha, FAST'03): per line
//! `start_block num_blocks ignore request_no`, whitespace-separated, standing for `num_blocks`
//! requests to the consecutive 512-byte pages `start_block ..`. Each page is one object keyed by
//! its number, of size 512; there is no time and no op. Only the first two fields are read, as
//! in the Caffeine simulator, so lines may omit the last two.

use super::source::TraceInput;

use super::text::LineSource;
use super::TraceReader;
use crate::{Request, TraceError};

/// Bytes per page of the ARC traces.
const PAGE_BYTES: u32 = 512;

/// Streams an ARC trace.
pub(crate) struct ArcReader {
    lines: LineSource,
    /// The pages of the line in progress still to give, `next..end`.
    next_page: u64,
    end_page: u64,
}

impl ArcReader {
    /// Opens `path` (optionally compressed).
    pub(crate) fn open(input: &TraceInput) -> Result<ArcReader, TraceError> {
        Ok(ArcReader {
            lines: LineSource::open(input)?,
            next_page: 0,
            end_page: 0,
        })
    }
}

impl TraceReader for ArcReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        while self.next_page == self.end_page {
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            let mut fields = line
                .text
                .split(|b| b.is_ascii_whitespace())
                .filter(|field| !field.is_empty());
            let (Some(start), Some(count)) = (fields.next(), fields.next()) else {
                return Err(line.field_count_error(
                    4,
                    1,
                    b' ',
                    "start_block num_blocks ignore request_no",
                ));
            };
            let start = line.parse_u64(start, 1, "start_block")?;
            let count = line.parse_u64(count, 2, "num_blocks")?;
            self.end_page = start
                .checked_add(count)
                .ok_or_else(|| line.error("start_block + num_blocks overflows 64 bits"))?;
            self.next_page = start;
        }
        let page = self.next_page;
        self.next_page += 1;
        Ok(Some(Request::new(page, PAGE_BYTES)))
    }
}
