//! The floor serves what the benchmarks' clients ask and answers everything else with the
//! protocol's error, going on serving other connections: checked over loopback TCP with the
//! project's NBD client and raw memcached text.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use heterarchy_floor::{Floor, Protocol};
use heterarchy_nbd::constants::{EINVAL, EPERM, FLAG_READ_ONLY, REQUEST_MAGIC};
use heterarchy_nbd::{Client, ClientError, Command, Request};

const EXPORT_BYTES: u64 = 1 << 20;

fn nbd_floor() -> Floor {
    Floor::start(
        "127.0.0.1:0",
        Protocol::Nbd {
            size_bytes: EXPORT_BYTES,
        },
    )
    .unwrap()
}

fn nbd_client(floor: &Floor, export: &str, structured: bool) -> Client<TcpStream> {
    let stream = TcpStream::connect(floor.address()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    Client::connect(stream, export, structured).unwrap()
}

fn request_error(result: Result<(), ClientError>) -> u32 {
    match result {
        Err(ClientError::Request(error)) => error.error,
        other => panic!("expected the server's error, got {other:?}"),
    }
}

#[test]
fn nbd_reads_of_any_length_return_zeros_and_pipelined_reads_all_come_back() {
    let floor = nbd_floor();
    for structured in [false, true] {
        for export in ["", "floor"] {
            let mut client = nbd_client(&floor, export, structured);
            let negotiated = client.negotiated().clone();
            assert_eq!(negotiated.size_bytes, EXPORT_BYTES);
            assert_ne!(negotiated.transmission_flags & FLAG_READ_ONLY, 0);
            for (offset, length) in [(0u64, 4096usize), (EXPORT_BYTES - 512, 512), (4095, 70_000)] {
                let mut data = vec![0xA5u8; length];
                client.read(offset, &mut data).unwrap();
                assert!(data.iter().all(|&byte| byte == 0), "{offset} {length}");
            }
            // Sixty-four reads in flight, answered each by its own reply.
            let cookies: Vec<u64> = (0..64)
                .map(|block| client.submit_read(block * 4096, 4096).unwrap())
                .collect();
            let mut answered = Vec::new();
            for _ in &cookies {
                let done = client.complete().unwrap();
                assert_eq!(done.result.as_ref().map(Vec::len), Ok(4096));
                answered.push(done.cookie);
            }
            answered.sort_unstable();
            assert_eq!(answered, cookies);
            client.disconnect().unwrap();
        }
    }
    floor.stop().unwrap();
}

#[test]
fn nbd_bad_requests_get_errors_and_a_bad_magic_closes_only_its_connection() {
    let floor = nbd_floor();
    let mut client = nbd_client(&floor, "", false);
    let mut beyond = vec![0u8; 4096];
    assert_eq!(
        request_error(client.read(EXPORT_BYTES - 2048, &mut beyond)),
        EINVAL
    );
    assert_eq!(request_error(client.read(0, &mut [])), EINVAL);
    // A write's payload is dropped, and the request after it is still understood.
    assert_eq!(request_error(client.write(0, &[7u8; 10_000], false)), EPERM);
    let cookie = client.submit(Command::Cache, 0, 0, 4096, &[]).unwrap();
    assert_eq!(
        client.wait(cookie).unwrap().result.unwrap_err().error,
        EINVAL
    );
    let mut data = [1u8; 4096];
    client.read(8192, &mut data).unwrap();
    assert_eq!(data, [0u8; 4096]);

    // Garbage in negotiation, and a request without the magic, end their own connection and
    // no other.
    let mut other = nbd_client(&floor, "", false);
    let mut broken = TcpStream::connect(floor.address()).unwrap();
    broken
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    broken.write_all(&[0xFFu8; 24]).unwrap();
    let mut seen = Vec::new();
    broken.read_to_end(&mut seen).unwrap();
    assert_eq!(seen.len(), 18, "the greeting, then the close");
    let mut garbled = Request {
        flags: 0,
        command: Command::Read,
        cookie: 1,
        offset: 0,
        length: 4096,
    }
    .encode();
    garbled[..4].copy_from_slice(&(REQUEST_MAGIC ^ 1).to_be_bytes());
    let stream = TcpStream::connect(floor.address()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut victim = Client::connect(stream.try_clone().unwrap(), "", false).unwrap();
    let mut sender = stream;
    sender.write_all(&garbled).unwrap();
    assert!(victim.read(0, &mut data).is_err(), "closed");
    other.read(0, &mut data).unwrap();
    client.read(0, &mut data).unwrap();
    floor.stop().unwrap();
}

fn memcached_floor(value_bytes: usize) -> Floor {
    Floor::start("127.0.0.1:0", Protocol::Memcached { value_bytes }).unwrap()
}

/// Sends `request` and reads until the reply is `expected_bytes` long.
fn exchange(stream: &mut TcpStream, request: &[u8], expected_bytes: usize) -> Vec<u8> {
    stream.write_all(request).unwrap();
    let mut reply = vec![0u8; expected_bytes];
    stream.read_exact(&mut reply).unwrap();
    reply
}

fn memcached_client(floor: &Floor) -> TcpStream {
    let stream = TcpStream::connect(floor.address()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

#[test]
fn memcached_gets_hit_one_constant_value_and_sets_are_stored() {
    for value_bytes in [0usize, 100, 4096, 100_000] {
        let floor = memcached_floor(value_bytes);
        let mut client = memcached_client(&floor);
        let value: Vec<u8> = (b'a'..=b'z').cycle().take(value_bytes).collect();
        let mut expected = format!("VALUE key:1 0 {value_bytes}\r\n").into_bytes();
        expected.extend_from_slice(&value);
        expected.extend_from_slice(b"\r\nEND\r\n");
        assert_eq!(
            exchange(&mut client, b"get key:1\r\n", expected.len()),
            expected
        );
        let data = vec![b'x'; 5000];
        let mut set = b"set k 0 0 5000\r\n".to_vec();
        set.extend_from_slice(&data);
        set.extend_from_slice(b"\r\n");
        assert_eq!(exchange(&mut client, &set, 8), b"STORED\r\n");
        // noreply answers nothing: the get after it is answered first.
        let mut quiet = b"set k 0 0 3 noreply\r\nabc\r\n".to_vec();
        quiet.extend_from_slice(b"get key:1\r\n");
        assert_eq!(exchange(&mut client, &quiet, expected.len()), expected);
        floor.stop().unwrap();
    }
}

#[test]
fn memcached_pipelined_and_split_requests_are_each_answered() {
    let floor = memcached_floor(3);
    let mut client = memcached_client(&floor);
    let hit = |key: &str| format!("VALUE {key} 0 3\r\nabc\r\nEND\r\n");
    let requests: String = (0..50).map(|n| format!("get k{n}\r\n")).collect();
    let expected: String = (0..50).map(|n| hit(&format!("k{n}"))).collect();
    assert_eq!(
        exchange(&mut client, requests.as_bytes(), expected.len()),
        expected.as_bytes()
    );
    // A request cut anywhere is answered once its end arrives.
    for cut in 1..b"get split\r\n".len() {
        let (head, tail) = b"get split\r\n".split_at(cut);
        client.write_all(head).unwrap();
        client.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let reply = exchange(&mut client, tail, hit("split").len());
        assert_eq!(reply, hit("split").as_bytes(), "cut at {cut}");
    }
    let multi = "VALUE a 0 3\r\nabc\r\nVALUE b 0 3\r\nabc\r\nEND\r\n";
    assert_eq!(
        exchange(&mut client, b"get a b\r\n", multi.len()),
        multi.as_bytes()
    );
    floor.stop().unwrap();
}

#[test]
fn memcached_bad_lines_get_errors_and_a_long_line_closes_only_its_connection() {
    let floor = memcached_floor(3);
    let mut client = memcached_client(&floor);
    assert_eq!(exchange(&mut client, b"bogus\r\n", 7), b"ERROR\r\n");
    assert_eq!(exchange(&mut client, b"get\r\n", 7), b"ERROR\r\n");
    assert_eq!(exchange(&mut client, b"set k 0 0\r\n", 7), b"ERROR\r\n");
    let bad_format = b"CLIENT_ERROR bad command line format\r\n";
    assert_eq!(
        exchange(&mut client, b"set k 0 0 many\r\n", bad_format.len()),
        bad_format
    );
    assert_eq!(
        exchange(&mut client, b"set k 0 0 3 loudly\r\n", bad_format.len()),
        bad_format
    );

    let mut flooder = memcached_client(&floor);
    let too_long = b"CLIENT_ERROR line too long\r\n";
    let mut garbage = vec![b'g'; 3000];
    garbage.extend_from_slice(b"\r\n");
    assert_eq!(exchange(&mut flooder, &garbage, too_long.len()), too_long);
    let mut rest = Vec::new();
    assert_eq!(flooder.read_to_end(&mut rest).unwrap(), 0, "closed");

    let hit = b"VALUE k 0 3\r\nabc\r\nEND\r\n";
    assert_eq!(exchange(&mut client, b"get k\r\n", hit.len()), hit);
    let mut quitter = memcached_client(&floor);
    quitter.write_all(b"quit\r\n").unwrap();
    assert_eq!(quitter.read_to_end(&mut rest).unwrap(), 0, "closed");
    assert_eq!(exchange(&mut client, b"get k\r\n", hit.len()), hit);
    floor.stop().unwrap();
}

#[test]
fn answers_a_client_does_not_read_wait_and_are_all_delivered_once_it_reads() {
    // 200 gets of 100 KB values: far more than the socket buffers hold while nobody reads.
    let floor = memcached_floor(100_000);
    let mut client = memcached_client(&floor);
    let requests: Vec<u8> = b"get k\r\n".repeat(200);
    client.write_all(&requests).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let one = b"VALUE k 0 100000\r\n".len() + 100_000 + b"\r\nEND\r\n".len();
    let mut all = vec![0u8; one * 200];
    client.read_exact(&mut all).unwrap();
    assert!(
        all.chunks(one)
            .all(|reply| reply.starts_with(b"VALUE k 0 100000\r\n")
                && reply.ends_with(b"\r\nEND\r\n"))
    );
    floor.stop().unwrap();
}
