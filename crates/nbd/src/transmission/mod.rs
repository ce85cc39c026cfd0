//! The transmission phase's messages (proto.md "Transmission"): request headers, simple
//! replies and structured reply chunks, each composed and parsed in one place so that both
//! sides agree on every byte.

pub mod reply;
pub mod request;
pub mod simple;
pub mod structured;

pub use reply::{parse_reply, parse_reply_header, Reply, ReplyHeader};
pub use request::{Command, Request};
pub use simple::{compose_simple_reply, simple_reply_header};
pub use structured::{
    compose_error, compose_none, compose_offset_data, compose_offset_hole, offset_data_header,
    parse_chunk_payload, ChunkHeader, ChunkPayload,
};
