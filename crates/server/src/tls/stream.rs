//! A connection's byte stream, in the clear or under TLS, for event loops whose sockets never
//! block: a [`Session`] keeps the records (rustls's `ServerConnection` for certificates,
//! OpenSSL for pre-shared keys, [`super::psk`]), the sockets stay non-blocking, and a read or
//! write that would wait says `WouldBlock` as a socket's would, so a client in the middle of a
//! TLS handshake holds up no one else on its loop.
//!
//! Two differences from a plain socket a caller must mind: a read that returned less than it
//! asked for does not mean the socket is empty (a session takes records in pieces), so read
//! until `WouldBlock`; and bytes written may still wait inside the session after `write` took
//! them all, so call [`Transport::flush`] until it says everything left.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::ServerConnection;

use super::TlsServer;
use crate::socket::Socket;

/// A TLS session as the transport drives it, records in and out through the caller's socket,
/// in rustls's terms (which OpenSSL's PSK sessions follow too).
pub(crate) trait Session: Send {
    /// Takes TLS records from `from`; `Ok(0)` at its end.
    fn read_tls(&mut self, from: &mut dyn Read) -> io::Result<usize>;
    /// Works on the records taken: the handshake, and decryption where it happens here.
    fn process_new_packets(&mut self) -> io::Result<()>;
    /// Whether records wait to be written.
    fn wants_write(&self) -> bool;
    /// Writes waiting records to `to`.
    fn write_tls(&mut self, to: &mut dyn Write) -> io::Result<usize>;
    /// Decrypted bytes; `WouldBlock` when none are ready, `Ok(0)` after a `close_notify`.
    fn read_plain(&mut self, buffer: &mut [u8]) -> io::Result<usize>;
    /// Takes bytes to encrypt, as many as there is room for (`Ok(0)` when none).
    fn write_plain(&mut self, bytes: &[u8]) -> io::Result<usize>;
    /// Queues the alert that ends the session cleanly.
    fn send_close_notify(&mut self);
    /// Whether the handshake is still under way.
    fn is_handshaking(&self) -> bool {
        false
    }
}

// The connection's own methods are its common part's, reached through `Deref`; the trait's
// names would otherwise call themselves.
impl Session for ServerConnection {
    fn read_tls(&mut self, from: &mut dyn Read) -> io::Result<usize> {
        (**self).read_tls(from)
    }

    fn process_new_packets(&mut self) -> io::Result<()> {
        (**self).process_new_packets().map(drop).map_err(tls_error)
    }

    fn wants_write(&self) -> bool {
        (**self).wants_write()
    }

    fn write_tls(&mut self, to: &mut dyn Write) -> io::Result<usize> {
        (**self).write_tls(to)
    }

    fn read_plain(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.reader().read(buffer)
    }

    fn write_plain(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.writer().write(bytes)
    }

    fn send_close_notify(&mut self) {
        (**self).send_close_notify();
    }

    fn is_handshaking(&self) -> bool {
        (**self).is_handshaking()
    }
}

/// A connection's socket, and its TLS session once one has begun.
pub struct Transport {
    socket: Socket,
    tls: Option<Box<dyn Session>>,
}

impl Transport {
    /// Bytes in the clear.
    pub fn plain(socket: Socket) -> Transport {
        Transport { socket, tls: None }
    }

    /// The socket under it, to close.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    /// The socket under it, to register with an event loop.
    pub fn socket_mut(&mut self) -> &mut Socket {
        &mut self.socket
    }

    /// Whether TLS carries the bytes.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether a TLS handshake is under way (for a deadline on it).
    pub fn is_handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.is_handshaking())
    }

    /// Begins TLS as the server: from now on every byte is a TLS record, starting with
    /// `received`, bytes already read from the socket after the last one in the clear.
    pub fn start_tls(&mut self, server: &TlsServer, received: &[u8]) -> io::Result<()> {
        if self.tls.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "TLS: already started",
            ));
        }
        let mut tls: Box<dyn Session> = match server {
            TlsServer::Certificates(config) => {
                Box::new(ServerConnection::new(Arc::clone(config)).map_err(tls_error)?)
            }
            TlsServer::Psk(psk) => Box::new(psk.session()?),
        };
        let mut rest = received;
        while !rest.is_empty() {
            if tls.read_tls(&mut rest)? == 0 {
                break;
            }
            tls.process_new_packets()?;
        }
        self.tls = Some(tls);
        Ok(())
    }

    /// Writes what the session holds for the socket; `Ok(true)` once nothing is left.
    pub fn flush(&mut self) -> io::Result<bool> {
        let Some(tls) = &mut self.tls else {
            return Ok(true);
        };
        while tls.wants_write() {
            match tls.write_tls(&mut self.socket) {
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(true)
    }

    /// Ends TLS cleanly (a `close_notify` alert), as far as the socket takes it now.
    pub fn close(&mut self) {
        if let Some(tls) = &mut self.tls {
            tls.send_close_notify();
            let _ = self.flush();
        }
    }
}

impl Read for Transport {
    /// Decrypted bytes; `Ok(0)` at the end (a `close_notify`, or the socket's end in the
    /// clear), `UnexpectedEof` when a TLS peer closed its socket without one.
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else {
            return self.socket.read(buffer);
        };
        loop {
            match tls.read_plain(buffer) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            // No plaintext buffered: more records are needed.
            let ended = match tls.read_tls(&mut self.socket) {
                Ok(count) => count == 0,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            if let Err(error) = tls.process_new_packets() {
                // The alert that says why goes out if the socket takes it.
                let _ = tls.write_tls(&mut self.socket);
                return Err(error);
            }
            // The handshake's answers go out as soon as they are made.
            while tls.wants_write() {
                match tls.write_tls(&mut self.socket) {
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => return Err(error),
                }
            }
            if ended {
                return match tls.read_plain(buffer) {
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        Err(io::ErrorKind::UnexpectedEof.into())
                    }
                    other => other,
                };
            }
        }
    }
}

impl Write for Transport {
    /// Takes as many bytes as the session has room for (encrypting them) and sends what the
    /// socket takes; `WouldBlock` when neither has room.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.tls.is_none() {
            return self.socket.write(bytes);
        }
        // Room first: what the session already holds goes out before more is taken.
        self.flush()?;
        let tls = self.tls.as_mut().expect("checked above");
        let taken = tls.write_plain(bytes)?;
        self.flush()?;
        match taken {
            0 if !bytes.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            taken => Ok(taken),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match Transport::flush(self)? {
            true => Ok(()),
            false => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// A TLS failure as an I/O error, on one line.
fn tls_error(error: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {error}"))
}
