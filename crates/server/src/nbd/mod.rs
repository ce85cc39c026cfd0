//! The NBD server (docs/block-volumes.md; docs/architecture.md, "Serving"): block volumes
//! exported over the NBD protocol to qemu, the libnbd tools, fio and the Linux nbd driver, on
//! TCP or a Unix socket. An acceptor hands connections to a few event loops ([`event_loop`]),
//! which parse requests and answer those that wait for nothing at once; the rest go to a pool
//! of I/O workers ([`workers`]), so that many requests of one client or of many are in flight
//! together. The wire format (handshake, request headers, replies) is `heterarchy-nbd`'s; this
//! module owns the sockets, the threads and the volumes.

pub mod budget;
mod connection;
mod event_loop;
mod reply;
mod workers;

use std::any::Any;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use heterarchy_device::BlockDevice;
use heterarchy_nbd::constants::*;
use heterarchy_nbd::{BlockSizes, ExportCatalog, ExportInfo, TlsMode};
use heterarchy_volume::Volume;

use crate::listen::Listener;
use crate::peers::PeerCounts;
use crate::socket::Socket;
use crate::stopping::Stopping;
use crate::tls::TlsServer;
use budget::ServerBudget;
use event_loop::Handoff;
use workers::Workers;

/// Connections served at once unless the config says otherwise (`[server] max_connections`);
/// more are closed as soon as they are accepted.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// What a client can make the server hold, and for how long (docs/reliability.md, "Limits on
/// what a client can make a server hold").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Bytes of requests and answers one connection holds at most (`[server]
    /// connection_buffer`): READ lengths and WRITE payloads from the header's arrival until
    /// the answer is sent.
    pub connection_buffer_bytes: usize,
    /// The same for all connections together (`[server] server_buffer`), beyond which only a
    /// small request of a connection that holds nothing goes ahead.
    pub server_buffer_bytes: usize,
    /// A client that has not chosen an export this long after it connected is closed
    /// (`[server] handshake_timeout_s`); TLS and its authentication are part of the handshake.
    pub handshake_timeout: Duration,
    /// A client past its handshake that sends nothing and waits for nothing this long is
    /// closed (`[server] idle_timeout_s`); none by default, as the Linux nbd driver and qemu
    /// hold their connections open while idle.
    pub idle_timeout: Option<Duration>,
    /// Connections one client (an address, or a user on a Unix socket) holds at most
    /// (`[server] max_connections_per_peer`).
    pub max_connections_per_peer: usize,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits {
            connection_buffer_bytes: 64 << 20,
            server_buffer_bytes: 1 << 30,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: None,
            max_connections_per_peer: 1024,
        }
    }
}

/// How many threads serve.
#[derive(Clone, Copy, Debug)]
pub struct Threads {
    /// Event loops: parsing, answering hits in memory, sending.
    pub loops: usize,
    /// I/O workers: requests that wait for a device (a disk, a paced device, a flush). Their
    /// number bounds the requests in flight below the loops.
    pub io_workers: usize,
}

/// How the server serves: its threads, its limit on connections, and TLS.
#[derive(Clone)]
pub struct Settings {
    /// The event loops and I/O workers.
    pub threads: Threads,
    /// Connections served at once; one more is closed as soon as it is accepted, and the
    /// others go on.
    pub max_connections: usize,
    /// How TLS is offered (proto.md "Server-side requirements").
    pub tls: TlsMode,
    /// What TLS runs with; `Some` unless `tls` is off.
    pub tls_server: Option<TlsServer>,
    /// Bytes, deadlines and connections per client.
    pub limits: ClientLimits,
    /// Set when the server stops: requests are refused from then on.
    pub stopping: Arc<Stopping>,
}

/// What every export offers: flush, FUA, trim, write zeroes, and several connections at once
/// (every connection shares one volume, whose FLUSH covers writes answered on any of them).
const TRANSMISSION_FLAGS: u16 = FLAG_HAS_FLAGS
    | FLAG_SEND_FLUSH
    | FLAG_SEND_FUA
    | FLAG_SEND_TRIM
    | FLAG_SEND_WRITE_ZEROES
    | FLAG_CAN_MULTI_CONN;

/// One export: a block device the workers serve by blocking calls, many in flight at once
/// (`heterarchy_device::BlockDevice`); a cached volume is one too, and also answers what
/// waits for nothing on the event loops, by its own submission path.
#[derive(Clone)]
pub enum Export {
    Cached(Arc<Volume>),
    Device(Arc<dyn BlockDevice>),
}

impl Export {
    /// The block device it is.
    pub fn device(&self) -> &dyn BlockDevice {
        match self {
            Export::Cached(volume) => volume.as_ref(),
            Export::Device(device) => device.as_ref(),
        }
    }
}

/// The exports of a server, by name. The empty name (proto.md's default export) is the first.
pub struct Exports {
    exports: Vec<Export>,
}

impl Exports {
    pub fn new(exports: Vec<Export>) -> Exports {
        Exports { exports }
    }
}

impl ExportCatalog for Exports {
    type Export = Export;

    fn names(&self) -> Vec<String> {
        self.exports
            .iter()
            .map(|export| export.device().name().to_string())
            .collect()
    }

    fn find(&self, name: &[u8]) -> Option<Export> {
        if name.is_empty() {
            return self.exports.first().cloned();
        }
        self.exports
            .iter()
            .find(|export| export.device().name().as_bytes() == name)
            .cloned()
    }

    fn describe(&self, export: &Export) -> ExportInfo {
        let device = export.device();
        ExportInfo {
            name: device.name().to_string(),
            size_bytes: device.size_bytes(),
            transmission_flags: TRANSMISSION_FLAGS,
            // Any alignment works, 4 KiB is best, payloads up to proto.md's 32 MiB.
            block_sizes: BlockSizes::DEFAULT,
        }
    }
}

/// Accepts clients on `listener` for ever and serves them as `settings` say. A connection that
/// fails (a protocol error, an I/O error, a failed TLS handshake) is logged with its peer and
/// the reason; a client that simply closes its socket is not.
pub fn serve(listener: Listener, exports: Arc<Exports>, settings: Settings) -> io::Result<()> {
    let workers = Arc::new(Workers::start(settings.threads.io_workers)?);
    let active = Arc::new(AtomicUsize::new(0));
    let budget = ServerBudget::new(
        settings.limits.server_buffer_bytes,
        settings.limits.connection_buffer_bytes,
    );
    let peers = PeerCounts::new(settings.limits.max_connections_per_peer);
    let loops = event_loop::start(&settings, exports, workers, Arc::clone(&active), budget)?;
    let mut next = 0usize;
    loop {
        let stream = match listener.accept() {
            Ok(stream) => stream,
            Err(error) => {
                // Out of descriptors, say: wait for connections to go rather than spin.
                eprintln!("heterarchy: nbd: accept failed: {error}");
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= settings.max_connections {
            active.fetch_sub(1, Ordering::SeqCst);
            stream.shutdown();
            continue;
        }
        let peer = stream.peer();
        let Some(peer_slot) = peers.admit(stream.peer_id()) else {
            active.fetch_sub(1, Ordering::SeqCst);
            stream.shutdown();
            continue;
        };
        match Socket::from_std(stream) {
            Ok(socket) => {
                loops[next % loops.len()].hand(Handoff {
                    socket,
                    peer,
                    peer_slot,
                });
                next = next.wrapping_add(1);
            }
            Err(error) => {
                active.fetch_sub(1, Ordering::SeqCst);
                eprintln!("heterarchy: nbd: connection from {peer}: {error}");
            }
        }
    }
}

/// Whether `error` only says the client closed its socket, at any point: nothing to log.
fn client_went_away(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

/// What a panic said, for the log.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::panic::catch_unwind;

    #[test]
    fn panics_are_described_by_their_message() {
        let caught = catch_unwind(|| panic!("volume {} fell over", 7)).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "volume 7 fell over");
        let caught = catch_unwind(|| std::panic::panic_any(42)).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "a panic without a message");
    }

    #[test]
    fn only_a_closed_socket_goes_unlogged() {
        let closed = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert!(client_went_away(&closed));
        let protocol: io::Error = heterarchy_nbd::ProtocolError::new("request magic", "bad").into();
        assert!(!client_went_away(&protocol));
        assert!(!client_went_away(&io::Error::other("disk on fire")));
    }
}
