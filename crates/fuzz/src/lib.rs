//! The fuzz targets' bodies (issue 23, item 1; docs/architecture.md, "Testing"): each takes any
//! bytes and drives one parser the way its server does, asserting what must hold whatever the
//! bytes (progress on every step, nothing consumed past the input, replies on one line). The
//! cargo-fuzz targets in `fuzz/` call them, and `tests/corpus.rs` replays the kept corpus
//! (`fuzz/corpus/TARGET/`) through them in every test run.

use heterarchy_memcache::{parse, Limits, ParseError};
use heterarchy_nbd::handshake::{BlockSizes, ExportInfo, ServerEvent, ServerHandshake};
use heterarchy_nbd::{Parsed, Request};

/// A target's body: any bytes in, a panic when something that must hold does not.
pub type Target = fn(&[u8]);

/// Every target by name: the name is also its folder under `fuzz/corpus/`.
pub const TARGETS: [(&str, Target); 6] = [
    ("memcache_text", memcache_text),
    ("memcache_meta", memcache_meta),
    ("nbd_handshake", nbd_handshake),
    ("nbd_requests", nbd_requests),
    ("serve_config", serve_config),
    ("hierarchy_config", hierarchy_config),
];

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
    if let Err(message) = heterarchy_server::config::ServeConfig::from_toml(text, "fuzz.toml") {
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
