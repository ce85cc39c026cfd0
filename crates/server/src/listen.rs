//! Where a server listens: TCP (127.0.0.1 unless told otherwise) or a Unix socket, as nbdkit's
//! `-i`/`-p` and `-U` choose.

use std::fmt;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::AddressError;
use crate::peers::Peer;

/// A listening address: `HOST:PORT` or `unix:PATH`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ListenAddr {
    Tcp(String),
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = AddressError;

    fn from_str(text: &str) -> Result<ListenAddr, AddressError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(AddressError::NoSocketPath);
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(ListenAddr::Tcp(text.to_string()))
            }
            _ => Err(AddressError::Malformed {
                text: text.to_string(),
            }),
        }
    }
}

impl TryFrom<String> for ListenAddr {
    type Error = AddressError;

    fn try_from(text: String) -> Result<ListenAddr, AddressError> {
        text.parse()
    }
}

impl From<ListenAddr> for String {
    fn from(addr: ListenAddr) -> String {
        addr.to_string()
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => f.write_str(addr),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// Binds a Unix socket at `path` (docs/reliability.md, "Files on disk"). A socket file left by
/// a server that is gone is replaced; one that a running server holds is not: a connect is
/// tried first, and only a refused one (ECONNREFUSED: nobody listens) lets the file go. The
/// socket's mode is the umask's, as nbdkit's and memcached's without `-a`: to let only the
/// owner connect, put it in a directory only the owner can enter. The error names the path.
pub fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    if std::fs::symlink_metadata(path)
        .is_ok_and(|meta| std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()))
    {
        match UnixStream::connect(path) {
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another server is listening there", path.display()),
                ))
            }
            Err(error) if error.raw_os_error() == Some(libc::ECONNREFUSED) => {
                std::fs::remove_file(path).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot remove the stale socket {}: {e}", path.display()),
                    )
                })?;
            }
            // Anything else (no permission to connect): the file stays, and the bind says why.
            Err(_) => {}
        }
    }
    UnixListener::bind(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen on {}: {e}", path.display()),
        )
    })
}

/// A bound listener of either kind.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `addr`; a stale Unix socket file is replaced ([`bind_unix`]).
    pub fn bind(addr: &ListenAddr) -> io::Result<Listener> {
        match addr {
            ListenAddr::Tcp(text) => TcpListener::bind(text)
                .map(Listener::Tcp)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {text}: {e}"))),
            ListenAddr::Unix(path) => {
                bind_unix(path).map(|listener| Listener::Unix(listener, path.clone()))
            }
        }
    }

    /// Where it listens (the port the system chose, for port 0).
    pub fn local_addr(&self) -> String {
        match self {
            Listener::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|_| "?".to_string(), |addr| addr.to_string()),
            Listener::Unix(_, path) => format!("unix:{}", path.display()),
        }
    }

    /// Waits for the next client.
    pub fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, _) = listener.accept()?;
                // Replies are batched by the server itself; Nagle would only delay them.
                stream.set_nodelay(true)?;
                prefer_cheap_congestion_control(&stream);
                Ok(Stream::Tcp(stream))
            }
            Listener::Unix(listener, _) => Ok(Stream::Unix(listener.accept()?.0)),
        }
    }
}

/// Loopback and LAN clients gain nothing from BBR's pacing model, which costs CPU on every
/// segment; reno is the kernel's cheapest. Kept as is where the kernel refuses.
fn prefer_cheap_congestion_control(stream: &TcpStream) {
    let name = b"reno";
    // SAFETY: a valid socket and a buffer of the length given.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(stream),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        );
    }
}

/// A connection of either kind.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Who is at the other end, for logs: the peer's address on TCP; on a Unix socket, whose
    /// clients have no address, the socket's path.
    pub fn peer(&self) -> String {
        match self {
            Stream::Tcp(stream) => stream.peer_addr().map_or_else(
                |_| "an unknown TCP peer".to_string(),
                |addr| addr.to_string(),
            ),
            Stream::Unix(stream) => stream
                .local_addr()
                .ok()
                .and_then(|addr| addr.as_pathname().map(|path| path.display().to_string()))
                .map_or_else(
                    || "a Unix socket".to_string(),
                    |path| format!("unix:{path}"),
                ),
        }
    }

    /// Who the client is, to count its connections by: its address on TCP, its user on a
    /// Unix socket.
    pub fn peer_id(&self) -> Peer {
        match self {
            Stream::Tcp(stream) => stream
                .peer_addr()
                .map_or(Peer::Unknown, |addr| Peer::ip(addr.ip())),
            Stream::Unix(stream) => Peer::of_unix(stream),
        }
    }

    /// Closes both directions: how a connection over the limit is refused.
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(stream) => stream.shutdown(Shutdown::Both),
            Stream::Unix(stream) => stream.shutdown(Shutdown::Both),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_unix_addresses() {
        assert_eq!(
            "127.0.0.1:10809".parse::<ListenAddr>(),
            Ok(ListenAddr::Tcp("127.0.0.1:10809".into()))
        );
        assert_eq!(
            "unix:/run/h.sock".parse::<ListenAddr>(),
            Ok(ListenAddr::Unix("/run/h.sock".into()))
        );
        for bad in ["10809", "127.0.0.1", "host:port", "unix:", ":80"] {
            assert!(bad.parse::<ListenAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_live_socket_is_kept_and_a_stale_one_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sock");
        let live = bind_unix(&path).unwrap();
        let error = bind_unix(&path).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("{}: another server is listening there", path.display())
        );
        assert!(path.exists());
        // Its server gone, the file is stale: replaced.
        drop(live);
        let again = bind_unix(&path).unwrap();
        drop(again);
        // Not a socket: never removed.
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"data").unwrap();
        assert!(bind_unix(&plain).is_err());
        assert_eq!(std::fs::read(&plain).unwrap(), b"data");
    }
}
