//! The answers of one connection, simple or structured as negotiated (proto.md "Simple reply
//! message", "Structured reply chunk message"): a READ's data follows a header composed first
//! so that it can be read straight into the outgoing bytes; other successes are 16-byte simple
//! replies, which proto.md allows with structured replies too; failures carry their reason in
//! an `NBD_REPLY_TYPE_ERROR` chunk when the client can read one.

use std::io;

use heterarchy_nbd::constants::*;
use heterarchy_nbd::transmission::{
    compose_error, compose_none, compose_simple_reply, offset_data_header,
};
use heterarchy_nbd::Request;

/// The error an NBD client understands for a volume error (proto.md "Error values").
pub fn errno(error: &io::Error) -> u32 {
    match error.kind() {
        io::ErrorKind::InvalidInput => EINVAL,
        io::ErrorKind::ConnectionAborted => ESHUTDOWN,
        _ => EIO,
    }
}

/// How a connection answers.
#[derive(Clone, Copy, Debug)]
pub struct Replies {
    /// proto.md `NBD_OPT_STRUCTURED_REPLY` was negotiated.
    pub structured: bool,
}

impl Replies {
    /// A success without data.
    pub fn success(self, output: &mut Vec<u8>, cookie: u64) {
        compose_simple_reply(output, cookie, 0);
    }

    /// A failure: an error chunk with `reason` when structured, else the error alone.
    pub fn failure(self, output: &mut Vec<u8>, cookie: u64, error: u32, reason: &str) {
        if self.structured {
            compose_error(output, cookie, error, reason, true);
        } else {
            compose_simple_reply(output, cookie, error);
        }
    }

    /// The answer to a command that moved no data to the client.
    pub fn outcome<T>(self, output: &mut Vec<u8>, cookie: u64, result: &io::Result<T>) {
        match result {
            Ok(_) => self.success(output, cookie),
            Err(error) => self.failure(output, cookie, errno(error), &error.to_string()),
        }
    }

    /// Room at the end of `output` for a READ's answer: the header, then `request.length`
    /// bytes for the caller to read into. Returns where the data starts.
    pub fn begin_read(self, output: &mut Vec<u8>, request: &Request) -> usize {
        self.read_header(output, request);
        let data = output.len();
        output.resize(data + request.length as usize, 0);
        data
    }

    /// A READ's header, for `request.length` bytes of data to follow.
    fn read_header(self, output: &mut Vec<u8>, request: &Request) {
        if request.length == 0 {
            // An OFFSET_DATA chunk holds at least one byte; NONE says "done, nothing more".
            if self.structured {
                compose_none(output, request.cookie);
            } else {
                self.success(output, request.cookie);
            }
            return;
        }
        if self.structured {
            output.extend_from_slice(&offset_data_header(
                request.cookie,
                request.offset,
                request.length as usize,
                true,
            ));
        } else {
            compose_simple_reply(output, request.cookie, 0);
        }
    }

    /// A READ's answer on its own: its header, then room for the data, which starts at the
    /// index returned. The room is allocated zeroed by the allocator (fresh pages for a large
    /// READ, which the read then fills once) rather than written with zeroes first.
    pub fn read_answer(self, request: &Request) -> (Vec<u8>, usize) {
        let mut header = Vec::new();
        self.read_header(&mut header, request);
        let data = header.len();
        let mut answer = vec![0u8; data + request.length as usize];
        answer[..data].copy_from_slice(&header);
        (answer, data)
    }

    /// Ends a READ begun at `start` (where its header began): on failure the header and room
    /// are taken back and a failure answered instead.
    pub fn end_read<T>(
        self,
        output: &mut Vec<u8>,
        start: usize,
        request: &Request,
        result: &io::Result<T>,
    ) {
        if let Err(error) = result {
            output.truncate(start);
            self.failure(output, request.cookie, errno(error), &error.to_string());
        }
    }
}

/// The reason sent for a request over proto.md's payload limit.
pub fn too_large(request: &Request) -> String {
    format!(
        "{:?} of {} bytes is over the {MAX_PAYLOAD_BYTES}-byte maximum",
        request.command, request.length
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_nbd::transmission::parse_reply;
    use heterarchy_nbd::{ChunkPayload, Command, Parsed, Reply};

    fn read_request(length: u32) -> Request {
        Request {
            flags: 0,
            command: Command::Read,
            cookie: 9,
            offset: 4096,
            length,
        }
    }

    #[test]
    fn a_read_answer_on_its_own_is_the_answer_begun_in_place() {
        for structured in [false, true] {
            let replies = Replies { structured };
            for length in [0, 1, 4096] {
                let request = read_request(length);
                let mut in_place = Vec::new();
                let data = replies.begin_read(&mut in_place, &request);
                assert_eq!(replies.read_answer(&request), (in_place, data));
            }
        }
    }

    #[test]
    fn a_failed_read_takes_its_room_back() {
        for structured in [false, true] {
            let replies = Replies { structured };
            let mut output = b"earlier".to_vec();
            let request = read_request(512);
            let data = replies.begin_read(&mut output, &request);
            assert_eq!(output.len(), data + 512);
            replies.end_read(
                &mut output,
                7,
                &request,
                &Err::<(), _>(io::Error::other("disk on fire")),
            );
            assert_eq!(&output[..7], b"earlier");
            let Ok(Parsed::Found { value, .. }) = parse_reply(&output[7..], |_| Some(512)) else {
                panic!("no reply parsed");
            };
            let error = match value {
                Reply::Simple { error, .. } => error,
                Reply::Chunk {
                    payload: ChunkPayload::Error { error, message, .. },
                    ..
                } => {
                    assert_eq!(message, b"disk on fire");
                    error
                }
                other => panic!("not an error: {other:?}"),
            };
            assert_eq!(error, EIO);
        }
    }
}
