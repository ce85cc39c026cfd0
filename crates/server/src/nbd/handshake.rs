//! Fixed newstyle negotiation on a blocking socket: `heterarchy-nbd`'s server handshake state
//! machine, fed what the client sends and its answers written back, until the client chooses
//! an export or leaves. Anything malformed closes only this connection.

use std::io::{self, Read, Write};
use std::sync::Arc;

use heterarchy_nbd::constants::{MAX_OPTION_BYTES, OPTION_HEADER_BYTES};
use heterarchy_nbd::{Parsed, ServerEvent, ServerHandshake};
use heterarchy_volume::Volume;

use super::Exports;

/// Bytes asked of the socket per read.
const READ_BYTES: usize = 16 * 1024;

/// The export a client chose and how to serve it.
pub struct Chosen {
    pub volume: Arc<Volume>,
    /// proto.md `NBD_OPT_STRUCTURED_REPLY` was negotiated.
    pub structured_replies: bool,
    /// Bytes read past the end of the handshake: the first requests, if the client did not
    /// wait for the handshake's last reply.
    pub leftover: Vec<u8>,
}

/// Greets the client and haggles; returns the export chosen, or `None` when the client left.
pub fn negotiate(
    input: &mut impl Read,
    output: &mut impl Write,
    exports: &Exports,
) -> io::Result<Option<Chosen>> {
    output.write_all(&ServerHandshake::greeting())?;
    let mut handshake = ServerHandshake::new();
    // The longest message the state machine buffers whole is an option of MAX_OPTION_BYTES.
    let mut received = Vec::with_capacity(OPTION_HEADER_BYTES + MAX_OPTION_BYTES as usize);
    let mut start = 0;
    let mut answer = Vec::new();
    loop {
        match handshake.receive(&received[start..], exports, &mut answer)? {
            Parsed::NeedMore => {
                received.drain(..start);
                start = 0;
                let filled = received.len();
                received.resize(filled + READ_BYTES, 0);
                let read = input.read(&mut received[filled..]);
                received.truncate(filled + read.as_ref().map_or(0, |&count| count));
                match read {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the client closed the connection during the handshake",
                        ))
                    }
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => return Err(error),
                }
            }
            Parsed::Found { value, consumed } => {
                start += consumed;
                if !answer.is_empty() {
                    output.write_all(&answer)?;
                    answer.clear();
                }
                match value {
                    ServerEvent::Negotiating => {}
                    ServerEvent::Transmission {
                        export,
                        structured_replies,
                    } => {
                        return Ok(Some(Chosen {
                            volume: export,
                            structured_replies,
                            leftover: received.split_off(start),
                        }))
                    }
                    ServerEvent::Closed => return Ok(None),
                }
            }
        }
    }
}
