//! The classic text commands: retrieval, storage, deletion, arithmetic, touch and the "other
//! commands" (memcached doc/protocol.txt, "Storage commands" through "Other commands").
//!
//! Word counts, `noreply` handling and error lines follow memcached 1.6.18 as observed: a wrong
//! number of words is "ERROR"; a command whose last word is `noreply` gets no reply even when
//! it is malformed.

use std::borrow::Cow;

use crate::block::{self, Block, Declared, BAD_DATA_CHUNK, OBJECT_TOO_LARGE};
use crate::lexer::{is_valid_key, parse_i64, parse_u32, parse_u64, WordIter, Words};
use crate::limits::Limits;
use crate::request::{Direction, ParseError, Parsed, Request, StoreMode, BAD_COMMAND_LINE, ERROR};

const INVALID_EXPTIME: &str = "CLIENT_ERROR invalid exptime argument";
const INVALID_DELTA: &str = "CLIENT_ERROR invalid numeric delta argument";
const DELETE_USAGE: &str = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";

/// A command line refused with `reply`, silently if the client asked for `noreply`.
struct Rejection {
    reply: &'static str,
    noreply: bool,
}

/// The rejection of an unknown command or a wrong number of words, which memcached always
/// answers.
fn unknown() -> Rejection {
    Rejection {
        reply: ERROR,
        noreply: false,
    }
}

/// Whether the last word is `noreply`, which is how memcached recognises it wherever it is
/// allowed (memcached doc/protocol.txt, "Storage commands").
fn ends_with_noreply(words: &[&[u8]]) -> bool {
    words.last().is_some_and(|word| *word == b"noreply")
}

/// Parses a classic command line named `name`, with `args` after the name, spanning
/// `line_bytes` bytes of `input` (followed there by the data block of a storage command).
pub(crate) fn parse<'a>(
    name: &[u8],
    args: WordIter<'a>,
    input: &'a [u8],
    line_bytes: usize,
    limits: &Limits,
) -> Result<Parsed<'a>, ParseError<'a>> {
    let request = match name {
        b"get" => retrieval(args, false, false, limits),
        b"gets" => retrieval(args, true, false, limits),
        b"gat" => retrieval(args, false, true, limits),
        b"gats" => retrieval(args, true, true, limits),
        b"set" => return storage(StoreMode::Set, args, input, line_bytes, limits),
        b"add" => return storage(StoreMode::Add, args, input, line_bytes, limits),
        b"replace" => return storage(StoreMode::Replace, args, input, line_bytes, limits),
        b"append" => return storage(StoreMode::Append, args, input, line_bytes, limits),
        b"prepend" => return storage(StoreMode::Prepend, args, input, line_bytes, limits),
        b"cas" => return storage(StoreMode::Cas, args, input, line_bytes, limits),
        b"delete" => delete(args, limits),
        b"incr" => arithmetic(Direction::Incr, args, limits),
        b"decr" => arithmetic(Direction::Decr, args, limits),
        b"touch" => touch(args, limits),
        b"flush_all" => flush_all(args),
        b"verbosity" => verbosity(args),
        b"stats" => Ok(stats(args)),
        // memcached ignores any words after these two.
        b"version" => Ok(Request::Version),
        b"quit" => Ok(Request::Quit),
        _ => Err(unknown()),
    };
    match request {
        Ok(request) => Ok(Parsed {
            request,
            consumed: line_bytes,
        }),
        Err(Rejection { reply, noreply }) => Err(ParseError::Invalid {
            reply,
            consumed: line_bytes,
            noreply,
        }),
    }
}

/// `get`/`gets <key>*`, or with `touch` `gat`/`gats <exptime> <key>*` (memcached
/// doc/protocol.txt, "Retrieval command", "Get And Touch").
fn retrieval<'a>(
    mut args: WordIter<'a>,
    with_cas: bool,
    touch: bool,
    limits: &Limits,
) -> Result<Request<'a>, Rejection> {
    let touch_exptime = match touch {
        true => {
            let exptime = args.next().ok_or_else(unknown)?;
            Some(parse_i64(exptime).ok_or(Rejection {
                reply: INVALID_EXPTIME,
                noreply: false,
            })?)
        }
        false => None,
    };
    let keys_text = args.remainder();
    let mut count = 0;
    for key in args {
        // One bad key refuses the whole line, as in memcached (which, in 1.6.18, also drops the
        // not yet sent replies to earlier pipelined requests; this does not).
        if !is_valid_key(key, limits.max_key_bytes) {
            return Err(Rejection {
                reply: BAD_COMMAND_LINE,
                noreply: false,
            });
        }
        count += 1;
    }
    // A get needs a key; memcached answers a gat without one with just "END".
    if count == 0 && !touch {
        return Err(unknown());
    }
    Ok(Request::Get {
        keys: Words::new(keys_text, count),
        with_cas,
        touch_exptime,
    })
}

/// `<mode> <key> <flags> <exptime> <bytes> [noreply]`, or for cas `... <bytes> <cas unique>
/// [noreply]`, and the data block (memcached doc/protocol.txt, "Storage commands").
fn storage<'a>(
    mode: StoreMode,
    args: WordIter<'a>,
    input: &'a [u8],
    line_bytes: usize,
    limits: &Limits,
) -> Result<Parsed<'a>, ParseError<'a>> {
    let required_words = if mode == StoreMode::Cas { 5 } else { 4 };
    let Some((words, count)) = args
        .collect_at_most::<6>()
        .filter(|&(_, count)| count == required_words || count == required_words + 1)
    else {
        return Err(ParseError::Invalid {
            reply: ERROR,
            consumed: line_bytes,
            noreply: false,
        });
    };
    let noreply = ends_with_noreply(&words[..count]);
    let bad_line = || ParseError::Invalid {
        reply: BAD_COMMAND_LINE,
        consumed: line_bytes,
        noreply,
    };
    let [key, client_flags, exptime, declared, cas_unique, _] = words;
    if !is_valid_key(key, limits.max_key_bytes) {
        return Err(bad_line());
    }
    let (Some(client_flags), Some(exptime)) = (parse_u32(client_flags), parse_i64(exptime)) else {
        return Err(bad_line());
    };
    let cas_unique = match mode {
        StoreMode::Cas => parse_u64(cas_unique).ok_or_else(bad_line)?,
        _ => 0,
    };
    let data_bytes = match block::classify(declared, limits) {
        Declared::Invalid => return Err(bad_line()),
        Declared::TooLarge { skip_bytes } => {
            return Err(ParseError::TooLarge {
                reply: OBJECT_TOO_LARGE,
                consumed: line_bytes,
                skip_bytes,
                noreply,
                unlink_key: (mode == StoreMode::Set).then_some(Cow::Borrowed(key)),
            })
        }
        Declared::Fits(bytes) => bytes,
    };
    match block::find(input, line_bytes, data_bytes) {
        Block::Incomplete => Err(ParseError::Incomplete),
        Block::BadTerminator { end } => Err(ParseError::Invalid {
            reply: BAD_DATA_CHUNK,
            consumed: end,
            noreply,
        }),
        Block::Complete { data, end } => Ok(Parsed {
            request: Request::Store {
                mode,
                key,
                client_flags,
                exptime,
                cas_unique,
                noreply,
                data,
            },
            consumed: end,
        }),
    }
}

/// `delete <key> [0] [noreply]` (memcached doc/protocol.txt, "Deletion"; the `0` is a legacy
/// hold time memcached still accepts).
fn delete<'a>(args: WordIter<'a>, limits: &Limits) -> Result<Request<'a>, Rejection> {
    let (words, count) = args
        .collect_at_most::<3>()
        .filter(|&(_, count)| count >= 1)
        .ok_or_else(unknown)?;
    let [key, hold_time, _] = words;
    let noreply = count > 1 && ends_with_noreply(&words[..count]);
    let hold_is_zero = hold_time == b"0";
    let well_formed = match count {
        1 => true,
        2 => hold_is_zero || noreply,
        _ => hold_is_zero && noreply,
    };
    if !well_formed {
        return Err(Rejection {
            reply: DELETE_USAGE,
            noreply,
        });
    }
    if !is_valid_key(key, limits.max_key_bytes) {
        return Err(Rejection {
            reply: BAD_COMMAND_LINE,
            noreply,
        });
    }
    Ok(Request::Delete { key, noreply })
}

/// `incr`/`decr <key> <value> [noreply]` (memcached doc/protocol.txt, "Increment/Decrement").
fn arithmetic<'a>(
    direction: Direction,
    args: WordIter<'a>,
    limits: &Limits,
) -> Result<Request<'a>, Rejection> {
    let (words, count) = args
        .collect_at_most::<3>()
        .filter(|&(_, count)| count >= 2)
        .ok_or_else(unknown)?;
    let noreply = ends_with_noreply(&words[..count]);
    let [key, delta, _] = words;
    if !is_valid_key(key, limits.max_key_bytes) {
        return Err(Rejection {
            reply: BAD_COMMAND_LINE,
            noreply,
        });
    }
    let delta = parse_u64(delta).ok_or(Rejection {
        reply: INVALID_DELTA,
        noreply,
    })?;
    Ok(Request::Arithmetic {
        key,
        direction,
        delta,
        noreply,
    })
}

/// `touch <key> <exptime> [noreply]` (memcached doc/protocol.txt, "Touch").
fn touch<'a>(args: WordIter<'a>, limits: &Limits) -> Result<Request<'a>, Rejection> {
    let (words, count) = args
        .collect_at_most::<3>()
        .filter(|&(_, count)| count >= 2)
        .ok_or_else(unknown)?;
    let noreply = ends_with_noreply(&words[..count]);
    let [key, exptime, _] = words;
    if !is_valid_key(key, limits.max_key_bytes) {
        return Err(Rejection {
            reply: BAD_COMMAND_LINE,
            noreply,
        });
    }
    let exptime = parse_i64(exptime).ok_or(Rejection {
        reply: INVALID_EXPTIME,
        noreply,
    })?;
    Ok(Request::Touch {
        key,
        exptime,
        noreply,
    })
}

/// `flush_all [delay] [noreply]` (memcached doc/protocol.txt, "Other commands"). memcached
/// ignores a second word that is not `noreply`.
fn flush_all<'a>(args: WordIter<'a>) -> Result<Request<'a>, Rejection> {
    let (words, count) = args.collect_at_most::<2>().ok_or_else(unknown)?;
    let noreply = ends_with_noreply(&words[..count]);
    let delay_seconds = match count > usize::from(noreply) {
        true => parse_i64(words[0]).ok_or(Rejection {
            reply: INVALID_EXPTIME,
            noreply,
        })?,
        false => 0,
    };
    Ok(Request::FlushAll {
        delay_seconds,
        noreply,
    })
}

/// `verbosity <level> [noreply]` (memcached doc/protocol.txt, "Other commands"). memcached
/// ignores a second word that is not `noreply`.
fn verbosity<'a>(args: WordIter<'a>) -> Result<Request<'a>, Rejection> {
    let (words, count) = args
        .collect_at_most::<2>()
        .filter(|&(_, count)| count >= 1)
        .ok_or_else(unknown)?;
    let noreply = ends_with_noreply(&words[..count]);
    let level = parse_u32(words[0]).ok_or(Rejection {
        reply: BAD_COMMAND_LINE,
        noreply,
    })?;
    Ok(Request::Verbosity { level, noreply })
}

/// `stats [<group> <args>*]` (memcached doc/protocol.txt, "Statistics"); which groups exist is
/// the server's business.
fn stats(mut args: WordIter<'_>) -> Request<'_> {
    let group = args.next();
    let arguments = args.remainder();
    Request::Stats {
        group,
        arguments: Words::new(arguments, args.count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// Parses `input` under default limits.
    fn parsed(input: &[u8]) -> Result<Parsed<'_>, ParseError<'_>> {
        parse(input, &Limits::default())
    }

    /// Parses `input` under default limits and returns the request.
    fn request(input: &[u8]) -> Request<'_> {
        match parsed(input) {
            Ok(parsed) => parsed.request,
            Err(error) => panic!("{input:?} refused: {error:?}"),
        }
    }

    /// Parses `input` under default limits and returns the refusal.
    fn refusal(input: &[u8]) -> (&'static str, usize, bool) {
        match parsed(input) {
            Err(ParseError::Invalid {
                reply,
                consumed,
                noreply,
            }) => (reply, consumed, noreply),
            other => panic!("{input:?} not refused: {other:?}"),
        }
    }

    /// A key of `length` bytes.
    fn long_key(length: usize) -> String {
        "k".repeat(length)
    }

    #[test]
    fn get_variants() {
        let Request::Get {
            keys,
            with_cas,
            touch_exptime,
        } = request(b"get a bb\r\n")
        else {
            panic!("not a get")
        };
        // All keys are kept in order; get neither returns cas nor touches.
        assert_eq!(keys.iter().collect::<Vec<_>>(), vec![&b"a"[..], b"bb"]);
        assert!(!with_cas && touch_exptime.is_none());
        // gets asks for cas uniques.
        assert!(matches!(
            request(b"gets a\r\n"),
            Request::Get { with_cas: true, .. }
        ));
        // gat and gats carry the new exptime, negative included.
        assert!(matches!(
            request(b"gats -1 a\r\n"),
            Request::Get {
                with_cas: true,
                touch_exptime: Some(-1),
                ..
            }
        ));
        // A gat may name no key (memcached answers "END").
        assert!(matches!(request(b"gat 10\r\n"), Request::Get { keys, .. } if keys.is_empty()));
    }

    #[test]
    fn get_refusals() {
        // get without keys is not a command.
        assert_eq!(refusal(b"get \r\n").0, "ERROR");
        assert_eq!(refusal(b"gat\r\n").0, "ERROR");
        // A key over 250 bytes anywhere in the line refuses it.
        let line = format!("get a {} b\r\n", long_key(251));
        assert_eq!(
            refusal(line.as_bytes()).0,
            "CLIENT_ERROR bad command line format"
        );
        // 250 bytes is fine.
        let line = format!("get {}\r\n", long_key(250));
        assert!(parsed(line.as_bytes()).is_ok());
        // A control character is not allowed in a key.
        assert_eq!(
            refusal(b"get a\tb\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
        // gat's exptime must be a number.
        assert_eq!(
            refusal(b"gat x a\r\n").0,
            "CLIENT_ERROR invalid exptime argument"
        );
    }

    #[test]
    fn storage_commands_parse_with_their_block() {
        let input = b"set k 5 -1 3 noreply\r\na\r\n\r\nget k\r\n";
        let parsed = parsed(input).unwrap();
        // The line, the value and its terminator are consumed.
        assert_eq!(parsed.consumed, input.len() - 7);
        // Every field is read; negative exptimes are allowed.
        assert_eq!(
            parsed.request,
            Request::Store {
                mode: StoreMode::Set,
                key: b"k",
                client_flags: 5,
                exptime: -1,
                cas_unique: 0,
                noreply: true,
                data: b"a\r\n"
            }
        );
        // Every mode has its name.
        for (name, mode) in [
            ("add", StoreMode::Add),
            ("replace", StoreMode::Replace),
            ("append", StoreMode::Append),
            ("prepend", StoreMode::Prepend),
        ] {
            let line = format!("{name} k 0 0 0\r\n\r\n");
            assert!(
                matches!(request(line.as_bytes()), Request::Store { mode: m, .. } if m == mode)
            );
        }
        // A fifth word that is not "noreply" is ignored, as memcached ignores it.
        assert!(matches!(
            request(b"set k 0 0 0 foo\r\n\r\n"),
            Request::Store { noreply: false, .. }
        ));
        // cas carries its unique.
        assert!(matches!(
            request(b"cas k 0 0 1 77 noreply\r\nx\r\n"),
            Request::Store {
                mode: StoreMode::Cas,
                cas_unique: 77,
                noreply: true,
                ..
            }
        ));
        // A '+' sign is accepted on numbers, as strtol accepts it.
        assert!(matches!(
            request(b"set k +1 +2 +0\r\n\r\n"),
            Request::Store {
                client_flags: 1,
                ..
            }
        ));
    }

    #[test]
    fn storage_waits_for_the_whole_block() {
        // The line alone, part of the value, or the value without its "\n" are not enough.
        for input in [
            &b"set k 0 0 2\r\n"[..],
            b"set k 0 0 2\r\nab",
            b"set k 0 0 2\r\nab\r",
        ] {
            assert_eq!(parsed(input), Err(ParseError::Incomplete));
        }
    }

    #[test]
    fn storage_word_counts() {
        // Too few or too many words are "ERROR", and only the line is dropped.
        assert_eq!(refusal(b"set k 0 0\r\n"), ("ERROR", 11, false));
        assert_eq!(refusal(b"set k 0 0 1 noreply x\r\n").0, "ERROR");
        assert_eq!(refusal(b"cas k 0 0 1\r\n").0, "ERROR");
        assert_eq!(refusal(b"cas k 0 0 1 2 noreply x\r\n").0, "ERROR");
    }

    #[test]
    fn storage_line_errors_leave_the_block_to_be_parsed() {
        // A bad number drops only the line: memcached then reads the value as a command.
        for input in [
            &b"set k -1 0 1\r\nx\r\n"[..],
            b"set k 4294967296 0 1\r\nx\r\n",
            b"set k 0 x 1\r\nx\r\n",
            b"set k 0 0 -1\r\nx\r\n",
            b"set k 0 0 2147483646\r\nx\r\n",
            b"cas k 0 0 1 -1\r\nx\r\n",
        ] {
            let (reply, consumed, _) = refusal(input);
            assert_eq!(reply, "CLIENT_ERROR bad command line format");
            assert_eq!(consumed, input.len() - 3);
        }
        // So does a key over 250 bytes.
        let input = format!("set {} 0 0 1\r\nx\r\n", long_key(251));
        assert_eq!(
            refusal(input.as_bytes()),
            (
                "CLIENT_ERROR bad command line format",
                input.len() - 3,
                false
            )
        );
    }

    #[test]
    fn bad_data_chunks_drop_the_value_and_two_bytes() {
        // The value and the two bytes in place of "\r\n" are dropped, as memcached reads them.
        assert_eq!(
            refusal(b"set k 0 0 1\r\nxyz\r\n"),
            ("CLIENT_ERROR bad data chunk", 16, false)
        );
        // A bare "\n" after the value is not a terminator.
        assert_eq!(refusal(b"set k 0 0 1\nx\nversion\r\n").1, 15);
    }

    #[test]
    fn too_large_values_are_skipped() {
        let limits = Limits {
            max_value_bytes: 10,
            ..Limits::default()
        };
        // The line is dropped and the value with its terminator skipped, not buffered.
        assert_eq!(
            parse(b"set k 0 0 11\r\n", &limits),
            Err(ParseError::TooLarge {
                reply: "SERVER_ERROR object too large for cache",
                consumed: 14,
                skip_bytes: 13,
                noreply: false,
                // A failed set leaves no stale value behind, as in memcached.
                unlink_key: Some(b"k"[..].into()),
            })
        );
        // noreply silences the error, as in memcached; a failed add leaves the old value.
        assert!(matches!(
            parse(b"add k 0 0 11 noreply\r\n", &limits),
            Err(ParseError::TooLarge {
                noreply: true,
                unlink_key: None,
                ..
            })
        ));
    }

    #[test]
    fn noreply_silences_errors() {
        // memcached sends nothing for a malformed command that ends in noreply.
        assert!(refusal(b"set k 0 0 x noreply\r\n").2);
        assert!(refusal(b"set k 0 0 1 noreply\r\nxyz\r\n").2);
        assert!(refusal(b"incr k x noreply\r\n").2);
        assert!(refusal(b"touch k noreply\r\n").2);
        assert!(refusal(b"flush_all x noreply\r\n").2);
        assert!(refusal(b"verbosity noreply\r\n").2);
        // But "ERROR" for a wrong word count is always sent.
        assert!(!refusal(b"incr k 1 noreply x\r\n").2);
    }

    #[test]
    fn delete_forms() {
        // The key alone, with noreply, or with the legacy 0 are accepted.
        assert_eq!(
            request(b"delete k\r\n"),
            Request::Delete {
                key: b"k",
                noreply: false
            }
        );
        assert_eq!(
            request(b"delete k noreply\r\n"),
            Request::Delete {
                key: b"k",
                noreply: true
            }
        );
        assert_eq!(
            request(b"delete k 0\r\n"),
            Request::Delete {
                key: b"k",
                noreply: false
            }
        );
        assert_eq!(
            request(b"delete k 0 noreply\r\n"),
            Request::Delete {
                key: b"k",
                noreply: true
            }
        );
        // A key named "noreply" is a key.
        assert_eq!(
            request(b"delete noreply\r\n"),
            Request::Delete {
                key: b"noreply",
                noreply: false
            }
        );
        // Anything else gets memcached's usage line.
        let usage = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
        assert_eq!(refusal(b"delete k 1\r\n").0, usage);
        assert_eq!(refusal(b"delete k x y\r\n").0, usage);
        // More words, or none, are "ERROR".
        assert_eq!(refusal(b"delete\r\n").0, "ERROR");
        assert_eq!(refusal(b"delete k 0 noreply x\r\n").0, "ERROR");
    }

    #[test]
    fn arithmetic_and_touch() {
        // incr and decr carry a 64-bit delta.
        assert_eq!(
            request(b"decr k 18446744073709551615 noreply\r\n"),
            Request::Arithmetic {
                key: b"k",
                direction: Direction::Decr,
                delta: u64::MAX,
                noreply: true
            }
        );
        // A delta that is negative, too big or not a number gets memcached's line.
        for input in [
            &b"incr k -1\r\n"[..],
            b"incr k 18446744073709551616\r\n",
            b"incr k 1x\r\n",
        ] {
            assert_eq!(
                refusal(input).0,
                "CLIENT_ERROR invalid numeric delta argument"
            );
        }
        // incr without a delta is not a command.
        assert_eq!(refusal(b"incr k\r\n").0, "ERROR");
        // touch carries an exptime.
        assert_eq!(
            request(b"touch k 30\r\n"),
            Request::Touch {
                key: b"k",
                exptime: 30,
                noreply: false
            }
        );
        // A bad one gets memcached's line.
        assert_eq!(
            refusal(b"touch k 1x\r\n").0,
            "CLIENT_ERROR invalid exptime argument"
        );
        // Keys are checked for both.
        let line = format!("touch {} 1\r\n", long_key(251));
        assert_eq!(
            refusal(line.as_bytes()).0,
            "CLIENT_ERROR bad command line format"
        );
    }

    #[test]
    fn other_commands() {
        // flush_all's delay defaults to 0 and may be negative.
        assert_eq!(
            request(b"flush_all\r\n"),
            Request::FlushAll {
                delay_seconds: 0,
                noreply: false
            }
        );
        assert_eq!(
            request(b"flush_all noreply\r\n"),
            Request::FlushAll {
                delay_seconds: 0,
                noreply: true
            }
        );
        assert_eq!(
            request(b"flush_all -1 noreply\r\n"),
            Request::FlushAll {
                delay_seconds: -1,
                noreply: true
            }
        );
        // A second word that is not noreply is ignored, as memcached ignores it.
        assert_eq!(
            request(b"flush_all 5 x\r\n"),
            Request::FlushAll {
                delay_seconds: 5,
                noreply: false
            }
        );
        assert_eq!(
            refusal(b"flush_all noreply x\r\n").0,
            "CLIENT_ERROR invalid exptime argument"
        );
        assert_eq!(refusal(b"flush_all 1 2 3\r\n").0, "ERROR");
        // verbosity needs an unsigned level.
        assert_eq!(
            request(b"verbosity 1 2\r\n"),
            Request::Verbosity {
                level: 1,
                noreply: false
            }
        );
        assert_eq!(
            refusal(b"verbosity -1\r\n").0,
            "CLIENT_ERROR bad command line format"
        );
        assert_eq!(refusal(b"verbosity\r\n").0, "ERROR");
        // version and quit ignore arguments.
        assert_eq!(request(b"version x\r\n"), Request::Version);
        assert_eq!(request(b"quit now\r\n"), Request::Quit);
    }

    #[test]
    fn stats_groups() {
        // Plain stats has no group.
        assert!(
            matches!(request(b"stats\r\n"), Request::Stats { group: None, arguments } if arguments.is_empty())
        );
        // The first word is the group, the rest its arguments.
        let Request::Stats { group, arguments } = request(b"stats cachedump 1 10\r\n") else {
            panic!("not stats")
        };
        assert_eq!(group, Some(&b"cachedump"[..]));
        assert_eq!(arguments.iter().collect::<Vec<_>>(), vec![&b"1"[..], b"10"]);
    }

    #[test]
    fn unknown_commands_are_errors() {
        // Command names are case-sensitive.
        assert_eq!(refusal(b"GET a\r\n"), ("ERROR", 7, false));
        // Unknown names are errors too.
        assert_eq!(refusal(b"slabs reassign 1 2\r\n").0, "ERROR");
    }
}
