//! The fuzz targets' bodies (docs/reliability.md, "Fuzzing"; docs/architecture.md, "Testing"):
//! each takes any bytes and drives one parser the way its server does, asserting what must hold
//! whatever the bytes (progress on every step, nothing consumed past the input, replies on one
//! line). The cargo-fuzz targets in `fuzz/` call them, and `tests/corpus.rs` replays the kept
//! corpus (`fuzz/corpus/TARGET/`) through them in every test run.

use heterarchy_memcache::{parse, Limits, ParseError};
use heterarchy_nbd::handshake::{BlockSizes, ExportInfo, ServerEvent, ServerHandshake};
use heterarchy_nbd::{Parsed, Request};

/// A target's body: any bytes in, a panic when something that must hold does not.
pub type Target = fn(&[u8]);

/// Every target by name: the name is also its folder under `fuzz/corpus/`.
pub const TARGETS: [(&str, Target); 9] = [
    ("memcache_text", memcache_text),
    ("memcache_meta", memcache_meta),
    ("nbd_handshake", nbd_handshake),
    ("nbd_requests", nbd_requests),
    ("serve_config", serve_config),
    ("hierarchy_config", hierarchy_config),
    ("volume_layout", volume_layout),
    ("kv_layout", kv_layout),
    ("trace_readers", trace_readers),
];

/// Requests one fuzzed trace may yield before the target stops reading: a block trace's one
/// record of a terabyte is a quarter of a billion cache lines, legitimately, and no bug. A few
/// thousand cross every reader's states; more would only spend the run decompressing.
const TRACE_REQUESTS_READ: usize = 1 << 12;

/// A trace's bytes through every reader: the first byte picks the format (one past the last
/// detects it from the content, as for a file named `trace`), the rest is the trace, compressed
/// or not, held in memory as any reader's bytes are. Its requests, and its block records where
/// it has them, are read to the end or the bound, and every error is one line.
pub fn trace_readers(data: &[u8]) {
    use heterarchy_trace::read::{open_block_records, TraceInput};
    use heterarchy_trace::{ReaderOptions, TraceFormat};
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let format = TraceFormat::ALL
        .get(usize::from(pick) % (TraceFormat::ALL.len() + 1))
        .copied();
    let input = TraceInput::bytes("fuzzed.trace", bytes.to_vec());
    let options = ReaderOptions {
        format,
        ..ReaderOptions::default()
    };
    match heterarchy_trace::open(&input, &options) {
        Ok(mut reader) => read_to_the_bound(|| reader.next_request()),
        Err(error) => assert_one_line(&error.to_string()),
    }
    match open_block_records(&input, &options) {
        Ok(mut records) => read_to_the_bound(|| records.next_record()),
        Err(error) => assert_one_line(&error.to_string()),
    }
}

/// Takes items from `next` to the end, the first error (which must be one line) or
/// [`TRACE_REQUESTS_READ`] of them.
fn read_to_the_bound<T>(mut next: impl FnMut() -> Result<Option<T>, heterarchy_trace::TraceError>) {
    for _ in 0..TRACE_REQUESTS_READ {
        match next() {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(error) => return assert_one_line(&error.to_string()),
        }
    }
}

/// A connection's bytes through the memcached parser, request after request, as the kv server
/// loops over its read buffer.
pub fn memcache_text(data: &[u8]) {
    let limits = Limits::default();
    let mut rest = data;
    loop {
        let consumed = match parse(rest, &limits) {
            Ok(parsed) => parsed.consumed,
            Err(ParseError::Incomplete) | Err(ParseError::Fatal { .. }) => return,
            Err(ParseError::Invalid {
                reply, consumed, ..
            }) => {
                assert_one_line(reply);
                consumed
            }
            Err(ParseError::TooLarge {
                reply,
                consumed,
                skip_bytes,
                ..
            }) => {
                assert_one_line(reply);
                assert!(consumed <= rest.len());
                // The value is skipped as it arrives, never buffered.
                let skip = usize::try_from(skip_bytes).unwrap_or(usize::MAX);
                consumed.saturating_add(skip).min(rest.len())
            }
        };
        assert!(
            consumed > 0 && consumed <= rest.len(),
            "consumed {consumed} of {}",
            rest.len()
        );
        rest = &rest[consumed..];
    }
}

/// The same, steered into the meta commands: the first byte picks one, the rest follows it.
pub fn memcache_meta(data: &[u8]) {
    const COMMANDS: [&[u8]; 6] = [b"mg ", b"ms ", b"md ", b"ma ", b"mn", b"me "];
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut input = COMMANDS[usize::from(pick) % COMMANDS.len()].to_vec();
    input.extend_from_slice(rest);
    memcache_text(&input);
}

fn assert_one_line(reply: &str) {
    assert!(
        !reply.is_empty() && !reply.contains(['\r', '\n']),
        "reply {reply:?}"
    );
}

/// A client's bytes through the server's side of the NBD handshake over two exports, then,
/// once transmission starts, through the request stream.
pub fn nbd_handshake(data: &[u8]) {
    let exports = [
        ExportInfo {
            name: "vol".into(),
            size_bytes: 1 << 30,
            transmission_flags: 0,
            block_sizes: BlockSizes::DEFAULT,
        },
        ExportInfo {
            name: "second".into(),
            size_bytes: 4096,
            transmission_flags: 0,
            block_sizes: BlockSizes::DEFAULT,
        },
    ];
    let mut handshake = ServerHandshake::new();
    let mut rest = data;
    let mut output = Vec::new();
    loop {
        output.clear();
        match handshake.receive(rest, &exports[..], &mut output) {
            Ok(Parsed::NeedMore) | Err(_) => return,
            Ok(Parsed::Found { value, consumed }) => {
                assert!(consumed <= rest.len());
                // A reply is bounded by what the server has to say, not by the client's bytes.
                assert!(output.len() <= 64 * 1024, "{} reply bytes", output.len());
                rest = &rest[consumed..];
                match value {
                    ServerEvent::Negotiating => {
                        assert!(consumed > 0, "a handshake step consumed nothing")
                    }
                    ServerEvent::Transmission { export, .. } => {
                        assert!(export < exports.len());
                        return nbd_requests(rest);
                    }
                    // Never with TLS off; what follows would be TLS records.
                    ServerEvent::Closed | ServerEvent::StartTls => return,
                }
            }
        }
    }
}

/// Bytes as the transmission phase's stream: request headers, each WRITE's payload after it.
pub fn nbd_requests(data: &[u8]) {
    let mut rest = data;
    loop {
        match Request::parse(rest) {
            Ok(Parsed::NeedMore) | Err(_) => return,
            Ok(Parsed::Found { value, consumed }) => {
                assert!(consumed > 0 && consumed <= rest.len());
                let payload = value.payload_bytes().min(rest.len() - consumed);
                rest = &rest[consumed + payload..];
            }
        }
    }
}

/// Config text through the server's loader: a config or a one-line error naming its source.
pub fn serve_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = heterarchy_server::config::ServeConfig::from_toml(text, "fuzz.toml") {
        let message = error.to_string();
        assert!(message.starts_with("fuzz.toml"), "{message}");
        assert!(!message.contains('\n'), "{message:?}");
    }
}

/// Hierarchy text through the timed simulator's loader.
pub fn hierarchy_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = heterarchy_sim::timed::config::Hierarchy::from_toml(text, "fuzz.toml", None)
    {
        let message = error.to_string();
        assert!(message.starts_with("fuzz.toml"), "{message}");
        assert!(!message.contains('\n'), "{message:?}");
    }
}

/// Bytes of a persistent cache tier, as a volume finds them at restart (docs/architecture.md,
/// "Format and recovery"). The first byte picks how they are laid: as they are (`0`), or, so
/// that the fuzzer reaches past the checksums, a superblock and entries sealed from the bytes
/// that follow (a geometry, then (key, valid, dirty, sequence) per slot). Opening must succeed or
/// fail with one line; once open, every block reads (or fails with one line), the cache holds
/// no more lines than it has slots, and cleaning leaves every block as it read.
pub fn volume_layout(data: &[u8]) {
    use heterarchy_volume::layout::{Entry, Geometry, Place};
    const LINE: u64 = 4096;
    // Small enough that an execution is cheap under the sanitizer, large enough for several
    // slots and for entries that name lines past the backing store.
    const TIER_BYTES: u64 = 32 * 1024;
    const BACKING_LINES: u64 = 8;
    const BACKING_BYTES: u64 = BACKING_LINES * LINE;
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut image = vec![0u8; TIER_BYTES as usize];
    let mut words = rest.chunks(8).map(|chunk| {
        chunk
            .iter()
            .rev()
            .fold(0u64, |word, &byte| word << 8 | u64::from(byte))
    });
    if mode % 2 == 0 {
        let take = rest.len().min(image.len());
        image[..take].copy_from_slice(&rest[..take]);
    } else {
        let real = Geometry::for_cache(TIER_BYTES, LINE as u32, BACKING_BYTES).expect("fits");
        // Small changes to the real geometry reach more than random words would.
        let mut nudge = || words.next().unwrap_or(0);
        let geometry = Geometry {
            line_bytes: (u64::from(real.line_bytes) ^ (nudge() & 0x1_f000)) as u32,
            slot_count: real.slot_count ^ (nudge() % 64),
            backing_bytes: real.backing_bytes ^ (nudge() & 0xff_f000),
            data_offset: real.data_offset ^ (nudge() & 0xf000),
        };
        let place = Place {
            tier: 0,
            tiers: 1,
            signature: Place::signature(false, &[TIER_BYTES]),
        };
        image[..64].copy_from_slice(&geometry.encode());
        image[64..128].copy_from_slice(&place.encode());
        for slot in 0..real.slot_count {
            let [key, valid, dirty, sequence] = [(); 4].map(|()| words.next());
            let Some(key) = key else { break };
            let entry = Entry {
                sequence: sequence.unwrap_or(1) % 4,
                key: (key != u64::MAX).then_some(key % (BACKING_LINES + 8)),
                valid: u128::from(valid.unwrap_or(u64::MAX)),
                dirty: u128::from(dirty.unwrap_or(0)),
            };
            let at = real.entry_offset(slot as u32, entry.sequence % 2) as usize;
            image[at..at + 64].copy_from_slice(&entry.encode());
        }
    }
    let tier = heterarchy_device::backend::RamBackend::persistent_holding(&image).expect("memory");
    let backing = heterarchy_device::backend::RamBackend::new(BACKING_BYTES).expect("memory");
    let mut config = heterarchy_volume::VolumeConfig::new(
        "fuzz",
        format!("ram:{BACKING_BYTES}").parse().expect("spec"),
        format!("ram:{TIER_BYTES}").parse().expect("spec"),
    );
    config.cache_line = LINE;
    config.caching.mode = heterarchy_engine::WriteMode::Wb;
    let volume = match heterarchy_volume::Volume::with_backends(
        &config,
        vec![Box::new(tier)],
        Box::new(backing),
    ) {
        Ok(volume) => volume,
        Err(error) => {
            let message = error.to_string();
            assert!(!message.contains('\n'), "{message:?}");
            return;
        }
    };
    let stats = volume.stats();
    assert!(stats.resident_lines <= stats.slots, "{stats:?}");
    let mut first = vec![0u8; BACKING_BYTES as usize];
    if let Err(error) = volume.read(0, &mut first) {
        assert!(!error.to_string().contains('\n'), "{error}");
        return;
    }
    volume.clean().expect("cleaning RAM");
    let mut again = vec![0u8; BACKING_BYTES as usize];
    volume.read(0, &mut again).expect("reading RAM");
    assert!(first == again, "cleaning changed what the volume reads");
}

/// Bytes of a key-value tenant's persistent memory, as the store finds them at restart
/// (docs/architecture.md, "Serving": segments of records). Opening must succeed or fail with
/// one line; once open, every item it found reads back, and a set and a get work.
pub fn kv_layout(data: &[u8]) {
    use heterarchy_kvstore::{Lookup, Store, StoreConfig, Write};
    const STORE_BYTES: u64 = 256 * 1024;
    let mut image = vec![0u8; STORE_BYTES as usize];
    let take = data.len().min(image.len());
    image[..take].copy_from_slice(&data[..take]);
    let backend =
        heterarchy_device::backend::RamBackend::persistent_holding(&image).expect("memory");
    let config = StoreConfig {
        segment_bytes: 64 * 1024,
        item_max_bytes: 64 * 1024,
        index_max_bytes: None,
    };
    let (mut store, _recovery) = match Store::open(Box::new(backend), config, 1_000_000) {
        Ok(opened) => opened,
        Err(error) => {
            assert!(!error.to_string().contains('\n'), "{error}");
            return;
        }
    };
    let write = Write::set(b"fuzz", b"value");
    if store.store(1_000_000, &write).is_ok() {
        let found = store
            .get(1_000_000, b"fuzz", &Lookup::default())
            .expect("reading RAM")
            .expect("a value just stored");
        let mut value = Vec::new();
        store.read_value(&found, &mut value).expect("reading RAM");
        assert_eq!(value, b"value");
    }
}
