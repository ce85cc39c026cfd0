//! Properties of every parser and state machine over random input (proto.md, all of it): no
//! input makes one panic, every message found consumes at least one byte and no more than it
//! was given, how the input is split into reads never changes what is found, and whatever one
//! side composes the other parses back to the same values.

mod support;

use heterarchy_nbd::constants::*;
use heterarchy_nbd::handshake::{
    compose_info_request, compose_option, compose_option_reply, compose_server_entry, greeting,
    parse_greeting, parse_info_request, parse_option_header, parse_option_reply,
    parse_server_entry, Info, OptionHeader, OptionReply,
};
use heterarchy_nbd::transmission::{
    compose_error, compose_none, compose_offset_data, compose_offset_hole, compose_simple_reply,
    parse_chunk_payload, parse_reply, parse_reply_header,
};
use heterarchy_nbd::{
    BlockSizes, ChunkHeader, ChunkPayload, ClientEvent, ClientHandshake, Command, Parsed,
    ProtocolError, Reply, Request, ServerEvent, ServerHandshake,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use support::catalog;

// ---- Feeding input in pieces ----

/// `bytes` cut at `cuts` (each taken as a position in it).
fn pieces<'a>(bytes: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.windows(2).map(|pair| &bytes[pair[0]..pair[1]]).collect()
}

/// Runs a parsing loop over `pieces`, appended to a buffer one at a time whenever `step` needs
/// more, and returns what it came to: `describe(value)` of every message found (those it maps
/// to `None` left out), then the error or the bytes left over when the input ran out.
fn drive<T>(
    pieces: &[&[u8]],
    mut step: impl FnMut(&[u8]) -> Result<Parsed<T>, ProtocolError>,
    mut describe: impl FnMut(T) -> Option<String>,
) -> Vec<String> {
    let mut buffer = Vec::new();
    let mut outcomes = Vec::new();
    let mut next = 0;
    loop {
        match step(&buffer) {
            Ok(Parsed::NeedMore) => {
                let Some(piece) = pieces.get(next) else {
                    outcomes.push(format!("needs more, holding {} bytes", buffer.len()));
                    return outcomes;
                };
                buffer.extend_from_slice(piece);
                next += 1;
            }
            Ok(Parsed::Found { value, consumed }) => {
                assert!(
                    (1..=buffer.len()).contains(&consumed),
                    "consumed {consumed} of {} bytes",
                    buffer.len()
                );
                buffer.drain(..consumed);
                outcomes.extend(describe(value));
            }
            Err(error) => {
                assert!(!error.to_string().contains('\n'), "not one line: {error}");
                outcomes.push(format!("error: {error}"));
                return outcomes;
            }
        }
    }
}

// ---- Mutating valid input ----

#[derive(Debug, Clone)]
enum Mutation {
    Set(Index, u8),
    Insert(Index, Vec<u8>),
    Remove(Index, usize),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set(at, byte)),
        1 => (any::<Index>(), vec(any::<u8>(), 1..8)).prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        1 => (any::<Index>(), 1usize..8).prop_map(|(at, count)| Mutation::Remove(at, count)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// `valid`, then up to three mutations of it (none half the time, so valid input is well
/// covered too).
fn mutated(valid: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (valid, prop_oneof![Just(Vec::new()), vec(mutation(), 1..4)]).prop_map(
        |(mut bytes, mutations)| {
            for mutation in mutations {
                let len = bytes.len();
                match mutation {
                    Mutation::Set(at, byte) if len > 0 => bytes[at.index(len)] = byte,
                    Mutation::Set(..) => {}
                    Mutation::Insert(at, inserted) => {
                        let at = at.index(len + 1);
                        bytes.splice(at..at, inserted);
                    }
                    Mutation::Remove(at, count) => {
                        let at = at.index(len + 1);
                        bytes.drain(at..(at + count).min(len));
                    }
                    Mutation::Truncate(at) => bytes.truncate(at.index(len + 1)),
                }
            }
            bytes
        },
    )
}

// ---- The server's handshake ----

fn option(option: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    compose_option(&mut bytes, option, data);
    bytes
}

fn export_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"".to_vec()),
        Just(b"vol".to_vec()),
        Just(b"scratch".to_vec()),
        vec(any::<u8>(), 0..8),
    ]
}

/// One option as a client sends it: known options with good or bad data, unknown options,
/// and (rarely) one too large to buffer.
fn client_option() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => export_name().prop_map(|name| option(OPT_EXPORT_NAME, &name)),
        1 => Just(option(OPT_ABORT, &[])),
        2 => vec(any::<u8>(), 0..3).prop_map(|data| option(OPT_LIST, &data)),
        6 => (prop_oneof![Just(OPT_INFO), Just(OPT_GO)], export_name(), vec(0u16..5, 0..4)).prop_map(
            |(kind, name, requests)| {
                let mut data = Vec::new();
                compose_info_request(&mut data, &name, &requests);
                option(kind, &data)
            }
        ),
        2 => vec(any::<u8>(), 0..2).prop_map(|data| option(OPT_STRUCTURED_REPLY, &data)),
        2 => (any::<u32>(), vec(any::<u8>(), 0..16)).prop_map(|(kind, data)| option(kind, &data)),
        1 => (1u32..64).prop_map(|extra| option(OPT_GO, &vec![0; (MAX_OPTION_BYTES + extra) as usize])),
    ]
}

/// What a client sends: its flags (known ones mostly), then options.
fn client_transcript() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![4 => 0u32..4, 1 => any::<u32>()],
        vec(client_option(), 0..6),
    )
        .prop_map(|(flags, options)| {
            let mut bytes = flags.to_be_bytes().to_vec();
            options
                .iter()
                .for_each(|option| bytes.extend_from_slice(option));
            bytes
        })
}

/// A server handshake's outcomes over `pieces`: its events but `Negotiating` (whose count
/// depends on the pieces when oversized data is skipped), its output, and how it ended.
fn serve_handshake(pieces: &[&[u8]]) -> (Vec<String>, Vec<u8>) {
    let catalog = catalog();
    let mut handshake = ServerHandshake::new();
    let mut output = Vec::new();
    let outcomes = drive(
        pieces,
        |input| handshake.receive(input, &catalog[..], &mut output),
        |event| (event != ServerEvent::Negotiating).then(|| format!("{event:?}")),
    );
    (outcomes, output)
}

// ---- The client's handshake ----

fn option_reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    compose_option_reply(&mut bytes, option, reply_type, data);
    bytes
}

fn info_item() -> impl Strategy<Value = Vec<u8>> {
    let item = prop_oneof![
        (any::<u64>(), any::<u16>()).prop_map(|(size_bytes, transmission_flags)| Info::Export {
            size_bytes,
            transmission_flags
        }
        .into_bytes()),
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(minimum, preferred, maximum)| {
            Info::BlockSize(BlockSizes {
                minimum,
                preferred,
                maximum,
            })
            .into_bytes()
        }),
        vec(any::<u8>(), 0..8).prop_map(|name| Info::Name(&name).into_bytes()),
        vec(any::<u8>(), 0..16),
    ];
    item
}

/// Composes an item into the bytes of an `NBD_REP_INFO` reply's data.
trait IntoBytes {
    fn into_bytes(self) -> Vec<u8>;
}

impl IntoBytes for Info<'_> {
    fn into_bytes(self) -> Vec<u8> {
        let mut data = Vec::new();
        self.compose(&mut data);
        data
    }
}

/// One message as a server sends it in the handshake, to any option a client of this crate
/// sends (or another).
fn server_message() -> impl Strategy<Value = Vec<u8>> {
    let option = prop_oneof![
        Just(OPT_STRUCTURED_REPLY),
        Just(OPT_GO),
        Just(OPT_LIST),
        any::<u32>()
    ]
    .boxed();
    prop_oneof![
        4 => (option.clone(), info_item()).prop_map(|(kind, data)| option_reply(kind, REP_INFO, &data)),
        3 => option.clone().prop_map(|kind| option_reply(kind, REP_ACK, &[])),
        2 => (option.clone(), vec(any::<u8>(), 0..8)).prop_map(|(kind, name)| {
            let mut entry = Vec::new();
            compose_server_entry(&mut entry, &name);
            option_reply(kind, REP_SERVER, &entry)
        }),
        2 => (
            option,
            prop_oneof![Just(REP_ERR_UNSUP), Just(REP_ERR_UNKNOWN), any::<u32>()],
            vec(any::<u8>(), 0..8)
        )
            .prop_map(|(kind, reply_type, message)| option_reply(kind, reply_type, &message)),
        1 => (any::<u64>(), any::<u16>(), any::<bool>()).prop_map(|(size, flags, zeroes)| {
            let mut bytes = size.to_be_bytes().to_vec();
            bytes.extend_from_slice(&flags.to_be_bytes());
            if zeroes {
                bytes.extend_from_slice(&[0; EXPORT_NAME_ZEROES_BYTES]);
            }
            bytes
        }),
    ]
}

/// What a server sends: the greeting, then messages.
fn server_transcript() -> impl Strategy<Value = Vec<u8>> {
    (0u16..4, vec(server_message(), 0..8)).prop_map(|(flags, messages)| {
        let mut bytes = greeting(flags).to_vec();
        messages
            .iter()
            .for_each(|message| bytes.extend_from_slice(message));
        bytes
    })
}

fn client_goal() -> impl Strategy<Value = ClientHandshake> {
    prop_oneof![
        ("[a-z]{0,3}", any::<bool>())
            .prop_map(|(name, structured)| ClientHandshake::go(&name, structured)),
        Just(ClientHandshake::list()),
    ]
}

fn client_handshake(mut handshake: ClientHandshake, pieces: &[&[u8]]) -> (Vec<String>, Vec<u8>) {
    let mut output = Vec::new();
    let outcomes = drive(
        pieces,
        |input| handshake.receive(input, &mut output),
        |event| (event != ClientEvent::Negotiating).then(|| format!("{event:?}")),
    );
    (outcomes, output)
}

// ---- Transmission streams ----

/// A request header as a client sends it, with its payload.
fn request_message() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u16>(),
        0u16..9,
        any::<u64>(),
        any::<u64>(),
        prop_oneof![0u32..32, any::<u32>()],
    )
        .prop_map(|(flags, command, cookie, offset, length)| {
            let request = Request {
                flags,
                command: Command::from_wire(command),
                cookie,
                offset,
                length,
            };
            let mut bytes = request.encode().to_vec();
            // A payload, unless it would be gigabytes (then the stream ends inside it).
            if request.payload_bytes() < 64 {
                bytes.extend_from_slice(&vec![0x5a; request.payload_bytes()]);
            }
            bytes
        })
}

/// A server's request loop: the header, then its payload, skipped.
fn serve_requests(pieces: &[&[u8]]) -> Vec<String> {
    drive(
        pieces,
        |input| {
            Ok(match Request::parse(input)? {
                Parsed::Found { value, consumed }
                    if input.len() >= consumed + value.payload_bytes() =>
                {
                    Parsed::Found {
                        value,
                        consumed: consumed + value.payload_bytes(),
                    }
                }
                _ => Parsed::NeedMore,
            })
        },
        |request| Some(format!("{request:?}")),
    )
}

/// The READ length a client remembers for each cookie: 0 and 1 are reads, 2 is another
/// request, 3 is not in flight.
fn read_length(cookie: u64) -> Option<u32> {
    match cookie {
        0 => Some(5),
        1 => Some(0),
        2 => Some(0),
        _ => None,
    }
}

/// One reply message as a server sends it, to cookies 0 to 3.
fn reply_message() -> impl Strategy<Value = Vec<u8>> {
    let cookie = 0u64..4;
    prop_oneof![
        (cookie.clone(), prop_oneof![Just(0u32), any::<u32>()]).prop_map(|(cookie, error)| {
            let mut bytes = Vec::new();
            compose_simple_reply(&mut bytes, cookie, error);
            if error == 0 {
                bytes.extend_from_slice(&vec![7; read_length(cookie).unwrap_or(0) as usize]);
            }
            bytes
        }),
        (
            cookie.clone(),
            any::<u64>(),
            vec(any::<u8>(), 1..16),
            any::<bool>()
        )
            .prop_map(|(cookie, offset, data, done)| {
                let mut bytes = Vec::new();
                compose_offset_data(&mut bytes, cookie, offset, &data, done);
                bytes
            }),
        (cookie.clone(), any::<u64>(), 1u32.., any::<bool>()).prop_map(
            |(cookie, offset, hole, done)| {
                let mut bytes = Vec::new();
                compose_offset_hole(&mut bytes, cookie, offset, hole, done);
                bytes
            }
        ),
        (cookie.clone(), 1u32.., "\\PC{0,12}", any::<bool>()).prop_map(
            |(cookie, error, message, done)| {
                let mut bytes = Vec::new();
                compose_error(&mut bytes, cookie, error, &message, done);
                bytes
            }
        ),
        cookie.prop_map(|cookie| {
            let mut bytes = Vec::new();
            compose_none(&mut bytes, cookie);
            bytes
        }),
    ]
}

fn concatenated(messages: Vec<Vec<u8>>) -> Vec<u8> {
    messages.concat()
}

fn receive_replies(pieces: &[&[u8]]) -> Vec<String> {
    drive(
        pieces,
        // A reply borrows the buffer, which the loop then drains: describe it at once.
        |input| {
            parse_reply(input, read_length).map(|parsed| parsed.map(|reply| format!("{reply:?}")))
        },
        Some,
    )
}

fn receive_reply_headers(pieces: &[&[u8]]) -> Vec<String> {
    drive(pieces, parse_reply_header, |header| {
        Some(format!("{header:?}"))
    })
}

fn cuts() -> impl Strategy<Value = Vec<Index>> {
    vec(any::<Index>(), 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_server_handshake_finds_the_same_whatever_the_pieces(
        input in mutated(client_transcript()),
        cuts in cuts(),
    ) {
        let whole = serve_handshake(&[&input]);
        prop_assert_eq!(serve_handshake(&pieces(&input, &cuts)), whole);
    }

    #[test]
    fn the_client_handshake_finds_the_same_whatever_the_pieces(
        handshake in client_goal(),
        input in mutated(server_transcript()),
        cuts in cuts(),
    ) {
        let whole = client_handshake(handshake.clone(), &[&input]);
        prop_assert_eq!(client_handshake(handshake, &pieces(&input, &cuts)), whole);
    }

    #[test]
    fn requests_are_found_the_same_whatever_the_pieces(
        input in mutated(vec(request_message(), 0..6).prop_map(concatenated)),
        cuts in cuts(),
    ) {
        prop_assert_eq!(serve_requests(&pieces(&input, &cuts)), serve_requests(&[&input]));
    }

    #[test]
    fn replies_are_found_the_same_whatever_the_pieces(
        input in mutated(vec(reply_message(), 0..6).prop_map(concatenated)),
        cuts in cuts(),
    ) {
        let pieces = pieces(&input, &cuts);
        prop_assert_eq!(receive_replies(&pieces), receive_replies(&[&input]));
        prop_assert_eq!(receive_reply_headers(&pieces), receive_reply_headers(&[&input]));
    }

    #[test]
    fn every_parser_survives_random_bytes(
        bytes in vec(any::<u8>(), 0..96),
        flags in any::<u16>(),
        chunk_type in prop_oneof![0u16..3, Just(REPLY_TYPE_ERROR), Just(REPLY_TYPE_ERROR_OFFSET), any::<u16>()],
        handshake in client_goal(),
    ) {
        let within = |parsed: Result<Parsed<_>, ProtocolError>| match parsed {
            Ok(Parsed::Found { consumed, .. }) => (1..=bytes.len()).contains(&consumed),
            _ => true,
        };
        prop_assert!(within(Request::parse(&bytes).map(|p| p.map(drop))));
        prop_assert!(within(parse_reply_header(&bytes).map(|p| p.map(drop))));
        prop_assert!(within(parse_reply(&bytes, read_length).map(|p| p.map(drop))));
        prop_assert!(within(parse_greeting(&bytes).map(|p| p.map(drop))));
        prop_assert!(within(parse_option_header(&bytes).map(|p| p.map(drop))));
        prop_assert!(within(parse_option_reply(&bytes).map(|p| p.map(drop))));
        let _ = parse_info_request(&bytes);
        let _ = parse_server_entry(&bytes);
        let _ = Info::parse(&bytes);
        let header = ChunkHeader { flags, chunk_type, cookie: 1, length: bytes.len() as u32 };
        if let Ok(ChunkPayload::OffsetData { data, .. }) = parse_chunk_payload(&header, &bytes) {
            prop_assert_eq!(data.len() + 8, bytes.len());
        }
        let mut output = Vec::new();
        prop_assert!(within(ServerHandshake::new().receive(&bytes, &catalog()[..], &mut output).map(|p| p.map(drop))));
        let mut client = handshake;
        prop_assert!(within(client.receive(&bytes, &mut output).map(|p| p.map(drop))));
    }

    #[test]
    fn requests_round_trip(
        flags in any::<u16>(), command in any::<u16>(), cookie in any::<u64>(),
        offset in any::<u64>(), length in any::<u32>(),
    ) {
        let request = Request { flags, command: Command::from_wire(command), cookie, offset, length };
        prop_assert_eq!(
            Request::parse(&request.encode()),
            Ok(Parsed::Found { value: request, consumed: REQUEST_HEADER_BYTES })
        );
        prop_assert_eq!(request.command.to_wire(), command);
    }

    #[test]
    fn simple_replies_round_trip(cookie in any::<u64>(), error in any::<u32>(), data in vec(any::<u8>(), 0..32)) {
        let mut bytes = Vec::new();
        compose_simple_reply(&mut bytes, cookie, error);
        bytes.extend_from_slice(&data);
        let (reply, consumed) = parse_reply(&bytes, |echoed| (echoed == cookie).then_some(data.len() as u32))
            .unwrap().found().unwrap();
        let expected = if error == 0 { &data[..] } else { &[][..] };
        prop_assert_eq!(reply, Reply::Simple { cookie, error, data: expected });
        prop_assert_eq!(consumed, SIMPLE_REPLY_HEADER_BYTES + expected.len());
    }

    #[test]
    fn structured_chunks_round_trip(
        cookie in any::<u64>(), offset in any::<u64>(), data in vec(any::<u8>(), 1..64),
        hole in 1u32.., error in 1u32.., message in "\\PC{0,40}", done in any::<bool>(),
    ) {
        let parse_one = |bytes: &[u8]| {
            let (reply, consumed) = parse_reply(bytes, |_| None).unwrap().found().unwrap();
            assert_eq!(consumed, bytes.len());
            let Reply::Chunk { header, payload } = reply else { panic!("not a chunk") };
            assert_eq!(header.cookie, cookie);
            (header.done(), format!("{payload:?}"))
        };
        let mut bytes = Vec::new();
        compose_offset_data(&mut bytes, cookie, offset, &data, done);
        prop_assert_eq!(parse_one(&bytes), (done, format!("{:?}", ChunkPayload::OffsetData { offset, data: &data })));
        let mut bytes = Vec::new();
        compose_offset_hole(&mut bytes, cookie, offset, hole, done);
        prop_assert_eq!(parse_one(&bytes), (done, format!("{:?}", ChunkPayload::OffsetHole { offset, length: hole })));
        let mut bytes = Vec::new();
        compose_error(&mut bytes, cookie, error, &message, done);
        let expected = ChunkPayload::Error { error, message: message.as_bytes(), offset: None };
        prop_assert_eq!(parse_one(&bytes), (done, format!("{expected:?}")));
        let mut bytes = Vec::new();
        compose_none(&mut bytes, cookie);
        prop_assert_eq!(parse_one(&bytes), (true, format!("{:?}", ChunkPayload::None)));
    }

    #[test]
    fn handshake_messages_round_trip(
        flags in any::<u16>(), kind in any::<u32>(), reply_type in any::<u32>(),
        data in vec(any::<u8>(), 0..64), name in vec(any::<u8>(), 0..16),
        requests in vec(any::<u16>(), 0..8), size_bytes in any::<u64>(), sizes in any::<(u32, u32, u32)>(),
    ) {
        prop_assert_eq!(parse_greeting(&greeting(flags)), Ok(Parsed::Found { value: flags, consumed: GREETING_BYTES }));
        let bytes = option(kind, &data);
        prop_assert_eq!(
            parse_option_header(&bytes),
            Ok(Parsed::Found { value: OptionHeader { option: kind, length: data.len() as u32 }, consumed: OPTION_HEADER_BYTES })
        );
        let bytes = option_reply(kind, reply_type, &data);
        prop_assert_eq!(
            parse_option_reply(&bytes),
            Ok(Parsed::Found { value: OptionReply { option: kind, reply_type, data: &data }, consumed: bytes.len() })
        );
        let mut info_request = Vec::new();
        compose_info_request(&mut info_request, &name, &requests);
        let parsed = parse_info_request(&info_request).unwrap();
        prop_assert_eq!(parsed.name, &name[..]);
        prop_assert_eq!(parsed.requests().collect::<Vec<_>>(), requests);
        let mut entry = Vec::new();
        compose_server_entry(&mut entry, &name);
        prop_assert_eq!(parse_server_entry(&entry), Ok(&name[..]));
        let (minimum, preferred, maximum) = sizes;
        for item in [
            Info::Export { size_bytes, transmission_flags: flags },
            Info::BlockSize(BlockSizes { minimum, preferred, maximum }),
            Info::Name(&name),
        ] {
            let bytes = item.clone().into_bytes();
            prop_assert_eq!(Info::parse(&bytes), Ok(item));
        }
    }
}
