//! The server's side of fixed newstyle negotiation (proto.md "Fixed newstyle negotiation",
//! "Option types") as a state machine over bytes: send [`ServerHandshake::greeting`], then feed
//! it what the client sends; it answers every option into an output buffer until the client
//! chooses an export (`NBD_OPT_EXPORT_NAME` or `NBD_OPT_GO`) or leaves. Anything malformed is
//! a [`ProtocolError`] (the server then closes); an option it does not know gets
//! `NBD_REP_ERR_UNSUP` and haggling goes on; option data too large to buffer is skipped in
//! pieces as it arrives and answered `NBD_REP_ERR_TOO_BIG`.
//!
//! TLS (proto.md "TLS support") is negotiated here too, as a [`TlsMode`]: `NBD_OPT_STARTTLS`
//! is acknowledged and answered with [`ServerEvent::StartTls`], after which the server runs
//! the TLS handshake itself and feeds this machine only decrypted bytes.

use crate::constants::*;
use crate::handshake::messages::{
    compose_option_reply, compose_server_entry, greeting, parse_info_request, parse_option_header,
    BlockSizes, Info,
};
use crate::parse::{Parsed, ProtocolError};

/// What the handshake tells a client about an export (proto.md `NBD_INFO_EXPORT`,
/// `NBD_INFO_NAME`, `NBD_INFO_BLOCK_SIZE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportInfo {
    /// The canonical name, shown for the default export when the client asks its name.
    pub name: String,
    /// The export's size in bytes.
    pub size_bytes: u64,
    /// proto.md "Transmission flags": `FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | ...`.
    pub transmission_flags: u16,
    /// proto.md "Block size constraints".
    pub block_sizes: BlockSizes,
}

/// The exports a server offers (proto.md "Option types": `NBD_OPT_LIST`, `NBD_OPT_INFO`,
/// `NBD_OPT_GO`, `NBD_OPT_EXPORT_NAME`), which the server implements over its volumes.
pub trait ExportCatalog {
    /// What the server serves a chosen export with (a volume, say); the handshake hands it
    /// back when transmission begins.
    type Export;

    /// The names `NBD_OPT_LIST` shows, in order.
    fn names(&self) -> Vec<String>;

    /// The export a client's name chooses; the empty name chooses the default export
    /// (proto.md `NBD_OPT_EXPORT_NAME`). `None`: no such export.
    fn find(&self, name: &[u8]) -> Option<Self::Export>;

    /// What the handshake tells clients about `export`.
    fn describe(&self, export: &Self::Export) -> ExportInfo;
}

/// A fixed list of exports is a catalog, the first being the default export: for servers whose
/// exports never change, and for tests. An export is its index in the list.
impl ExportCatalog for [ExportInfo] {
    type Export = usize;

    fn names(&self) -> Vec<String> {
        self.iter().map(|export| export.name.clone()).collect()
    }

    fn find(&self, name: &[u8]) -> Option<usize> {
        if name.is_empty() {
            return (!self.is_empty()).then_some(0);
        }
        self.iter()
            .position(|export| export.name.as_bytes() == name)
    }

    /// `export` is an index [`find`](ExportCatalog::find) returned.
    fn describe(&self, export: &usize) -> ExportInfo {
        self[*export].clone()
    }
}

/// What one step of the server's handshake came to (proto.md "Termination of the session
/// during option haggling").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent<E> {
    /// Haggling goes on: send the output, then feed what the client sends next.
    Negotiating,
    /// Send the output, then serve `export` in transmission (proto.md "Transmission"), with
    /// structured replies if `structured_replies` (proto.md `NBD_OPT_STRUCTURED_REPLY`).
    Transmission { export: E, structured_replies: bool },
    /// The client left (`NBD_OPT_ABORT`), or chose with `NBD_OPT_EXPORT_NAME` an export that
    /// does not exist, which proto.md answers by closing: send the output, then close.
    Closed,
    /// The client sent `NBD_OPT_STARTTLS` and it was acknowledged (proto.md "FORCEDTLS
    /// mode"): send the output in the clear, then run a TLS handshake as the server. Every
    /// byte after the option, already received or not, belongs to TLS; feed this machine only
    /// what TLS decrypts from then on.
    StartTls,
}

/// How a server offers TLS (proto.md "Server-side requirements"), as nbdkit's `--tls` names
/// the modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// NOTLS: `NBD_OPT_STARTTLS` is refused with `NBD_REP_ERR_POLICY`.
    #[default]
    Off,
    /// SELECTIVETLS with every export open either way: a client may upgrade, or not.
    On,
    /// FORCEDTLS: every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` is refused with
    /// `NBD_REP_ERR_TLS_REQD` until TLS is up, and `NBD_OPT_EXPORT_NAME` closes the session.
    Require,
}

impl TlsMode {
    /// The mode's name, as `--tls` takes it.
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Off => "off",
            TlsMode::On => "on",
            TlsMode::Require => "require",
        }
    }
}

impl std::str::FromStr for TlsMode {
    type Err = crate::TlsModeError;

    fn from_str(text: &str) -> Result<TlsMode, crate::TlsModeError> {
        match text {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(crate::TlsModeError {
                text: text.to_string(),
            }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    ClientFlags,
    Options,
    /// Option data over [`MAX_OPTION_BYTES`]: `remaining` bytes are still to be dropped.
    Skipping {
        option: u32,
        remaining: u32,
    },
    Finished,
}

/// The server's handshake state machine (proto.md "Fixed newstyle negotiation"). It performs
/// no I/O: an event loop keeps a receive buffer per connection and calls
/// [`receive`](ServerHandshake::receive) whenever bytes arrive.
#[derive(Debug, Clone)]
pub struct ServerHandshake {
    state: State,
    no_zeroes: bool,
    structured_replies: bool,
    tls: TlsMode,
    /// `NBD_OPT_STARTTLS` was acknowledged: what follows is under TLS.
    tls_started: bool,
}

impl Default for ServerHandshake {
    fn default() -> ServerHandshake {
        ServerHandshake::new()
    }
}

impl ServerHandshake {
    /// The handshake flags offered (proto.md "Handshake flags"): fixed newstyle, and no zeroes
    /// after `NBD_OPT_EXPORT_NAME` for clients that want none.
    pub const HANDSHAKE_FLAGS: u16 = FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES;

    /// A handshake waiting for the client's flags, which come once the greeting is sent; it
    /// offers no TLS.
    pub fn new() -> ServerHandshake {
        ServerHandshake::with_tls(TlsMode::Off)
    }

    /// A handshake that offers TLS as `tls` says; the caller must be able to run a TLS
    /// handshake when it answers [`ServerEvent::StartTls`] (unless `tls` is `Off`).
    pub fn with_tls(tls: TlsMode) -> ServerHandshake {
        ServerHandshake {
            state: State::ClientFlags,
            no_zeroes: false,
            structured_replies: false,
            tls,
            tls_started: false,
        }
    }

    /// Whether options other than `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` are refused now.
    fn tls_required(&self) -> bool {
        self.tls == TlsMode::Require && !self.tls_started
    }

    /// The bytes to send first, before the client sends anything (proto.md "Newstyle
    /// negotiation").
    pub fn greeting() -> [u8; GREETING_BYTES] {
        greeting(Self::HANDSHAKE_FLAGS)
    }

    /// Feeds the bytes received and not yet consumed; answers at most one client message,
    /// appending the reply to `output`. `Found { consumed, .. }` says how many input bytes to
    /// drop; `NeedMore` consumed none. After `Transmission`, the bytes that follow belong to
    /// the transmission phase.
    pub fn receive<C: ExportCatalog + ?Sized>(
        &mut self,
        input: &[u8],
        catalog: &C,
        output: &mut Vec<u8>,
    ) -> Result<Parsed<ServerEvent<C::Export>>, ProtocolError> {
        match self.state {
            State::ClientFlags => {
                let Some(bytes) = input.get(..CLIENT_FLAGS_BYTES) else {
                    return Ok(Parsed::NeedMore);
                };
                let flags = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                // proto.md "Client flags": the server MUST drop the connection on unknown ones.
                let known = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
                if flags & !known != 0 {
                    return Err(ProtocolError::new(
                        "client flags",
                        format!(
                            "{flags:#x} sets unknown bits; expected only FIXED_NEWSTYLE (1) and \
                             NO_ZEROES (2)"
                        ),
                    ));
                }
                self.no_zeroes = flags & FLAG_C_NO_ZEROES != 0;
                self.state = State::Options;
                Ok(Parsed::Found {
                    value: ServerEvent::Negotiating,
                    consumed: CLIENT_FLAGS_BYTES,
                })
            }
            State::Skipping { option, remaining } => {
                if input.is_empty() {
                    return Ok(Parsed::NeedMore);
                }
                let skipped = input.len().min(remaining as usize);
                let remaining = remaining - skipped as u32;
                self.state = if remaining == 0 {
                    let refusal = match self.tls_required() {
                        true => REP_ERR_TLS_REQD,
                        false => REP_ERR_TOO_BIG,
                    };
                    compose_option_reply(output, option, refusal, &[]);
                    State::Options
                } else {
                    State::Skipping { option, remaining }
                };
                Ok(Parsed::Found {
                    value: ServerEvent::Negotiating,
                    consumed: skipped,
                })
            }
            State::Options => {
                let Some((header, header_bytes)) = parse_option_header(input)?.found() else {
                    return Ok(Parsed::NeedMore);
                };
                if header.length > MAX_OPTION_BYTES {
                    self.state = State::Skipping {
                        option: header.option,
                        remaining: header.length,
                    };
                    return Ok(Parsed::Found {
                        value: ServerEvent::Negotiating,
                        consumed: header_bytes,
                    });
                }
                let end = header_bytes + header.length as usize;
                let Some(data) = input.get(header_bytes..end) else {
                    return Ok(Parsed::NeedMore);
                };
                let event = self.answer(header.option, data, catalog, output);
                if matches!(
                    event,
                    ServerEvent::Transmission { .. } | ServerEvent::Closed
                ) {
                    self.state = State::Finished;
                }
                Ok(Parsed::Found {
                    value: event,
                    consumed: end,
                })
            }
            State::Finished => Err(ProtocolError::new(
                "handshake",
                "negotiation is over; expected no more options",
            )),
        }
    }

    /// Answers one whole option (proto.md "Option types").
    fn answer<C: ExportCatalog + ?Sized>(
        &mut self,
        option: u32,
        data: &[u8],
        catalog: &C,
        output: &mut Vec<u8>,
    ) -> ServerEvent<C::Export> {
        if self.tls_required() && option != OPT_STARTTLS && option != OPT_ABORT {
            // proto.md "FORCEDTLS mode": NBD_OPT_EXPORT_NAME cannot be refused, so the
            // session ends; anything else is refused until TLS is up.
            if option == OPT_EXPORT_NAME {
                return ServerEvent::Closed;
            }
            compose_option_reply(output, option, REP_ERR_TLS_REQD, &[]);
            return ServerEvent::Negotiating;
        }
        match option {
            OPT_STARTTLS => {
                let refusal = if self.tls == TlsMode::Off {
                    REP_ERR_POLICY
                } else if self.tls_started || !data.is_empty() {
                    // proto.md: a second STARTTLS is invalid, and the option has no data.
                    REP_ERR_INVALID
                } else {
                    compose_option_reply(output, option, REP_ACK, &[]);
                    self.tls_started = true;
                    // What was negotiated in the clear could have been injected by a man in
                    // the middle; it starts again under TLS (nbdkit's CVE-2021-3716).
                    self.structured_replies = false;
                    return ServerEvent::StartTls;
                };
                compose_option_reply(output, option, refusal, &[]);
                ServerEvent::Negotiating
            }
            OPT_EXPORT_NAME => {
                // proto.md "Conventions": a string MUST be no longer than 4096 bytes.
                if data.len() > MAX_STRING_BYTES {
                    return ServerEvent::Closed;
                }
                let Some(export) = catalog.find(data) else {
                    // proto.md: a server that cannot satisfy NBD_OPT_EXPORT_NAME can only close.
                    return ServerEvent::Closed;
                };
                let info = catalog.describe(&export);
                output.extend_from_slice(&info.size_bytes.to_be_bytes());
                output.extend_from_slice(&info.transmission_flags.to_be_bytes());
                if !self.no_zeroes {
                    output.extend_from_slice(&[0; EXPORT_NAME_ZEROES_BYTES]);
                }
                ServerEvent::Transmission {
                    export,
                    structured_replies: self.structured_replies,
                }
            }
            OPT_ABORT => {
                compose_option_reply(output, option, REP_ACK, &[]);
                ServerEvent::Closed
            }
            OPT_LIST => {
                if !data.is_empty() {
                    compose_option_reply(output, option, REP_ERR_INVALID, &[]);
                    return ServerEvent::Negotiating;
                }
                let mut entry = Vec::new();
                for name in catalog.names() {
                    entry.clear();
                    compose_server_entry(&mut entry, name.as_bytes());
                    compose_option_reply(output, option, REP_SERVER, &entry);
                }
                compose_option_reply(output, option, REP_ACK, &[]);
                ServerEvent::Negotiating
            }
            OPT_INFO | OPT_GO => {
                let request = match parse_info_request(data) {
                    Ok(request) if request.name.len() <= MAX_STRING_BYTES => request,
                    _ => {
                        compose_option_reply(output, option, REP_ERR_INVALID, &[]);
                        return ServerEvent::Negotiating;
                    }
                };
                let Some(export) = catalog.find(request.name) else {
                    compose_option_reply(output, option, REP_ERR_UNKNOWN, &[]);
                    return ServerEvent::Negotiating;
                };
                let info = catalog.describe(&export);
                // proto.md lets a server send block sizes unasked; the name only when asked.
                let mut items = vec![
                    Info::Export {
                        size_bytes: info.size_bytes,
                        transmission_flags: info.transmission_flags,
                    },
                    Info::BlockSize(info.block_sizes),
                ];
                if request.asks_for(INFO_NAME) {
                    let shown = if request.name.is_empty() {
                        info.name.as_bytes()
                    } else {
                        request.name
                    };
                    items.push(Info::Name(shown));
                }
                let mut item_bytes = Vec::new();
                for item in items {
                    item_bytes.clear();
                    item.compose(&mut item_bytes);
                    compose_option_reply(output, option, REP_INFO, &item_bytes);
                }
                compose_option_reply(output, option, REP_ACK, &[]);
                if option == OPT_GO {
                    ServerEvent::Transmission {
                        export,
                        structured_replies: self.structured_replies,
                    }
                } else {
                    ServerEvent::Negotiating
                }
            }
            OPT_STRUCTURED_REPLY => {
                if data.is_empty() {
                    self.structured_replies = true;
                    compose_option_reply(output, option, REP_ACK, &[]);
                } else {
                    compose_option_reply(output, option, REP_ERR_INVALID, &[]);
                }
                ServerEvent::Negotiating
            }
            _ => {
                compose_option_reply(output, option, REP_ERR_UNSUP, &[]);
                ServerEvent::Negotiating
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::messages::{
        compose_info_request, compose_option, parse_option_reply, parse_server_entry, OptionReply,
    };

    /// Two exports, "vol" (the default, 1 MiB) and "b" (2 MiB).
    fn two_exports() -> Vec<ExportInfo> {
        ["vol", "b"]
            .iter()
            .enumerate()
            .map(|(index, name)| ExportInfo {
                name: name.to_string(),
                size_bytes: 1 << (20 + index),
                transmission_flags: FLAG_HAS_FLAGS | FLAG_SEND_FLUSH,
                block_sizes: BlockSizes::DEFAULT,
            })
            .collect()
    }

    /// How a handshake ended (`None`: still haggling) when fed the client flags `flags`, then
    /// `input`, whole; and its output.
    fn run(
        flags: u32,
        input: &[u8],
    ) -> (Option<Result<ServerEvent<usize>, ProtocolError>>, Vec<u8>) {
        run_with(TlsMode::Off, flags, input)
    }

    /// [`run`] for a handshake offering TLS as `tls` says.
    fn run_with(
        tls: TlsMode,
        flags: u32,
        input: &[u8],
    ) -> (Option<Result<ServerEvent<usize>, ProtocolError>>, Vec<u8>) {
        let exports = two_exports();
        let mut handshake = ServerHandshake::with_tls(tls);
        let mut bytes = flags.to_be_bytes().to_vec();
        bytes.extend_from_slice(input);
        let mut output = Vec::new();
        let mut at = 0;
        loop {
            match handshake.receive(&bytes[at..], &exports[..], &mut output) {
                Ok(Parsed::NeedMore) => return (None, output),
                Ok(Parsed::Found {
                    value: ServerEvent::Negotiating,
                    consumed,
                }) => at += consumed,
                Ok(Parsed::Found { value, .. }) => return (Some(Ok(value)), output),
                Err(error) => return (Some(Err(error)), output),
            }
        }
    }

    /// One step that must find a message: its event and the bytes consumed.
    fn found(
        handshake: &mut ServerHandshake,
        input: &[u8],
        output: &mut Vec<u8>,
    ) -> (ServerEvent<usize>, usize) {
        let parsed = handshake.receive(input, &two_exports()[..], output);
        parsed.unwrap().found().expect("a whole message")
    }

    fn replies(mut output: &[u8]) -> Vec<OptionReply<'_>> {
        let mut replies = Vec::new();
        while let Ok(Parsed::Found { value, consumed }) = parse_option_reply(output) {
            replies.push(value);
            output = &output[consumed..];
        }
        assert!(
            output.is_empty(),
            "{} bytes are no option reply",
            output.len()
        );
        replies
    }

    fn go(name: &[u8], requests: &[u16]) -> Vec<u8> {
        let mut data = Vec::new();
        compose_info_request(&mut data, name, requests);
        let mut option = Vec::new();
        compose_option(&mut option, OPT_GO, &data);
        option
    }

    #[test]
    fn a_list_of_exports_is_a_catalog_whose_first_is_the_default() {
        let exports = two_exports();
        assert_eq!(exports.names(), ["vol", "b"]);
        assert_eq!(exports.find(b""), Some(0));
        assert_eq!(exports.find(b"b"), Some(1));
        assert_eq!(exports.find(b"vo"), None);
        assert_eq!(exports.describe(&1).size_bytes, 2 << 20);
        let none: &[ExportInfo] = &[];
        assert_eq!(none.find(b""), None, "no default export without exports");
    }

    #[test]
    fn greeting_offers_fixed_newstyle_and_no_zeroes() {
        let greeting = ServerHandshake::greeting();
        assert_eq!(&greeting[..16], b"NBDMAGICIHAVEOPT");
        assert_eq!(&greeting[16..], &[0, 3]);
    }

    #[test]
    fn unknown_client_flags_close_the_connection() {
        let (ending, output) = run(4, &[]);
        assert_eq!(ending.unwrap().unwrap_err().field, "client flags");
        assert!(output.is_empty());
    }

    #[test]
    fn go_describes_the_export_then_enters_transmission() {
        let (ending, output) = run(3, &go(b"", &[INFO_NAME]));
        assert_eq!(
            ending,
            Some(Ok(ServerEvent::Transmission {
                export: 0,
                structured_replies: false
            }))
        );
        let replies = replies(&output);
        let items: Vec<_> = replies
            .iter()
            .filter(|reply| reply.reply_type == REP_INFO)
            .map(|reply| Info::parse(reply.data).unwrap())
            .collect();
        assert_eq!(
            items,
            [
                Info::Export {
                    size_bytes: 1 << 20,
                    transmission_flags: FLAG_HAS_FLAGS | FLAG_SEND_FLUSH
                },
                Info::BlockSize(BlockSizes {
                    minimum: 1,
                    preferred: 4096,
                    maximum: MAX_PAYLOAD_BYTES
                }),
                // The default export's canonical name.
                Info::Name(b"vol"),
            ]
        );
        assert_eq!(replies.last().unwrap().reply_type, REP_ACK);
    }

    #[test]
    fn structured_replies_are_acknowledged_and_reported_at_go() {
        let mut input = Vec::new();
        compose_option(&mut input, OPT_STRUCTURED_REPLY, &[]);
        input.extend_from_slice(&go(b"b", &[]));
        let (ending, output) = run(1, &input);
        assert_eq!(
            ending,
            Some(Ok(ServerEvent::Transmission {
                export: 1,
                structured_replies: true
            }))
        );
        assert_eq!(replies(&output)[0].reply_type, REP_ACK);
        let mut with_data = Vec::new();
        compose_option(&mut with_data, OPT_STRUCTURED_REPLY, b"x");
        let (_, output) = run(1, &with_data);
        assert_eq!(replies(&output)[0].reply_type, REP_ERR_INVALID);
    }

    #[test]
    fn refusals_keep_haggling_going() {
        let mut input = Vec::new();
        compose_option(&mut input, 0x7fff, b"what is this");
        input.extend_from_slice(&go(b"nope", &[]));
        compose_option(&mut input, OPT_LIST, b"x");
        compose_option(&mut input, OPT_INFO, &[0, 0]);
        compose_option(&mut input, OPT_LIST, &[]);
        let (ending, output) = run(1, &input);
        assert_eq!(ending, None, "still haggling");
        let kinds: Vec<u32> = replies(&output)
            .iter()
            .map(|reply| reply.reply_type)
            .collect();
        assert_eq!(
            kinds,
            [
                REP_ERR_UNSUP,
                REP_ERR_UNKNOWN,
                REP_ERR_INVALID,
                REP_ERR_INVALID,
                REP_SERVER,
                REP_SERVER,
                REP_ACK
            ]
        );
        let names: Vec<&[u8]> = replies(&output)[4..6]
            .iter()
            .map(|reply| parse_server_entry(reply.data).unwrap())
            .collect();
        assert_eq!(names, [&b"vol"[..], b"b"]);
    }

    #[test]
    fn export_name_replies_with_zeroes_unless_the_client_declined_them() {
        let mut input = Vec::new();
        compose_option(&mut input, OPT_EXPORT_NAME, b"b");
        let (ending, with_zeroes) = run(1, &input);
        assert!(matches!(
            ending,
            Some(Ok(ServerEvent::Transmission { export: 1, .. }))
        ));
        assert_eq!(
            with_zeroes.len(),
            EXPORT_NAME_REPLY_BYTES + EXPORT_NAME_ZEROES_BYTES
        );
        assert_eq!(&with_zeroes[..8], &(2u64 << 20).to_be_bytes());
        let (_, without) = run(3, &input);
        assert_eq!(without.len(), EXPORT_NAME_REPLY_BYTES);
        let mut unknown = Vec::new();
        compose_option(&mut unknown, OPT_EXPORT_NAME, b"nope");
        let (ending, output) = run(3, &unknown);
        assert_eq!(ending, Some(Ok(ServerEvent::Closed)));
        assert!(output.is_empty(), "proto.md: the server can only close");
    }

    #[test]
    fn abort_is_acknowledged_and_ends_the_handshake() {
        let mut input = Vec::new();
        compose_option(&mut input, OPT_ABORT, &[]);
        let (ending, output) = run(1, &input);
        assert_eq!(ending, Some(Ok(ServerEvent::Closed)));
        assert_eq!(replies(&output)[0].reply_type, REP_ACK);
    }

    #[test]
    fn oversized_options_are_skipped_in_pieces_then_refused() {
        let exports = two_exports();
        let mut handshake = ServerHandshake::new();
        let mut output = Vec::new();
        let mut header = 1u32.to_be_bytes().to_vec();
        header.extend_from_slice(&IHAVEOPT.to_be_bytes());
        header.extend_from_slice(&OPT_GO.to_be_bytes());
        header.extend_from_slice(&(MAX_OPTION_BYTES + 10).to_be_bytes());
        let (_, consumed) = found(&mut handshake, &header, &mut output);
        let (_, consumed_header) = found(&mut handshake, &header[consumed..], &mut output);
        assert_eq!(consumed_header, OPTION_HEADER_BYTES);
        let piece = vec![0u8; 1000];
        let mut skipped = 0;
        while skipped < MAX_OPTION_BYTES as usize + 10 {
            assert!(output.is_empty(), "answered before the data was skipped");
            let (_, consumed) = found(&mut handshake, &piece, &mut output);
            assert!(consumed <= piece.len());
            skipped += consumed;
        }
        assert_eq!(skipped, MAX_OPTION_BYTES as usize + 10);
        assert_eq!(replies(&output)[0].reply_type, REP_ERR_TOO_BIG);
        assert_eq!(
            handshake.receive(&[], &exports[..], &mut output),
            Ok(Parsed::NeedMore)
        );
    }

    /// The reply types in `output`.
    fn kinds(output: &[u8]) -> Vec<u32> {
        replies(output)
            .iter()
            .map(|reply| reply.reply_type)
            .collect()
    }

    #[test]
    fn export_names_over_the_longest_string_are_refused() {
        let long = vec![b'v'; MAX_STRING_BYTES + 1];
        let (ending, output) = run(1, &go(&long, &[]));
        assert_eq!(ending, None);
        assert_eq!(kinds(&output), [REP_ERR_INVALID]);
        let mut export_name = Vec::new();
        compose_option(&mut export_name, OPT_EXPORT_NAME, &long);
        let (ending, output) = run(1, &export_name);
        assert_eq!(ending, Some(Ok(ServerEvent::Closed)));
        assert!(output.is_empty());
        // At the limit the name is looked up, and found or not.
        let (ending, output) = run(1, &go(&long[1..], &[]));
        assert_eq!(ending, None);
        assert_eq!(kinds(&output), [REP_ERR_UNKNOWN]);
    }

    #[test]
    fn tls_modes_parse_from_their_names() {
        for mode in [TlsMode::Off, TlsMode::On, TlsMode::Require] {
            assert_eq!(mode.name().parse::<TlsMode>(), Ok(mode));
        }
        let error = "yes".parse::<TlsMode>().unwrap_err().to_string();
        assert!(error.contains("off, on or require"), "{error}");
    }

    #[test]
    fn starttls_is_refused_by_policy_when_tls_is_off() {
        let mut input = Vec::new();
        compose_option(&mut input, OPT_STARTTLS, &[]);
        compose_option(&mut input, OPT_LIST, &[]);
        let (ending, output) = run(1, &input);
        assert_eq!(ending, None, "haggling goes on in the clear");
        assert_eq!(
            kinds(&output),
            [REP_ERR_POLICY, REP_SERVER, REP_SERVER, REP_ACK]
        );
    }

    #[test]
    fn require_refuses_every_option_but_starttls_and_abort() {
        let mut input = Vec::new();
        compose_option(&mut input, OPT_LIST, &[]);
        compose_option(&mut input, OPT_STRUCTURED_REPLY, &[]);
        compose_option(&mut input, 0x7fff, b"unknown");
        input.extend_from_slice(&go(b"vol", &[]));
        let mut info = go(b"vol", &[]);
        info[11] = OPT_INFO as u8;
        input.extend_from_slice(&info);
        let (ending, output) = run_with(TlsMode::Require, 1, &input);
        assert_eq!(ending, None, "refusals keep haggling going");
        assert_eq!(kinds(&output), [REP_ERR_TLS_REQD; 5]);
        let mut export_name = Vec::new();
        compose_option(&mut export_name, OPT_EXPORT_NAME, b"vol");
        let (ending, output) = run_with(TlsMode::Require, 1, &export_name);
        assert_eq!(ending, Some(Ok(ServerEvent::Closed)));
        assert!(
            output.is_empty(),
            "proto.md: EXPORT_NAME cannot be refused, only closed"
        );
        let mut abort = Vec::new();
        compose_option(&mut abort, OPT_ABORT, &[]);
        let (ending, output) = run_with(TlsMode::Require, 1, &abort);
        assert_eq!(ending, Some(Ok(ServerEvent::Closed)));
        assert_eq!(kinds(&output), [REP_ACK]);
    }

    #[test]
    fn an_oversized_option_before_tls_is_refused_as_needing_tls() {
        let mut input = IHAVEOPT.to_be_bytes().to_vec();
        input.extend_from_slice(&OPT_GO.to_be_bytes());
        input.extend_from_slice(&(MAX_OPTION_BYTES + 1).to_be_bytes());
        input.resize(input.len() + MAX_OPTION_BYTES as usize + 1, 0);
        let (ending, output) = run_with(TlsMode::Require, 1, &input);
        assert_eq!(ending, None);
        assert_eq!(kinds(&output), [REP_ERR_TLS_REQD]);
    }

    #[test]
    fn starttls_is_acknowledged_once_and_forgets_what_was_negotiated_in_the_clear() {
        for tls in [TlsMode::On, TlsMode::Require] {
            let exports = two_exports();
            let mut handshake = ServerHandshake::with_tls(tls);
            let mut output = Vec::new();
            let mut clear = 1u32.to_be_bytes().to_vec();
            compose_option(&mut clear, OPT_STRUCTURED_REPLY, &[]);
            compose_option(&mut clear, OPT_STARTTLS, b"x");
            compose_option(&mut clear, OPT_STARTTLS, &[]);
            // Bytes after STARTTLS are TLS records; the machine must stop before them.
            clear.extend_from_slice(b"\x16\x03\x01 a ClientHello");
            let mut at = 0;
            let event = loop {
                let (event, consumed) = found(&mut handshake, &clear[at..], &mut output);
                at += consumed;
                if event != ServerEvent::Negotiating {
                    break event;
                }
            };
            assert_eq!(event, ServerEvent::StartTls, "{tls:?}");
            assert_eq!(&clear[at..], b"\x16\x03\x01 a ClientHello");
            let structured = match tls {
                TlsMode::On => REP_ACK,
                _ => REP_ERR_TLS_REQD,
            };
            assert_eq!(
                kinds(&output),
                [structured, REP_ERR_INVALID, REP_ACK],
                "{tls:?}"
            );
            // Under TLS now: a second STARTTLS is invalid, and GO is served, without the
            // structured replies asked for in the clear.
            output.clear();
            let mut secure = Vec::new();
            compose_option(&mut secure, OPT_STARTTLS, &[]);
            secure.extend_from_slice(&go(b"b", &[]));
            let (event, consumed) = found(&mut handshake, &secure, &mut output);
            assert_eq!(event, ServerEvent::Negotiating);
            let parsed = handshake.receive(&secure[consumed..], &exports[..], &mut output);
            let (event, _) = parsed.unwrap().found().expect("GO is whole");
            assert_eq!(
                event,
                ServerEvent::Transmission {
                    export: 1,
                    structured_replies: false
                }
            );
            assert_eq!(kinds(&output)[0], REP_ERR_INVALID);
            assert_eq!(*kinds(&output).last().unwrap(), REP_ACK);
        }
    }

    #[test]
    fn a_bad_option_magic_is_an_error_and_the_end_is_final() {
        let exports = two_exports();
        let (ending, _) = run(1, b"GET / HTTP/1.1\r\n");
        assert_eq!(ending.unwrap().unwrap_err().field, "option magic");
        let mut handshake = ServerHandshake::new();
        let mut input = 1u32.to_be_bytes().to_vec();
        compose_option(&mut input, OPT_ABORT, &[]);
        let mut output = Vec::new();
        let (_, consumed) = found(&mut handshake, &input, &mut output);
        let (event, _) = found(&mut handshake, &input[consumed..], &mut output);
        assert_eq!(event, ServerEvent::Closed);
        assert_eq!(
            handshake
                .receive(&input, &exports[..], &mut output)
                .unwrap_err()
                .field,
            "handshake"
        );
    }
}
