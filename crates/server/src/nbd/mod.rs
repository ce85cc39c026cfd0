//! The NBD server (issue 5, item 4): block volumes exported over the NBD protocol to qemu, the
//! libnbd tools, fio and the Linux nbd driver, on TCP or a Unix socket, one thread per
//! connection. The wire format (handshake, request headers, replies) is `heterarchy-nbd`'s;
//! this module owns the sockets, the threads and the volumes.

mod handshake;
mod transmission;

use std::any::Any;
use std::io::{self, BufReader, Cursor, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use heterarchy_nbd::constants::*;
use heterarchy_nbd::{BlockSizes, ExportCatalog, ExportInfo};
use heterarchy_volume::Volume;

use crate::listen::{Listener, Stream};

/// Connections served at once at most; more are closed at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Socket buffers: a few 64 KiB requests, or hundreds of 4 KiB ones, per system call.
const BUFFER_BYTES: usize = 256 * 1024;

/// What every export offers: flush, FUA, trim, write zeroes, and several connections at once
/// (every connection shares one volume, whose FLUSH covers writes answered on any of them).
const TRANSMISSION_FLAGS: u16 = FLAG_HAS_FLAGS
    | FLAG_SEND_FLUSH
    | FLAG_SEND_FUA
    | FLAG_SEND_TRIM
    | FLAG_SEND_WRITE_ZEROES
    | FLAG_CAN_MULTI_CONN;

/// The volumes a server exports, by name. The empty name (proto.md's default export) is the
/// first.
pub struct Exports {
    volumes: Vec<Arc<Volume>>,
}

impl Exports {
    pub fn new(volumes: Vec<Arc<Volume>>) -> Exports {
        Exports { volumes }
    }
}

impl ExportCatalog for Exports {
    type Export = Arc<Volume>;

    fn names(&self) -> Vec<String> {
        self.volumes
            .iter()
            .map(|volume| volume.name().to_string())
            .collect()
    }

    fn find(&self, name: &[u8]) -> Option<Arc<Volume>> {
        if name.is_empty() {
            return self.volumes.first().cloned();
        }
        self.volumes
            .iter()
            .find(|volume| volume.name().as_bytes() == name)
            .cloned()
    }

    fn describe(&self, volume: &Arc<Volume>) -> ExportInfo {
        ExportInfo {
            name: volume.name().to_string(),
            size_bytes: volume.size_bytes(),
            transmission_flags: TRANSMISSION_FLAGS,
            // Any alignment works, 4 KiB is best, payloads up to proto.md's 32 MiB.
            block_sizes: BlockSizes::DEFAULT,
        }
    }
}

/// A connection's input after the handshake: the bytes the handshake read past its end, then
/// the socket, buffered.
type Input = BufReader<io::Chain<Cursor<Vec<u8>>, Stream>>;

/// Accepts clients on `listener` for ever, each served on its own thread. A connection that
/// fails (a protocol error, an I/O error, a panic) is logged with its peer and the reason; a
/// client that simply closes its socket is not.
pub fn serve(listener: Listener, exports: Arc<Exports>) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok(stream) => stream,
            Err(error) => {
                eprintln!("heterarchy: nbd: accept failed: {error}");
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            stream.shutdown();
            continue;
        }
        let exports = Arc::clone(&exports);
        let counted = Counted(Arc::clone(&active));
        let spawned = std::thread::Builder::new()
            .name("nbd-connection".to_string())
            .spawn(move || {
                let _counted = counted;
                let peer = stream.peer();
                // Release builds abort on panic; elsewhere a panic ends only this connection.
                match catch_unwind(AssertUnwindSafe(|| connection(stream, &exports))) {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) if client_went_away(&error) => {}
                    Ok(Err(error)) => eprintln!("heterarchy: nbd: connection from {peer}: {error}"),
                    Err(panic) => eprintln!(
                        "heterarchy: nbd: connection from {peer}: panicked: {}",
                        panic_message(panic.as_ref())
                    ),
                }
            });
        if let Err(error) = spawned {
            eprintln!("heterarchy: nbd: cannot start a connection thread: {error}");
        }
    }
}

/// One connection counted as active until dropped, however its thread ends.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
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

fn connection(stream: Stream, exports: &Exports) -> io::Result<()> {
    let result = negotiate_then_serve(&stream, exports);
    stream.shutdown();
    result
}

fn negotiate_then_serve(stream: &Stream, exports: &Exports) -> io::Result<()> {
    let mut output = stream.try_clone()?;
    let Some(chosen) = handshake::negotiate(&mut stream.try_clone()?, &mut output, exports)? else {
        return Ok(());
    };
    let input: Input = BufReader::with_capacity(
        BUFFER_BYTES,
        Cursor::new(chosen.leftover).chain(stream.try_clone()?),
    );
    transmission::serve(input, output, &chosen.volume, chosen.structured_replies)
}

#[cfg(test)]
mod tests {
    use super::*;

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
