//! Stopping a command from outside: a trace file whose readers fail their next batch once the
//! command's caller sets a flag, so that every trace-driven command stops, its threads and all,
//! within a batch (the Python API at Ctrl-C; docs/architecture.md, "Python API").

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use heterarchy_sim::cache_sim::{TraceFile, TraceSource};
use heterarchy_trace::{Request, TraceError, TraceReader};

/// A trace file whose readers stop when their command's caller says so
/// ([`crate::output::Sink::watch`]).
pub struct WatchedTrace {
    file: TraceFile,
    stop: Option<Arc<AtomicBool>>,
}

impl WatchedTrace {
    /// `file`, stopped by `stop` when there is one.
    pub fn new(file: TraceFile, stop: Option<Arc<AtomicBool>>) -> WatchedTrace {
        WatchedTrace { file, stop }
    }

    /// The trace file watched.
    pub fn file(&self) -> &TraceFile {
        &self.file
    }
}

impl TraceSource for WatchedTrace {
    fn open(&self) -> Result<Box<dyn TraceReader>, TraceError> {
        let reader = self.file.open()?;
        Ok(match &self.stop {
            None => reader,
            Some(stop) => Box::new(StoppableReader {
                reader,
                path: self.file.input.name().to_path_buf(),
                stop: Arc::clone(stop),
            }),
        })
    }
}

struct StoppableReader {
    reader: Box<dyn TraceReader>,
    path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl StoppableReader {
    fn check(&self) -> Result<(), TraceError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(TraceError::file(&self.path, "stopped by the caller"));
        }
        Ok(())
    }
}

impl TraceReader for StoppableReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        self.check()?;
        self.reader.next_request()
    }

    fn read_batch(&mut self, batch: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        self.check()?;
        self.reader.read_batch(batch, max)
    }
}
