//! TLS with pre-shared keys for the NBD server (docs/reliability.md, "TLS and authentication"),
//! as nbdkit's `--tls-psk` and qemu's `tls-creds-psk` offer it: a file of `username:hexkey`
//! lines (what GnuTLS's `psktool` writes), the client naming its user as the PSK identity.
//! rustls has no external PSKs (rustls/rustls#174), so these sessions run on OpenSSL, driven
//! the way rustls is: records go in and out through memory, and the socket stays the event
//! loop's ([`super::stream`]).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use openssl::ssl::{
    ErrorCode, Ssl, SslContext, SslContextBuilder, SslMethod, SslMode, SslStream, SslVersion,
};

use super::stream::Session;
use crate::error::TlsError;

/// Bytes of TLS records one `read_tls` takes from the socket: one record at most.
const RECORD_BYTES: usize = 16 * 1024 + 256;
/// Encrypted bytes that may wait for the socket before more plaintext is refused: enough for a
/// few records, so that a slow reader bounds what a connection holds.
const OUTGOING_LIMIT_BYTES: usize = 64 * 1024;
/// Plaintext bytes one write encrypts: one record's worth.
const PLAINTEXT_CHUNK_BYTES: usize = 16 * 1024;

/// The keys of a PSK file: each user's key, by user name (the PSK identity).
pub type PskKeys = HashMap<Vec<u8>, Vec<u8>>;

/// Reads a `username:hexkey` file (one key per line; blank lines and `#` comments skipped); the
/// error names the file and line.
pub fn read_keys(path: &Path) -> Result<PskKeys, TlsError> {
    let failed = |reason: String| TlsError {
        subject: path.display().to_string(),
        reason,
    };
    heterarchy_device::secure_file::warn_if_exposed(path);
    let text = std::fs::read_to_string(path).map_err(|e| failed(format!("cannot read: {e}")))?;
    let mut keys = PskKeys::new();
    for (index, line) in text.lines().enumerate() {
        let line_failed = |what: &str| {
            failed(format!(
                "line {}: {what}; expected username:hexkey",
                index + 1
            ))
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (user, hex) = line.rsplit_once(':').ok_or_else(|| line_failed("no ':'"))?;
        if user.is_empty() {
            return Err(line_failed("an empty username"));
        }
        let key = hex::decode(hex).map_err(|_| line_failed("the key is not hexadecimal"))?;
        if key.is_empty() || key.len() > 256 {
            return Err(line_failed("a key of 1 to 256 bytes is needed"));
        }
        if keys.insert(user.as_bytes().to_vec(), key).is_some() {
            return Err(line_failed(&format!("user {user} again")));
        }
    }
    if keys.is_empty() {
        return Err(failed(
            "no keys; expected username:hexkey lines".to_string(),
        ));
    }
    Ok(keys)
}

/// What a server needs to open PSK sessions: an OpenSSL context that looks a client's identity
/// up in the keys and offers only PSK cipher suites (TLS 1.2's with ECDHE, DHE or none, and
/// TLS 1.3's resumption-style PSK with its key exchange).
#[derive(Clone)]
pub struct PskServer {
    context: SslContext,
}

impl std::fmt::Debug for PskServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("PskServer")
    }
}

impl PskServer {
    /// A server that knows `keys`.
    pub fn new(keys: PskKeys) -> Result<PskServer, TlsError> {
        let failed = |e: openssl::error::ErrorStack| TlsError {
            subject: "the TLS provider (OpenSSL)".to_string(),
            reason: e.to_string().replace('\n', " "),
        };
        let keys = Arc::new(keys);
        let mut builder = SslContextBuilder::new(SslMethod::tls_server()).map_err(failed)?;
        builder
            .set_min_proto_version(Some(SslVersion::TLS1_2))
            .map_err(failed)?;
        builder
            .set_cipher_list("ECDHE-PSK:DHE-PSK:PSK:!NULL:!3DES")
            .map_err(failed)?;
        // Writes the connection retries after a full socket may come from another place in its
        // buffer; each takes what it can.
        builder.set_mode(SslMode::ENABLE_PARTIAL_WRITE | SslMode::ACCEPT_MOVING_WRITE_BUFFER);
        builder.set_psk_server_callback(move |_ssl, identity, key_out| {
            // An unknown user gets no key, and the handshake fails.
            let key = identity.and_then(|user| keys.get(user));
            Ok(match key {
                Some(key) if key.len() <= key_out.len() => {
                    key_out[..key.len()].copy_from_slice(key);
                    key.len()
                }
                _ => 0,
            })
        });
        Ok(PskServer {
            context: builder.build(),
        })
    }

    /// A server that knows the keys in the file at `path`.
    pub fn from_file(path: &Path) -> Result<PskServer, TlsError> {
        PskServer::new(read_keys(path)?)
    }

    /// A session for one client, waiting for its handshake.
    pub(crate) fn session(&self) -> io::Result<PskSession> {
        let ssl = Ssl::new(&self.context).map_err(io::Error::other)?;
        let stream = SslStream::new(ssl, Pipe::default()).map_err(io::Error::other)?;
        Ok(PskSession {
            stream,
            handshaken: false,
        })
    }
}

/// TLS records in memory, between OpenSSL and the socket: what came from the socket and is
/// not yet read, and what OpenSSL wrote for the socket. Reading an empty pipe would block.
#[derive(Default)]
struct Pipe {
    incoming: Vec<u8>,
    incoming_read: usize,
    outgoing: Vec<u8>,
}

impl Read for Pipe {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let waiting = &self.incoming[self.incoming_read..];
        if waiting.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let count = waiting.len().min(buffer.len());
        buffer[..count].copy_from_slice(&waiting[..count]);
        self.incoming_read += count;
        if self.incoming_read == self.incoming.len() {
            self.incoming.clear();
            self.incoming_read = 0;
        }
        Ok(count)
    }
}

impl Write for Pipe {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.outgoing.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One client's PSK session on OpenSSL.
pub(crate) struct PskSession {
    stream: SslStream<Pipe>,
    handshaken: bool,
}

/// An OpenSSL failure as an I/O error, on one line: `WouldBlock` when it waits for records.
fn ssl_error(error: openssl::ssl::Error) -> io::Error {
    match error.code() {
        ErrorCode::WANT_READ | ErrorCode::WANT_WRITE => io::ErrorKind::WouldBlock.into(),
        _ => io::Error::new(
            io::ErrorKind::InvalidData,
            format!("TLS: {}", error.to_string().replace('\n', " ")),
        ),
    }
}

impl Session for PskSession {
    fn read_tls(&mut self, from: &mut dyn Read) -> io::Result<usize> {
        let pipe = self.stream.get_mut();
        let start = pipe.incoming.len();
        pipe.incoming.resize(start + RECORD_BYTES, 0);
        let result = from.read(&mut pipe.incoming[start..]);
        pipe.incoming
            .truncate(start + *result.as_ref().unwrap_or(&0));
        result
    }

    fn process_new_packets(&mut self) -> io::Result<()> {
        if !self.handshaken {
            match self.stream.accept() {
                Ok(()) => self.handshaken = true,
                Err(error) => match ssl_error(error) {
                    error if error.kind() == io::ErrorKind::WouldBlock => {}
                    error => return Err(error),
                },
            }
        }
        Ok(())
    }

    fn wants_write(&self) -> bool {
        !self.stream.get_ref().outgoing.is_empty()
    }

    fn write_tls(&mut self, to: &mut dyn Write) -> io::Result<usize> {
        let outgoing = &mut self.stream.get_mut().outgoing;
        let written = to.write(outgoing)?;
        outgoing.drain(..written);
        Ok(written)
    }

    fn read_plain(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if !self.handshaken {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        match self.stream.ssl_read(buffer) {
            Ok(count) => Ok(count),
            Err(error) if error.code() == ErrorCode::ZERO_RETURN => Ok(0),
            Err(error) => Err(ssl_error(error)),
        }
    }

    fn write_plain(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if !self.handshaken
            || bytes.is_empty()
            || self.stream.get_ref().outgoing.len() >= OUTGOING_LIMIT_BYTES
        {
            return Ok(0);
        }
        let chunk = &bytes[..bytes.len().min(PLAINTEXT_CHUNK_BYTES)];
        self.stream.ssl_write(chunk).map_err(ssl_error)
    }

    fn send_close_notify(&mut self) {
        let _ = self.stream.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::ssl::SslConnector;

    const KEY_HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn keys() -> PskKeys {
        PskKeys::from([(b"alice".to_vec(), hex::decode(KEY_HEX).unwrap())])
    }

    /// An OpenSSL client for `user` with `key`, on its own pipe, as nbdinfo's GnuTLS would be.
    fn client(user: &'static str, key: Vec<u8>, max: SslVersion) -> SslStream<Pipe> {
        let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
        builder.set_max_proto_version(Some(max)).unwrap();
        builder.set_cipher_list("PSK:ECDHE-PSK").unwrap();
        builder.set_psk_client_callback(move |_ssl, _hint, identity, key_out| {
            identity[..user.len()].copy_from_slice(user.as_bytes());
            identity[user.len()] = 0;
            key_out[..key.len()].copy_from_slice(&key);
            Ok(key.len())
        });
        let ssl = builder.build().configure().unwrap().verify_hostname(false);
        let ssl = ssl.into_ssl("localhost").unwrap();
        SslStream::new(ssl, Pipe::default()).unwrap()
    }

    /// Moves records both ways until neither side has any left; then whether the client's
    /// handshake is done.
    fn exchange(client: &mut SslStream<Pipe>, server: &mut PskSession) -> io::Result<bool> {
        let mut client_done = false;
        for _ in 0..20 {
            client_done = client_done || client.connect().is_ok();
            let to_server = std::mem::take(&mut client.get_mut().outgoing);
            if !to_server.is_empty() {
                server.read_tls(&mut to_server.as_slice())?;
            }
            server.process_new_packets()?;
            let mut to_client = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut to_client)?;
            }
            client.get_mut().incoming.extend_from_slice(&to_client);
            if to_server.is_empty() && to_client.is_empty() && client_done {
                break;
            }
        }
        Ok(client_done)
    }

    #[test]
    fn a_client_with_the_key_talks_under_tls_1_2_and_1_3() {
        let server = PskServer::new(keys()).unwrap();
        for version in [SslVersion::TLS1_2, SslVersion::TLS1_3] {
            let mut session = server.session().unwrap();
            let mut client = client("alice", hex::decode(KEY_HEX).unwrap(), version);
            assert!(exchange(&mut client, &mut session).unwrap(), "{version:?}");
            assert_eq!(client.ssl().version2(), Some(version));
            client.ssl_write(b"request").unwrap();
            let records = std::mem::take(&mut client.get_mut().outgoing);
            session.read_tls(&mut records.as_slice()).unwrap();
            let mut plain = [0u8; 64];
            let count = session.read_plain(&mut plain).unwrap();
            assert_eq!(&plain[..count], b"request");
            assert_eq!(session.write_plain(b"answer").unwrap(), 6);
            let mut to_client = Vec::new();
            while session.wants_write() {
                session.write_tls(&mut to_client).unwrap();
            }
            client.get_mut().incoming.extend_from_slice(&to_client);
            let count = client.ssl_read(&mut plain).unwrap();
            assert_eq!(&plain[..count], b"answer");
        }
    }

    #[test]
    fn a_wrong_key_or_an_unknown_user_fails_the_handshake() {
        let server = PskServer::new(keys()).unwrap();
        for (user, key) in [
            ("alice", vec![7u8; 32]),
            ("mallory", hex::decode(KEY_HEX).unwrap()),
        ] {
            let mut session = server.session().unwrap();
            let mut client = client(user, key, SslVersion::TLS1_2);
            let outcome = exchange(&mut client, &mut session);
            assert!(!matches!(outcome, Ok(true)), "{user}: {outcome:?}");
            if let Err(error) = outcome {
                assert!(!error.to_string().contains('\n'), "{error}");
            }
            assert!(session.read_plain(&mut [0u8; 8]).is_err(), "{user}");
        }
    }

    #[test]
    fn bad_key_files_are_named_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.psk");
        for (text, expected) in [
            ("alice\n", "line 1: no ':'"),
            ("# users\n\n:00ff\n", "line 3: an empty username"),
            ("alice:xyz0\n", "line 1: the key is not hexadecimal"),
            ("alice:abc\n", "line 1: the key is not hexadecimal"),
            ("alice:00\nalice:01\n", "line 2: user alice again"),
            ("# nobody\n", "no keys"),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = read_keys(&path).unwrap_err().to_string();
            assert!(
                error.contains("keys.psk") && error.contains(expected),
                "{text:?}: {error}"
            );
            assert!(!error.contains('\n'), "{error}");
        }
        std::fs::write(&path, format!("alice:{KEY_HEX}\nbob:00ff\n")).unwrap();
        let keys = read_keys(&path).unwrap();
        assert_eq!(keys[b"bob".as_slice()], vec![0, 255]);
        assert_eq!(keys.len(), 2);
    }
}
