//! The meta commands `mg`, `ms`, `md`, `ma`, `mn`, `me` and access to their flags
//! (memcached doc/protocol.txt, "Meta Commands" through "Meta No-Op").

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::base64;
use crate::block::{self, Block, Declared, BAD_DATA_CHUNK, OBJECT_TOO_LARGE};
use crate::lexer::{is_valid_key, parse_i64, parse_u32, parse_u64, WordIter};
use crate::limits::Limits;
use crate::request::{
    Direction, Meta, MetaCommand, ParseError, Parsed, Request, StoreMode, BAD_COMMAND_LINE, ERROR,
};

/// The flag letters accepted, for every meta command alike: memcached 1.6.18's, and from the
/// protocol.txt of later releases `x` (md: drop the value, keep the item) and `E` (the CAS
/// unique to give a modified item). Any other is refused (memcached's answer to "mg a y" is
/// "CLIENT_ERROR invalid flag").
pub const KNOWN_META_FLAGS: &[u8] = b"bcfhklqstuvxCDEFIJLMNOPRT";

/// The longest opaque (`O`) token memcached 1.6.18 echoes, in bytes after the letter.
pub const MAX_OPAQUE_BYTES: usize = 31;

const INVALID_FLAG: &str = "CLIENT_ERROR invalid flag";
const DUPLICATE_FLAG: &str = "CLIENT_ERROR duplicate flag";
/// `md` and `ma` answer every flag problem with this one line.
const INVALID_OR_DUPLICATE_FLAG: &str = "CLIENT_ERROR invalid or duplicate flag";
const BAD_MODE_LENGTH: &str = "CLIENT_ERROR incorrect length for M token";
const OPAQUE_TOO_LONG: &str = "CLIENT_ERROR opaque token too long";
const BAD_BASE64_KEY: &str = "CLIENT_ERROR error decoding key";

/// The bit of a flag letter in a set of letters, `None` for a byte that is not a letter.
const fn letter_bit(letter: u8) -> Option<u64> {
    match letter {
        b'a'..=b'z' => Some(1 << (letter - b'a')),
        b'A'..=b'Z' => Some(1 << (letter - b'A' + 26)),
        _ => None,
    }
}

/// The bit of the `b` flag (base64 key).
const BASE64_FLAG_BIT: u64 = 1 << (b'b' - b'a');

/// [`KNOWN_META_FLAGS`] as a set of letter bits.
const KNOWN_FLAG_BITS: u64 = {
    let mut bits = 0;
    let mut index = 0;
    while index < KNOWN_META_FLAGS.len() {
        if let Some(bit) = letter_bit(KNOWN_META_FLAGS[index]) {
            bits |= bit;
        }
        index += 1;
    }
    bits
};

/// A meta flag whose token is not what the server needs, or a mode the command lacks; `reply`
/// is memcached 1.6.18's answer (memcached doc/protocol.txt, "Meta Commands").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaError {
    /// The token of flag `letter` is missing or not a number of the wanted type.
    BadToken {
        /// The command the flag came with (`md` and `ma` word their errors differently).
        command: MetaCommand,
        /// The flag.
        letter: u8,
    },
    /// The `M` token names no mode of `command`.
    InvalidMode {
        /// The command the flag came with.
        command: MetaCommand,
    },
}

impl MetaError {
    /// The line memcached sends for this error, without "\r\n".
    pub fn reply(&self) -> &'static str {
        match *self {
            MetaError::BadToken {
                command: MetaCommand::Delete | MetaCommand::Arithmetic,
                ..
            } => INVALID_OR_DUPLICATE_FLAG,
            MetaError::BadToken { letter: b'D', .. } => "CLIENT_ERROR invalid numeric delta value",
            MetaError::BadToken { letter: b'J', .. } => {
                "CLIENT_ERROR invalid numeric initial value"
            }
            MetaError::BadToken { letter: b'F', .. } => BAD_COMMAND_LINE,
            MetaError::BadToken { .. } => "CLIENT_ERROR bad token in command line format",
            MetaError::InvalidMode {
                command: MetaCommand::Arithmetic,
            } => "CLIENT_ERROR invalid mode for ma M token",
            MetaError::InvalidMode { .. } => "CLIENT_ERROR invalid mode for ms M token",
        }
    }
}

impl fmt::Display for MetaError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.reply())
    }
}

impl std::error::Error for MetaError {}

/// The flags of a meta request, in the order the client sent them: return flags must be echoed
/// in that order (memcached doc/protocol.txt, "Meta Commands"). Each is a known letter, sent
/// once, optionally followed directly by a token (`T30`, `Oabc`, `MS`).
///
/// It keeps the line's text and a bit set of the letters, so no flag access allocates.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MetaFlags<'a> {
    text: &'a [u8],
    present: u64,
    command: MetaCommand,
}

impl<'a> MetaFlags<'a> {
    /// No flags, for `mn` and for an `me` without `b`.
    fn none(command: MetaCommand) -> Self {
        MetaFlags {
            text: &[],
            present: 0,
            command,
        }
    }

    /// Checks the letters and tokens of the flags of an `mg`, `ms`, `md` or `ma` as memcached
    /// does, decoding `wire_key` where `b` stands; `Err` is the reply.
    ///
    /// memcached checks every numeric token whatever the command, so this does too, and an `ms`
    /// with a bad token swallows its value as memcached's does. Numbers are checked in
    /// memcached's types, widened where memcached truncates: i64 for `N`, `T`, `R`; u32 for `F`
    /// (memcached truncates larger client flags; this refuses them); u64 for `C`, `D`, `E`, `J`.
    fn validate(
        command: MetaCommand,
        wire_key: &[u8],
        text: &'a [u8],
    ) -> Result<(Self, Option<Vec<u8>>), &'static str> {
        let flag_error = |specific| match command {
            MetaCommand::Delete | MetaCommand::Arithmetic => INVALID_OR_DUPLICATE_FLAG,
            _ => specific,
        };
        let mut present = 0;
        let mut token_error = None;
        let mut decoded_key = None;
        for word in WordIter::new(text) {
            let Some((&letter, token)) = word.split_first() else {
                continue;
            };
            let bit = letter_bit(letter)
                .filter(|bit| KNOWN_FLAG_BITS & bit != 0)
                .ok_or(flag_error(INVALID_FLAG))?;
            if present & bit != 0 {
                return Err(flag_error(DUPLICATE_FLAG));
            }
            present |= bit;
            let well_formed = match letter {
                b'M' if token.len() != 1 => {
                    token_error = Some(flag_error(BAD_MODE_LENGTH));
                    continue;
                }
                b'N' | b'T' | b'R' => parse_i64(token).is_some(),
                b'F' => parse_u32(token).is_some(),
                b'C' | b'D' | b'E' | b'J' => parse_u64(token).is_some(),
                // memcached decodes the key where `b` stands among the flags, so a bad key is
                // reported in that order too.
                b'b' => match decode_key(command, wire_key) {
                    Ok(key) => {
                        decoded_key = Some(key);
                        continue;
                    }
                    Err(reply) => {
                        token_error = Some(reply);
                        continue;
                    }
                },
                _ => true,
            };
            // memcached reports a bad letter anywhere before a bad token, and of bad tokens the
            // last one.
            if !well_formed {
                token_error = Some(MetaError::BadToken { command, letter }.reply());
            }
        }
        match token_error {
            Some(reply) => Err(reply),
            None => Ok((
                MetaFlags {
                    text,
                    present,
                    command,
                },
                decoded_key,
            )),
        }
    }

    /// The flags of an `me`: memcached only looks for a `b` right after the key and ignores
    /// anything else.
    fn for_debug(first_word: Option<&'a [u8]>) -> Self {
        match first_word {
            Some(word @ b"b") => MetaFlags {
                text: word,
                present: BASE64_FLAG_BIT,
                command: MetaCommand::Debug,
            },
            _ => MetaFlags::none(MetaCommand::Debug),
        }
    }

    /// Whether flag `letter` was sent.
    pub fn has(&self, letter: u8) -> bool {
        letter_bit(letter).is_some_and(|bit| self.present & bit != 0)
    }

    /// The token of flag `letter`; `None` if the flag was not sent or came without a token.
    pub fn token(&self, letter: u8) -> Option<&'a [u8]> {
        if !self.has(letter) {
            return None;
        }
        self.iter()
            .find(|&(sent, _)| sent == letter)
            .and_then(|(_, token)| token)
    }

    /// The token of flag `letter` as a number; `Ok(None)` if the flag was not sent, an error
    /// (memcached's "CLIENT_ERROR bad token in command line format" and kin) if it came without
    /// a number of type `T`. [`parse`](crate::parse) has already refused tokens that are not
    /// i64 for `N`, `T`, `R`, u32 for `F`, u64 for `C`, `D`, `E`, `J`, so those types never fail.
    pub fn number<T: FromStr>(&self, letter: u8) -> Result<Option<T>, MetaError> {
        if !self.has(letter) {
            return Ok(None);
        }
        let bad_token = MetaError::BadToken {
            command: self.command,
            letter,
        };
        self.token(letter)
            .and_then(|token| std::str::from_utf8(token).ok())
            .and_then(|text| text.parse().ok())
            .map(Some)
            .ok_or(bad_token)
    }

    /// The flags as sent, each letter with its token (`None` when it has none).
    pub fn iter(&self) -> impl Iterator<Item = (u8, Option<&'a [u8]>)> + 'a {
        WordIter::new(self.text).filter_map(|word| {
            let (&letter, token) = word.split_first()?;
            Some((letter, (!token.is_empty()).then_some(token)))
        })
    }

    /// The opaque token (`O`), which the reply must echo.
    pub fn opaque(&self) -> Option<&'a [u8]> {
        self.token(b'O')
    }

    /// Whether `q` asks to suppress the common-case reply ("HD" for `ms`/`md`, "EN" for `mg`).
    pub fn quiet(&self) -> bool {
        self.has(b'q')
    }

    /// The storage mode of an `ms` (`M` token E, A, P, R or S; set when absent). A cas
    /// comparison is asked for separately, by `C`, in any mode.
    pub fn store_mode(&self) -> Result<StoreMode, MetaError> {
        match self.token(b'M') {
            None | Some(b"S") => Ok(StoreMode::Set),
            Some(b"E") => Ok(StoreMode::Add),
            Some(b"A") => Ok(StoreMode::Append),
            Some(b"P") => Ok(StoreMode::Prepend),
            Some(b"R") => Ok(StoreMode::Replace),
            Some(_) => Err(MetaError::InvalidMode {
                command: self.command,
            }),
        }
    }

    /// The direction of an `ma` (`M` token I or +, D or -; increment when absent).
    pub fn direction(&self) -> Result<Direction, MetaError> {
        match self.token(b'M') {
            None | Some(b"I" | b"+") => Ok(Direction::Incr),
            Some(b"D" | b"-") => Ok(Direction::Decr),
            Some(_) => Err(MetaError::InvalidMode {
                command: self.command,
            }),
        }
    }
}

impl fmt::Debug for MetaFlags<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_list()
            .entries(WordIter::new(self.text).map(String::from_utf8_lossy))
            .finish()
    }
}

/// The base64 decoding of a key sent with `b`; `Err` is memcached's reply for `command`.
fn decode_key(command: MetaCommand, wire_key: &[u8]) -> Result<Vec<u8>, &'static str> {
    base64::decode(wire_key)
        .filter(|key| !key.is_empty())
        .ok_or(match command {
            MetaCommand::Delete | MetaCommand::Arithmetic => INVALID_OR_DUPLICATE_FLAG,
            MetaCommand::Debug => BAD_COMMAND_LINE,
            _ => BAD_BASE64_KEY,
        })
}

/// The key to act on: its base64 decoding if there is one, else `wire_key` itself, which must
/// then be a valid key; `Err` is the reply.
fn resolve_key<'a>(
    wire_key: &'a [u8],
    decoded_key: Option<Vec<u8>>,
    limits: &Limits,
) -> Result<Cow<'a, [u8]>, &'static str> {
    match decoded_key {
        Some(key) => Ok(Cow::Owned(key)),
        None if is_valid_key(wire_key, limits.max_key_bytes) => Ok(Cow::Borrowed(wire_key)),
        None => Err(BAD_COMMAND_LINE),
    }
}

/// Checks an `mg`, `ms`, `md` or `ma` after its key and length, in memcached's order: flag
/// letters, then tokens and the base64 key in flag order, the mode, the opaque's length. Returns the key to act on
/// and the flags, or the reply.
fn check_request<'a>(
    command: MetaCommand,
    wire_key: &'a [u8],
    flag_text: &'a [u8],
    limits: &Limits,
) -> Result<(Cow<'a, [u8]>, MetaFlags<'a>), &'static str> {
    let (flags, decoded_key) = MetaFlags::validate(command, wire_key, flag_text)?;
    let key = resolve_key(wire_key, decoded_key, limits)?;
    let mode = match command {
        MetaCommand::Set => flags.store_mode().map(drop),
        MetaCommand::Arithmetic => flags.direction().map(drop),
        _ => Ok(()),
    };
    mode.map_err(|error| error.reply())?;
    if flags
        .opaque()
        .is_some_and(|opaque| opaque.len() > MAX_OPAQUE_BYTES)
    {
        return Err(OPAQUE_TOO_LONG);
    }
    Ok((key, flags))
}

/// Parses the rest of a meta command line, whose name gave `command`, and for `ms` its data
/// block; the line spans `line_bytes` bytes of `input`.
pub(crate) fn parse<'a>(
    command: MetaCommand,
    mut args: WordIter<'a>,
    input: &'a [u8],
    line_bytes: usize,
    limits: &Limits,
) -> Result<Parsed<'a>, ParseError<'a>> {
    let invalid = |reply| ParseError::Invalid {
        reply,
        consumed: line_bytes,
        noreply: false,
    };
    let parsed = |key, wire_key, flags| Parsed {
        request: Request::Meta(Meta {
            command,
            key,
            wire_key,
            flags,
            data: &[],
        }),
        consumed: line_bytes,
    };
    let key_word = args.next();
    // memcached checks the key as sent, so a base64 key is limited by its encoded length.
    let checked_key = |key_word: &'a [u8]| match key_word.len() <= limits.max_key_bytes {
        true => Ok(key_word),
        false => Err(invalid(BAD_COMMAND_LINE)),
    };
    match command {
        // memcached ignores anything after "mn".
        MetaCommand::Noop => Ok(parsed(Cow::Borrowed(&[]), &[], MetaFlags::none(command))),
        MetaCommand::Debug => {
            let wire_key = checked_key(key_word.ok_or(invalid(BAD_COMMAND_LINE))?)?;
            let flags = MetaFlags::for_debug(args.next());
            let decoded_key = match flags.has(b'b') {
                true => Some(decode_key(command, wire_key).map_err(invalid)?),
                false => None,
            };
            let key = resolve_key(wire_key, decoded_key, limits).map_err(invalid)?;
            Ok(parsed(key, wire_key, flags))
        }
        MetaCommand::Set => {
            let wire_key = checked_key(key_word.ok_or(invalid(ERROR))?)?;
            let datalen = args.next().ok_or(invalid(BAD_COMMAND_LINE))?;
            parse_set(wire_key, datalen, args, input, line_bytes, limits)
        }
        MetaCommand::Get | MetaCommand::Delete | MetaCommand::Arithmetic => {
            let wire_key = checked_key(key_word.ok_or(invalid(ERROR))?)?;
            let (key, flags) =
                check_request(command, wire_key, args.remainder(), limits).map_err(invalid)?;
            Ok(parsed(key, wire_key, flags))
        }
    }
}

/// Parses `ms <key> <datalen> <flags>*\r\n<data>\r\n` (memcached doc/protocol.txt, "Meta Set")
/// from its datalen on; `flag_words` are the words after the datalen.
fn parse_set<'a>(
    wire_key: &'a [u8],
    datalen: &[u8],
    flag_words: WordIter<'a>,
    input: &'a [u8],
    line_bytes: usize,
    limits: &Limits,
) -> Result<Parsed<'a>, ParseError<'a>> {
    let invalid = |reply, consumed| ParseError::Invalid {
        reply,
        consumed,
        noreply: false,
    };
    // Up to here memcached does not know the block's length and so does not swallow it; from
    // here on every error swallows it.
    let data_bytes = match block::classify(datalen, limits) {
        Declared::Invalid => return Err(invalid(BAD_COMMAND_LINE, line_bytes)),
        Declared::TooLarge { skip_bytes } => {
            let (reply, unlink_key) =
                match check_request(MetaCommand::Set, wire_key, flag_words.remainder(), limits) {
                    Ok((key, _)) => (OBJECT_TOO_LARGE, Some(key)),
                    Err(reply) => (reply, None),
                };
            return Err(ParseError::TooLarge {
                reply,
                consumed: line_bytes,
                skip_bytes,
                noreply: false,
                unlink_key,
            });
        }
        Declared::Fits(bytes) => bytes,
    };
    let (data, end) = match block::find(input, line_bytes, data_bytes) {
        Block::Incomplete => return Err(ParseError::Incomplete),
        Block::BadTerminator { end } => (None, end),
        Block::Complete { data, end } => (Some(data), end),
    };
    let (key, flags) = check_request(MetaCommand::Set, wire_key, flag_words.remainder(), limits)
        .map_err(|reply| invalid(reply, end))?;
    let data = data.ok_or(invalid(BAD_DATA_CHUNK, end))?;
    Ok(Parsed {
        request: Request::Meta(Meta {
            command: MetaCommand::Set,
            key,
            wire_key,
            flags,
            data,
        }),
        consumed: end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// Parses `input` under default limits and returns its meta request.
    fn meta(input: &[u8]) -> Meta<'_> {
        match parse(input, &Limits::default()) {
            Ok(Parsed {
                request: Request::Meta(meta),
                ..
            }) => meta,
            other => panic!("not a meta request: {other:?}"),
        }
    }

    /// Parses `input` under default limits and returns the error reply and bytes consumed.
    fn rejected(input: &[u8]) -> (&'static str, usize) {
        match parse(input, &Limits::default()) {
            Err(ParseError::Invalid {
                reply, consumed, ..
            }) => (reply, consumed),
            other => panic!("not rejected: {other:?}"),
        }
    }

    #[test]
    fn meta_get_keeps_flags_in_order() {
        let request = meta(b"mg foo v Oab t T30 k\r\n");
        // The command and key are recognised.
        assert_eq!(request.command, MetaCommand::Get);
        assert_eq!(&*request.key, b"foo");
        // Flags come back in the order sent, with their tokens.
        let flags: Vec<_> = request.flags.iter().collect();
        let expected: Vec<(u8, Option<&[u8]>)> = vec![
            (b'v', None),
            (b'O', Some(b"ab")),
            (b't', None),
            (b'T', Some(b"30")),
            (b'k', None),
        ];
        assert_eq!(flags, expected);
        // Presence and tokens are found by letter.
        assert!(request.flags.has(b'v') && !request.flags.has(b'q'));
        assert_eq!(request.flags.opaque(), Some(&b"ab"[..]));
        assert_eq!(request.flags.number::<i64>(b'T'), Ok(Some(30)));
        // An absent flag is no number and no error.
        assert_eq!(request.flags.number::<i64>(b'N'), Ok(None));
        // No value rides on an mg.
        assert!(request.data.is_empty());
    }

    #[test]
    fn meta_set_carries_its_value() {
        let input = b"ms foo 5 T60 F7 q\r\nhe\r\no\r\nmn\r\n";
        let parsed = parse(input, &Limits::default()).unwrap();
        // The line and the block (with its terminator) are consumed, not the next request.
        assert_eq!(parsed.consumed, input.len() - 4);
        let Request::Meta(request) = parsed.request else {
            panic!("not meta")
        };
        // The value is the declared bytes, "\r\n" inside it included.
        assert_eq!(request.data, b"he\r\no");
        // Numeric flags parse to the types the server wants.
        assert_eq!(request.flags.number::<u32>(b'F'), Ok(Some(7)));
        // Quiet mode is just a flag.
        assert!(request.flags.quiet());
        // Without M the mode is set.
        assert_eq!(request.flags.store_mode(), Ok(StoreMode::Set));
    }

    #[test]
    fn meta_set_waits_for_its_block() {
        // Until the terminator has arrived nothing is parsed.
        assert_eq!(
            parse(b"ms foo 2\r\nhi\r", &Limits::default()),
            Err(ParseError::Incomplete)
        );
    }

    #[test]
    fn unknown_and_duplicate_flags_are_refused_as_memcached_does() {
        // A letter memcached does not know.
        assert_eq!(rejected(b"mg a y\r\n").0, "CLIENT_ERROR invalid flag");
        // A non-letter.
        assert_eq!(rejected(b"mg a 1\r\n").0, "CLIENT_ERROR invalid flag");
        // The same letter twice, even with different tokens.
        assert_eq!(rejected(b"mg a Oa Ob\r\n").0, "CLIENT_ERROR duplicate flag");
        // md and ma say both with one line.
        assert_eq!(
            rejected(b"md a y\r\n").0,
            "CLIENT_ERROR invalid or duplicate flag"
        );
        // x, which memcached 1.6.18 does not know yet, is a flag here.
        assert!(parse(b"md a x\r\n", &Limits::default()).is_ok());
        assert_eq!(
            rejected(b"ma a v v\r\n").0,
            "CLIENT_ERROR invalid or duplicate flag"
        );
    }

    #[test]
    fn token_shapes_are_checked() {
        // M takes exactly one character.
        assert_eq!(
            rejected(b"mg a Mxx\r\n").0,
            "CLIENT_ERROR incorrect length for M token"
        );
        // Opaque tokens hold at most 31 bytes.
        assert!(parse(
            b"mg a Oxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n",
            &Limits::default()
        )
        .is_ok());
        assert_eq!(
            rejected(b"mg a Oxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n").0,
            "CLIENT_ERROR opaque token too long"
        );
    }

    #[test]
    fn bad_numbers_get_memcached_replies() {
        // A flag without its number, or a negative cas.
        assert_eq!(
            rejected(b"mg a T\r\n").0,
            "CLIENT_ERROR bad token in command line format"
        );
        assert_eq!(
            rejected(b"mg a C-1\r\n").0,
            "CLIENT_ERROR bad token in command line format"
        );
        // Delta, initial value and client flags each have their own wording.
        assert_eq!(
            rejected(b"mg a Dx\r\n").0,
            "CLIENT_ERROR invalid numeric delta value"
        );
        assert_eq!(
            rejected(b"mg a Jx\r\n").0,
            "CLIENT_ERROR invalid numeric initial value"
        );
        assert_eq!(
            rejected(b"mg a F-1\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
        // Of several bad tokens the last is reported, as memcached reports it.
        assert_eq!(
            rejected(b"mg a Dx Jx\r\n").0,
            "CLIENT_ERROR invalid numeric initial value"
        );
        // A bad base64 key counts where its `b` stands.
        assert_eq!(
            rejected(b"mg YQ T b\r\n").0,
            "CLIENT_ERROR error decoding key"
        );
        assert_eq!(
            rejected(b"mg YQ b T\r\n").0,
            "CLIENT_ERROR bad token in command line format"
        );
        // A bad letter is reported before any bad token.
        assert_eq!(rejected(b"mg a Tx !\r\n").0, "CLIENT_ERROR invalid flag");
        // md and ma word them all alike.
        assert_eq!(
            rejected(b"ma a Nx\r\n").0,
            "CLIENT_ERROR invalid or duplicate flag"
        );
    }

    #[test]
    fn numbers_are_read_in_the_callers_type() {
        let flags = meta(b"mg a T99999999999 N-5\r\n").flags;
        // A checked token reads in memcached's type.
        assert_eq!(flags.number::<i64>(b'T'), Ok(Some(99_999_999_999)));
        // A narrower type may refuse it, with memcached's words for the flag.
        assert_eq!(
            flags.number::<i32>(b'T').map_err(|error| error.to_string()),
            Err("CLIENT_ERROR bad token in command line format".to_string())
        );
        assert!(flags.number::<u64>(b'N').is_err());
    }

    #[test]
    fn modes_are_checked_per_command() {
        // ms modes are upper-case letters.
        assert_eq!(
            meta(b"ms a 0 ME\r\n\r\n").flags.store_mode(),
            Ok(StoreMode::Add)
        );
        // Others are refused, and the value swallowed with the line.
        assert_eq!(
            rejected(b"ms a 0 Me\r\n\r\n"),
            ("CLIENT_ERROR invalid mode for ms M token", 13)
        );
        // ma modes include the + and - aliases.
        assert_eq!(meta(b"ma a M-\r\n").flags.direction(), Ok(Direction::Decr));
        assert_eq!(meta(b"ma a\r\n").flags.direction(), Ok(Direction::Incr));
        assert_eq!(
            rejected(b"ma a Md\r\n").0,
            "CLIENT_ERROR invalid mode for ma M token"
        );
        // mg and md ignore the mode, as memcached does.
        let flags = meta(b"mg a MX\r\n").flags;
        // Asking them for one anyway is an error.
        assert_eq!(
            flags.store_mode(),
            Err(MetaError::InvalidMode {
                command: MetaCommand::Get
            })
        );
    }

    #[test]
    fn base64_keys_are_decoded_and_echoable() {
        let request = meta(b"mg AAFiaW5hcnkga2V5 b k v\r\n");
        // The key to look up is the decoded binary.
        assert_eq!(&*request.key, b"\x00\x01binary key");
        // The form to echo with `k` is what was sent.
        assert_eq!(request.wire_key, b"AAFiaW5hcnkga2V5");
        // Invalid base64 is refused with memcached's words, per command.
        assert_eq!(
            rejected(b"mg YQ b\r\n").0,
            "CLIENT_ERROR error decoding key"
        );
        assert_eq!(
            rejected(b"md YQ b\r\n").0,
            "CLIENT_ERROR invalid or duplicate flag"
        );
        // Without `b`, base64-looking text is just a key.
        assert_eq!(&*meta(b"mg YQ== v\r\n").key, b"YQ==");
    }

    #[test]
    fn keys_are_limited_as_sent() {
        let mut line = b"mg ".to_vec();
        line.extend_from_slice(&[b'Q'; 252]);
        line.extend_from_slice(b" b\r\n");
        // A base64 key over 250 characters is refused even though it decodes shorter.
        assert_eq!(rejected(&line).0, "CLIENT_ERROR bad command line format");
        // A control character makes a plain key invalid.
        assert_eq!(
            rejected(b"mg a\x01b v\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
    }

    #[test]
    fn missing_keys_are_answered_as_memcached_does() {
        // mg, md and ma without a key are not commands.
        assert_eq!(rejected(b"mg\r\n").0, "ERROR");
        assert_eq!(rejected(b"ms\r\n").0, "ERROR");
        // me without a key, and ms without a length, are bad lines.
        assert_eq!(
            rejected(b"me\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
        assert_eq!(
            rejected(b"ms a\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
    }

    #[test]
    fn ms_length_errors_do_not_swallow_the_block() {
        // A non-numeric, negative or absurd length drops only the line, as in memcached.
        assert_eq!(
            rejected(b"ms a x\r\nx\r\n"),
            ("CLIENT_ERROR bad command line format", 8)
        );
        assert_eq!(rejected(b"ms a -1\r\n").1, 9);
        assert_eq!(rejected(b"ms a 2147483646\r\n").1, 17);
        // So does a key too long to be one.
        let mut line = b"ms ".to_vec();
        line.extend_from_slice(&[b'k'; 251]);
        line.extend_from_slice(b" 1\r\nx\r\n");
        assert_eq!(rejected(&line).1, line.len() - 3);
    }

    #[test]
    fn ms_flag_errors_swallow_the_block() {
        // A bad flag drops the value with the line, as memcached swallows it.
        assert_eq!(
            rejected(b"ms a 1 !\r\nx\r\nmn\r\n"),
            ("CLIENT_ERROR invalid flag", 13)
        );
        // Even when the value is not properly terminated: memcached swallows blindly.
        assert_eq!(
            rejected(b"ms a 1 b\r\nxyz"),
            ("CLIENT_ERROR error decoding key", 13)
        );
        // So does a bad token or mode, which memcached checks before reading the value.
        assert_eq!(
            rejected(b"ms a 1 Tx\r\nxyz"),
            ("CLIENT_ERROR bad token in command line format", 14)
        );
        // A bad terminator alone is a bad data chunk.
        assert_eq!(
            rejected(b"ms a 1\r\nxyz\r\n"),
            ("CLIENT_ERROR bad data chunk", 11)
        );
    }

    #[test]
    fn ms_too_large_is_skipped_unread() {
        let limits = Limits {
            max_value_bytes: 4,
            ..Limits::default()
        };
        // The line is dropped and the value skipped, not buffered.
        assert_eq!(
            parse(b"ms a 5 T1\r\n", &limits),
            Err(ParseError::TooLarge {
                reply: "SERVER_ERROR object too large for cache",
                consumed: 11,
                skip_bytes: 7,
                noreply: false,
                // memcached unlinks the old item whatever the mode.
                unlink_key: Some(b"a"[..].into()),
            })
        );
        // Quiet mode does not hide errors.
        assert!(matches!(
            parse(b"ms a 5 q\r\n", &limits),
            Err(ParseError::TooLarge { noreply: false, .. })
        ));
        // A flag error takes precedence, as memcached checks flags first.
        assert!(matches!(
            parse(b"ms a 5 !\r\n", &limits),
            Err(ParseError::TooLarge {
                reply: "CLIENT_ERROR invalid flag",
                unlink_key: None,
                ..
            })
        ));
    }

    #[test]
    fn noop_and_debug() {
        // mn ignores anything after it.
        assert_eq!(meta(b"mn x y\r\n").command, MetaCommand::Noop);
        // me decodes its key only with a `b` right after it.
        assert_eq!(&*meta(b"me YQ== b\r\n").key, b"a");
        assert_eq!(&*meta(b"me YQ== x b\r\n").key, b"YQ==");
        assert_eq!(&*meta(b"me YQ== bx\r\n").key, b"YQ==");
        // me's bad base64 is a bad line.
        assert_eq!(
            rejected(b"me a b\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
    }

    #[test]
    fn flags_debug_as_text() {
        // Debug output shows the flags as the client wrote them.
        assert_eq!(
            format!("{:?}", meta(b"mg a v Oxy\r\n").flags),
            r#"["v", "Oxy"]"#
        );
    }
}
