//! What every parser of this crate returns, and the big-endian field reader they share
//! (proto.md "Conventions": every number is sent in network byte order).

use std::fmt;

/// What a parser found at the front of the bytes received so far (proto.md "Conventions":
/// every message states its own length, so the front of a stream can always be cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// The bytes end before the message does: call again once more have arrived (with these
    /// bytes and the new ones after them). Nothing was consumed.
    NeedMore,
    /// A whole message: `value`, and `consumed` bytes to drop from the front before the next
    /// call.
    Found { value: T, consumed: usize },
}

impl<T> Parsed<T> {
    /// The value and its byte count, or `None` for [`Parsed::NeedMore`].
    pub fn found(self) -> Option<(T, usize)> {
        match self {
            Parsed::NeedMore => None,
            Parsed::Found { value, consumed } => Some((value, consumed)),
        }
    }

    /// The same outcome with the value changed by `convert`.
    pub fn map<U>(self, convert: impl FnOnce(T) -> U) -> Parsed<U> {
        match self {
            Parsed::NeedMore => Parsed::NeedMore,
            Parsed::Found { value, consumed } => Parsed::Found {
                value: convert(value),
                consumed,
            },
        }
    }
}

/// Bytes that break the protocol (proto.md "Termination of the session during option
/// haggling", "Terminating the transmission phase": the peer may then hard-disconnect). Its
/// one-line message names the field and says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    /// The field, as proto.md names it: "request magic", "option reply length", ...
    pub field: &'static str,
    /// What was expected and what came instead.
    pub message: String,
}

impl ProtocolError {
    /// An error in `field`; `message` says what was expected and what came.
    pub fn new(field: &'static str, message: impl Into<String>) -> ProtocolError {
        ProtocolError {
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NBD {}: {}", self.field, self.message)
    }
}

impl std::error::Error for ProtocolError {}

impl From<ProtocolError> for std::io::Error {
    fn from(error: ProtocolError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, error)
    }
}

/// Reads big-endian fields one after another from the front of a byte slice; every read is
/// `None` once the slice runs out, which the parsers turn into [`Parsed::NeedMore`].
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { bytes, at: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn consumed(&self) -> usize {
        self.at
    }

    /// Bytes left after those read.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub(crate) fn bytes(&mut self, count: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(count)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_big_endian_and_stop_at_the_end() {
        let mut fields = Fields::new(&[0, 1, 0, 0, 0, 2, 9]);
        assert_eq!(fields.u16(), Some(1));
        assert_eq!(fields.u32(), Some(2));
        assert_eq!(fields.u16(), None, "one byte left is not a u16");
        assert_eq!((fields.consumed(), fields.remaining()), (6, 1));
        assert_eq!(fields.bytes(usize::MAX), None);
        assert_eq!(fields.bytes(1), Some(&[9][..]));
    }

    #[test]
    fn errors_are_one_line_naming_the_field() {
        let error = ProtocolError::new("request magic", "expected 0x25609513, found 0x0");
        assert_eq!(
            error.to_string(),
            "NBD request magic: expected 0x25609513, found 0x0"
        );
        let io: std::io::Error = error.into();
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            Parsed::Found {
                value: 2,
                consumed: 3
            }
            .map(|v| v * 2)
            .found(),
            Some((4, 3))
        );
        assert_eq!(Parsed::<u8>::NeedMore.found(), None);
    }
}
