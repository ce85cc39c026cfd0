//! The NBD protocol (proto.md of the NetworkBlockDevice project, `doc/proto.md`) as pure code:
//! byte-level parsers and composers for every message a fixed-newstyle server or client
//! exchanges, a handshake state machine for each side, and a small blocking client built on
//! them. No sockets and no threads outside [`blocking`]: servers and event loops own the I/O.
//!
//! Every parser takes the bytes received so far and returns
//!
//! - `Ok(Parsed::NeedMore)`: read more, and call again with these bytes and the new ones;
//! - `Ok(Parsed::Found { value, consumed })`: handle `value`, drop `consumed` bytes, go on;
//! - `Err(ProtocolError)`: the peer broke the protocol; its one-line message names the field
//!   and what was expected, and proto.md lets the connection be closed.
//!
//! No input makes any of them panic, and how the input is split into reads never changes what
//! they find (both are property-tested).
//!
//! - [`constants`]: magics, flags, options, commands, reply types, errors, sizes and limits.
//! - [`handshake`]: the greeting, options and option replies; [`ServerHandshake`] (answers
//!   options over an [`ExportCatalog`]) and [`ClientHandshake`].
//! - [`transmission`]: request headers, simple replies, structured reply chunks.
//! - [`blocking`]: [`Client`], over any `Read + Write` stream, one call per command or many
//!   requests in flight.

pub mod blocking;
pub mod constants;
mod error;
pub mod handshake;
mod parse;
pub mod transmission;

pub use blocking::{Client, ClientError, Completion, RequestError};
pub use error::TlsModeError;
pub use handshake::{
    BlockSizes, ClientEvent, ClientHandshake, ExportCatalog, ExportInfo, Negotiated, Refusal,
    ServerEvent, ServerHandshake, TlsMode,
};
pub use parse::{Parsed, ProtocolError};
pub use transmission::{ChunkHeader, ChunkPayload, Command, Reply, ReplyHeader, Request};
