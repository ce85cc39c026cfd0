//! Small writers of response lines into a caller's buffer (memcached doc/protocol.txt,
//! "Retrieval command", "Meta Get" and "General-purpose statistics"). They only append, so a
//! reused `Vec` makes responses without allocating.

use std::fmt::Display;
use std::io::Write;

/// Appends the decimal digits of `value`, formatted by hand because `write!` costs more than
/// the rest of a small response.
fn push_decimal(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        // `value % 10` is below 10, so the cast keeps it whole.
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// A value a meta return flag can carry: a number or raw token bytes (memcached
/// doc/protocol.txt, "Meta Get": flags "return ... as a token").
pub trait FlagValue {
    /// Appends the value as it appears after the flag letter.
    fn write_to(&self, out: &mut Vec<u8>);
}

impl FlagValue for u64 {
    fn write_to(&self, out: &mut Vec<u8>) {
        push_decimal(out, *self);
    }
}

impl FlagValue for u32 {
    fn write_to(&self, out: &mut Vec<u8>) {
        push_decimal(out, u64::from(*self));
    }
}

impl FlagValue for usize {
    fn write_to(&self, out: &mut Vec<u8>) {
        push_decimal(out, *self as u64);
    }
}

impl FlagValue for i64 {
    /// Signed, for the TTL flag `t`, which is -1 for items that never expire.
    fn write_to(&self, out: &mut Vec<u8>) {
        if *self < 0 {
            out.push(b'-');
        }
        push_decimal(out, self.unsigned_abs());
    }
}

impl FlagValue for &[u8] {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

/// Writes `text` and the line terminator "\r\n", e.g. "STORED", "ERROR", "VERSION 1.6.18".
pub fn line(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Writes a number alone on a line: the reply to `incr`/`decr` (memcached doc/protocol.txt,
/// "Increment/Decrement").
pub fn number_line(out: &mut Vec<u8>, value: u64) {
    push_decimal(out, value);
    out.extend_from_slice(b"\r\n");
}

/// Writes `VALUE <key> <flags> <bytes> [<cas unique>]\r\n`, the header of one item in a
/// `get`/`gets` reply (memcached doc/protocol.txt, "Retrieval command"); the caller then writes
/// the value and "\r\n".
pub fn value_line(
    out: &mut Vec<u8>,
    key: &[u8],
    client_flags: u32,
    value_bytes: usize,
    cas: Option<u64>,
) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    push_decimal(out, u64::from(client_flags));
    out.push(b' ');
    push_decimal(out, value_bytes as u64);
    if let Some(cas) = cas {
        out.push(b' ');
        push_decimal(out, cas);
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes "END\r\n", which ends a retrieval or stats reply.
pub fn end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"END\r\n");
}

/// Writes the start of a meta reply: the two-letter code ("HD", "VA", "EN", "NF", "NS", "EX",
/// "MN") and, for "VA", the value's length (memcached doc/protocol.txt, "Meta Commands":
/// `<RC> <datalen*> <flag1> <flag2> <...>\r\n`). Flags follow via [`meta_flag`], then
/// [`line_end`].
pub fn meta_header(out: &mut Vec<u8>, code: &[u8; 2], datalen: Option<usize>) {
    out.extend_from_slice(code);
    if let Some(datalen) = datalen {
        out.push(b' ');
        push_decimal(out, datalen as u64);
    }
}

/// Writes one meta return flag, `" <letter><value>"`, e.g. " t30", " Oabc", " kfoo"; pass `&[]`
/// for a flag without a value such as " W".
pub fn meta_flag(out: &mut Vec<u8>, letter: u8, value: impl FlagValue) {
    out.push(b' ');
    out.push(letter);
    value.write_to(out);
}

/// Writes "\r\n", ending a line started with [`meta_header`].
pub fn line_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

/// Writes `STAT <name> <value>\r\n`, one line of a `stats` reply (memcached doc/protocol.txt,
/// "General-purpose statistics").
pub fn stat(out: &mut Vec<u8>, name: &str, value: impl Display) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{value}");
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a writer on a fresh buffer and returns what it wrote.
    fn written(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out);
        out
    }

    #[test]
    fn value_lines_match_the_protocol() {
        // A get item header has key, flags and length.
        assert_eq!(
            written(|out| value_line(out, b"foo", 5, 3, None)),
            b"VALUE foo 5 3\r\n"
        );
        // A gets item header adds the cas unique; extremes print in full.
        assert_eq!(
            written(|out| value_line(out, b"k", u32::MAX, 0, Some(u64::MAX))),
            b"VALUE k 4294967295 0 18446744073709551615\r\n"
        );
    }

    #[test]
    fn simple_lines() {
        // Lines get the protocol terminator.
        assert_eq!(written(|out| line(out, "STORED")), b"STORED\r\n");
        // END ends retrievals.
        assert_eq!(written(end), b"END\r\n");
        // incr replies are bare numbers.
        assert_eq!(written(|out| number_line(out, 0)), b"0\r\n");
    }

    #[test]
    fn meta_replies_compose() {
        let out = written(|out| {
            meta_header(out, b"VA", Some(2));
            meta_flag(out, b't', -1i64);
            meta_flag(out, b'f', 30u32);
            meta_flag(out, b'O', &b"op"[..]);
            meta_flag(out, b'W', &b""[..]);
            line_end(out);
        });
        // Header, length, then flags in the order written, each with its value.
        assert_eq!(out, b"VA 2 t-1 f30 Oop W\r\n");
        // A code without a value has no length.
        assert_eq!(
            written(|out| {
                meta_header(out, b"HD", None);
                line_end(out)
            }),
            b"HD\r\n"
        );
        // Unsigned flag values of every width print in decimal.
        assert_eq!(
            written(|out| {
                meta_flag(out, b'c', 7u64);
                meta_flag(out, b's', 12usize)
            }),
            b" c7 s12"
        );
    }

    #[test]
    fn stat_lines_take_any_display_value() {
        // Numbers, text and fractions all print as given.
        assert_eq!(
            written(|out| stat(out, "curr_items", 42)),
            b"STAT curr_items 42\r\n"
        );
        assert_eq!(
            written(|out| stat(out, "version", "1.0")),
            b"STAT version 1.0\r\n"
        );
        assert_eq!(
            written(|out| stat(out, "rusage_user", "0.001000")),
            b"STAT rusage_user 0.001000\r\n"
        );
    }

    #[test]
    fn signed_values_keep_their_sign() {
        // i64::MIN prints without overflow.
        assert_eq!(
            written(|out| meta_flag(out, b't', i64::MIN)),
            b" t-9223372036854775808"
        );
    }
}
