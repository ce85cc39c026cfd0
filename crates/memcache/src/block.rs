//! The data block that follows a storage command line (`set` and friends, `ms`): its declared
//! length and its "\r\n" terminator (memcached doc/protocol.txt, "Storage commands" and
//! "Meta Set").

use crate::lexer::parse_u64;
use crate::limits::{Limits, PROTOCOL_MAX_DECLARED_BYTES};

/// memcached's answer to a value over the item size limit.
pub(crate) const OBJECT_TOO_LARGE: &str = "SERVER_ERROR object too large for cache";

/// memcached's answer to a data block not followed by "\r\n".
pub(crate) const BAD_DATA_CHUNK: &str = "CLIENT_ERROR bad data chunk";

/// What a declared `<bytes>` / `<datalen>` field asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Declared {
    /// Not a number, negative, or beyond what memcached accepts at all: the line is bad and,
    /// as in memcached, the block that may follow is not skipped.
    Invalid,
    /// More than the server stores: the block (and its terminator) must be skipped unread.
    TooLarge { skip_bytes: u64 },
    /// A block that will be buffered, of this many bytes.
    Fits(usize),
}

/// Classifies a declared data length against the limits.
pub(crate) fn classify(word: &[u8], limits: &Limits) -> Declared {
    let Some(declared) = parse_u64(word).filter(|&bytes| bytes <= PROTOCOL_MAX_DECLARED_BYTES)
    else {
        return Declared::Invalid;
    };
    match usize::try_from(declared) {
        Ok(bytes) if bytes <= limits.max_value_bytes => Declared::Fits(bytes),
        _ => Declared::TooLarge {
            skip_bytes: declared + 2,
        },
    }
}

/// The data block of a storage command as found in the input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Block<'a> {
    /// Not all of it (with its terminator) has arrived yet.
    Incomplete,
    /// The value, well terminated; `end` is where the next request starts.
    Complete { data: &'a [u8], end: usize },
    /// The two bytes after the value are not "\r\n"; memcached drops the value and those two
    /// bytes, and parses on from `end`.
    BadTerminator { end: usize },
}

/// Finds the `data_bytes`-byte block that starts at `start` in `input`.
pub(crate) fn find(input: &[u8], start: usize, data_bytes: usize) -> Block<'_> {
    let data_end = start.saturating_add(data_bytes);
    let end = data_end.saturating_add(2);
    match (input.get(start..data_end), input.get(data_end..end)) {
        (Some(data), Some(b"\r\n")) => Block::Complete { data, end },
        (Some(_), Some(_)) => Block::BadTerminator { end },
        _ => Block::Incomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_lengths_are_classified_as_memcached_does() {
        let limits = Limits {
            max_value_bytes: 10,
            ..Limits::default()
        };
        // Up to the limit the block is buffered.
        assert_eq!(classify(b"10", &limits), Declared::Fits(10));
        // Over it, the block and its terminator are skipped.
        assert_eq!(
            classify(b"11", &limits),
            Declared::TooLarge { skip_bytes: 13 }
        );
        // memcached's largest accepted declaration is still only skipped.
        assert_eq!(
            classify(b"2147483645", &limits),
            Declared::TooLarge {
                skip_bytes: 2_147_483_647
            }
        );
        // Beyond that, negative or non-numeric, the line itself is bad.
        assert_eq!(classify(b"2147483646", &limits), Declared::Invalid);
        assert_eq!(classify(b"-1", &limits), Declared::Invalid);
        assert_eq!(classify(b"1x", &limits), Declared::Invalid);
    }

    #[test]
    fn blocks_need_their_terminator() {
        // The value and "\r\n" make a complete block.
        assert_eq!(
            find(b"L\r\nab\r\nnext", 3, 2),
            Block::Complete {
                data: b"ab",
                end: 7
            }
        );
        // "\r\n" inside a value is just data.
        assert_eq!(
            find(b"\r\n\r\n", 0, 2),
            Block::Complete {
                data: b"\r\n",
                end: 4
            }
        );
        // Until the terminator has arrived the block is incomplete.
        assert_eq!(find(b"L\r\nab\r", 3, 2), Block::Incomplete);
        // A bare "\n" does not terminate a block (memcached answers "bad data chunk").
        assert_eq!(find(b"ab\nx", 0, 2), Block::BadTerminator { end: 4 });
    }
}
