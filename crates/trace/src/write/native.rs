//! Writes heterarchy's native binary format (layout in `read/native.rs`) as the requests come,
//! in constant memory. `next_access` is written as given: annotate the trace first with
//! [`annotate_next_access`](super::annotate_next_access) when a Belady run will read it.

use std::io;
use std::path::Path;

use super::sink::Sink;
use super::TraceWriter;
use crate::read::{encode_native_record, native_header};
use crate::Request;

/// Streams requests into a native trace.
pub struct NativeWriter {
    sink: Sink,
    written: u64,
}

impl NativeWriter {
    /// Creates `path` (compressed by its suffix) and writes the header.
    pub fn create(path: &Path) -> io::Result<NativeWriter> {
        let mut sink = Sink::create(path)?;
        sink.write_all(&native_header())?;
        Ok(NativeWriter { sink, written: 0 })
    }
}

impl NativeWriter {
    /// The file being written, for errors.
    pub fn path(&self) -> &Path {
        self.sink.path()
    }
}

impl TraceWriter for NativeWriter {
    fn write(&mut self, request: &Request) -> io::Result<()> {
        let record = encode_native_record(request).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: request {}: next access {} is neither an index below 2^56 - 2 nor \
                     never/unknown",
                    self.sink.path().display(),
                    self.written,
                    request.next_access
                ),
            )
        })?;
        self.sink.write_all(&record)?;
        self.written += 1;
        Ok(())
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        self.sink.finish()
    }
}
