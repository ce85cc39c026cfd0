//! Why a serve config cannot be used, or a server cannot start: one line that names the file,
//! line, table or key at fault (docs/architecture.md, "Conventions"). A key inside a table is
//! written as the config writes it, `tenant[1] (a).limit: ...`, the table's part added by
//! [`ConfigError::within`] as the error goes up.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// Any error a part of the server passes on as it is.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// A config, or a file it names, that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file that cannot be read at all.
    #[error("{}: cannot read: {error}", path.display())]
    Read { path: PathBuf, error: io::Error },
    /// Text that is not TOML of a serve config: `at` is the source and, where known, the line
    /// and key (`volumes.toml:3: cache`).
    #[error("{at}: {message}")]
    Syntax { at: String, message: String },
    /// A setting that cannot be used; `key` names it.
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
    /// A config with nothing to serve.
    #[error("no [[export]] or [[tenant]] table; a server needs one of either")]
    Empty,
    /// An error of a part the config describes (a volume, a device), as that part words it.
    #[error(transparent)]
    Other(BoxError),
    /// An error inside a table or file, `prefix` naming it as the message begins
    /// (`export[0] (v).`, `volumes.toml: `).
    #[error("{prefix}{error}")]
    Within { prefix: String, error: BoxError },
}

impl ConfigError {
    /// Setting `key` cannot be used, for `reason`.
    pub(crate) fn invalid(key: impl Into<String>, reason: impl fmt::Display) -> ConfigError {
        ConfigError::Invalid {
            key: key.into(),
            reason: reason.to_string(),
        }
    }

    /// An error of a part the config describes, kept as that part's own type.
    pub(crate) fn other(error: impl Into<BoxError>) -> ConfigError {
        ConfigError::Other(error.into())
    }

    /// `error`, found inside what `prefix` names.
    pub(crate) fn within(prefix: impl Into<String>, error: impl Into<BoxError>) -> ConfigError {
        ConfigError::Within {
            prefix: prefix.into(),
            error: error.into(),
        }
    }
}

/// A listen address that is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// `unix:` with nothing after it.
    #[error("unix: needs a socket path")]
    NoSocketPath,
    /// Neither `HOST:PORT` nor `unix:PATH`.
    #[error("bad listen address \"{text}\": expected HOST:PORT (127.0.0.1:10809) or unix:PATH")]
    Malformed { text: String },
}

/// A TLS file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{subject}: {reason}")]
pub struct TlsError {
    /// The file or files (`DIR/server-cert.pem`), or `the TLS provider`.
    pub subject: String,
    /// What is wrong, and what was expected.
    pub reason: String,
}

/// A tenant's `auth_file` that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A line that is not a usable `username:password`.
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
    /// No line at all.
    #[error("no username:password line; a tenant without users is open to no one")]
    Empty,
}

/// A server that could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The config cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An I/O error whose message names its file or address (a tenant's store, the listening
    /// socket).
    #[error("{0}")]
    Io(io::Error),
    /// A part of the server failed: `what` names it (`export v`, `tenant t: cannot listen on
    /// ADDR`, `cannot start the cleaner thread`).
    #[error("{what}: {error}")]
    Failed { what: String, error: BoxError },
}

impl RunError {
    /// `what` failed with `error`.
    pub(crate) fn failed(what: impl Into<String>, error: impl Into<BoxError>) -> RunError {
        RunError::Failed {
            what: what.into(),
            error: error.into(),
        }
    }
}
