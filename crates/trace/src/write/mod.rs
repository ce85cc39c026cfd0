//! Trace writers: libCacheSim's oracleGeneral (for comparisons with libCacheSim), our native
//! binary format (the fast path), a cache trace as `time,page,op` text (csv) and block traces with
//! their offsets (`block.rs`), compressed when the file name ends in `.gz`, `.bz2`, `.xz` or
//! `.zst` (docs/architecture.md, "Requests and traces").

mod block;
mod cache_csv;
mod native;
mod next_access;
mod oracle_general;
mod sink;

pub use block::{create_block_writer, BlockTraceWriter, BLOCK_WRITABLE_FORMATS};
pub use cache_csv::CacheCsvWriter;
pub use native::NativeWriter;
pub use next_access::annotate_next_access;
pub use oracle_general::OracleGeneralWriter;

use std::io;
use std::path::Path;

use crate::{Request, TraceFormat};

/// A sink of requests that becomes a trace file.
pub trait TraceWriter: Send {
    /// Adds one request.
    fn write(&mut self, request: &Request) -> io::Result<()>;
    /// Writes whatever is buffered, ends any compressed stream and flushes the file. Without it
    /// the file may be incomplete.
    fn finish(self: Box<Self>) -> io::Result<()>;
}

/// The formats [`create_writer`] writes.
pub const WRITABLE_FORMATS: [TraceFormat; 3] = [
    TraceFormat::OracleGeneral,
    TraceFormat::Native,
    TraceFormat::Csv,
];

/// Creates a writer of `format` at `path`, compressing by the file name's suffix.
pub fn create_writer(path: &Path, format: TraceFormat) -> io::Result<Box<dyn TraceWriter>> {
    match format {
        TraceFormat::OracleGeneral => Ok(Box::new(OracleGeneralWriter::create(path)?)),
        TraceFormat::Native => Ok(Box::new(NativeWriter::create(path)?)),
        TraceFormat::Csv => Ok(Box::new(CacheCsvWriter::create(path)?)),
        other => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: cannot write {} traces; expected one of {}",
                path.display(),
                other.name(),
                WRITABLE_FORMATS.map(TraceFormat::name).join(", ")
            ),
        )),
    }
}
