//! The native half of the `heterarchy` Python package (docs/architecture.md, "Python API"):
//! the command line's commands run in this process, keeping each result as the JSON that
//! `--format json` prints, so that the Python functions return what the CLI prints by
//! construction; a trace reader as a Python iterator; and the option names of every command,
//! from which the Python half maps keyword arguments to flags.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use clap::CommandFactory;
use heterarchy::trace_args::TraceArgs;
use heterarchy_trace::{Request, TraceReader};
use pyo3::create_exception;
use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;

create_exception!(
    heterarchy,
    HeterarchyError,
    PyValueError,
    "A heterarchy command failed; the message is the command line's one-line error."
);

/// How often a waiting call looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Requests read from a trace per call into the reader.
const READ_BATCH: usize = 4096;

fn error_of(error: anyhow::Error) -> PyErr {
    HeterarchyError::new_err(format!("{error:#}").replace('\n', " "))
}

/// Runs `heterarchy ARGS...` and returns its JSON results as one JSON array. The command runs
/// on its own thread with the GIL released, while this thread looks for Ctrl-C: on one, the call
/// tells the command to stop and raises `KeyboardInterrupt` at once; a trace-driven command stops
/// on its own thread at its next read of the trace (within a chunk of requests).
#[pyfunction]
fn run(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    let stop = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::channel();
    // A Mutex makes the receiver Sync, as a GIL-free closure needs.
    let receiver = Mutex::new(receiver);
    let command_stop = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("heterarchy".into())
        .spawn(move || {
            let outcome = heterarchy::run_keeping(&args, command_stop);
            let _ = sender.send(outcome);
        })
        .map_err(|e| HeterarchyError::new_err(format!("cannot start a thread: {e}")))?;
    loop {
        match wait(py, &receiver, SIGNAL_POLL) {
            Ok(outcome) => {
                let values = outcome.map_err(error_of)?;
                return serde_json::to_string(&values)
                    .map_err(|e| HeterarchyError::new_err(e.to_string()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    stop.store(true, Ordering::Relaxed);
                    return Err(interrupt);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(HeterarchyError::new_err("the command's thread stopped"))
            }
        }
    }
}

type Outcome = anyhow::Result<Vec<serde_json::Value>>;

/// Waits up to `timeout` for the command's outcome with the GIL released.
fn wait(
    py: Python<'_>,
    receiver: &Mutex<mpsc::Receiver<Outcome>>,
    timeout: Duration,
) -> Result<Outcome, mpsc::RecvTimeoutError> {
    py.detach(|| {
        receiver
            .lock()
            .expect("only this thread waits")
            .recv_timeout(timeout)
    })
}

/// The options of the subcommand at `path` (`["sim"]`, `["trace", "stats"]`): for each, its
/// argument id (the long flag with `_` for `-`), whether it is positional, and whether it takes
/// a value (a flag that takes none is a switch).
#[pyfunction]
fn command_options(path: Vec<String>) -> PyResult<Vec<(String, bool, bool)>> {
    let mut command = heterarchy::Cli::command();
    for name in &path {
        command = command
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| HeterarchyError::new_err(format!("no command {}", path.join(" "))))?;
    }
    Ok(command
        .get_arguments()
        .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
        .map(|arg| {
            let takes_value = arg.get_action().takes_values();
            (
                arg.get_long()
                    .unwrap_or(arg.get_id().as_str())
                    .replace('-', "_"),
                arg.is_positional(),
                takes_value,
            )
        })
        .collect())
}

/// A JSON document (a hierarchy given to `simulate` as a dict) as TOML text.
#[pyfunction]
fn toml_from_json(json: &str) -> PyResult<String> {
    let value: toml::Value =
        serde_json::from_str(json).map_err(|e| PyValueError::new_err(e.to_string()))?;
    toml::to_string(&value).map_err(|e| PyValueError::new_err(format!("not a TOML table: {e}")))
}

/// One request of a trace.
#[pyclass(frozen, get_all, module = "heterarchy")]
struct TraceRequest {
    /// Time since the trace's epoch, in nanoseconds.
    time_ns: u64,
    /// Object id (for a block trace, the cache line's number with the volume above it).
    key: u64,
    /// Object size in bytes.
    size: u32,
    /// Tenant (volume, client); 0 when the trace has none.
    tenant: u32,
    /// What the request does: `get`, `set`, `read`, `write`, ... or `unknown`.
    op: &'static str,
    /// Index of the next request to the same key, -1 if none, -2 if the trace does not say.
    next_access: i64,
}

#[pymethods]
impl TraceRequest {
    fn __repr__(&self) -> String {
        format!(
            "TraceRequest(time_ns={}, key={}, size={}, tenant={}, op='{}', next_access={})",
            self.time_ns, self.key, self.size, self.tenant, self.op, self.next_access
        )
    }
}

impl From<&Request> for TraceRequest {
    fn from(request: &Request) -> TraceRequest {
        TraceRequest {
            time_ns: request.time_ns,
            key: request.key,
            size: request.size,
            tenant: request.tenant,
            op: request.op.name(),
            next_access: request.next_access,
        }
    }
}

/// The requests of a trace file, read in batches as the iteration goes.
#[pyclass(module = "heterarchy")]
struct TraceIter {
    state: Mutex<ReadState>,
}

struct ReadState {
    reader: Box<dyn TraceReader>,
    batch: Vec<Request>,
    next: usize,
}

#[pymethods]
impl TraceIter {
    /// Opens `path` as the command line's trace arguments would (`--trace-format`,
    /// `--block-size`, `--no-split`, `--trace-type-params`).
    #[new]
    #[pyo3(signature = (path, trace_format=None, block_size="4k".to_string(), no_split=false, trace_type_params=None))]
    fn new(
        path: std::path::PathBuf,
        trace_format: Option<String>,
        block_size: String,
        no_split: bool,
        trace_type_params: Option<String>,
    ) -> PyResult<TraceIter> {
        let args = TraceArgs {
            path,
            trace_format,
            block_size,
            no_split,
            csv_spec: trace_type_params,
        };
        let source = args.source().map_err(error_of)?;
        let reader = heterarchy_trace::open(&source.input, &source.options)
            .map_err(|e| error_of(e.into()))?;
        Ok(TraceIter {
            state: Mutex::new(ReadState {
                reader,
                batch: Vec::with_capacity(READ_BATCH),
                next: 0,
            }),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<TraceRequest> {
        let mut state = self.state.lock().expect("a reader panicked");
        if state.next == state.batch.len() {
            let ReadState { reader, batch, .. } = &mut *state;
            py.detach(|| reader.read_batch(batch, READ_BATCH))
                .map_err(|e| error_of(e.into()))?;
            state.next = 0;
            if state.batch.is_empty() {
                return Err(PyStopIteration::new_err(()));
            }
        }
        let request = TraceRequest::from(&state.batch[state.next]);
        state.next += 1;
        Ok(request)
    }
}

/// The module `heterarchy._native`.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(run, module)?)?;
    module.add_function(wrap_pyfunction!(command_options, module)?)?;
    module.add_function(wrap_pyfunction!(toml_from_json, module)?)?;
    module.add_class::<TraceIter>()?;
    module.add_class::<TraceRequest>()?;
    module.add("HeterarchyError", module.py().get_type::<HeterarchyError>())?;
    Ok(())
}
