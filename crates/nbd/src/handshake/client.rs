//! The client's side of fixed newstyle negotiation (proto.md "Fixed newstyle negotiation",
//! "Option types") as a state machine over bytes. It waits for the server's greeting, answers
//! with its flags (NO_ZEROES when offered), optionally negotiates structured replies, then
//! either chooses an export with `NBD_OPT_GO` (asking for block sizes, and falling back to
//! `NBD_OPT_EXPORT_NAME` on a server without it, as proto.md says a client SHOULD) or lists the
//! exports with `NBD_OPT_LIST` and aborts.

use crate::constants::*;
use crate::handshake::messages::{
    compose_info_request, compose_option, parse_greeting, parse_option_reply, parse_server_entry,
    BlockSizes, Info, OptionReply,
};
use crate::parse::{Fields, Parsed, ProtocolError};
use std::fmt;

/// What a client learns about the export it chose (proto.md `NBD_INFO_EXPORT`,
/// `NBD_INFO_BLOCK_SIZE`, `NBD_OPT_STRUCTURED_REPLY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The export's size in bytes.
    pub size_bytes: u64,
    /// proto.md "Transmission flags".
    pub transmission_flags: u16,
    /// The block size constraints, when the server sent them (never after the
    /// `NBD_OPT_EXPORT_NAME` fallback).
    pub block_sizes: Option<BlockSizes>,
    /// Whether the server agreed to structured replies: then every READ is answered by
    /// structured reply chunks (proto.md "Structured reply chunk message").
    pub structured_replies: bool,
}

/// An option the server refused with an error reply (proto.md "Option reply types").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The option refused.
    pub option: u32,
    /// The error reply type, `REP_ERR_*`.
    pub reply_type: u32,
    /// The server's message, if it sent one.
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the NBD server refused {} with {}",
            option_name(self.option),
            reply_type_name(self.reply_type)
        )?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

/// What one step of the client's handshake came to (proto.md "Termination of the session
/// during option haggling": transmission, or a soft disconnect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// Negotiation goes on: send the output, then feed what the server sends next.
    Negotiating,
    /// Send the output; transmission begins on the export described.
    Ready(Negotiated),
    /// The exports' names; an `NBD_OPT_ABORT` is in the output: send it, then close.
    Listed(Vec<String>),
    /// The server refused the export (or the list); an `NBD_OPT_ABORT` is in the output: send
    /// it, then close.
    Refused(Refusal),
}

/// What the client negotiates for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Goal {
    /// An export, with structured replies if the server agrees and `structured_replies`.
    Go {
        structured_replies: bool,
    },
    List,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Greeting,
    StructuredReply,
    Go,
    ExportName,
    List,
    Finished,
}

/// The client's handshake state machine (proto.md "Fixed newstyle negotiation"). It performs
/// no I/O: feed it what the server sends with [`receive`](ClientHandshake::receive) and send
/// whatever it appends to the output.
#[derive(Debug, Clone)]
pub struct ClientHandshake {
    goal: Goal,
    /// The export chosen (empty for the default export, or when listing).
    export_name: String,
    state: State,
    no_zeroes: bool,
    structured_replies: bool,
    export: Option<(u64, u16)>,
    block_sizes: Option<BlockSizes>,
    names: Vec<String>,
}

impl ClientHandshake {
    /// A handshake that chooses `export_name` (empty: the server's default export), asking for
    /// structured replies first if `structured_replies`.
    pub fn go(export_name: &str, structured_replies: bool) -> ClientHandshake {
        ClientHandshake::new(Goal::Go { structured_replies }, export_name)
    }

    /// A handshake that lists the server's exports (`NBD_OPT_LIST`), then aborts (`NBD_OPT_ABORT`).
    pub fn list() -> ClientHandshake {
        ClientHandshake::new(Goal::List, "")
    }

    fn new(goal: Goal, export_name: &str) -> ClientHandshake {
        ClientHandshake {
            goal,
            export_name: export_name.to_string(),
            state: State::Greeting,
            no_zeroes: false,
            structured_replies: false,
            export: None,
            block_sizes: None,
            names: Vec::new(),
        }
    }

    /// Feeds the bytes received and not yet consumed; handles at most one server message,
    /// appending what to send to `output`. `Found { consumed, .. }` says how many input bytes
    /// to drop; `NeedMore` consumed none.
    pub fn receive(
        &mut self,
        input: &[u8],
        output: &mut Vec<u8>,
    ) -> Result<Parsed<ClientEvent>, ProtocolError> {
        match self.state {
            State::Greeting => {
                let Some((flags, consumed)) = parse_greeting(input)?.found() else {
                    return Ok(Parsed::NeedMore);
                };
                if flags & FLAG_FIXED_NEWSTYLE == 0 {
                    return Err(ProtocolError::new(
                        "handshake flags",
                        format!(
                            "{flags:#x} lacks NBD_FLAG_FIXED_NEWSTYLE, which this client needs"
                        ),
                    ));
                }
                // proto.md "Client flags": NO_ZEROES MUST NOT be set unless the server set it.
                self.no_zeroes = flags & FLAG_NO_ZEROES != 0;
                let client_flags =
                    FLAG_C_FIXED_NEWSTYLE | if self.no_zeroes { FLAG_C_NO_ZEROES } else { 0 };
                output.extend_from_slice(&client_flags.to_be_bytes());
                self.state = match &self.goal {
                    Goal::Go {
                        structured_replies: true,
                    } => {
                        compose_option(output, OPT_STRUCTURED_REPLY, &[]);
                        State::StructuredReply
                    }
                    Goal::Go { .. } => self.send_go(output),
                    Goal::List => {
                        compose_option(output, OPT_LIST, &[]);
                        State::List
                    }
                };
                Ok(found(ClientEvent::Negotiating, consumed))
            }
            State::StructuredReply => {
                let Some((reply, consumed)) = reply_to(OPT_STRUCTURED_REPLY, input)? else {
                    return Ok(Parsed::NeedMore);
                };
                match reply.reply_type {
                    REP_ACK => self.structured_replies = true,
                    // proto.md: clients SHOULD handle NBD_REP_ERR_UNSUP; no structured replies.
                    _ if reply.is_error() => self.structured_replies = false,
                    other => return Err(unexpected_reply(OPT_STRUCTURED_REPLY, other)),
                }
                self.state = self.send_go(output);
                Ok(found(ClientEvent::Negotiating, consumed))
            }
            State::Go => {
                let Some((reply, consumed)) = reply_to(OPT_GO, input)? else {
                    return Ok(Parsed::NeedMore);
                };
                let event = match reply.reply_type {
                    REP_INFO => {
                        match Info::parse(reply.data)? {
                            Info::Export {
                                size_bytes,
                                transmission_flags,
                            } => self.export = Some((size_bytes, transmission_flags)),
                            Info::BlockSize(sizes) => self.block_sizes = Some(sizes),
                            // proto.md: the client MUST ignore what it does not understand.
                            _ => {}
                        }
                        ClientEvent::Negotiating
                    }
                    REP_ACK => {
                        let Some((size_bytes, transmission_flags)) = self.export else {
                            return Err(ProtocolError::new(
                                "NBD_OPT_GO reply",
                                "NBD_REP_ACK came before any NBD_INFO_EXPORT",
                            ));
                        };
                        self.state = State::Finished;
                        ClientEvent::Ready(Negotiated {
                            size_bytes,
                            transmission_flags,
                            block_sizes: self.block_sizes,
                            structured_replies: self.structured_replies,
                        })
                    }
                    // proto.md: fall back to NBD_OPT_EXPORT_NAME on a server without NBD_OPT_GO.
                    REP_ERR_UNSUP => {
                        compose_option(output, OPT_EXPORT_NAME, self.export_name.as_bytes());
                        self.state = State::ExportName;
                        ClientEvent::Negotiating
                    }
                    _ if reply.is_error() => self.refuse(&reply, output),
                    other => return Err(unexpected_reply(OPT_GO, other)),
                };
                Ok(found(event, consumed))
            }
            State::ExportName => {
                let zeroes = if self.no_zeroes {
                    0
                } else {
                    EXPORT_NAME_ZEROES_BYTES
                };
                let mut fields = Fields::new(input);
                let (Some(size_bytes), Some(transmission_flags), Some(_)) =
                    (fields.u64(), fields.u16(), fields.bytes(zeroes))
                else {
                    return Ok(Parsed::NeedMore);
                };
                self.state = State::Finished;
                let negotiated = Negotiated {
                    size_bytes,
                    transmission_flags,
                    block_sizes: None,
                    structured_replies: self.structured_replies,
                };
                Ok(found(ClientEvent::Ready(negotiated), fields.consumed()))
            }
            State::List => {
                let Some((reply, consumed)) = reply_to(OPT_LIST, input)? else {
                    return Ok(Parsed::NeedMore);
                };
                let event = match reply.reply_type {
                    REP_SERVER => {
                        let name = parse_server_entry(reply.data)?;
                        self.names.push(String::from_utf8_lossy(name).into_owned());
                        ClientEvent::Negotiating
                    }
                    REP_ACK => {
                        compose_option(output, OPT_ABORT, &[]);
                        self.state = State::Finished;
                        ClientEvent::Listed(std::mem::take(&mut self.names))
                    }
                    _ if reply.is_error() => self.refuse(&reply, output),
                    other => return Err(unexpected_reply(OPT_LIST, other)),
                };
                Ok(found(event, consumed))
            }
            State::Finished => Err(ProtocolError::new(
                "handshake",
                "negotiation is over; expected no more option replies",
            )),
        }
    }

    fn send_go(&self, output: &mut Vec<u8>) -> State {
        let mut data = Vec::new();
        // Asking for block sizes promises to honour them (proto.md "Block size constraints").
        compose_info_request(&mut data, self.export_name.as_bytes(), &[INFO_BLOCK_SIZE]);
        compose_option(output, OPT_GO, &data);
        State::Go
    }

    /// A soft disconnect after a refusal (proto.md: a client ends the session with
    /// `NBD_OPT_ABORT`).
    fn refuse(&mut self, reply: &OptionReply<'_>, output: &mut Vec<u8>) -> ClientEvent {
        compose_option(output, OPT_ABORT, &[]);
        self.state = State::Finished;
        ClientEvent::Refused(Refusal {
            option: reply.option,
            reply_type: reply.reply_type,
            message: String::from_utf8_lossy(reply.data).into_owned(),
        })
    }
}

fn found(event: ClientEvent, consumed: usize) -> Parsed<ClientEvent> {
    Parsed::Found {
        value: event,
        consumed,
    }
}

/// The whole option reply at the front of `input` and its byte count, checked to answer
/// `option` (proto.md "Fixed newstyle negotiation": a reply names "the option as sent by the
/// client"); `None` until it has all arrived.
fn reply_to(option: u32, input: &[u8]) -> Result<Option<(OptionReply<'_>, usize)>, ProtocolError> {
    let Some((reply, consumed)) = parse_option_reply(input)?.found() else {
        return Ok(None);
    };
    if reply.option != option {
        return Err(ProtocolError::new(
            "option reply option",
            format!(
                "expected {} ({option}), found {}",
                option_name(option),
                reply.option
            ),
        ));
    }
    Ok(Some((reply, consumed)))
}

fn unexpected_reply(option: u32, reply_type: u32) -> ProtocolError {
    ProtocolError::new(
        "option reply type",
        format!(
            "{} ({reply_type:#x}) is no answer to {}",
            reply_type_name(reply_type),
            option_name(option)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::messages::{compose_option_reply, compose_server_entry, greeting};

    /// Feeds `input` whole; returns the non-`Negotiating` event that ended it, if any.
    fn feed(
        handshake: &mut ClientHandshake,
        input: &[u8],
        output: &mut Vec<u8>,
    ) -> Option<Result<ClientEvent, ProtocolError>> {
        let mut at = 0;
        loop {
            match handshake.receive(&input[at..], output) {
                Ok(Parsed::NeedMore) => return None,
                Ok(Parsed::Found {
                    value: ClientEvent::Negotiating,
                    consumed,
                }) => at += consumed,
                Ok(Parsed::Found { value, .. }) => return Some(Ok(value)),
                Err(error) => return Some(Err(error)),
            }
        }
    }

    fn info_reply(output: &mut Vec<u8>, item: Info<'_>) {
        let mut data = Vec::new();
        item.compose(&mut data);
        compose_option_reply(output, OPT_GO, REP_INFO, &data);
    }

    #[test]
    fn answers_the_greeting_with_its_flags_and_first_option() {
        let mut handshake = ClientHandshake::go("vol", true);
        let mut output = Vec::new();
        assert_eq!(
            feed(&mut handshake, &greeting(FLAG_FIXED_NEWSTYLE), &mut output),
            None
        );
        assert_eq!(
            &output[..4],
            &[0, 0, 0, 1],
            "no NO_ZEROES the server did not offer"
        );
        assert_eq!(&output[4..12], b"IHAVEOPT");
        assert_eq!(&output[12..16], &OPT_STRUCTURED_REPLY.to_be_bytes());
        let mut plain = ClientHandshake::go("vol", false);
        let mut output = Vec::new();
        feed(&mut plain, &greeting(3), &mut output);
        assert_eq!(&output[..4], &[0, 0, 0, 3]);
        assert_eq!(&output[12..16], &OPT_GO.to_be_bytes());
        let error = ClientHandshake::list()
            .receive(&greeting(0), &mut Vec::new())
            .unwrap_err();
        assert_eq!(error.field, "handshake flags");
    }

    #[test]
    fn go_collects_the_export_and_its_block_sizes() {
        let mut handshake = ClientHandshake::go("vol", true);
        let mut input = greeting(3).to_vec();
        compose_option_reply(&mut input, OPT_STRUCTURED_REPLY, REP_ACK, &[]);
        info_reply(&mut input, Info::Name(b"vol"));
        info_reply(
            &mut input,
            Info::Export {
                size_bytes: 1 << 30,
                transmission_flags: 0x10d,
            },
        );
        let sizes = BlockSizes {
            minimum: 512,
            preferred: 4096,
            maximum: 1 << 20,
        };
        info_reply(&mut input, Info::BlockSize(sizes));
        compose_option_reply(&mut input, OPT_GO, REP_ACK, &[]);
        let ending = feed(&mut handshake, &input, &mut Vec::new());
        assert_eq!(
            ending,
            Some(Ok(ClientEvent::Ready(Negotiated {
                size_bytes: 1 << 30,
                transmission_flags: 0x10d,
                block_sizes: Some(sizes),
                structured_replies: true
            })))
        );
    }

    #[test]
    fn an_ack_without_export_information_is_an_error() {
        let mut handshake = ClientHandshake::go("", false);
        let mut input = greeting(3).to_vec();
        compose_option_reply(&mut input, OPT_GO, REP_ACK, &[]);
        let ending = feed(&mut handshake, &input, &mut Vec::new());
        assert_eq!(ending.unwrap().unwrap_err().field, "NBD_OPT_GO reply");
    }

    #[test]
    fn unsupported_structured_replies_and_go_fall_back() {
        let mut handshake = ClientHandshake::go("old", true);
        let mut input = greeting(FLAG_FIXED_NEWSTYLE).to_vec();
        compose_option_reply(&mut input, OPT_STRUCTURED_REPLY, REP_ERR_UNSUP, &[]);
        compose_option_reply(&mut input, OPT_GO, REP_ERR_UNSUP, &[]);
        input.extend_from_slice(&(8u64 << 20).to_be_bytes());
        input.extend_from_slice(&1u16.to_be_bytes());
        let mut output = Vec::new();
        // Without NO_ZEROES the reply to NBD_OPT_EXPORT_NAME ends with 124 zeroes.
        assert_eq!(feed(&mut handshake.clone(), &input, &mut output), None);
        input.extend_from_slice(&[0; EXPORT_NAME_ZEROES_BYTES]);
        let mut output = Vec::new();
        let ending = feed(&mut handshake, &input, &mut output);
        assert_eq!(
            ending,
            Some(Ok(ClientEvent::Ready(Negotiated {
                size_bytes: 8 << 20,
                transmission_flags: 1,
                block_sizes: None,
                structured_replies: false
            })))
        );
        let export_name_option = &output[output.len() - 19..];
        assert_eq!(&export_name_option[8..12], &OPT_EXPORT_NAME.to_be_bytes());
        assert_eq!(&export_name_option[16..], b"old");
    }

    #[test]
    fn refusals_are_reported_and_followed_by_abort() {
        let mut handshake = ClientHandshake::go("nope", false);
        let mut input = greeting(3).to_vec();
        compose_option_reply(&mut input, OPT_GO, REP_ERR_UNKNOWN, b"no such export");
        let mut output = Vec::new();
        let ending = feed(&mut handshake, &input, &mut output);
        let Some(Ok(ClientEvent::Refused(refusal))) = ending else {
            panic!("expected a refusal, got {ending:?}");
        };
        assert_eq!(refusal.reply_type, REP_ERR_UNKNOWN);
        assert_eq!(
            refusal.to_string(),
            "the NBD server refused NBD_OPT_GO with NBD_REP_ERR_UNKNOWN: no such export"
        );
        assert_eq!(
            &output[output.len() - 8..output.len() - 4],
            &OPT_ABORT.to_be_bytes()
        );
    }

    #[test]
    fn list_collects_names_then_aborts() {
        let mut handshake = ClientHandshake::list();
        let mut input = greeting(3).to_vec();
        for name in ["a", "vol"] {
            let mut entry = Vec::new();
            compose_server_entry(&mut entry, name.as_bytes());
            compose_option_reply(&mut input, OPT_LIST, REP_SERVER, &entry);
        }
        compose_option_reply(&mut input, OPT_LIST, REP_ACK, &[]);
        let mut output = Vec::new();
        let ending = feed(&mut handshake, &input, &mut output);
        assert_eq!(
            ending,
            Some(Ok(ClientEvent::Listed(vec!["a".into(), "vol".into()])))
        );
        assert_eq!(
            &output[output.len() - 8..output.len() - 4],
            &OPT_ABORT.to_be_bytes()
        );
    }

    #[test]
    fn replies_to_another_option_or_of_the_wrong_type_are_errors() {
        let mut input = greeting(3).to_vec();
        compose_option_reply(&mut input, OPT_INFO, REP_ACK, &[]);
        let ending = feed(&mut ClientHandshake::go("", false), &input, &mut Vec::new());
        assert_eq!(ending.unwrap().unwrap_err().field, "option reply option");
        let mut input = greeting(3).to_vec();
        compose_option_reply(&mut input, OPT_LIST, REP_INFO, &[]);
        let ending = feed(&mut ClientHandshake::list(), &input, &mut Vec::new());
        assert_eq!(ending.unwrap().unwrap_err().field, "option reply type");
    }
}
