//! Properties of the parser over random input (memcached doc/protocol.txt): it never panics,
//! it gives the same answers however the input is split into reads, and every key it returns is
//! a protocol key.

use heterarchy_memcache::{parse, Limits, MetaCommand, ParseError, Request};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

/// Limits small enough that random input reaches every limit.
fn small_limits() -> Limits {
    Limits {
        max_key_bytes: 250,
        max_value_bytes: 16,
        max_line_bytes: 64,
        max_get_line_bytes: 96,
    }
}

fn any_limits() -> impl Strategy<Value = Limits> {
    prop_oneof![Just(Limits::default()), Just(small_limits())]
}

/// Whether `key` is a key as the protocol defines one.
fn is_protocol_key(key: &[u8]) -> bool {
    (1..=250).contains(&key.len()) && key.iter().all(|&byte| byte > b' ' && byte != 0x7f)
}

/// Asserts that every key of `request` is a protocol key.
fn assert_keys_valid(request: &Request<'_>) {
    match request {
        Request::Get { keys, .. } => keys.iter().for_each(|key| assert!(is_protocol_key(key))),
        Request::Store { key, .. }
        | Request::Delete { key, .. }
        | Request::Arithmetic { key, .. }
        | Request::Touch { key, .. } => assert!(is_protocol_key(key)),
        Request::Meta(meta) if meta.command != MetaCommand::Noop => {
            // The key as sent is a protocol key; under `b` its decoding may hold any bytes.
            assert!(is_protocol_key(meta.wire_key));
            assert!((1..=250).contains(&meta.key.len()));
        }
        _ => {}
    }
}

/// Serves `stream` as a server would, receiving it in two reads split at `split`, and returns
/// what each request came to, in order.
fn serve(stream: &[u8], split: usize, limits: &Limits) -> Vec<String> {
    let mut buffer = stream[..split].to_vec();
    let mut unread = &stream[split..];
    let mut skip_bytes = 0u64;
    let mut outcomes = Vec::new();
    loop {
        let skipped = usize::try_from(skip_bytes)
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        buffer.drain(..skipped);
        skip_bytes -= skipped as u64;
        let result = if skip_bytes > 0 {
            Err(ParseError::Incomplete)
        } else {
            parse(&buffer, limits)
        };
        let consumed = match result {
            Ok(parsed) => {
                assert_keys_valid(&parsed.request);
                outcomes.push(format!("{:?}", parsed.request));
                parsed.consumed
            }
            Err(ParseError::Incomplete) if !unread.is_empty() => {
                buffer.extend_from_slice(unread);
                unread = &[];
                continue;
            }
            Err(ParseError::Incomplete) => break,
            Err(ParseError::TooLarge {
                consumed,
                skip_bytes: skip,
                ..
            }) => {
                outcomes.push(format!("{result:?}"));
                skip_bytes = skip;
                consumed
            }
            Err(ParseError::Invalid { consumed, .. }) => {
                outcomes.push(format!("{result:?}"));
                consumed
            }
            Err(ParseError::Fatal { .. }) => {
                outcomes.push(format!("{result:?}"));
                break;
            }
        };
        // Every answer makes progress, so a server loop always ends.
        assert!(consumed > 0 && consumed <= buffer.len());
        buffer.drain(..consumed);
    }
    outcomes
}

/// A key byte: printable ASCII but space, or any byte with the high bit set.
fn key_byte() -> impl Strategy<Value = u8> {
    prop_oneof![0x21u8..=0x7e, 0x80u8..=0xff]
}

/// A key, usually short, sometimes at the length limit.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![4 => vec(key_byte(), 1..12), 1 => vec(key_byte(), 245..=250)]
}

/// A value, with "\r\n" and any other bytes inside.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..24), Just(b"\r\n".to_vec())]
}

/// Encodes `bytes` as padded standard base64, for `b` keys.
fn base64(bytes: &[u8]) -> Vec<u8> {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = Vec::new();
    for group in bytes.chunks(3) {
        let bits = group
            .iter()
            .fold(0u32, |bits, &byte| (bits << 8) | u32::from(byte))
            << (8 * (3 - group.len()));
        for index in 0..4 {
            encoded.push(match index <= group.len() {
                true => DIGITS[(bits >> (18 - 6 * index) & 63) as usize],
                false => b'=',
            });
        }
    }
    encoded
}

/// Joins words with single spaces and ends the line with "\r\n" or a bare "\n".
fn line(words: &[&[u8]], bare_newline: bool) -> Vec<u8> {
    let mut line = words.join(&b' ');
    line.extend_from_slice(if bare_newline { b"\n" } else { b"\r\n" });
    line
}

/// `noreply` or nothing.
fn noreply(yes: bool) -> &'static [u8] {
    if yes {
        b"noreply"
    } else {
        b""
    }
}

/// Drops the empty words left by absent optional arguments.
fn present<'a>(words: &[&'a [u8]]) -> Vec<&'a [u8]> {
    words
        .iter()
        .copied()
        .filter(|word| !word.is_empty())
        .collect()
}

/// Meta flags in a random order, each once.
fn meta_flags(choices: &'static [&'static str]) -> impl Strategy<Value = Vec<Vec<u8>>> {
    subsequence(choices, 0..=choices.len())
        .prop_shuffle()
        .prop_map(|flags| flags.iter().map(|flag| flag.as_bytes().to_vec()).collect())
}

/// One valid request of any command, as bytes.
fn valid_request() -> impl Strategy<Value = Vec<u8>> {
    let newline = any::<bool>();
    prop_oneof![
        (select(vec!["get", "gets"]), vec(key(), 1..4), newline).prop_map(|(name, keys, bare)| {
            let mut words: Vec<&[u8]> = vec![name.as_bytes()];
            words.extend(keys.iter().map(Vec::as_slice));
            line(&words, bare)
        }),
        (select(vec!["gat", "gats"]), any::<i32>(), vec(key(), 0..3)).prop_map(
            |(name, exptime, keys)| {
                let exptime = exptime.to_string();
                let mut words: Vec<&[u8]> = vec![name.as_bytes(), exptime.as_bytes()];
                words.extend(keys.iter().map(Vec::as_slice));
                line(&words, false)
            }
        ),
        (
            select(vec!["set", "add", "replace", "append", "prepend", "cas"]),
            key(),
            any::<u32>(),
            any::<i32>(),
            any::<u64>(),
            value(),
            any::<bool>(),
        )
            .prop_map(|(name, key, flags, exptime, cas, value, quiet)| {
                let numbers = [
                    flags.to_string(),
                    exptime.to_string(),
                    value.len().to_string(),
                ];
                let cas = if name == "cas" {
                    cas.to_string()
                } else {
                    String::new()
                };
                let mut request = line(
                    &present(&[
                        name.as_bytes(),
                        &key,
                        numbers[0].as_bytes(),
                        numbers[1].as_bytes(),
                        numbers[2].as_bytes(),
                        cas.as_bytes(),
                        noreply(quiet),
                    ]),
                    false,
                );
                request.extend_from_slice(&value);
                request.extend_from_slice(b"\r\n");
                request
            }),
        (key(), any::<bool>())
            .prop_map(|(key, quiet)| line(&present(&[b"delete", &key, noreply(quiet)]), false)),
        (
            select(vec!["incr", "decr"]),
            key(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(|(name, key, delta, quiet)| {
                let delta = delta.to_string();
                line(
                    &present(&[name.as_bytes(), &key, delta.as_bytes(), noreply(quiet)]),
                    false,
                )
            }),
        (key(), any::<i64>(), any::<bool>()).prop_map(|(key, exptime, quiet)| {
            let exptime = exptime.to_string();
            line(
                &present(&[b"touch", &key, exptime.as_bytes(), noreply(quiet)]),
                false,
            )
        }),
        (proptest::option::of(any::<i64>()), any::<bool>()).prop_map(|(delay, quiet)| {
            let delay = delay.map(|delay| delay.to_string()).unwrap_or_default();
            line(
                &present(&[b"flush_all", delay.as_bytes(), noreply(quiet)]),
                false,
            )
        }),
        (any::<u32>(), any::<bool>()).prop_map(|(level, quiet)| {
            let level = level.to_string();
            line(
                &present(&[b"verbosity", level.as_bytes(), noreply(quiet)]),
                false,
            )
        }),
        select(vec![
            "stats",
            "stats items",
            "stats cachedump 1 2",
            "version",
            "quit",
            "mn"
        ])
        .prop_map(|text| line(&[text.as_bytes()], false)),
        (
            select(vec!["mg", "md", "ma"]),
            key(),
            meta_flags(&["v", "k", "c", "f", "t", "s", "q", "h", "Oop", "T30", "N10", "MI", "P"])
        )
            .prop_map(|(name, key, flags)| {
                let mut words: Vec<&[u8]> = vec![name.as_bytes(), &key];
                words.extend(flags.iter().map(Vec::as_slice));
                line(&words, false)
            }),
        (
            key(),
            value(),
            meta_flags(&["T60", "F5", "q", "k", "c", "I", "C12", "MS", "Oab"])
        )
            .prop_map(|(key, value, flags)| {
                let datalen = value.len().to_string();
                let mut words: Vec<&[u8]> = vec![b"ms", &key, datalen.as_bytes()];
                words.extend(flags.iter().map(Vec::as_slice));
                let mut request = line(&words, false);
                request.extend_from_slice(&value);
                request.extend_from_slice(b"\r\n");
                request
            }),
        (select(vec!["mg", "me"]), vec(any::<u8>(), 1..=186)).prop_map(|(name, binary_key)| {
            line(&[name.as_bytes(), &base64(&binary_key), b"b"], false)
        }),
    ]
}

/// Input that looks like commands: protocol words, numbers and junk, with separators.
fn command_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    let word = prop_oneof![
        select(vec![
            "get",
            "gets",
            "gat",
            "gats",
            "set",
            "add",
            "cas",
            "append",
            "delete",
            "incr",
            "decr",
            "touch",
            "flush_all",
            "verbosity",
            "stats",
            "version",
            "quit",
            "mg",
            "ms",
            "md",
            "ma",
            "mn",
            "me",
            "noreply",
            "0",
            "1",
            "5",
            "-1",
            "+3",
            "2147483645",
            "2147483646",
            "18446744073709551616",
            "b",
            "v",
            "q",
            "k",
            "T1",
            "Oab",
            "MS",
            "Mxx",
            "YQ==",
            "YQ",
            "x",
        ])
        .prop_map(|word| word.as_bytes().to_vec()),
        vec(any::<u8>(), 0..6),
        vec(key_byte(), 248..=252),
    ];
    let separator = select(vec![&b" "[..], b"  ", b"\r\n", b"\n", b"\r"]);
    vec((word, separator), 0..24).prop_map(|pieces| {
        pieces
            .into_iter()
            .flat_map(|(word, separator)| word.into_iter().chain(separator.iter().copied()))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random bytes never panic the parser, and a read split changes no answer.
    #[test]
    fn random_bytes(bytes in vec(any::<u8>(), 0..300), split in any::<prop::sample::Index>(), limits in any_limits()) {
        let split = split.index(bytes.len() + 1);
        prop_assert_eq!(serve(&bytes, split, &limits), serve(&bytes, bytes.len(), &limits));
    }

    /// Nearly-valid commands never panic the parser, and a read split changes no answer.
    #[test]
    fn command_like_input(bytes in command_like_bytes(), split in any::<prop::sample::Index>(), limits in any_limits()) {
        let split = split.index(bytes.len() + 1);
        prop_assert_eq!(serve(&bytes, split, &limits), serve(&bytes, bytes.len(), &limits));
    }

    /// Every valid request parses, whole, after answering Incomplete for each of its prefixes.
    #[test]
    fn valid_requests_parse_after_any_prefix(request in valid_request()) {
        let limits = Limits::default();
        for cut in 0..request.len() {
            prop_assert_eq!(parse(&request[..cut], &limits), Err(ParseError::Incomplete));
        }
        let parsed = parse(&request, &limits);
        prop_assert!(parsed.is_ok(), "{:?} refused: {:?}", String::from_utf8_lossy(&request), parsed);
        if let Ok(parsed) = parsed {
            prop_assert_eq!(parsed.consumed, request.len());
            assert_keys_valid(&parsed.request);
        }
    }

    /// A pipeline of valid requests gives the same requests however it is split into reads.
    #[test]
    fn pipelines_split_anywhere(requests in vec(valid_request(), 1..6), split in any::<prop::sample::Index>(), limits in any_limits()) {
        let stream = requests.concat();
        let split = split.index(stream.len() + 1);
        let whole = serve(&stream, stream.len(), &limits);
        if limits == Limits::default() {
            // Under default limits every request is served as itself.
            prop_assert_eq!(whole.len(), requests.len());
            prop_assert!(whole.iter().all(|outcome| !outcome.starts_with("Err")));
        }
        prop_assert_eq!(serve(&stream, split, &limits), whole);
    }
}
