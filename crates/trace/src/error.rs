//! The one error type of the trace layer: a single line naming the file, where in it, and what
//! was expected (docs/architecture.md, "Conventions").

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a trace file an error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (cannot open, empty, unknown format).
    File,
    /// A 1-based line of a text format.
    Line(u64),
    /// A byte offset of a binary format (offset in the decompressed stream).
    Offset(u64),
}

/// A trace that cannot be read, with enough context to find and fix the problem.
#[derive(Debug, thiserror::Error)]
pub struct TraceError {
    pub path: PathBuf,
    pub location: Location,
    /// What was expected and, where it helps, what was found.
    pub message: String,
}

impl TraceError {
    /// An error at `location` of `path`.
    pub fn new(path: &Path, location: Location, message: impl Into<String>) -> TraceError {
        TraceError {
            path: path.to_path_buf(),
            location,
            message: message.into(),
        }
    }

    /// An error about the file as a whole.
    pub fn file(path: &Path, message: impl Into<String>) -> TraceError {
        TraceError::new(path, Location::File, message)
    }

    /// An I/O error while reading `path` at `location`.
    pub fn io(path: &Path, location: Location, err: &std::io::Error) -> TraceError {
        TraceError::new(path, location, format!("read failed: {err}"))
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        // Messages must stay on one line whatever the underlying error says.
        let message = self.message.replace(['\n', '\r'], " ");
        match self.location {
            Location::File => write!(f, "{path}: {message}"),
            Location::Line(line) => write!(f, "{path}: line {line}: {message}"),
            Location::Offset(offset) => write!(f, "{path}: byte offset {offset}: {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_with_location() {
        let e = TraceError::new(
            Path::new("t.csv"),
            Location::Line(3),
            "expected a number in column 2,\nfound \"x\"",
        );
        assert_eq!(
            e.to_string(),
            "t.csv: line 3: expected a number in column 2, found \"x\""
        );
        let e = TraceError::new(Path::new("t.bin"), Location::Offset(48), "truncated record");
        assert_eq!(e.to_string(), "t.bin: byte offset 48: truncated record");
    }
}
