//! A non-blocking client socket of either kind, for the event-loop servers (the key-value
//! server's workers and the NBD server's loops).

use std::io::{self, Read, Write};

/// A connection's socket.
pub enum Socket {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(stream) => stream.read(buf),
            Socket::Unix(stream) => stream.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(stream) => stream.write(buf),
            Socket::Unix(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl mio::event::Source for Socket {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        match self {
            Socket::Tcp(stream) => stream.register(registry, token, interests),
            Socket::Unix(stream) => stream.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        match self {
            Socket::Tcp(stream) => stream.reregister(registry, token, interests),
            Socket::Unix(stream) => stream.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        match self {
            Socket::Tcp(stream) => stream.deregister(registry),
            Socket::Unix(stream) => stream.deregister(registry),
        }
    }
}

impl Socket {
    /// Accepted from a blocking listener: made non-blocking for an event loop.
    pub fn from_std(stream: crate::listen::Stream) -> io::Result<Socket> {
        Ok(match stream {
            crate::listen::Stream::Tcp(stream) => {
                stream.set_nonblocking(true)?;
                Socket::Tcp(mio::net::TcpStream::from_std(stream))
            }
            crate::listen::Stream::Unix(stream) => {
                stream.set_nonblocking(true)?;
                Socket::Unix(mio::net::UnixStream::from_std(stream))
            }
        })
    }

    /// Closes both directions.
    pub fn shutdown(&self) {
        let _ = match self {
            Socket::Tcp(stream) => stream.shutdown(std::net::Shutdown::Both),
            Socket::Unix(stream) => stream.shutdown(std::net::Shutdown::Both),
        };
    }
}
