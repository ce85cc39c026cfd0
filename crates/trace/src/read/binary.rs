//! What every fixed-record binary format shares: records decoded straight out of the read
//! buffer, a batch at a time, with the one record that straddles two buffer refills stitched
//! together, and truncation reported at the record's byte offset.

use super::source::TraceInput;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::{open_source, TraceReader};
use crate::{Location, Request, TraceError};

/// A fixed-size record format whose every record is one request.
pub trait RequestRecord {
    /// Decodes one record; the slice holds exactly one record.
    fn decode(record: &[u8]) -> Request;
}

/// Streams a binary trace of [`RequestRecord`]s `R` (oracleGeneral, native), decoding a
/// buffer at a time.
pub struct RequestRecords<R> {
    stream: RecordStream,
    /// Holds the one request of [`TraceReader::next_request`] without allocating per call.
    single: Vec<Request>,
    format: std::marker::PhantomData<R>,
}

impl<R: RequestRecord> RequestRecords<R> {
    /// Reads the records of `stream` (positioned after any header).
    pub(crate) fn new(stream: RecordStream) -> RequestRecords<R> {
        RequestRecords {
            stream,
            single: Vec::with_capacity(1),
            format: std::marker::PhantomData,
        }
    }
}

impl<R: RequestRecord + Send> TraceReader for RequestRecords<R> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        self.single.clear();
        self.stream.decode_batch(&mut self.single, 1, R::decode)?;
        Ok(self.single.pop())
    }

    fn read_batch(&mut self, batch: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        batch.clear();
        self.stream.decode_batch(batch, max, R::decode)
    }
}

/// Streams the fixed-size records of a (possibly compressed) binary trace.
pub(crate) struct RecordStream {
    path: PathBuf,
    input: Box<dyn BufRead + Send>,
    record_bytes: usize,
    /// Names the format in truncation errors.
    format_name: &'static str,
    /// Bytes of the decompressed stream consumed so far, including any header.
    offset: u64,
    /// A record split across two buffer refills, or the one record of [`Self::next_record`].
    partial: Vec<u8>,
}

impl RecordStream {
    /// Opens `path` (optionally compressed) as records of `record_bytes`.
    pub(crate) fn open(
        input: &TraceInput,
        record_bytes: usize,
        format_name: &'static str,
    ) -> Result<RecordStream, TraceError> {
        let path = input.name();
        let (input, _) = open_source(input)?;
        Ok(RecordStream {
            path: path.to_path_buf(),
            input,
            record_bytes,
            format_name,
            offset: 0,
            partial: Vec::with_capacity(record_bytes),
        })
    }

    /// The path being read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset of the next record in the decompressed stream (the record just read starts
    /// one record size earlier).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads exactly `buffer.len()` bytes of header; a short file is an error naming `what`.
    pub(crate) fn read_header(&mut self, buffer: &mut [u8], what: &str) -> Result<(), TraceError> {
        let mut filled = 0;
        while filled < buffer.len() {
            let available = fill(&mut self.input, &self.path, self.offset)?;
            if available.is_empty() {
                return Err(TraceError::new(
                    &self.path,
                    Location::Offset(self.offset),
                    format!(
                        "truncated header: {filled} of {} bytes ({what})",
                        buffer.len()
                    ),
                ));
            }
            let take = available.len().min(buffer.len() - filled);
            buffer[filled..filled + take].copy_from_slice(&available[..take]);
            self.input.consume(take);
            self.offset += take as u64;
            filled += take;
        }
        Ok(())
    }

    /// Appends up to `max` decoded records to `batch`. Decoding happens in place in the read
    /// buffer; only a record cut by a refill is copied.
    #[inline]
    pub(crate) fn decode_batch<T>(
        &mut self,
        batch: &mut Vec<T>,
        max: usize,
        decode: impl Fn(&[u8]) -> T,
    ) -> Result<(), TraceError> {
        let record_bytes = self.record_bytes;
        let target = batch.len() + max;
        batch.reserve(max);
        while batch.len() < target {
            let buffer = match self.input.fill_buf() {
                Ok(buffer) => buffer,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(TraceError::io(
                        &self.path,
                        Location::Offset(self.offset),
                        &e,
                    ))
                }
            };
            if buffer.is_empty() {
                if !self.partial.is_empty() {
                    return Err(self.truncated());
                }
                break;
            }
            let mut used = 0;
            if !self.partial.is_empty() {
                let need = (record_bytes - self.partial.len()).min(buffer.len());
                self.partial.extend_from_slice(&buffer[..need]);
                used = need;
                if self.partial.len() == record_bytes {
                    batch.push(decode(&self.partial));
                    self.partial.clear();
                }
            }
            let whole = ((buffer.len() - used) / record_bytes).min(target - batch.len());
            let end = used + whole * record_bytes;
            batch.extend(buffer[used..end].chunks_exact(record_bytes).map(&decode));
            used = end;
            if batch.len() < target && used < buffer.len() && buffer.len() - used < record_bytes {
                self.partial.extend_from_slice(&buffer[used..]);
                used = buffer.len();
            }
            self.input.consume(used);
            self.offset += used as u64;
        }
        Ok(())
    }

    /// The next whole record, or `None` at a clean end of the stream. Not to be mixed with
    /// [`Self::decode_batch`] on one stream: the single-record readers (vscsi) use this only.
    pub(crate) fn next_record(&mut self) -> Result<Option<&[u8]>, TraceError> {
        self.partial.clear();
        while self.partial.len() < self.record_bytes {
            let want = self.record_bytes - self.partial.len();
            let available = fill(&mut self.input, &self.path, self.offset)?;
            if available.is_empty() {
                if self.partial.is_empty() {
                    return Ok(None);
                }
                return Err(self.truncated());
            }
            let take = available.len().min(want);
            self.partial.extend_from_slice(&available[..take]);
            self.input.consume(take);
            self.offset += take as u64;
        }
        Ok(Some(&self.partial))
    }

    fn truncated(&self) -> TraceError {
        let partial = self.partial.len();
        TraceError::new(
            &self.path,
            Location::Offset(self.offset - partial as u64),
            format!(
                "truncated record: {partial} of {} bytes ({} records are {} bytes)",
                self.record_bytes, self.format_name, self.record_bytes
            ),
        )
    }
}

/// The read buffer of `input`, refilled if empty; empty at the end of the stream. A free
/// function so that the returned borrow holds only the input, not the whole stream.
fn fill<'a>(
    input: &'a mut Box<dyn BufRead + Send>,
    path: &Path,
    offset: u64,
) -> Result<&'a [u8], TraceError> {
    // Retry interrupted reads first and take the buffer after: returning the borrow from inside
    // the retry loop is what the borrow checker cannot follow.
    loop {
        match input.fill_buf() {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(TraceError::io(path, Location::Offset(offset), &e)),
        }
    }
    input
        .fill_buf()
        .map_err(|e| TraceError::io(path, Location::Offset(offset), &e))
}
