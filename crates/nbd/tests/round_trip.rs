//! The client state machine talking to the server state machine through in-memory byte pipes
//! (proto.md "Fixed newstyle negotiation"), and what one side composes in transmission read
//! back by the other (proto.md "Transmission").

mod support;

use heterarchy_nbd::constants::*;
use heterarchy_nbd::transmission::{
    compose_error, compose_none, compose_offset_data, compose_offset_hole, compose_simple_reply,
    parse_reply,
};
use heterarchy_nbd::{
    BlockSizes, ChunkPayload, ClientEvent, ClientHandshake, Command, Negotiated, Parsed,
    ProtocolError, Reply, Request, ServerEvent, ServerHandshake,
};
use support::{catalog, FLAGS};

/// How both sides ended.
#[derive(Debug, PartialEq)]
struct Ending {
    client: Result<ClientEvent, ProtocolError>,
    server: Option<Result<ServerEvent<usize>, ProtocolError>>,
}

/// One direction of an in-memory connection: what one side sent, and the other side's receive
/// buffer, filled from it in pieces.
#[derive(Default)]
struct Pipe {
    sent: Vec<u8>,
    delivered: usize,
    received: Vec<u8>,
}

impl Pipe {
    /// Moves at most `piece_bytes` more of what was sent into the receive buffer; whether any.
    fn deliver(&mut self, piece_bytes: usize) -> bool {
        let piece = (self.sent.len() - self.delivered).min(piece_bytes);
        self.received
            .extend_from_slice(&self.sent[self.delivered..self.delivered + piece]);
        self.delivered += piece;
        piece > 0
    }
}

/// Applies one side's step to its receive buffer; records how the side ended, if it did, and
/// says whether the step consumed anything.
fn step<E: PartialEq>(
    received: &mut Vec<u8>,
    result: Result<Parsed<E>, ProtocolError>,
    negotiating: E,
    end: &mut Option<Result<E, ProtocolError>>,
) -> bool {
    match result {
        Ok(Parsed::NeedMore) => false,
        Ok(Parsed::Found { value, consumed }) => {
            received.drain(..consumed);
            if value != negotiating {
                *end = Some(Ok(value));
            }
            true
        }
        Err(error) => {
            *end = Some(Err(error));
            true
        }
    }
}

/// Runs `client` against a fresh server, each side reading the other's output through a pipe
/// in pieces of at most `piece_bytes`, until neither can go on.
fn negotiate(mut client: ClientHandshake, piece_bytes: usize) -> Ending {
    let catalog = catalog();
    let mut server = ServerHandshake::new();
    let mut to_client = Pipe {
        sent: ServerHandshake::greeting().to_vec(),
        ..Pipe::default()
    };
    let mut to_server = Pipe::default();
    let (mut client_end, mut server_end) = (None, None);
    loop {
        let mut progressed = false;
        if client_end.is_none() {
            progressed |= to_client.deliver(piece_bytes);
            let result = client.receive(&to_client.received, &mut to_server.sent);
            progressed |= step(
                &mut to_client.received,
                result,
                ClientEvent::Negotiating,
                &mut client_end,
            );
        }
        if server_end.is_none() {
            progressed |= to_server.deliver(piece_bytes);
            let result = server.receive(&to_server.received, &catalog[..], &mut to_client.sent);
            progressed |= step(
                &mut to_server.received,
                result,
                ServerEvent::Negotiating,
                &mut server_end,
            );
        }
        if !progressed {
            break;
        }
    }
    Ending {
        client: client_end.expect("the client's handshake ended"),
        server: server_end,
    }
}

#[test]
fn go_with_structured_replies_agrees_on_both_sides_whatever_the_pieces() {
    for piece_bytes in [1, 3, 7, 20, 1 << 20] {
        let ending = negotiate(ClientHandshake::go("scratch", true), piece_bytes);
        assert_eq!(
            ending,
            Ending {
                client: Ok(ClientEvent::Ready(Negotiated {
                    size_bytes: 1 << 20,
                    transmission_flags: FLAGS,
                    block_sizes: Some(BlockSizes::DEFAULT),
                    structured_replies: true,
                })),
                server: Some(Ok(ServerEvent::Transmission {
                    export: 1,
                    structured_replies: true
                })),
            },
            "pieces of {piece_bytes} bytes"
        );
    }
}

#[test]
fn go_without_structured_replies_chooses_the_default_export() {
    let ending = negotiate(ClientHandshake::go("", false), 5);
    let Ok(ClientEvent::Ready(negotiated)) = ending.client else {
        panic!("not ready: {ending:?}");
    };
    assert_eq!(negotiated.size_bytes, 64 << 20);
    assert!(!negotiated.structured_replies);
    assert_eq!(
        ending.server,
        Some(Ok(ServerEvent::Transmission {
            export: 0,
            structured_replies: false
        }))
    );
}

#[test]
fn an_unknown_export_is_refused_and_both_sides_close() {
    let ending = negotiate(ClientHandshake::go("nope", true), 11);
    let Ok(ClientEvent::Refused(refusal)) = &ending.client else {
        panic!("not refused: {ending:?}");
    };
    assert_eq!(
        (refusal.option, refusal.reply_type),
        (OPT_GO, REP_ERR_UNKNOWN)
    );
    // The client's NBD_OPT_ABORT reaches the server, which acknowledges and closes.
    assert_eq!(ending.server, Some(Ok(ServerEvent::Closed)));
}

#[test]
fn list_names_every_export_then_aborts() {
    let ending = negotiate(ClientHandshake::list(), 2);
    assert_eq!(
        ending,
        Ending {
            client: Ok(ClientEvent::Listed(vec!["vol".into(), "scratch".into()])),
            server: Some(Ok(ServerEvent::Closed)),
        }
    );
}

#[test]
fn requests_the_client_composes_are_what_the_server_parses() {
    let requests = [
        (Command::Read, 0, 4096),
        (Command::Write, CMD_FLAG_FUA, 3),
        (Command::Flush, 0, 0),
        (Command::Trim, 0, 1 << 20),
        (Command::WriteZeroes, CMD_FLAG_FUA | CMD_FLAG_NO_HOLE, 512),
        (Command::Disconnect, 0, 0),
    ];
    let mut stream = Vec::new();
    let mut sent = Vec::new();
    for (cookie, (command, flags, length)) in requests.into_iter().enumerate() {
        let request = Request {
            flags,
            command,
            cookie: cookie as u64 * 0x1_0000_0001,
            offset: 512 * cookie as u64,
            length,
        };
        request.compose(&mut stream);
        stream.extend_from_slice(&vec![0xab; request.payload_bytes()]);
        sent.push(request);
    }
    let mut parsed = Vec::new();
    let mut input = &stream[..];
    while let Parsed::Found { value, consumed } = Request::parse(input).unwrap() {
        let payload = &input[consumed..consumed + value.payload_bytes()];
        assert!(payload.iter().all(|&byte| byte == 0xab));
        input = &input[consumed + value.payload_bytes()..];
        parsed.push(value);
    }
    assert!(input.is_empty());
    assert_eq!(parsed, sent);
}

#[test]
fn replies_the_server_composes_are_what_the_client_parses() {
    let mut stream = Vec::new();
    compose_simple_reply(&mut stream, 1, 0);
    stream.extend_from_slice(b"four");
    compose_simple_reply(&mut stream, 2, EINVAL);
    compose_offset_data(&mut stream, 3, 8192, b"data", false);
    compose_offset_hole(&mut stream, 3, 8196, 4, false);
    compose_error(&mut stream, 3, EIO, "medium error", true);
    compose_none(&mut stream, 4);
    let mut replies = Vec::new();
    let mut input = &stream[..];
    while !input.is_empty() {
        let read_length = |cookie| Some(if cookie == 1 { 4 } else { 0 });
        let (reply, consumed) = parse_reply(input, read_length).unwrap().found().unwrap();
        input = &input[consumed..];
        replies.push(match reply {
            Reply::Simple {
                cookie,
                error,
                data,
            } => format!("simple {cookie} {error} {data:?}"),
            Reply::Chunk { header, payload } => {
                let payload = match payload {
                    ChunkPayload::None => "none".to_string(),
                    ChunkPayload::OffsetData { offset, data } => format!("data {offset} {data:?}"),
                    ChunkPayload::OffsetHole { offset, length } => {
                        format!("hole {offset} {length}")
                    }
                    ChunkPayload::Error {
                        error,
                        message,
                        offset,
                    } => format!(
                        "error {error} {} {offset:?}",
                        String::from_utf8_lossy(message)
                    ),
                };
                format!("chunk {} done={} {payload}", header.cookie, header.done())
            }
        });
    }
    assert_eq!(
        replies,
        [
            "simple 1 0 [102, 111, 117, 114]",
            "simple 2 22 []",
            "chunk 3 done=false data 8192 [100, 97, 116, 97]",
            "chunk 3 done=false hole 8196 4",
            "chunk 3 done=true error 5 medium error None",
            "chunk 4 done=true none",
        ]
    );
}
