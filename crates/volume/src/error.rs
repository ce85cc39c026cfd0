//! Why a volume could not be opened. Every message is one line that starts with the config key
//! of the offending setting or device (`cache[1]: ...`, docs/architecture.md, "Conventions"),
//! so that a server can prefix the export's name and still print one line.

use std::io;

/// A volume that cannot be opened, grouped by what the operator can do about it.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A setting the volume cannot use: fix the config.
    #[error("{key}: {reason}")]
    Config { key: String, reason: String },
    /// A device too small for the line size, or a line size no volume uses.
    #[error("{key}: {error}")]
    Geometry { key: String, error: GeometryError },
    /// A cache tier holds another volume's format or dirty lines: give the settings it was
    /// formatted with, or set `force`.
    #[error("{key}: {reason}")]
    Refused { key: String, reason: String },
    /// A device could not be opened, read or formatted.
    #[error("{key}: {error}")]
    Io { key: String, error: io::Error },
    /// Handing the lines the persistent tiers held back to the controller failed.
    #[error("cache: {0}")]
    Restore(io::Error),
}

impl VolumeError {
    /// A setting named `key` that cannot be used, for `reason`.
    pub(crate) fn config(key: impl Into<String>, reason: impl Into<String>) -> VolumeError {
        VolumeError::Config {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Why a cache device cannot be laid out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// Lines must be a power of two from 4 KiB to 64 KiB.
    #[error("cache line of {line_bytes} bytes; expected 4k, 8k, 16k, 32k or 64k")]
    LineSize { line_bytes: u32 },
    /// The device cannot hold a single line with its metadata.
    #[error("a cache of {cache_bytes} bytes holds no {line_bytes}-byte line with its metadata")]
    TooSmall { cache_bytes: u64, line_bytes: u32 },
}
