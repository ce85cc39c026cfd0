//! What the parser produces: one request borrowing from the input buffer, or the reason there is
//! none yet (memcached doc/protocol.txt, "Commands" and "Error strings").

use std::borrow::Cow;

use crate::lexer::Words;
use crate::meta::MetaFlags;

/// memcached's answer to an unknown command, or a known one with the wrong number of words
/// (memcached doc/protocol.txt, "Error strings").
pub(crate) const ERROR: &str = "ERROR";

/// memcached's answer to a command line it cannot make sense of.
pub(crate) const BAD_COMMAND_LINE: &str = "CLIENT_ERROR bad command line format";

/// How a storage command stores its value (memcached doc/protocol.txt, "Storage commands").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// `set`: store the value.
    Set,
    /// `add`: store only if the key holds nothing.
    Add,
    /// `replace`: store only if the key holds something.
    Replace,
    /// `append`: add the value after the existing one.
    Append,
    /// `prepend`: add the value before the existing one.
    Prepend,
    /// `cas`: store only if the item is unchanged since the client fetched `cas_unique`.
    Cas,
}

/// Which way `incr`/`decr` (or `ma`'s mode) changes a counter (memcached doc/protocol.txt,
/// "Increment/Decrement").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Add the delta, wrapping at 2^64.
    Incr,
    /// Subtract the delta, stopping at 0.
    Decr,
}

/// The meta commands (memcached doc/protocol.txt, "Meta Commands").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaCommand {
    /// `mg`: meta get ("Meta Get").
    Get,
    /// `ms`: meta set ("Meta Set").
    Set,
    /// `md`: meta delete ("Meta Delete").
    Delete,
    /// `ma`: meta arithmetic ("Meta Arithmetic").
    Arithmetic,
    /// `mn`: meta no-op, answered "MN" ("Meta No-Op").
    Noop,
    /// `me`: meta debug, a human-readable dump of an item's metadata ("Meta Debug").
    Debug,
}

impl MetaCommand {
    /// The meta command a command name spells, if any.
    pub(crate) fn from_name(name: &[u8]) -> Option<MetaCommand> {
        match name {
            b"mg" => Some(MetaCommand::Get),
            b"ms" => Some(MetaCommand::Set),
            b"md" => Some(MetaCommand::Delete),
            b"ma" => Some(MetaCommand::Arithmetic),
            b"mn" => Some(MetaCommand::Noop),
            b"me" => Some(MetaCommand::Debug),
            _ => None,
        }
    }
}

/// One meta request (memcached doc/protocol.txt, "Meta Commands":
/// `<cm> <key> <datalen*> <flag1> <flag2> <...>\r\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta<'a> {
    /// Which meta command.
    pub command: MetaCommand,
    /// The key to act on, decoded when the `b` flag is present (then it may hold any bytes);
    /// empty for `mn`.
    pub key: Cow<'a, [u8]>,
    /// The key exactly as sent: the base64 text under `b`, which the `k` return flag echoes.
    pub wire_key: &'a [u8],
    /// The flags, in the order sent.
    pub flags: MetaFlags<'a>,
    /// The value of an `ms`, `<datalen>` bytes; empty for the other commands.
    pub data: &'a [u8],
}

/// One parsed request, borrowing from the input buffer (memcached doc/protocol.txt, "Commands").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets <key>*` and `gat`/`gats <exptime> <key>*` ("Retrieval command", "Get And
    /// Touch"). A `gat` may name no key: memcached answers it with just "END".
    Get {
        /// The keys, in order, each checked.
        keys: Words<'a>,
        /// `gets`/`gats`: reply with each item's cas unique.
        with_cas: bool,
        /// `gat`/`gats`: the new expiration time of the items found.
        touch_exptime: Option<i64>,
    },
    /// `set`/`add`/`replace`/`append`/`prepend <key> <flags> <exptime> <bytes> [noreply]` and
    /// `cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]` ("Storage commands").
    Store {
        /// Which storage command.
        mode: StoreMode,
        /// The key.
        key: &'a [u8],
        /// The opaque 32-bit client flags, stored and returned with the value.
        client_flags: u32,
        /// The expiration time ("Expiration times"); negative expires at once.
        exptime: i64,
        /// The cas unique to compare with, 0 unless `mode` is [`StoreMode::Cas`].
        cas_unique: u64,
        /// The client wants no reply.
        noreply: bool,
        /// The value.
        data: &'a [u8],
    },
    /// `delete <key> [noreply]` ("Deletion"); memcached also accepts a legacy `0` before
    /// `noreply`.
    Delete {
        /// The key.
        key: &'a [u8],
        /// The client wants no reply.
        noreply: bool,
    },
    /// `incr`/`decr <key> <value> [noreply]` ("Increment/Decrement").
    Arithmetic {
        /// The key.
        key: &'a [u8],
        /// `incr` or `decr`.
        direction: Direction,
        /// The amount to change the counter by.
        delta: u64,
        /// The client wants no reply.
        noreply: bool,
    },
    /// `touch <key> <exptime> [noreply]` ("Touch").
    Touch {
        /// The key.
        key: &'a [u8],
        /// The new expiration time.
        exptime: i64,
        /// The client wants no reply.
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]` ("Other commands").
    FlushAll {
        /// Seconds until the flush takes effect; 0 if absent.
        delay_seconds: i64,
        /// The client wants no reply.
        noreply: bool,
    },
    /// `stats [<args>]` ("Statistics").
    Stats {
        /// The first argument (`items`, `slabs`, `settings`, ...), `None` for plain `stats`.
        group: Option<&'a [u8]>,
        /// The arguments after the group (e.g. `stats cachedump 1 10`).
        arguments: Words<'a>,
    },
    /// `version` ("Other commands").
    Version,
    /// `verbosity <level> [noreply]` ("Other commands").
    Verbosity {
        /// The logging level asked for.
        level: u32,
        /// The client wants no reply.
        noreply: bool,
    },
    /// `quit`: close the connection ("Other commands").
    Quit,
    /// A meta command ("Meta Commands").
    Meta(Meta<'a>),
}

/// A request and how many input bytes it spans (its line and any data block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The request.
    pub request: Request<'a>,
    /// The bytes to drop from the input before parsing the next request.
    pub consumed: usize,
}

/// Why [`parse`](crate::parse) returned no request (memcached doc/protocol.txt,
/// "Error strings"). Replies are memcached 1.6.18's exact strings, without "\r\n".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError<'a> {
    /// More bytes are needed; nothing is consumed.
    Incomplete,
    /// A protocol error to answer: drop `consumed` bytes (the bad line and, for a storage command
    /// whose data block memcached swallows, that block too), then parse on.
    ///
    /// As in memcached, a storage line rejected for its key or its numbers does not swallow the
    /// block that follows: the client's value is then parsed as commands.
    Invalid {
        /// The line to send, e.g. "ERROR", "CLIENT_ERROR bad command line format".
        reply: &'static str,
        /// The bytes to drop.
        consumed: usize,
        /// The command ended in `noreply`: memcached then sends nothing, not even this error.
        noreply: bool,
    },
    /// A storage command whose value is over [`Limits::max_value_bytes`](crate::Limits): send
    /// `reply`, drop `consumed` bytes (the line), then discard the next `skip_bytes` bytes (the
    /// value and its "\r\n") as they arrive without buffering them, so a declared 2 GB value
    /// never makes the server allocate.
    ///
    /// `reply` is "SERVER_ERROR object too large for cache", or, for an `ms` whose flags are
    /// also bad, the flag error (memcached checks flags first). memcached 1.6.18 sends it only
    /// once the block is swallowed.
    TooLarge {
        /// The line to send.
        reply: &'static str,
        /// The bytes of the command line to drop.
        consumed: usize,
        /// The bytes to discard after them.
        skip_bytes: u64,
        /// The command ended in `noreply`: memcached then sends nothing.
        noreply: bool,
        /// The key whose stored item must go, so that no stale value outlives the failed
        /// update: memcached 1.6.18 unlinks it for a text `set` and for every `ms` (whatever
        /// its mode), not for add, replace, append, prepend or cas.
        unlink_key: Option<Cow<'a, [u8]>>,
    },
    /// The input cannot be resynchronised (a line longer than
    /// [`Limits::max_line_bytes`](crate::Limits), or for a get
    /// [`Limits::max_get_line_bytes`](crate::Limits)): send `reply`, then close the connection.
    /// memcached 1.6.18 closes such connections without a word.
    Fatal {
        /// The line to send before closing.
        reply: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_commands_are_two_lowercase_letters() {
        // Each meta command has its two-letter name.
        assert_eq!(MetaCommand::from_name(b"mg"), Some(MetaCommand::Get));
        assert_eq!(MetaCommand::from_name(b"ms"), Some(MetaCommand::Set));
        assert_eq!(MetaCommand::from_name(b"md"), Some(MetaCommand::Delete));
        assert_eq!(MetaCommand::from_name(b"ma"), Some(MetaCommand::Arithmetic));
        assert_eq!(MetaCommand::from_name(b"mn"), Some(MetaCommand::Noop));
        assert_eq!(MetaCommand::from_name(b"me"), Some(MetaCommand::Debug));
        // Names are case-sensitive, as all memcached command names are.
        assert_eq!(MetaCommand::from_name(b"MG"), None);
        // A longer word is another command.
        assert_eq!(MetaCommand::from_name(b"mgx"), None);
    }
}
