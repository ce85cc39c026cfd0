//! The handshake phase (proto.md "Handshake"): its messages, and a state machine for each
//! side of fixed newstyle negotiation.

pub mod client;
pub mod messages;
pub mod server;

pub use client::{ClientEvent, ClientHandshake, Negotiated, Refusal};
pub use messages::{
    compose_info_request, compose_option, compose_option_reply, compose_server_entry, greeting,
    parse_greeting, parse_info_request, parse_option_header, parse_option_reply,
    parse_server_entry, BlockSizes, Info, InfoRequest, OptionHeader, OptionReply,
};
pub use server::{ExportCatalog, ExportInfo, ServerEvent, ServerHandshake, TlsMode};
