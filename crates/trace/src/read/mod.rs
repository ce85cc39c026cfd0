//! Streaming trace readers: one file per format, transparent decompression, detection by name
//! and content (DESIGN.md, "Requests and traces").

mod oracle_general;
mod source;

pub use oracle_general::OracleGeneralReader;
pub use source::{open_source, Compression};

use std::path::Path;

use crate::{Request, TraceError};

/// A stream of requests from one trace file, read in constant memory.
pub trait TraceReader: Send {
    /// The next request, or `None` at the end of the trace.
    fn next_request(&mut self) -> Result<Option<Request>, TraceError>;

    /// Replaces the contents of `batch` with up to `max` next requests; an empty batch means the
    /// end of the trace. Readers of binary formats override it to decode a buffer at a time.
    fn read_batch(&mut self, batch: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        batch.clear();
        while batch.len() < max {
            match self.next_request()? {
                Some(request) => batch.push(request),
                None => break,
            }
        }
        Ok(())
    }
}

/// The trace formats heterarchy reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// libCacheSim oracleGeneral: packed `{u32 time; u64 id; u32 size; i64 next}` records.
    OracleGeneral,
}

impl TraceFormat {
    /// The name used by `--trace-format`.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::OracleGeneral => "oracleGeneral",
        }
    }
}

/// How to read a trace: format override and block splitting.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// Forces a format instead of detecting it.
    pub format: Option<TraceFormat>,
    /// Cache-line size that block requests are split into, in bytes.
    pub block_size: u32,
    /// Split block requests into cache-line keys (true) or keep each request as one object,
    /// as libCacheSim does (false, `--no-split`).
    pub split_blocks: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            format: None,
            block_size: 4096,
            split_blocks: true,
        }
    }
}

/// Opens `path` for reading, detecting compression and (unless forced) the format.
pub fn open(path: &Path, options: &ReaderOptions) -> Result<Box<dyn TraceReader>, TraceError> {
    let format = options.format.unwrap_or(TraceFormat::OracleGeneral);
    match format {
        TraceFormat::OracleGeneral => Ok(Box::new(OracleGeneralReader::open(path)?)),
    }
}
