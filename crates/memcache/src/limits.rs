//! The bounds the parser enforces, so that a client can never make the server buffer or
//! allocate without limit.

/// memcached's key length limit (memcached doc/protocol.txt, "Keys").
pub const PROTOCOL_MAX_KEY_BYTES: usize = 250;

/// The largest `<bytes>` a storage command may declare before memcached 1.6.18 answers
/// "CLIENT_ERROR bad command line format" instead of swallowing the block: it keeps the length
/// plus the trailing "\r\n" in a C `int`.
pub const PROTOCOL_MAX_DECLARED_BYTES: u64 = i32::MAX as u64 - 2;

/// The size limits one connection is parsed under (memcached doc/protocol.txt, "Keys" and
/// "Storage commands"; the line limits follow memcached 1.6.18, which has none for `get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest key, as sent on the wire (base64 text for meta keys sent with `b`).
    pub max_key_bytes: usize,
    /// Largest value a storage command may carry; larger ones are answered "SERVER_ERROR object
    /// too large for cache" and streamed past, never buffered.
    pub max_value_bytes: usize,
    /// Longest command line other than a get, terminator included. A client that sends more
    /// without a newline cannot be resynchronised, so its connection is closed.
    pub max_line_bytes: usize,
    /// Longest `get` or `gets` line, terminator included: multi-gets may name thousands of
    /// keys (memcslap's name 2000), so this bounds only what one line may make the server
    /// buffer.
    pub max_get_line_bytes: usize,
}

impl Default for Limits {
    /// memcached's defaults for keys and values (250 bytes, `-I 1m`) and its 2048-byte line;
    /// get lines up to 1 MiB, which holds over 4000 keys of the longest kind.
    fn default() -> Self {
        Limits {
            max_key_bytes: PROTOCOL_MAX_KEY_BYTES,
            max_value_bytes: 1 << 20,
            max_line_bytes: 2048,
            max_get_line_bytes: 1 << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_memcached() {
        let limits = Limits::default();
        // Keys are limited exactly as memcached limits them.
        assert_eq!(limits.max_key_bytes, 250);
        // Values default to memcached's `-I 1m`.
        assert_eq!(limits.max_value_bytes, 1024 * 1024);
        // memcached closes a connection after 2048 bytes without a newline.
        assert_eq!(limits.max_line_bytes, 2048);
        // A get of 4000 keys of 250 bytes fits.
        assert!(limits.max_get_line_bytes >= 4000 * 251 + 6);
    }
}
