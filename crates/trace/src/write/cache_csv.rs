//! A cache trace as text (seed 002 §4.2.2): one split cache-line request per line,
//! `time,page,op`, in request order — time in µs, the page (its key: the volume in the high
//! bits, the line below), `r` or `w` (a discard or another op by its name).

use std::io;
use std::path::Path;

use super::sink::Sink;
use super::TraceWriter;
use crate::{Op, Request};

/// Writes `time,page,op` lines after a header.
pub struct CacheCsvWriter {
    sink: Sink,
    line: String,
}

impl CacheCsvWriter {
    /// Creates `path` (compressed by its suffix) and writes the header.
    pub fn create(path: &Path) -> io::Result<CacheCsvWriter> {
        let mut sink = Sink::create(path)?;
        sink.write_all(b"time,page,op\n")?;
        Ok(CacheCsvWriter {
            sink,
            line: String::new(),
        })
    }
}

impl TraceWriter for CacheCsvWriter {
    fn write(&mut self, request: &Request) -> io::Result<()> {
        use std::fmt::Write as _;
        let op = match request.op {
            Op::Read | Op::Get | Op::Gets => "r",
            Op::Write | Op::Set => "w",
            other => other.name(),
        };
        self.line.clear();
        let _ = writeln!(self.line, "{},{},{op}", request.time_ns / 1000, request.key);
        self.sink.write_all(self.line.as_bytes())
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        self.sink.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_request_with_its_microsecond_page_and_op() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.csv");
        let mut writer: Box<dyn TraceWriter> = Box::new(CacheCsvWriter::create(&path).unwrap());
        for (time_ns, key, op) in [
            (1_500, 7, Op::Read),
            (2_000_000, 7, Op::Write),
            (3_000, 9, Op::Trim),
        ] {
            writer
                .write(&Request {
                    time_ns,
                    key,
                    op,
                    ..Request::default()
                })
                .unwrap();
        }
        writer.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "time,page,op\n1,7,r\n2000,7,w\n3,9,trim\n");
    }
}
