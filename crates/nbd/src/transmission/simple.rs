//! Simple replies (proto.md "Simple reply message"): 16 bytes of magic, error and cookie, then
//! a successful READ's data. Only the client knows which cookies were READs, so parsing a
//! whole reply needs it (see [`crate::transmission::parse_reply`]).

use crate::constants::*;

/// The 16 bytes of a simple reply's header (proto.md "Simple reply message"); a successful
/// READ's data follows it.
pub fn simple_reply_header(cookie: u64, error: u32) -> [u8; SIMPLE_REPLY_HEADER_BYTES] {
    let mut header = [0u8; SIMPLE_REPLY_HEADER_BYTES];
    header[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    header[4..8].copy_from_slice(&error.to_be_bytes());
    header[8..16].copy_from_slice(&cookie.to_be_bytes());
    header
}

/// Appends a simple reply's header to `output` (proto.md "Simple reply message"); a
/// successful READ's data goes after it.
pub fn compose_simple_reply(output: &mut Vec<u8>, cookie: u64, error: u32) {
    output.extend_from_slice(&simple_reply_header(cookie, error));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_magic_error_cookie() {
        let mut output = vec![7];
        compose_simple_reply(&mut output, 0x1122_3344_5566_7788, EINVAL);
        assert_eq!(
            output,
            [
                7, 0x67, 0x44, 0x66, 0x98, 0, 0, 0, 22, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                0x88
            ]
        );
    }
}
