//! Block traces written back out with their offsets (docs/simulation.md, "Traces"): what
//! `trace sample` and `trace generate block-io:...` produce, in a format the block readers read
//! back as the same records.
//!
//! - `msr`: MSR Cambridge's CSV (`Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
//!   FILETIME ticks of 100 ns, offsets and sizes in bytes), the column style libCacheSim's CSV
//!   reader takes with `time-col=1,obj-id-col=5,obj-size-col=6,op-col=4`.
//! - `native`: one native record per I/O, the byte offset as key, the length as size and the
//!   volume as tenant; [`open_block_records`](crate::read::open_block_records) reads it back
//!   as block records.

use std::io;
use std::path::Path;

use super::sink::Sink;
use super::{NativeWriter, TraceWriter};
use crate::read::BlockRecord;
use crate::request::NEXT_ACCESS_UNKNOWN;
use crate::{Op, Request, TraceFormat};

/// Nanoseconds per FILETIME tick.
const FILETIME_TICK_NS: u64 = 100;

/// A sink of block records that becomes a block trace file.
pub trait BlockTraceWriter: Send {
    /// Adds one I/O (`repeat` times).
    fn write(&mut self, record: &BlockRecord) -> io::Result<()>;
    /// Flushes and ends the file; without it the file may be incomplete.
    fn finish(self: Box<Self>) -> io::Result<()>;
}

/// The formats [`create_block_writer`] writes.
pub const BLOCK_WRITABLE_FORMATS: [TraceFormat; 2] = [TraceFormat::Msr, TraceFormat::Native];

/// Creates a block trace writer of `format` at `path`, compressing by the file name's suffix.
pub fn create_block_writer(
    path: &Path,
    format: TraceFormat,
) -> io::Result<Box<dyn BlockTraceWriter>> {
    match format {
        TraceFormat::Msr => Ok(Box::new(MsrWriter::create(path)?)),
        TraceFormat::Native => Ok(Box::new(NativeBlockWriter {
            inner: Box::new(NativeWriter::create(path)?),
        })),
        other => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: cannot write block records as {}; expected one of {}",
                path.display(),
                other.name(),
                BLOCK_WRITABLE_FORMATS.map(TraceFormat::name).join(", ")
            ),
        )),
    }
}

/// Writes MSR Cambridge CSV lines.
struct MsrWriter {
    sink: Sink,
    line: String,
}

impl MsrWriter {
    fn create(path: &Path) -> io::Result<MsrWriter> {
        Ok(MsrWriter {
            sink: Sink::create(path)?,
            line: String::new(),
        })
    }
}

impl BlockTraceWriter for MsrWriter {
    fn write(&mut self, record: &BlockRecord) -> io::Result<()> {
        use std::fmt::Write as _;
        let kind = match record.op {
            Op::Read => "Read",
            Op::Write => "Write",
            Op::Flush => "Flush",
            other => return Err(unwritable_op(self.sink.path(), other, "msr")),
        };
        self.line.clear();
        let _ = writeln!(
            self.line,
            "{},heterarchy,{},{kind},{},{},0",
            record.time_ns / FILETIME_TICK_NS,
            record.volume,
            record.offset_bytes,
            record.length_bytes
        );
        for _ in 0..record.repeat {
            self.sink.write_all(self.line.as_bytes())?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        self.sink.finish()
    }
}

/// Writes block records as native requests keyed by byte offset.
struct NativeBlockWriter {
    inner: Box<NativeWriter>,
}

impl BlockTraceWriter for NativeBlockWriter {
    fn write(&mut self, record: &BlockRecord) -> io::Result<()> {
        let size = u32::try_from(record.length_bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: an I/O of {} bytes at offset {}: native records hold lengths below 4 GiB",
                    self.inner.path().display(),
                    record.length_bytes,
                    record.offset_bytes
                ),
            )
        })?;
        let request = Request {
            time_ns: record.time_ns,
            key: record.offset_bytes,
            size,
            tenant: record.volume,
            op: record.op,
            next_access: NEXT_ACCESS_UNKNOWN,
        };
        for _ in 0..record.repeat {
            self.inner.write(&request)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        self.inner.finish()
    }
}

fn unwritable_op(path: &Path, op: Op, format: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{}: a {} I/O: {format} block traces hold reads and writes only",
            path.display(),
            op.name()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{open_block_records, ReaderOptions};

    fn round_trip(name: &str, format: TraceFormat) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let records = [
            BlockRecord::in_bytes(1_000_000, 0, 4096, 8192, Op::Read),
            BlockRecord::in_bytes(2_500_000, 3, 512, 1536, Op::Write),
            BlockRecord::in_bytes(9_000_000, 1, 1 << 40, 65536, Op::Read),
            BlockRecord::in_bytes(9_500_000, 1, 0, 0, Op::Flush),
        ];
        let mut writer = create_block_writer(&path, format).unwrap();
        for record in &records {
            writer.write(record).unwrap();
        }
        writer.finish().unwrap();
        let mut source = open_block_records(&path, &ReaderOptions::default()).unwrap();
        for expected in &records {
            let got = source.next_record().unwrap().unwrap();
            assert_eq!(
                (
                    got.time_ns,
                    got.volume,
                    got.offset_bytes,
                    got.length_bytes,
                    got.op
                ),
                (
                    expected.time_ns,
                    expected.volume,
                    expected.offset_bytes,
                    expected.length_bytes,
                    expected.op
                ),
                "{name}"
            );
        }
        assert!(source.next_record().unwrap().is_none());
    }

    #[test]
    fn msr_and_native_read_back_as_the_same_records() {
        round_trip("sample.csv", TraceFormat::Msr);
        round_trip("sample.csv.zst", TraceFormat::Msr);
        round_trip("sample.htrace", TraceFormat::Native);
    }

    #[test]
    fn refuses_what_the_format_cannot_hold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let mut writer = create_block_writer(&path, TraceFormat::Msr).unwrap();
        let trim = BlockRecord::in_bytes(0, 0, 0, 4096, Op::Trim);
        let err = writer.write(&trim).unwrap_err().to_string();
        assert!(err.contains("trim I/O"), "{err}");
        assert!(create_block_writer(&path, TraceFormat::Twitter).is_err());
    }
}
