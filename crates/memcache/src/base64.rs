//! Decoding of base64 keys, sent by meta commands with the `b` flag (memcached doc/protocol.txt,
//! "Meta Get": "b: interpret key as base64 encoded binary value").

/// The value of one base64 digit of the standard alphabet, `None` for any other byte.
fn digit_value(byte: u8) -> Option<u32> {
    let value = match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

/// Decodes padded standard base64, as memcached 1.6.18 accepts it: the length must be a multiple
/// of four, and '=' may only pad the last group.
///
/// memcached ignores the unused low bits of the last digit, so "YR==" decodes as "a" like "YQ==";
/// this does too. memcached stops at the first padded group; this refuses anything after it.
pub(crate) fn decode(text: &[u8]) -> Option<Vec<u8>> {
    let groups = text.chunks_exact(4);
    if text.is_empty() || !groups.remainder().is_empty() {
        return None;
    }
    let last_group = groups.len() - 1;
    let mut decoded = Vec::with_capacity(groups.len() * 3);
    for (index, group) in groups.enumerate() {
        let padding = group.iter().rev().take_while(|&&byte| byte == b'=').count();
        if padding > 2 || (padding > 0 && index != last_group) {
            return None;
        }
        let digits = &group[..4 - padding];
        let bits = digits
            .iter()
            .try_fold(0u32, |bits, &byte| Some((bits << 6) | digit_value(byte)?))?
            << (6 * padding);
        let bytes = bits.to_be_bytes();
        decoded.extend_from_slice(&bytes[1..4 - padding]);
    }
    Some(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_padded_base64() {
        // Every padding length decodes.
        assert_eq!(decode(b"YWJj").as_deref(), Some(&b"abc"[..]));
        assert_eq!(decode(b"YWI=").as_deref(), Some(&b"ab"[..]));
        assert_eq!(decode(b"YQ==").as_deref(), Some(&b"a"[..]));
        // Binary bytes come through, '+' and '/' included.
        assert_eq!(
            decode(b"AAFiaW5hcnkga2V5").as_deref(),
            Some(&b"\x00\x01binary key"[..])
        );
        assert_eq!(decode(b"+/+/").as_deref(), Some(&[0xfb, 0xff, 0xbf][..]));
        // Unused low bits are ignored, as memcached ignores them.
        assert_eq!(decode(b"YR==").as_deref(), Some(&b"a"[..]));
    }

    #[test]
    fn refuses_what_memcached_refuses() {
        // Unpadded text, as memcached answers "error decoding key" for "YQ".
        assert_eq!(decode(b"YQ"), None);
        assert_eq!(decode(b"YQ="), None);
        // Three '=' or a group of padding only.
        assert_eq!(decode(b"Y==="), None);
        assert_eq!(decode(b"===="), None);
        // URL-safe digits and other bytes.
        assert_eq!(decode(b"-_-_"), None);
        assert_eq!(decode(b"Y!=="), None);
        // Nothing.
        assert_eq!(decode(b""), None);
    }

    #[test]
    fn refuses_padding_before_the_end() {
        // memcached would stop at the first padded group; data after it is refused here.
        assert_eq!(decode(b"YQ==YQ=="), None);
    }
}
