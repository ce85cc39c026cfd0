//! The NBD server over TCP, driven by `heterarchy-nbd`'s client (proto.md "Transmission"):
//! structured replies negotiated and read through, errors as error chunks with a reason, and
//! many requests in flight on one connection, on a cached volume and on a staged PM device;
//! long TRIMs and WRITE ZEROES planned a slice at a time and out-of-range ones refused before
//! anything is written; clients that hold their byte budgets waiting and then served.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::Arc;

use heterarchy_blockdev::{StagedConfig, StagedExport};
use heterarchy_device::backend::Throttles;
use heterarchy_engine::staging::StagingScheme;
use heterarchy_engine::WriteMode;
use heterarchy_nbd::constants::{EINVAL, MAX_PAYLOAD_BYTES};
use heterarchy_nbd::{Client, ClientError, Command};
use heterarchy_server::listen::{ListenAddr, Listener};
use heterarchy_server::nbd::{serve, ClientLimits, Export, Exports, Settings, Threads};
use heterarchy_server::stopping::Stopping;
use heterarchy_volume::{Volume, VolumeConfig};

const VOLUME_BYTES: u64 = 64 << 20;
const BLOCK: usize = 4096;

/// Serves "vol" (64 MiB of RAM behind a 16 MiB RAM cache, write-back), "small", and "pm" (64
/// MiB of RAM under an 8 MiB Caiti cache) on a free port; returns the address.
fn start() -> String {
    start_with(ClientLimits::default())
}

/// The same with `limits`.
fn start_with(limits: ClientLimits) -> String {
    let mut exports: Vec<Export> = [
        ("vol", "ram:64m", "ram:16m"),
        ("small", "ram:1m", "ram:512k"),
    ]
    .into_iter()
    .map(|(name, backing, cache)| {
        let mut config = VolumeConfig::new(name, backing.parse().unwrap(), cache.parse().unwrap());
        config.caching.mode = WriteMode::Wb;
        Export::Cached(Arc::new(Volume::open(&config).expect("a RAM volume opens")))
    })
    .collect();
    let staged = StagedConfig {
        staging_size: 8 << 20,
        evictors: Some(2),
        ..StagedConfig::new("pm", "ram:64m".parse().unwrap(), StagingScheme::CAITI)
    };
    let device = StagedExport::open(&staged, &Throttles::default()).unwrap();
    exports.push(Export::Device(Arc::new(device)));
    let listener = Listener::bind(&ListenAddr::Tcp("127.0.0.1:0".into())).unwrap();
    let address = listener.local_addr();
    let exports = Arc::new(Exports::new(exports));
    let settings = Settings {
        threads: Threads {
            loops: 2,
            io_workers: 4,
        },
        max_connections: 64,
        tls: Default::default(),
        tls_server: None,
        limits,
        stopping: Stopping::new(),
    };
    std::thread::spawn(move || serve(listener, exports, settings));
    address
}

fn connect(address: &str, export: &str, structured: bool) -> Client<TcpStream> {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    Client::connect(stream, export, structured).expect("the export is served")
}

/// A block's content, unique to the block and the round it was written in.
fn pattern(block: u64, round: u64) -> Vec<u8> {
    let mut data = Vec::with_capacity(BLOCK);
    while data.len() < BLOCK {
        data.extend_from_slice(&block.to_be_bytes());
        data.extend_from_slice(&round.to_be_bytes());
    }
    data
}

#[test]
fn structured_replies_are_negotiated_and_carry_reads_and_errors() {
    let address = start();
    let mut client = connect(&address, "vol", true);
    assert!(client.negotiated().structured_replies);
    assert_eq!(client.negotiated().size_bytes, VOLUME_BYTES);
    let data = pattern(3, 1);
    client.write(3 * BLOCK as u64, &data, true).unwrap();
    let mut read = vec![0u8; BLOCK];
    client.read(3 * BLOCK as u64, &mut read).unwrap();
    assert_eq!(read, data);
    client
        .read(0, &mut [])
        .expect("a read of no bytes is answered NBD_REPLY_TYPE_NONE");

    let bad = [
        (VOLUME_BYTES - BLOCK as u64, 2 * BLOCK as u32),
        (VOLUME_BYTES, BLOCK as u32),
        (0, 2 * MAX_PAYLOAD_BYTES),
    ];
    for (offset, length) in bad {
        let cookie = client.submit_read(offset, length).unwrap();
        let done = client.wait(cookie).unwrap();
        let Err(error) = done.result else {
            panic!("a read of {length} bytes at {offset} succeeded");
        };
        assert_eq!(error.error, EINVAL, "{error}");
        assert!(!error.message.is_empty(), "an error chunk says why");
        client
            .read(3 * BLOCK as u64, &mut read)
            .expect("the connection goes on");
        assert_eq!(read, data);
    }
    // A failed WRITE is an error chunk too, and its payload is skipped.
    let error = client.write(VOLUME_BYTES, &data, false).unwrap_err();
    assert!(
        matches!(error, ClientError::Request(ref e) if e.error == EINVAL),
        "{error}"
    );
    client.flush().unwrap();
    client.disconnect().unwrap();
}

#[test]
fn many_requests_in_flight_on_one_connection() {
    let address = start();
    for (export, structured) in [("vol", false), ("vol", true), ("pm", false), ("pm", true)] {
        let mut client = connect(&address, export, structured);
        const BLOCKS: u64 = 2048;
        const WINDOW: usize = 64;
        // Every block written with a window of requests in flight, some with FUA...
        let mut writing = HashMap::new();
        let round = u64::from(structured);
        for block in 0..BLOCKS {
            if client.in_flight() == WINDOW {
                let done = client.complete().unwrap();
                assert_eq!(done.result, Ok(Vec::new()));
                assert!(
                    writing.remove(&done.cookie).is_some(),
                    "an answer per write"
                );
            }
            // Spread over the whole volume, so the cache evicts and writes back meanwhile.
            let at = block * (VOLUME_BYTES / BLOCKS);
            let cookie = client
                .submit_write(at, &pattern(block, round), block % 7 == 0)
                .unwrap();
            writing.insert(cookie, block);
        }
        let flush = client.submit_flush().unwrap();
        while client.in_flight() > 0 {
            let done = client.complete().unwrap();
            assert_eq!(done.result, Ok(Vec::new()), "{:?}", done.command);
            if done.cookie != flush {
                assert!(writing.remove(&done.cookie).is_some());
            }
        }
        assert!(writing.is_empty());
        // ...then read back, the same way, and each answer matched to its block by cookie.
        let mut reading = HashMap::new();
        let mut verified = 0;
        for block in (0..BLOCKS).rev() {
            if client.in_flight() == WINDOW {
                let done = client.complete().unwrap();
                let block = reading.remove(&done.cookie).expect("an answer per read");
                assert_eq!(done.result, Ok(pattern(block, round)), "block {block}");
                verified += 1;
            }
            let at = block * (VOLUME_BYTES / BLOCKS);
            reading.insert(client.submit_read(at, BLOCK as u32).unwrap(), block);
        }
        for done in client.disconnect().unwrap() {
            assert_eq!(done.command, Command::Read);
            let block = reading.remove(&done.cookie).expect("an answer per read");
            assert_eq!(done.result, Ok(pattern(block, round)), "block {block}");
            verified += 1;
        }
        assert_eq!(verified, BLOCKS);
    }
}

#[test]
fn exports_are_listed_and_chosen_by_name() {
    let address = start();
    let names = Client::list(TcpStream::connect(&address).unwrap()).unwrap();
    assert_eq!(names, ["vol", "small", "pm"]);
    let client = connect(&address, "small", false);
    assert_eq!(client.negotiated().size_bytes, 1 << 20);
    let default = connect(&address, "", false);
    assert_eq!(default.negotiated().size_bytes, VOLUME_BYTES);
    let refused = Client::connect(TcpStream::connect(&address).unwrap(), "nope", true);
    assert!(matches!(refused, Err(ClientError::Refused(_))));
}

#[test]
fn long_write_zeroes_and_trims_are_sliced_and_out_of_range_ones_change_nothing() {
    let address = start();
    for export in ["vol", "pm"] {
        let mut client = connect(&address, export, true);
        let blocks = VOLUME_BYTES / BLOCK as u64;
        for block in 0..blocks {
            client
                .submit_write(block * BLOCK as u64, &pattern(block, 7), false)
                .unwrap();
            if client.in_flight() == 32 {
                assert_eq!(client.complete().unwrap().result, Ok(Vec::new()));
            }
        }
        while client.in_flight() > 0 {
            assert_eq!(client.complete().unwrap().result, Ok(Vec::new()));
        }
        // Past the end by one block: refused, and the blocks before the end keep their data.
        let last = VOLUME_BYTES - 2 * BLOCK as u64;
        let over = 3 * BLOCK as u32;
        for refused in [
            client.write_zeroes(last, over, false),
            client.trim(last, over),
            client.write_zeroes(VOLUME_BYTES - (8 << 20), 16 << 20, true),
        ] {
            assert!(
                matches!(refused, Err(ClientError::Request(ref e)) if e.error == EINVAL),
                "{export}: {refused:?}"
            );
        }
        let mut read = vec![0u8; BLOCK];
        for block in [blocks - 2, blocks - 1, blocks - 2048] {
            client.read(block * BLOCK as u64, &mut read).unwrap();
            assert_eq!(
                read,
                pattern(block, 7),
                "{export}: block {block} was written"
            );
        }
        // 5 MiB and a bit, from inside one block to inside another: several slices.
        let (from, length) = (3 * BLOCK as u64 + 512, (5 << 20) + 1000);
        client.write_zeroes(from, length, true).unwrap();
        let mut edge = vec![0u8; 2 * BLOCK];
        client.read(2 * BLOCK as u64, &mut edge).unwrap();
        assert_eq!(
            edge[..BLOCK + 512],
            pattern(2, 7)[..]
                .iter()
                .chain(&pattern(3, 7)[..512])
                .copied()
                .collect::<Vec<u8>>()[..]
        );
        assert!(
            edge[BLOCK + 512..].iter().all(|&byte| byte == 0),
            "{export}"
        );
        let end = from + u64::from(length);
        let end_block = end / BLOCK as u64;
        client.read(end_block * BLOCK as u64, &mut read).unwrap();
        let cut = (end % BLOCK as u64) as usize;
        assert!(read[..cut].iter().all(|&byte| byte == 0), "{export}");
        assert_eq!(read[cut..], pattern(end_block, 7)[cut..], "{export}");
        // The whole volume in one request.
        client.write_zeroes(0, VOLUME_BYTES as u32, false).unwrap();
        for block in (0..blocks).step_by(97) {
            client.read(block * BLOCK as u64, &mut read).unwrap();
            assert!(
                read.iter().all(|&byte| byte == 0),
                "{export}: block {block}"
            );
        }
        client.trim(0, VOLUME_BYTES as u32).unwrap();
        client.disconnect().unwrap();
    }
}

#[test]
fn clients_over_their_byte_budgets_wait_and_are_all_served() {
    // Each client may hold 1 MiB, all together 2 MiB: three clients with 64 reads of 256 KiB
    // in flight each wait for one another's answers to leave, and every read comes back right.
    let address = start_with(ClientLimits {
        connection_buffer_bytes: 1 << 20,
        server_buffer_bytes: 2 << 20,
        ..ClientLimits::default()
    });
    const READ_BYTES: u32 = 256 << 10;
    let mut writer = connect(&address, "vol", false);
    for piece in 0..16u64 {
        let data: Vec<u8> = (0..READ_BYTES)
            .map(|i| (i as u64 * 31 + piece) as u8)
            .collect();
        writer
            .write(piece * u64::from(READ_BYTES), &data, false)
            .unwrap();
    }
    let clients: Vec<_> = (0..3)
        .map(|index| {
            let address = address.clone();
            std::thread::spawn(move || {
                let mut client = connect(&address, "vol", index % 2 == 1);
                let mut asked = HashMap::new();
                for round in 0..64u64 {
                    let piece = (round * 7 + index) % 16;
                    let cookie = client
                        .submit_read(piece * u64::from(READ_BYTES), READ_BYTES)
                        .unwrap();
                    asked.insert(cookie, piece);
                }
                client.send().unwrap();
                for done in client.disconnect().unwrap() {
                    let piece = asked.remove(&done.cookie).expect("an answer per read");
                    let expected: Vec<u8> = (0..READ_BYTES)
                        .map(|i| (i as u64 * 31 + piece) as u8)
                        .collect();
                    assert_eq!(done.result, Ok(expected), "piece {piece}");
                }
                assert!(asked.is_empty());
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client thread");
    }
}
