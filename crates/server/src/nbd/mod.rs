//! The NBD server (issue 5, item 4): block volumes exported over the NBD protocol to qemu, the
//! libnbd tools, fio and the Linux nbd driver, on TCP or a Unix socket, one thread per
//! connection.

mod handshake;
mod protocol;
mod transmission;

use std::io::BufReader;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use heterarchy_volume::Volume;

use crate::listen::{Listener, Stream};

/// Connections served at once at most; more are closed at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Socket buffers: a few 64 KiB requests, or hundreds of 4 KiB ones, per system call.
const BUFFER_BYTES: usize = 256 * 1024;

/// The volumes a server exports, by name. The empty name (proto.md's default export) is the
/// first.
pub struct Exports {
    volumes: Vec<Arc<Volume>>,
}

impl Exports {
    pub fn new(volumes: Vec<Arc<Volume>>) -> Exports {
        Exports { volumes }
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

    fn names(&self) -> impl Iterator<Item = &str> {
        self.volumes.iter().map(|volume| volume.name())
    }
}

/// Accepts clients on `listener` for ever, each served on its own thread.
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
        let active = Arc::clone(&active);
        let spawned = std::thread::Builder::new()
            .name("nbd-connection".to_string())
            .spawn(move || {
                let _ = connection(stream, &exports);
                active.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(error) = spawned {
            eprintln!("heterarchy: nbd: cannot start a connection thread: {error}");
        }
    }
}

fn connection(stream: Stream, exports: &Exports) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(BUFFER_BYTES, stream.try_clone()?);
    let mut output = stream.try_clone()?;
    let result = match handshake::negotiate(&mut input, &mut output, exports) {
        Ok(Some(volume)) => transmission::serve(input, output, &volume),
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    };
    stream.shutdown();
    result
}
