//! A connection's byte stream, in the clear or under TLS, for event loops whose sockets never
//! block (issue 23, item 5): rustls's `ServerConnection` keeps the records, the sockets stay
//! non-blocking, and a read or write that would wait says `WouldBlock` as a socket's would, so
//! a client in the middle of a TLS handshake holds up no one else on its loop.
//!
//! Two differences from a plain socket a caller must mind: a read that returned less than it
//! asked for does not mean the socket is empty (rustls takes records in pieces), so read until
//! `WouldBlock`; and bytes written may still wait inside rustls after `write` took them all,
//! so call [`Transport::flush`] until it says everything left.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::{ServerConfig, ServerConnection};

use crate::socket::Socket;

/// A connection's socket, and its TLS session once one has begun.
pub struct Transport {
    socket: Socket,
    tls: Option<Box<ServerConnection>>,
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

    /// Begins TLS as the server: from now on every byte is a TLS record, starting with
    /// `received`, bytes already read from the socket after the last one in the clear.
    pub fn start_tls(&mut self, config: Arc<ServerConfig>, received: &[u8]) -> io::Result<()> {
        if self.tls.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "TLS: already started",
            ));
        }
        let mut tls = ServerConnection::new(config).map_err(tls_error)?;
        let mut rest = received;
        while !rest.is_empty() {
            if tls.read_tls(&mut rest)? == 0 {
                break;
            }
            tls.process_new_packets().map_err(tls_error)?;
        }
        self.tls = Some(Box::new(tls));
        Ok(())
    }

    /// Writes what rustls holds for the socket; `Ok(true)` once nothing is left.
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
            match tls.reader().read(buffer) {
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
                return Err(tls_error(error));
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
                return match tls.reader().read(buffer) {
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
    /// Takes as many bytes as rustls has room for (encrypting them) and sends what the socket
    /// takes; `WouldBlock` when neither has room.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.tls.is_none() {
            return self.socket.write(bytes);
        }
        // Room first: what rustls already holds goes out before more is taken.
        self.flush()?;
        let tls = self.tls.as_mut().expect("checked above");
        let taken = tls.writer().write(bytes)?;
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
