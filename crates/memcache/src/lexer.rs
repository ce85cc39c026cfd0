//! Command lines and their words: where a line ends, how it splits, what a number and a key look
//! like (memcached doc/protocol.txt, "Commands" and "Keys").

use std::fmt;

use crate::limits::Limits;
use crate::request::ParseError;

/// The reply memcached would send for a line it cannot resynchronise after; memcached itself
/// closes such connections silently (see [`ParseError::Fatal`]).
const LINE_TOO_LONG: &str = "CLIENT_ERROR line too long";

/// Finds the first command line of `input`: its text without the terminator, and how many bytes
/// it spans with the terminator.
///
/// memcached doc/protocol.txt says lines end with "\r\n"; memcached also accepts a bare "\n", and
/// so does this. Only one '\r' before the '\n' belongs to the terminator, as in memcached.
///
/// A line may be [`Limits::max_line_bytes`] long, a `get` or `gets` line
/// [`Limits::max_get_line_bytes`]: memcached 1.6.18 closes a connection that sent over 2048
/// bytes without a newline unless they begin a get, whose keys it takes without bound.
pub(crate) fn next_line<'a>(
    input: &'a [u8],
    limits: &Limits,
) -> Result<(&'a [u8], usize), ParseError<'a>> {
    let max_line_bytes = match starts_a_get(input) {
        true => limits.max_get_line_bytes.max(limits.max_line_bytes),
        false => limits.max_line_bytes,
    };
    // Looking no further than the limit keeps the answer the same however the line was split
    // into reads: a line is too long as soon as the limit is reached without a newline.
    let window = &input[..input.len().min(max_line_bytes)];
    match window.iter().position(|&byte| byte == b'\n') {
        Some(newline) => {
            let text = &input[..newline];
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            Ok((text, newline + 1))
        }
        None if input.len() >= max_line_bytes => Err(ParseError::Fatal {
            reply: LINE_TOO_LONG,
        }),
        None => Err(ParseError::Incomplete),
    }
}

/// Whether `input` begins with a `get` or `gets` command, after any leading spaces.
fn starts_a_get(input: &[u8]) -> bool {
    let start = input
        .iter()
        .position(|&byte| byte != b' ')
        .unwrap_or(input.len());
    let input = &input[start..];
    input.starts_with(b"get ") || input.starts_with(b"gets ")
}

/// An iterator over the space-separated words of a line.
///
/// memcached separates words by runs of spaces only; a tab is part of a word (and then makes a
/// key invalid here).
#[derive(Clone)]
pub struct WordIter<'a> {
    rest: &'a [u8],
}

impl<'a> WordIter<'a> {
    /// Iterates over the words of `text`.
    pub(crate) fn new(text: &'a [u8]) -> Self {
        WordIter { rest: text }
    }

    /// The text not yet iterated over, so that a list of words can be kept without collecting it.
    pub(crate) fn remainder(&self) -> &'a [u8] {
        self.rest
    }

    /// Collects up to `N` words; `None` if there are more, which no fixed-arity command accepts.
    pub(crate) fn collect_at_most<const N: usize>(mut self) -> Option<([&'a [u8]; N], usize)> {
        let mut words: [&'a [u8]; N] = [&[]; N];
        let mut count = 0;
        for word in self.by_ref() {
            *words.get_mut(count)? = word;
            count += 1;
        }
        Some((words, count))
    }
}

impl<'a> Iterator for WordIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&byte| byte != b' ')?;
        let rest = &self.rest[start..];
        let end = rest
            .iter()
            .position(|&byte| byte == b' ')
            .unwrap_or(rest.len());
        let (word, rest) = rest.split_at(end);
        self.rest = rest;
        Some(word)
    }
}

/// A list of space-separated words borrowed from a command line: the keys of a `get`, the
/// arguments of `stats` (memcached doc/protocol.txt, "Retrieval command" and "Statistics").
///
/// It keeps the line's text rather than a `Vec`, so a multi-key get parses without allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Words<'a> {
    text: &'a [u8],
    count: usize,
}

impl<'a> Words<'a> {
    /// The words of `text`, of which there are `count`.
    pub(crate) fn new(text: &'a [u8], count: usize) -> Self {
        Words { text, count }
    }

    /// How many words there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none (a `gat` may name no key).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The words, in the order the client sent them.
    pub fn iter(&self) -> WordIter<'a> {
        WordIter::new(self.text)
    }

    /// The first word, e.g. the only key of a single-key get.
    pub fn first(&self) -> Option<&'a [u8]> {
        self.iter().next()
    }
}

impl<'a> IntoIterator for Words<'a> {
    type Item = &'a [u8];
    type IntoIter = WordIter<'a>;

    fn into_iter(self) -> WordIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Words<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

/// Whether `word` may be a key: 1 to `max_key_bytes` bytes, none a control character
/// (memcached doc/protocol.txt, "Keys"). Spaces cannot occur: they split words.
pub(crate) fn is_valid_key(word: &[u8], max_key_bytes: usize) -> bool {
    !word.is_empty()
        && word.len() <= max_key_bytes
        && word.iter().all(|&byte| byte > b' ' && byte != 0x7f)
}

/// Parses decimal digits, with no sign, refusing overflow.
fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// Parses an unsigned decimal as memcached's `strtoull` does: an optional '+', then digits.
pub(crate) fn parse_u64(word: &[u8]) -> Option<u64> {
    parse_digits(word.strip_prefix(b"+").unwrap_or(word))
}

/// Parses an unsigned decimal that must fit 32 bits (client flags, memcached doc/protocol.txt
/// "Storage commands"). memcached 1.6.18 silently truncates larger ones; this refuses them.
pub(crate) fn parse_u32(word: &[u8]) -> Option<u32> {
    u32::try_from(parse_u64(word)?).ok()
}

/// Parses a signed decimal (exptimes may be negative, memcached doc/protocol.txt "Storage
/// commands").
pub(crate) fn parse_i64(word: &[u8]) -> Option<i64> {
    match word.strip_prefix(b"-") {
        Some(digits) => 0i64.checked_sub_unsigned(parse_digits(digits)?),
        None => i64::try_from(parse_u64(word)?).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_line_bytes: usize, max_get_line_bytes: usize) -> Limits {
        Limits {
            max_line_bytes,
            max_get_line_bytes,
            ..Limits::default()
        }
    }

    #[test]
    fn lines_end_at_the_first_newline() {
        let limits = limits(100, 100);
        // "\r\n" is the protocol's terminator and is not part of the text.
        assert_eq!(next_line(b"get a\r\nrest", &limits), Ok((&b"get a"[..], 7)));
        // A bare "\n" is accepted as memcached accepts it.
        assert_eq!(next_line(b"get a\nrest", &limits), Ok((&b"get a"[..], 6)));
        // Only one '\r' belongs to the terminator.
        assert_eq!(next_line(b"get a\r\r\n", &limits), Ok((&b"get a\r"[..], 8)));
        // Without a newline more bytes are needed.
        assert_eq!(next_line(b"get a\r", &limits), Err(ParseError::Incomplete));
    }

    #[test]
    fn a_line_reaching_the_limit_is_fatal() {
        let limits = limits(5, 5);
        // A line of exactly the limit, terminator included, is accepted.
        assert_eq!(next_line(b"abc\r\n", &limits), Ok((&b"abc"[..], 5)));
        // One byte more is fatal, even though the newline is there.
        assert!(matches!(
            next_line(b"abcd\r\n", &limits),
            Err(ParseError::Fatal { .. })
        ));
        // So is a prefix of it: the verdict does not depend on how reads split the line.
        assert!(matches!(
            next_line(b"abcd\r", &limits),
            Err(ParseError::Fatal { .. })
        ));
    }

    #[test]
    fn only_get_lines_may_be_longer() {
        let limits = limits(8, 16);
        // A get or gets, after any spaces, has the longer limit.
        assert_eq!(
            next_line(b"get a b c d\r\n", &limits),
            Ok((&b"get a b c d"[..], 13))
        );
        assert_eq!(
            next_line(b"  gets a b c", &limits),
            Err(ParseError::Incomplete)
        );
        assert!(matches!(
            next_line(b"get a b c d e f g", &limits),
            Err(ParseError::Fatal { .. })
        ));
        // Any other line, gat included as in memcached, has the short one.
        assert!(matches!(
            next_line(b"gat 0 a b c\r\n", &limits),
            Err(ParseError::Fatal { .. })
        ));
        assert!(matches!(
            next_line(b"getx a b c", &limits),
            Err(ParseError::Fatal { .. })
        ));
    }

    #[test]
    fn words_split_on_runs_of_spaces() {
        let words: Vec<&[u8]> = WordIter::new(b"  get a  b\tc ").collect();
        // Leading, repeated and trailing spaces are skipped; tabs are not separators.
        assert_eq!(words, vec![&b"get"[..], b"a", b"b\tc"]);
        // A blank line has no words.
        assert_eq!(WordIter::new(b"   ").next(), None);
    }

    #[test]
    fn collect_at_most_refuses_extra_words() {
        // Up to N words are collected with their count.
        let (words, count) = WordIter::new(b"a b").collect_at_most::<3>().unwrap();
        assert_eq!((count, words[1]), (2, &b"b"[..]));
        // More than N is refused.
        assert!(WordIter::new(b"a b c d").collect_at_most::<3>().is_none());
    }

    #[test]
    fn word_lists_iterate_their_text() {
        let words = Words::new(b"a  bb c", 3);
        // The count is what the parser found.
        assert_eq!(words.len(), 3);
        // The first word is the first key.
        assert_eq!(words.first(), Some(&b"a"[..]));
        // Iteration yields every word in order.
        assert_eq!(
            words.iter().collect::<Vec<_>>(),
            vec![&b"a"[..], b"bb", b"c"]
        );
        // Debug shows the words as text.
        assert_eq!(format!("{words:?}"), r#"["a", "bb", "c"]"#);
    }

    #[test]
    fn keys_have_no_control_characters() {
        // Printable ASCII and UTF-8 bytes are allowed.
        assert!(is_valid_key("ключ:1".as_bytes(), 250));
        // Empty keys are not keys.
        assert!(!is_valid_key(b"", 250));
        // Longer than the limit is refused.
        assert!(!is_valid_key(&[b'k'; 251], 250));
        // Tabs and DEL are control characters.
        assert!(!is_valid_key(b"a\tb", 250) && !is_valid_key(b"a\x7f", 250));
    }

    #[test]
    fn numbers_parse_like_strtol() {
        // A leading '+' is accepted, as strtoull accepts it.
        assert_eq!(parse_u64(b"+12"), Some(12));
        // The full u64 range parses.
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        // Overflow, signs on unsigned numbers, and trailing junk are refused.
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"1x"), None);
        assert_eq!(parse_u64(b"+"), None);
        // Client flags are 32 bits.
        assert_eq!(parse_u32(b"4294967296"), None);
        // Signed numbers reach both ends of i64.
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        // A sign must be followed by digits only.
        assert_eq!(parse_i64(b"-+1"), None);
    }
}
