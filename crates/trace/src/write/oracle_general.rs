//! Writes libCacheSim's oracleGeneral format (layout in `read/oracle_general.rs`) so that
//! libCacheSim and its Python package read our traces. The format carries each request's next
//! access, which needs the whole future: this writer holds the trace in memory (24 bytes per
//! request plus a map entry per distinct key while annotating) and writes it in
//! [`TraceWriter::finish`].
//!
//! What the format cannot hold is lost: ops, tenants and sub-second times. Times become whole
//! seconds; when the last one does not fit oracleGeneral's 32-bit seconds (absolute Windows
//! FILETIMEs, for instance), all times are written relative to the earliest request instead.
//! Next accesses are written 1-based as libCacheSim counts virtual time, -1 for never.

use std::io;
use std::path::Path;

use super::sink::Sink;
use super::{annotate_next_access, TraceWriter};
use crate::read::ORACLE_GENERAL_RECORD_BYTES;
use crate::request::NEXT_ACCESS_NEVER;
use crate::Request;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Collects requests and writes them as oracleGeneral on [`TraceWriter::finish`].
pub struct OracleGeneralWriter {
    sink: Sink,
    requests: Vec<Request>,
}

impl OracleGeneralWriter {
    /// Creates `path` (compressed by its suffix); nothing is written before `finish`.
    pub fn create(path: &Path) -> io::Result<OracleGeneralWriter> {
        Ok(OracleGeneralWriter {
            sink: Sink::create(path)?,
            requests: Vec::new(),
        })
    }
}

/// The oracleGeneral record of `request`, with times shifted back by `epoch_ns`.
fn encode(request: &Request, epoch_ns: u64) -> [u8; ORACLE_GENERAL_RECORD_BYTES] {
    let seconds = (request.time_ns - epoch_ns) / NANOS_PER_SECOND;
    let next_vtime = match request.next_access {
        NEXT_ACCESS_NEVER => -1,
        index => index + 1,
    };
    let mut record = [0; ORACLE_GENERAL_RECORD_BYTES];
    record[0..4].copy_from_slice(&(seconds.min(u64::from(u32::MAX)) as u32).to_le_bytes());
    record[4..12].copy_from_slice(&request.key.to_le_bytes());
    record[12..16].copy_from_slice(&request.size.to_le_bytes());
    record[16..24].copy_from_slice(&next_vtime.to_le_bytes());
    record
}

impl TraceWriter for OracleGeneralWriter {
    fn write(&mut self, request: &Request) -> io::Result<()> {
        self.requests.push(*request);
        Ok(())
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        let OracleGeneralWriter {
            mut sink,
            mut requests,
        } = *self;
        annotate_next_access(&mut requests);
        let latest_ns = requests.iter().map(|r| r.time_ns).max().unwrap_or(0);
        let earliest_ns = requests.iter().map(|r| r.time_ns).min().unwrap_or(0);
        let epoch_ns = if latest_ns / NANOS_PER_SECOND > u64::from(u32::MAX) {
            earliest_ns
        } else {
            0
        };
        if (latest_ns - epoch_ns) / NANOS_PER_SECOND > u64::from(u32::MAX) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the trace spans more than 2^32 seconds, which oracleGeneral's 32-bit \
                     times cannot hold",
                    sink.path().display()
                ),
            ));
        }
        for request in &requests {
            sink.write_all(&encode(request, epoch_ns))?;
        }
        sink.finish()
    }
}
