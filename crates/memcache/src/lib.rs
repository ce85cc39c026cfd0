//! The memcached text and meta protocols as pure code (memcached doc/protocol.txt): [`parse`]
//! reads one request from the front of a byte buffer, and [`compose`] writes response lines.
//! No sockets, no storage, no threads: the server owns those.
//!
//! A server keeps a read buffer per connection and loops:
//!
//! - `Ok(Parsed { request, consumed })`: serve `request` (it borrows from the buffer), then drop
//!   `consumed` bytes and parse again;
//! - `Err(ParseError::Incomplete)`: read more bytes;
//! - `Err(ParseError::Invalid { .. })`: send the reply unless `noreply`, drop `consumed`, go on;
//! - `Err(ParseError::TooLarge { .. })`: the same, then discard `skip_bytes` more bytes as they
//!   arrive, without buffering them;
//! - `Err(ParseError::Fatal { .. })`: send the reply and close.
//!
//! The error lines are memcached 1.6.18's, checked against the real server. Where memcached is
//! lax the parser is stricter, and says so where it is: keys may not hold control characters,
//! client flags must fit 32 bits, a bad key in a multi-get refuses the whole line.
//!
//! Parsing allocates nothing except to decode a base64 meta key.

mod base64;
mod block;
pub mod compose;
mod lexer;
mod limits;
mod meta;
mod request;
mod text;

pub use lexer::{WordIter, Words};
pub use limits::{Limits, PROTOCOL_MAX_DECLARED_BYTES, PROTOCOL_MAX_KEY_BYTES};
pub use meta::{MetaError, MetaFlags, KNOWN_META_FLAGS, MAX_OPAQUE_BYTES};
pub use request::{Direction, Meta, MetaCommand, ParseError, Parsed, Request, StoreMode};

/// Parses the first request in `input` (memcached doc/protocol.txt, "Commands" and "Meta
/// Commands"): a command line and, for a storage command, its data block.
///
/// Never panics, whatever the bytes; see [`ParseError`] for what to do when no request comes
/// back.
pub fn parse<'a>(input: &'a [u8], limits: &Limits) -> Result<Parsed<'a>, ParseError<'a>> {
    let (line, line_bytes) = lexer::next_line(input, limits)?;
    let mut words = WordIter::new(line);
    let Some(name) = words.next() else {
        // memcached answers an empty line with "ERROR".
        return Err(ParseError::Invalid {
            reply: request::ERROR,
            consumed: line_bytes,
            noreply: false,
        });
    };
    match request::MetaCommand::from_name(name) {
        Some(command) => meta::parse(command, words, input, line_bytes, limits),
        None => text::parse(name, words, input, line_bytes, limits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lines_are_errors() {
        // memcached answers an empty line with "ERROR".
        assert_eq!(
            parse(b"\r\nversion\r\n", &Limits::default()),
            Err(ParseError::Invalid {
                reply: "ERROR",
                consumed: 2,
                noreply: false
            })
        );
        // A line of spaces is empty too.
        assert!(matches!(
            parse(b"   \n", &Limits::default()),
            Err(ParseError::Invalid {
                reply: "ERROR",
                consumed: 4,
                ..
            })
        ));
    }

    #[test]
    fn endless_lines_are_fatal() {
        let limits = Limits {
            max_line_bytes: 8,
            max_get_line_bytes: 16,
            ..Limits::default()
        };
        // Short of the limit, a line without a newline needs more bytes.
        assert_eq!(
            parse(b"get aaaaaaaaaaa", &limits),
            Err(ParseError::Incomplete)
        );
        // At the limit it cannot be resynchronised.
        assert_eq!(
            parse(b"get aaaaaaaaaaaa", &limits),
            Err(ParseError::Fatal {
                reply: "CLIENT_ERROR line too long"
            })
        );
    }

    #[test]
    fn pipelined_requests_parse_one_at_a_time() {
        let limits = Limits::default();
        let input = b"get a\r\nset b 0 0 1\r\nx\r\nmn\r\n";
        let first = parse(input, &limits).unwrap();
        // The first request ends at its line.
        assert_eq!(first.consumed, 7);
        let second = parse(&input[7..], &limits).unwrap();
        // The second spans its line and block.
        assert!(matches!(second.request, Request::Store { data: b"x", .. }));
        let third = parse(&input[7 + second.consumed..], &limits).unwrap();
        // The third is the rest of the input.
        assert_eq!(third.consumed, 4);
    }
}
