//! What every text format shares: a line source that skips blank lines and keeps the line number
//! for errors, field splitting, number and op parsing, and the stable hash that turns string keys
//! into numeric ones.

use super::source::TraceInput;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::open_source;
use crate::{Location, Op, TraceError};

/// Longest excerpt of a bad field quoted in an error message.
const QUOTED_FIELD_CHARS: usize = 40;

/// Streams the non-blank lines of a (possibly compressed) text trace.
pub(crate) struct LineSource {
    path: PathBuf,
    input: Box<dyn BufRead + Send>,
    buffer: Vec<u8>,
    /// 1-based number of the line last read.
    line_number: u64,
    /// The trimmed line in `buffer` (byte range), when it was read but not yet given out.
    held: Option<(usize, usize)>,
}

impl LineSource {
    /// Opens `path` (optionally compressed).
    pub(crate) fn open(input: &TraceInput) -> Result<LineSource, TraceError> {
        let path = input.name();
        let (input, _) = open_source(input)?;
        Ok(LineSource {
            path: path.to_path_buf(),
            input,
            buffer: Vec::with_capacity(256),
            line_number: 0,
            held: None,
        })
    }

    /// The path being read, for errors raised outside a line.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The location of the line last read, for errors raised after it was parsed.
    pub(crate) fn location(&self) -> Location {
        Location::Line(self.line_number)
    }

    /// The next line that is not blank, trimmed, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<Line<'_>>, TraceError> {
        let range = match self.held.take() {
            Some(range) => Some(range),
            None => self.read_line()?,
        };
        Ok(range.map(|(start, end)| Line {
            text: &self.buffer[start..end],
            number: self.line_number,
            path: &self.path,
        }))
    }

    /// Skips the first non-blank line if `is_header` says it is a header; otherwise it stays to
    /// be read as data. Formats whose header is optional call this once, before reading.
    pub(crate) fn skip_header(
        &mut self,
        is_header: impl Fn(&[u8]) -> bool,
    ) -> Result<(), TraceError> {
        if let Some((start, end)) = self.read_line()? {
            if !is_header(&self.buffer[start..end]) {
                self.held = Some((start, end));
            }
        }
        Ok(())
    }

    /// Reads up to the next non-blank line and returns its trimmed byte range in `buffer`.
    fn read_line(&mut self) -> Result<Option<(usize, usize)>, TraceError> {
        loop {
            self.buffer.clear();
            let read = self
                .input
                .read_until(b'\n', &mut self.buffer)
                .map_err(|e| {
                    TraceError::io(&self.path, Location::Line(self.line_number + 1), &e)
                })?;
            if read == 0 {
                return Ok(None);
            }
            self.line_number += 1;
            let line = if self.line_number == 1 {
                strip_bom(&self.buffer)
            } else {
                &self.buffer[..]
            };
            let text = trim_ascii(line);
            if !text.is_empty() {
                let start = text.as_ptr() as usize - self.buffer.as_ptr() as usize;
                return Ok(Some((start, start + text.len())));
            }
        }
    }
}

/// One non-blank line of a text trace, trimmed, with what an error about it needs.
pub(crate) struct Line<'a> {
    pub(crate) text: &'a [u8],
    pub(crate) number: u64,
    pub(crate) path: &'a Path,
}

impl<'a> Line<'a> {
    /// An error about this line.
    pub(crate) fn error(&self, message: impl Into<String>) -> TraceError {
        TraceError::new(self.path, Location::Line(self.number), message)
    }

    /// Splits the line at `delimiter` into exactly `N` trimmed fields; `layout` names them for
    /// the error when the count differs.
    pub(crate) fn exact_fields<const N: usize>(
        &self,
        delimiter: u8,
        layout: &str,
    ) -> Result<[&'a [u8]; N], TraceError> {
        let mut fields: [&'a [u8]; N] = [&[]; N];
        let mut count = 0;
        for field in self.text.split(|&b| b == delimiter) {
            if count < N {
                fields[count] = trim_ascii(field);
            }
            count += 1;
        }
        if count != N {
            return Err(self.field_count_error(N, count, delimiter, layout));
        }
        Ok(fields)
    }

    /// The error for a line with `found` fields where `expected` were needed.
    pub(crate) fn field_count_error(
        &self,
        expected: usize,
        found: usize,
        delimiter: u8,
        layout: &str,
    ) -> TraceError {
        let separator = match delimiter {
            b',' => "comma-separated".to_string(),
            b'\t' => "tab-separated".to_string(),
            b' ' => "space-separated".to_string(),
            other => format!("'{}'-separated", other as char),
        };
        let relation = if found < expected {
            "too few"
        } else {
            "too many"
        };
        self.error(format!(
            "{relation} fields: expected {expected} {separator} fields ({layout}), found {found}"
        ))
    }

    /// Parses `field` (column `column`, 1-based, named `name`) as an unsigned decimal integer.
    pub(crate) fn parse_u64(
        &self,
        field: &[u8],
        column: usize,
        name: &str,
    ) -> Result<u64, TraceError> {
        parse_decimal(field)
            .ok_or_else(|| self.expected(field, column, name, "an unsigned integer"))
    }

    /// Parses `field` as an unsigned integer that fits 32 bits.
    pub(crate) fn parse_u32(
        &self,
        field: &[u8],
        column: usize,
        name: &str,
    ) -> Result<u32, TraceError> {
        parse_decimal(field)
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| self.expected(field, column, name, "an unsigned integer below 2^32"))
    }

    /// Parses `field` as a non-negative number of seconds (decimals allowed) and returns it in
    /// nanoseconds.
    pub(crate) fn parse_seconds_ns(
        &self,
        field: &[u8],
        column: usize,
        name: &str,
    ) -> Result<u64, TraceError> {
        parse_seconds_ns(field)
            .ok_or_else(|| self.expected(field, column, name, "a non-negative number of seconds"))
    }

    /// The error for a field that is not what column `column` holds.
    pub(crate) fn expected(
        &self,
        field: &[u8],
        column: usize,
        name: &str,
        what: &str,
    ) -> TraceError {
        self.error(format!(
            "column {column} ({name}): expected {what}, found \"{}\"",
            quote(field)
        ))
    }
}

/// `field` for an error message: lossy UTF-8, shortened.
pub(crate) fn quote(field: &[u8]) -> String {
    let text = String::from_utf8_lossy(field);
    if text.chars().count() > QUOTED_FIELD_CHARS {
        let mut short: String = text.chars().take(QUOTED_FIELD_CHARS).collect();
        short.push_str("...");
        short
    } else {
        text.into_owned()
    }
}

/// `bytes` without leading and trailing ASCII whitespace (including the `\r` of CRLF files).
pub(crate) fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |last| last + 1);
    &bytes[start..end]
}

/// `bytes` without a leading UTF-8 byte-order mark, which spreadsheet exports put before the
/// first header name.
pub(crate) fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes)
}

/// An unsigned decimal integer, or `None` if `field` is empty, holds anything but digits or
/// overflows 64 bits. Hand-written because `str::parse` needs UTF-8 validation first.
pub(crate) fn parse_decimal(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &byte in field {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    Some(value)
}

/// A number written in C's `strtoull(s, _, 0)` style as libCacheSim reads ids: decimal, or
/// hexadecimal with a `0x` prefix.
pub(crate) fn parse_integer(field: &[u8]) -> Option<u64> {
    match field {
        [b'0', b'x' | b'X', hex @ ..] if !hex.is_empty() => {
            u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
        }
        _ => parse_decimal(field),
    }
}

/// Seconds, written as an integer, a decimal fraction or in exponent notation, converted to
/// nanoseconds. The integer and plain-fraction forms are converted exactly (no float rounding),
/// digits beyond nanoseconds are dropped.
pub(crate) fn parse_seconds_ns(field: &[u8]) -> Option<u64> {
    let (whole, fraction) = match field.iter().position(|&b| b == b'.') {
        Some(dot) => (&field[..dot], &field[dot + 1..]),
        None => (field, &[][..]),
    };
    let plain = |digits: &[u8]| digits.iter().all(u8::is_ascii_digit);
    if plain(whole) && plain(fraction) && !(whole.is_empty() && fraction.is_empty()) {
        let seconds = if whole.is_empty() {
            0
        } else {
            parse_decimal(whole)?
        };
        let mut nanos: u64 = 0;
        for position in 0..9 {
            let digit = fraction.get(position).map_or(0, |d| u64::from(d - b'0'));
            nanos = nanos * 10 + digit;
        }
        return seconds.checked_mul(1_000_000_000)?.checked_add(nanos);
    }
    let seconds: f64 = std::str::from_utf8(field).ok()?.parse().ok()?;
    let nanos = seconds * 1e9;
    (nanos.is_finite() && nanos >= 0.0 && nanos < u64::MAX as f64).then_some(nanos as u64)
}

/// The op a text trace names: our own names ([`Op::name`]), the usual block-trace spellings
/// (`R`, `W`, `RS`, `WS`, `discard`, `unmap`) and SCSI opcodes written in hex as the
/// CloudPhysics CSV does (`28`/`88`/`08`/`a8` read, `2a`/`8a`/`0a`/`aa` write, `42` unmap).
pub(crate) fn parse_op_name(name: &[u8]) -> Option<Op> {
    let name = std::str::from_utf8(name).ok()?;
    if let Some(op) = Op::from_name(name) {
        return Some(op);
    }
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "r" | "rs" | "28" | "88" | "08" | "a8" => Some(Op::Read),
        "w" | "ws" | "2a" | "8a" | "0a" | "aa" => Some(Op::Write),
        "d" | "discard" | "unmap" | "42" => Some(Op::Trim),
        _ => None,
    }
}

/// The stable 64-bit hash that turns string keys (non-numeric ids, Twitter and Meta keys) into
/// numeric ones: FNV-1a over the bytes, then the SplitMix64 finaliser so that similar strings
/// spread over all bits. It never changes between versions, so keys stay comparable across runs
/// and tools.
pub fn stable_key_hash(bytes: &[u8]) -> u64 {
    const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = FNV_OFFSET_BASIS;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// A 64-bit id folded into a 32-bit tenant: unchanged when it fits, else both halves mixed.
pub(crate) fn fold_to_u32(value: u64) -> u32 {
    match u32::try_from(value) {
        Ok(small) => small,
        Err(_) => ((value >> 32) ^ value) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_parsing_rejects_junk_and_overflow() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"-1"), None);
        assert_eq!(parse_decimal(b"12a"), None);
        assert_eq!(parse_integer(b"0x1F"), Some(31));
        assert_eq!(parse_integer(b"0x"), None);
    }

    #[test]
    fn seconds_convert_exactly() {
        assert_eq!(
            parse_seconds_ns(b"1486512000.037142"),
            Some(1_486_512_000_037_142_000)
        );
        assert_eq!(parse_seconds_ns(b"3"), Some(3_000_000_000));
        assert_eq!(parse_seconds_ns(b".5"), Some(500_000_000));
        assert_eq!(parse_seconds_ns(b"1.0000000019"), Some(1_000_000_001));
        assert_eq!(parse_seconds_ns(b"1.5e3"), Some(1_500_000_000_000));
        assert_eq!(parse_seconds_ns(b"."), None);
        assert_eq!(parse_seconds_ns(b"-1"), None);
        assert_eq!(parse_seconds_ns(b"x"), None);
    }

    #[test]
    fn op_names_cover_block_spellings() {
        assert_eq!(parse_op_name(b"Read"), Some(Op::Read));
        assert_eq!(parse_op_name(b"W"), Some(Op::Write));
        assert_eq!(parse_op_name(b"2a"), Some(Op::Write));
        assert_eq!(parse_op_name(b"28"), Some(Op::Read));
        assert_eq!(parse_op_name(b"GET"), Some(Op::Get));
        assert_eq!(parse_op_name(b"frobnicate"), None);
    }

    #[test]
    fn stable_hash_matches_independent_computation() {
        // Values computed with a separate Python implementation of FNV-1a 64 followed by the
        // SplitMix64 finaliser (see the comment on `stable_key_hash`).
        assert_eq!(stable_key_hash(b""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(stable_key_hash(b"hello"), 0x16fe_05a1_c75b_cd0f);
        assert_eq!(stable_key_hash(b"q:q:1:8WTwl7huJeQ"), 0x8fca_6afa_bf11_5d21);
    }

    #[test]
    fn trimming_handles_crlf_and_blank() {
        assert_eq!(trim_ascii(b" 12\r"), b"12");
        assert_eq!(trim_ascii(b" \r"), b"");
    }
}
