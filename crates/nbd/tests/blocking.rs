//! The blocking client against a small server made of this crate's own pieces, over a Unix
//! socket pair (proto.md "Transmission"): one call per command, and many requests in flight
//! answered out of order, with structured READ replies split into chunks sent back to front.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

use heterarchy_nbd::constants::*;
use heterarchy_nbd::transmission::{
    compose_error, compose_none, compose_offset_data, compose_offset_hole, compose_simple_reply,
};
use heterarchy_nbd::{
    BlockSizes, Client, ClientError, Command, ExportInfo, Parsed, Request, ServerEvent,
    ServerHandshake,
};

const DISK_BYTES: usize = 1 << 20;
const FLAGS: u16 =
    FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;

/// One export, "disk".
fn catalog() -> Vec<ExportInfo> {
    vec![ExportInfo {
        name: "disk".into(),
        size_bytes: DISK_BYTES as u64,
        transmission_flags: FLAGS,
        block_sizes: BlockSizes::DEFAULT,
    }]
}

/// Reads more bytes into `buffer`; false once the client closed.
fn receive(stream: &mut UnixStream, buffer: &mut Vec<u8>) -> bool {
    let mut piece = [0u8; 4096];
    let count = stream.read(&mut piece).expect("the server reads");
    buffer.extend_from_slice(&piece[..count]);
    count > 0
}

/// The reply to one request, applied to `disk`.
fn answer(request: &Request, payload: &[u8], disk: &mut [u8], structured: bool) -> Vec<u8> {
    let mut reply = Vec::new();
    let start = request.offset as usize;
    let end = start
        .checked_add(request.length as usize)
        .filter(|&end| end <= disk.len());
    let error = |reply: &mut Vec<u8>, message: &str| {
        if structured {
            compose_error(reply, request.cookie, EINVAL, message, true);
        } else {
            compose_simple_reply(reply, request.cookie, EINVAL);
        }
    };
    let Some(end) = end else {
        error(&mut reply, "beyond the end of the disk");
        return reply;
    };
    match request.command {
        Command::Read if structured => {
            // Back to front, so the client must place each chunk by its offset.
            let middle = start + (end - start) / 2;
            for (from, to) in [(middle, end), (start, middle)] {
                if from == to {
                    continue;
                }
                if disk[from..to].iter().all(|&byte| byte == 0) {
                    compose_offset_hole(
                        &mut reply,
                        request.cookie,
                        from as u64,
                        (to - from) as u32,
                        false,
                    );
                } else {
                    compose_offset_data(
                        &mut reply,
                        request.cookie,
                        from as u64,
                        &disk[from..to],
                        false,
                    );
                }
            }
            compose_none(&mut reply, request.cookie);
        }
        Command::Read => {
            compose_simple_reply(&mut reply, request.cookie, 0);
            reply.extend_from_slice(&disk[start..end]);
        }
        Command::Write => {
            disk[start..end].copy_from_slice(payload);
            compose_simple_reply(&mut reply, request.cookie, 0);
        }
        Command::Trim | Command::WriteZeroes => {
            disk[start..end].fill(0);
            compose_simple_reply(&mut reply, request.cookie, 0);
        }
        Command::Flush => compose_simple_reply(&mut reply, request.cookie, 0),
        _ => error(&mut reply, "unknown command"),
    }
    reply
}

/// Serves `stream` on its own thread: requests are answered `batch` at a time, each batch in
/// reverse order. Returns the disk at the end.
fn serve(mut stream: UnixStream, batch: usize) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut disk = vec![0u8; DISK_BYTES];
        let mut buffer = Vec::new();
        let mut output = Vec::new();
        let catalog = catalog();
        let mut handshake = ServerHandshake::new();
        stream.write_all(&ServerHandshake::greeting()).unwrap();
        let structured = loop {
            match handshake
                .receive(&buffer, &catalog[..], &mut output)
                .expect("a good handshake")
            {
                Parsed::NeedMore => {
                    if !receive(&mut stream, &mut buffer) {
                        return disk;
                    }
                }
                Parsed::Found { value, consumed } => {
                    buffer.drain(..consumed);
                    let sent = stream.write_all(&output);
                    output.clear();
                    // proto.md NBD_OPT_ABORT: the client may close without waiting for the ACK.
                    if value != ServerEvent::Closed {
                        sent.expect("the server writes");
                    }
                    match value {
                        ServerEvent::Negotiating => {}
                        ServerEvent::Transmission {
                            structured_replies, ..
                        } => break structured_replies,
                        ServerEvent::Closed | ServerEvent::StartTls => return disk,
                    }
                }
            }
        };
        let mut replies: Vec<Vec<u8>> = Vec::new();
        loop {
            let Parsed::Found {
                value: request,
                consumed,
            } = Request::parse(&buffer).expect("a good request")
            else {
                if !receive(&mut stream, &mut buffer) {
                    return disk;
                }
                continue;
            };
            let end = consumed + request.payload_bytes();
            if buffer.len() < end {
                if !receive(&mut stream, &mut buffer) {
                    return disk;
                }
                continue;
            }
            let disconnect = request.command == Command::Disconnect;
            if !disconnect {
                replies.push(answer(
                    &request,
                    &buffer[consumed..end],
                    &mut disk,
                    structured,
                ));
            }
            buffer.drain(..end);
            if replies.len() == batch || disconnect {
                for reply in replies.drain(..).rev() {
                    stream.write_all(&reply).unwrap();
                }
            }
            if disconnect {
                return disk;
            }
        }
    })
}

fn connect(structured: bool, batch: usize) -> (Client<UnixStream>, JoinHandle<Vec<u8>>) {
    let (client_end, server_end) = UnixStream::pair().unwrap();
    let server = serve(server_end, batch);
    let client = Client::connect(client_end, "disk", structured).expect("connected");
    (client, server)
}

fn pattern(seed: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|at| (seed * 31 + at * 7 % 251) as u8 | 1)
        .collect()
}

#[test]
fn one_call_per_command_with_and_without_structured_replies() {
    for structured in [false, true] {
        let (mut client, server) = connect(structured, 1);
        assert_eq!(client.negotiated().size_bytes, DISK_BYTES as u64);
        assert_eq!(client.negotiated().structured_replies, structured);
        let data = pattern(1, 10_000);
        client.write(4096, &data, false).unwrap();
        client.write(4096 + 10_000, b"fua", true).unwrap();
        let mut read = vec![0u8; 10_003];
        client.read(4096, &mut read).unwrap();
        assert_eq!(&read[..10_000], &data[..]);
        assert_eq!(&read[10_000..], b"fua");
        client.write_zeroes(4096, 100, false).unwrap();
        client.trim(4196, 100).unwrap();
        client.flush().unwrap();
        client.read(4096, &mut read).unwrap();
        assert!(
            read[..200].iter().all(|&byte| byte == 0),
            "zeroed and trimmed"
        );
        assert_eq!(&read[200..10_000], &data[200..]);
        let error = client
            .read(DISK_BYTES as u64 - 10, &mut [0; 20])
            .unwrap_err();
        let ClientError::Request(error) = error else {
            panic!("expected the server's error, got {error}");
        };
        assert_eq!(error.error, EINVAL);
        assert_eq!(
            error.message.is_empty(),
            !structured,
            "structured errors carry a message"
        );
        client
            .read(4096, &mut read[..3])
            .expect("the connection goes on after an error");
        assert!(client.disconnect().unwrap().is_empty());
        let disk = server.join().unwrap();
        assert_eq!(&disk[4096 + 200..4096 + 10_000], &data[200..]);
    }
}

#[test]
fn pipelined_requests_complete_by_cookie_in_any_order() {
    for structured in [false, true] {
        let (mut client, server) = connect(structured, 16);
        let mut writes = std::collections::HashMap::new();
        for block in 0..64 {
            let cookie = client
                .submit_write(block * 4096, &pattern(block as usize, 4096), block % 5 == 0)
                .unwrap();
            writes.insert(cookie, block);
        }
        assert_eq!(client.in_flight(), 64);
        let mut order = Vec::new();
        while client.in_flight() > 0 {
            let done = client.complete().unwrap();
            assert_eq!(done.command, Command::Write);
            assert_eq!(done.result, Ok(Vec::new()));
            order.push(writes.remove(&done.cookie).expect("each cookie once"));
        }
        assert!(writes.is_empty());
        assert_ne!(
            order,
            (0..64).collect::<Vec<_>>(),
            "the server answers each batch backwards"
        );
        let mut reads = std::collections::HashMap::new();
        for block in (0..64).rev() {
            reads.insert(client.submit_read(block * 4096, 4096).unwrap(), block);
        }
        for _ in 0..64 {
            let done = client.complete().unwrap();
            let block = reads.remove(&done.cookie).expect("each cookie once");
            assert_eq!(
                done.result,
                Ok(pattern(block as usize, 4096)),
                "block {block}"
            );
        }
        assert!(reads.is_empty());
        client.disconnect().unwrap();
        server.join().unwrap();
    }
}

#[test]
fn a_hole_reads_back_as_zeroes_through_structured_chunks() {
    let (mut client, server) = connect(true, 1);
    client.write(0, &[9; 512], false).unwrap();
    let mut read = vec![1u8; 2048];
    // Half data, half hole: the server sends a hole chunk for the zero half.
    client.read(0, &mut read[..1024]).unwrap();
    assert_eq!(&read[..512], &[9; 512]);
    assert_eq!(&read[512..1024], &[0; 512]);
    client.disconnect().unwrap();
    server.join().unwrap();
}

#[test]
fn wait_keeps_other_answers_for_complete() {
    let (mut client, server) = connect(false, 2);
    let first = client.submit_write(0, b"a", false).unwrap();
    let second = client.submit_write(1, b"b", false).unwrap();
    // The server answers the second first; waiting for the first keeps the second.
    assert_eq!(client.wait(first).unwrap().cookie, first);
    assert_eq!(client.in_flight(), 1);
    assert_eq!(client.complete().unwrap().cookie, second);
    client.disconnect().unwrap();
    server.join().unwrap();
}

#[test]
fn list_and_refusal() {
    let (client_end, server_end) = UnixStream::pair().unwrap();
    let server = serve(server_end, 1);
    assert_eq!(Client::list(client_end).unwrap(), ["disk"]);
    server.join().unwrap();
    let (client_end, server_end) = UnixStream::pair().unwrap();
    let server = serve(server_end, 1);
    let Err(ClientError::Refused(refusal)) = Client::connect(client_end, "nope", true) else {
        panic!("an unknown export must be refused");
    };
    assert_eq!(refusal.reply_type, REP_ERR_UNKNOWN);
    server.join().unwrap();
}

#[test]
fn misuse_is_refused_before_anything_is_sent() {
    let (mut client, server) = connect(false, 1);
    let error = client
        .submit(Command::Write, 0, 0, 10, b"short")
        .unwrap_err();
    assert!(
        matches!(error, ClientError::Io(ref e) if e.kind() == std::io::ErrorKind::InvalidInput),
        "{error}"
    );
    let error = client.complete().unwrap_err();
    assert!(
        error.to_string().contains("no request is in flight"),
        "{error}"
    );
    client.disconnect().unwrap();
    server.join().unwrap();
}

#[test]
fn a_server_that_breaks_the_protocol_is_a_protocol_error() {
    let (client_end, mut server_end) = UnixStream::pair().unwrap();
    let server = std::thread::spawn(move || {
        let mut bytes = ServerHandshake::greeting().to_vec();
        bytes.extend_from_slice(b"this is no option reply at all");
        server_end.write_all(&bytes).unwrap();
        // Hold the socket open until the client has read and given up.
        let mut sink = Vec::new();
        let _ = server_end.read_to_end(&mut sink);
    });
    let Err(ClientError::Protocol(error)) = Client::connect(client_end, "", false) else {
        panic!("garbage must be a protocol error");
    };
    assert_eq!(error.field, "option reply magic");
    server.join().unwrap();
}
