//! Why a load run could not produce a report. Every message is one line that names the server
//! and what happened (docs/architecture.md, "Conventions"); the I/O error is part of the message rather
//! than a separate cause, so that printing the cause chain does not repeat it.

use std::io;

/// A run that failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The workload asks for something impossible (no keys, a key too short to be unique ...):
    /// `flag` names the flags at fault, `reason` what is wrong with them.
    #[error("{flag} {reason}")]
    Config { flag: String, reason: String },
    /// A rate schedule that cannot run.
    #[error(transparent)]
    Arg(#[from] ArgError),
    /// This target stopped because another one failed.
    #[error("another target failed first")]
    AnotherTargetFailed,
    /// A connection could not be opened.
    #[error("cannot connect to {server}: {error}")]
    Connect { server: String, error: io::Error },
    /// The server closed a connection while the run still needed it.
    #[error("{server} closed connection {connection} in the middle of the run")]
    Closed { server: String, connection: usize },
    /// Reading or writing a connection failed (reset, broken pipe ...).
    #[error("connection {connection} to {server} failed: {error}")]
    Io {
        server: String,
        connection: usize,
        error: io::Error,
    },
    /// The server sent bytes that are not a memcached text reply, or a reply to no request,
    /// after which replies can no longer be matched to requests.
    #[error("{server} broke the protocol on connection {connection}: {detail}")]
    Protocol {
        server: String,
        connection: usize,
        detail: String,
    },
    /// A set of the prefill was not answered `STORED`.
    #[error("prefill of {server} failed: the set of key #{key} got \"{reply}\" instead of STORED")]
    Prefill {
        server: String,
        key: u64,
        reply: String,
    },
    /// Requests stayed unanswered for too long.
    #[error("{server} left {outstanding} requests unanswered for {seconds} s ({phase})")]
    Stalled {
        server: String,
        seconds: u64,
        outstanding: usize,
        phase: &'static str,
    },
    /// The event loop itself failed: epoll or a thread could not be created, or waiting failed.
    #[error("cannot run the event loop: {0}")]
    EventLoop(io::Error),
}

/// An argument of a load run that cannot be read: a server address, a key distribution, a
/// duration, a rate schedule or a target.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// `unix:` with nothing after it.
    #[error("unix: needs a socket path")]
    NoSocketPath,
    /// Text that is not what `what` is written as; `reason` says what was expected.
    #[error("bad {what} \"{text}\": {reason}")]
    Bad {
        what: &'static str,
        text: String,
        reason: String,
    },
    /// A duration that is neither seconds nor milliseconds.
    #[error("expected a duration such as 10s, 1.5s or 500ms, found \"{text}\"")]
    Duration { text: String },
    /// A flag whose value cannot run; `flag` names it, with its value where that helps.
    #[error("{flag}: {reason}")]
    Flag { flag: String, reason: &'static str },
}

impl ArgError {
    /// `text`, given as a `what`, is not one, for `reason`.
    pub(crate) fn bad(what: &'static str, text: &str, reason: impl Into<String>) -> ArgError {
        ArgError::Bad {
            what,
            text: text.to_string(),
            reason: reason.into(),
        }
    }
}
