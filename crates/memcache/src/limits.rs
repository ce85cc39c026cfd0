//! The bounds the parser enforces, so that a client can never make the server buffer or
//! allocate without limit.

/// memcached's key length limit (memcached doc/protocol.txt, "Keys").
pub const PROTOCOL_MAX_KEY_BYTES: usize = 250;

/// The largest `<bytes>` a storage command may declare before memcached 1.6.18 answers
/// "CLIENT_ERROR bad command line format" instead of swallowing the block: it keeps the length
/// plus the trailing "\r\n" in a C `int`.
pub const PROTOCOL_MAX_DECLARED_BYTES: u64 = i32::MAX as u64 - 2;

/// The size limits one connection is parsed under (memcached doc/protocol.txt, "Keys" and
/// "Storage commands"; the line limits are this server's, memcached has none for `get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest key, as sent on the wire (base64 text for meta keys sent with `b`).
    pub max_key_bytes: usize,
    /// Largest value a storage command may carry; larger ones are answered "SERVER_ERROR object
    /// too large for cache" and streamed past, never buffered.
    pub max_value_bytes: usize,
    /// Longest command line, terminator included. A client that sends more without a newline
    /// cannot be resynchronised, so its connection is closed.
    pub max_line_bytes: usize,
    /// Most keys one `get`/`gets`/`gat`/`gats` may name.
    pub max_keys_per_get: usize,
}

impl Default for Limits {
    /// memcached's defaults for keys and values (250 bytes, `-I 1m`); lines up to 64 KiB, which
    /// holds a get of 1024 keys of 60 bytes.
    fn default() -> Self {
        Limits {
            max_key_bytes: PROTOCOL_MAX_KEY_BYTES,
            max_value_bytes: 1 << 20,
            max_line_bytes: 64 << 10,
            max_keys_per_get: 1024,
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
        // A full-size multi-get of the default key count fits with short keys.
        assert!(limits.max_line_bytes >= limits.max_keys_per_get * 60);
    }
}
