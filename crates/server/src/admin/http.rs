//! The admin port's HTTP/1.1, bounded (docs/reliability.md, "The admin port"): a request is read
//! into a buffer that never grows past [`Limits::max_head_bytes`] of request line and headers
//! plus [`Limits::max_body_bytes`] of body, parsed strictly (one request per connection, no
//! transfer codings), and answered with `Connection: close`. Whatever a client sends is answered
//! with a status, never a panic: 400 for what is not HTTP/1.x, 431 for a head over the limit,
//! 413 for a body over it, 501 for a transfer coding, 505 for another HTTP version. The socket
//! side (deadlines, connections at once, handler threads) is [`super::server`].

use std::fmt::Write as _;
use std::time::Duration;

/// What the admin port lets one client make it hold, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of request line and headers, the blank line that ends them included; more is
    /// answered 431.
    pub max_head_bytes: usize,
    /// Bytes of a request's body (`Content-Length`); more is answered 413 before it is read.
    pub max_body_bytes: usize,
    /// From a connection's accept to its whole request; a slower client is answered 408.
    pub request_deadline: Duration,
    /// From an answer being ready to its last byte sent; a client that reads slower is closed.
    pub write_deadline: Duration,
    /// How long, after its answer, a connection is read from and what it sent thrown away, so
    /// that closing it with unread bytes does not reset the answer away before the client
    /// reads it.
    pub linger: Duration,
    /// Connections held at once, whatever their state; one more is answered 503 and closed as
    /// soon as it is accepted.
    pub max_connections: usize,
    /// Threads that build answers (a flush may take a while; the connections wait for them
    /// without holding one).
    pub handler_threads: usize,
    /// Whole requests waiting for a handler thread; one more is answered 503.
    pub queued_requests: usize,
}

/// The admin port's limits unless a test says otherwise (docs/reliability.md, "The admin
/// port").
pub const DEFAULT_LIMITS: Limits = Limits {
    max_head_bytes: 8 << 10,
    max_body_bytes: 8 << 10,
    request_deadline: Duration::from_secs(5),
    write_deadline: Duration::from_secs(5),
    linger: Duration::from_secs(1),
    max_connections: 256,
    handler_threads: 4,
    queued_requests: 16,
};

impl Default for Limits {
    fn default() -> Self {
        DEFAULT_LIMITS
    }
}

/// One whole request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// As sent (`GET`, `POST`): methods are case-sensitive.
    pub method: String,
    /// The origin-form target: the path and any query (`/flush?export=vol`).
    pub target: String,
    /// HTTP/1.`minor`.
    pub minor: u8,
    /// Every header in order, names as sent; values without the white space around them (bytes
    /// that are not UTF-8 replaced).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The values of every header named `name` (case-insensitively).
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The value of the header named `name` when there is exactly one.
    pub fn header<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        let mut values = self.headers_named(name);
        let first = values.next()?;
        values.next().is_none().then_some(first)
    }
}

/// A request that is refused before any route sees it: the status and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: String,
}

impl Refusal {
    fn new(status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
        }
    }

    fn bad(reason: impl Into<String>) -> Refusal {
        Refusal::new(400, reason)
    }

    /// The answer that says so.
    pub fn response(&self) -> Response {
        Response::error(self.status, &self.reason)
    }
}

/// A request read so far, fed the bytes of one connection as they arrive.
#[derive(Debug, Default)]
pub struct RequestReader {
    buffer: Vec<u8>,
    /// Where the search for the blank line resumes, so a client sending a byte at a time
    /// costs a scan of each byte once.
    scanned: usize,
    /// Once the head is parsed: the request without its body, and where the body starts.
    head: Option<(Request, usize, usize)>,
}

impl RequestReader {
    pub fn new() -> RequestReader {
        RequestReader::default()
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.buffer.len()
    }

    /// Takes the next bytes of the connection: the whole request once it has arrived, or
    /// why it is refused. Bytes past the request (a second one) are ignored: one request per
    /// connection.
    pub fn push(&mut self, bytes: &[u8], limits: &Limits) -> Result<Option<Request>, Refusal> {
        if let Some((_, body_start, length)) = &self.head {
            let wanted = body_start + length - self.buffer.len();
            self.buffer
                .extend_from_slice(&bytes[..wanted.min(bytes.len())]);
        } else {
            // Never more than one read past the limit is held.
            self.buffer.extend_from_slice(bytes);
            let from = self.scanned.saturating_sub(2);
            let Some(end) = head_end(&self.buffer, from) else {
                self.scanned = self.buffer.len();
                if self.buffer.len() > limits.max_head_bytes {
                    return Err(head_too_large(limits));
                }
                return Ok(None);
            };
            if end > limits.max_head_bytes {
                return Err(head_too_large(limits));
            }
            let request = parse_head(&self.buffer[..end])?;
            let length = body_length(&request, limits)?;
            self.buffer.truncate((end + length).min(self.buffer.len()));
            self.buffer.shrink_to(end + length);
            self.head = Some((request, end, length));
        }
        let Some((_, body_start, length)) = &self.head else {
            unreachable!("the head was parsed above");
        };
        if self.buffer.len() < body_start + length {
            return Ok(None);
        }
        let (mut request, body_start, _) = self.head.take().expect("the head was parsed");
        request.body = self.buffer.split_off(body_start);
        self.buffer = Vec::new();
        Ok(Some(request))
    }
}

fn head_too_large(limits: &Limits) -> Refusal {
    Refusal::new(
        431,
        format!(
            "the request line and headers exceed {} bytes",
            limits.max_head_bytes
        ),
    )
}

/// The length of the head in `buffer` (through the blank line that ends it), searching from
/// `from`: lines end in CRLF or, as RFC 9112 §2.2 lets a server accept, a bare LF.
fn head_end(buffer: &[u8], from: usize) -> Option<usize> {
    let start = leading_blank_lines(buffer);
    let from = from.max(start);
    let mut at = from;
    while let Some(offset) = buffer.get(at..)?.iter().position(|&b| b == b'\n') {
        let newline = at + offset;
        // A line starts after this newline; the head ends if that line is empty.
        match buffer.get(newline + 1) {
            Some(b'\n') => return Some(newline + 2),
            Some(b'\r') => match buffer.get(newline + 2) {
                Some(b'\n') => return Some(newline + 3),
                Some(_) => {}
                None => return None,
            },
            Some(_) => {}
            None => return None,
        }
        at = newline + 1;
    }
    None
}

/// Bytes of empty lines before the request line, which RFC 9112 §2.2 says to ignore.
fn leading_blank_lines(buffer: &[u8]) -> usize {
    let mut at = 0;
    loop {
        match buffer.get(at..) {
            Some([b'\r', b'\n', ..]) => at += 2,
            Some([b'\n', ..]) => at += 1,
            _ => return at,
        }
    }
}

/// RFC 9110 §5.6.2's token characters.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// The request line and headers of `head` (the blank line included).
fn parse_head(head: &[u8]) -> Result<Request, Refusal> {
    let head = &head[leading_blank_lines(head)..];
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    let (method, target, minor) = parse_request_line(request_line)?;
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        headers.push(parse_header(line)?);
    }
    let request = Request {
        method,
        target,
        minor,
        headers,
        body: Vec::new(),
    };
    // RFC 9112 §3.2: one Host, or the request is a bad one.
    if request.headers_named("host").count() != 1 {
        return Err(Refusal::bad("expected one Host header"));
    }
    Ok(request)
}

fn parse_request_line(line: &[u8]) -> Result<(String, String, u8), Refusal> {
    let bad = || Refusal::bad("expected a request line: METHOD /PATH HTTP/1.1");
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(bad());
    }
    // Origin form only: no absolute URL (a proxy's), no `*`.
    if target.first() != Some(&b'/') || !target.iter().all(|b| (0x21..0x7f).contains(b)) {
        return Err(Refusal::bad(
            "expected a request target that is a path: /metrics, /stats, /flush?export=NAME",
        ));
    }
    let minor = match version {
        b"HTTP/1.1" => 1,
        b"HTTP/1.0" => 0,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(Refusal::new(505, "expected HTTP/1.1 or HTTP/1.0"));
        }
        _ => return Err(bad()),
    };
    // Every byte was checked to be ASCII above.
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    Ok((text(method), text(target), minor))
}

fn parse_header(line: &[u8]) -> Result<(String, String), Refusal> {
    let bad = |why: &str| Refusal::bad(format!("bad header line: {why}"));
    if matches!(line.first(), Some(b' ' | b'\t')) {
        return Err(bad("a line folded onto the one before (RFC 9112 §5.2)"));
    }
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or_else(|| bad("expected NAME: VALUE"))?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Err(bad(
            "a name that is not a token, or white space before the colon",
        ));
    }
    let value = value.trim_ascii();
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(bad("a control character in a value"));
    }
    Ok((
        String::from_utf8_lossy(name).into_owned(),
        String::from_utf8_lossy(value).into_owned(),
    ))
}

/// The body's length: `Content-Length`, checked against the limit; no transfer coding.
fn body_length(request: &Request, limits: &Limits) -> Result<usize, Refusal> {
    if request.headers_named("transfer-encoding").next().is_some() {
        return Err(Refusal::new(
            501,
            "no transfer coding is served; send Content-Length",
        ));
    }
    let mut length: Option<u64> = None;
    for value in request.headers_named("content-length") {
        // RFC 9110 §8.6: digits only; several copies must agree.
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Refusal::bad("Content-Length is not a number"));
        }
        let this = value.parse::<u64>().unwrap_or(u64::MAX);
        if length.is_some_and(|before| before != this) {
            return Err(Refusal::bad("Content-Length headers disagree"));
        }
        length = Some(this);
    }
    let length = length.unwrap_or(0);
    if length > limits.max_body_bytes as u64 {
        return Err(Refusal::new(
            413,
            format!("a body exceeds {} bytes", limits.max_body_bytes),
        ));
    }
    Ok(length as usize)
}

/// An answer: every one closes its connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    /// Headers beyond Content-Type, Content-Length and Connection.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// JSON, as every error the admin port gives.
pub const JSON: &str = "application/json";

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// `{"error": message}` with `status`.
    pub fn error(status: u16, message: &str) -> Response {
        Response::new(
            status,
            JSON,
            serde_json::json!({ "error": message }).to_string(),
        )
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The bytes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut head = String::new();
        let _ = write!(
            head,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            reason_phrase(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

/// RFC 9110 §15's phrase for each status the admin port gives.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8], limits: &Limits) -> Result<Option<Request>, Refusal> {
        RequestReader::new().push(bytes, limits)
    }

    /// Feeds `bytes` one at a time: the result of the push that ended it, and how many pushes.
    fn read_bytewise(bytes: &[u8], limits: &Limits) -> (Result<Option<Request>, Refusal>, usize) {
        let mut reader = RequestReader::new();
        for (at, byte) in bytes.iter().enumerate() {
            match reader.push(std::slice::from_ref(byte), limits) {
                Ok(None) => {}
                done => return (done, at + 1),
            }
            assert!(reader.held() <= limits.max_head_bytes + limits.max_body_bytes + 1);
        }
        (Ok(None), bytes.len())
    }

    #[test]
    fn a_request_is_read_whole_at_once_or_a_byte_at_a_time() {
        let text = b"POST /flush?export=vol HTTP/1.1\r\nHost: 127.0.0.1:9109\r\n\
                     Authorization:  Bearer abc \r\nContent-Length: 5\r\n\r\nhello";
        let limits = Limits::default();
        let whole = read_all(text, &limits).unwrap().unwrap();
        assert_eq!(whole.method, "POST");
        assert_eq!(whole.target, "/flush?export=vol");
        assert_eq!(whole.minor, 1);
        assert_eq!(whole.header("HOST"), Some("127.0.0.1:9109"));
        assert_eq!(whole.header("authorization"), Some("Bearer abc"));
        assert_eq!(whole.body, b"hello");
        let (bytewise, pushes) = read_bytewise(text, &limits);
        assert_eq!(bytewise.unwrap().unwrap(), whole);
        assert_eq!(pushes, text.len());
        // Bare LFs, empty lines before the request line and bytes past the body.
        let lf = read_all(
            b"\r\n\nGET /metrics HTTP/1.0\nHost: x\n\nGET /next",
            &limits,
        );
        let lf = lf.unwrap().unwrap();
        assert_eq!((lf.target.as_str(), lf.minor), ("/metrics", 0));
        assert!(lf.body.is_empty());
    }

    #[test]
    fn a_head_over_the_limit_is_431_however_it_arrives_and_never_held_past_it() {
        let limits = Limits {
            max_head_bytes: 256,
            ..Limits::default()
        };
        let endless = [
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: ".to_vec(),
            vec![b'a'; 1000],
        ]
        .concat();
        let (refused, pushes) = read_bytewise(&endless, &limits);
        assert_eq!(refused.unwrap_err().status, 431);
        assert_eq!(pushes, 257, "refused at the first byte past the limit");
        let mut reader = RequestReader::new();
        assert_eq!(reader.push(&endless, &limits).unwrap_err().status, 431);
        // An endless request line, and a head whose end comes past the limit in one read.
        let line = [b"GET /".to_vec(), vec![b'a'; 300]].concat();
        assert_eq!(read_all(&line, &limits).unwrap_err().status, 431);
        let late = [endless.clone(), b"\r\n\r\n".to_vec()].concat();
        assert_eq!(read_all(&late, &limits).unwrap_err().status, 431);
        // A head of exactly the limit is read.
        let head = b"GET / HTTP/1.1\r\nHost: x\r\nX: ";
        let exact = [&head[..], &vec![b'b'; 256 - head.len() - 4], b"\r\n\r\n"].concat();
        assert_eq!(exact.len(), 256);
        assert!(read_all(&exact, &limits).unwrap().is_some());
        let (whole, _) = read_bytewise(&exact, &limits);
        assert!(whole.unwrap().is_some());
    }

    #[test]
    fn bodies_are_bounded_and_transfer_codings_refused() {
        let limits = Limits {
            max_body_bytes: 10,
            ..Limits::default()
        };
        let with = |headers: &str| {
            read_all(
                format!("POST /flush HTTP/1.1\r\nHost: x\r\n{headers}\r\n").as_bytes(),
                &limits,
            )
        };
        assert_eq!(with("Content-Length: 11\r\n").unwrap_err().status, 413);
        let huge = "Content-Length: 99999999999999999999999999\r\n";
        assert_eq!(with(huge).unwrap_err().status, 413);
        for bad in [
            "Content-Length: -1\r\n",
            "Content-Length: 1e3\r\n",
            "Content-Length: \r\n",
            "Content-Length: 1\r\nContent-Length: 2\r\n",
        ] {
            assert_eq!(with(bad).unwrap_err().status, 400, "{bad}");
        }
        let chunked = with("Transfer-Encoding: chunked\r\n").unwrap_err();
        assert_eq!(chunked.status, 501);
        assert_eq!(
            with("Content-Length: 10\r\n").unwrap(),
            None,
            "body to come"
        );
        let same = with("Content-Length: 0\r\nContent-Length: 0\r\n").unwrap();
        assert!(same.is_some());
    }

    #[test]
    fn bad_request_lines_and_headers_are_refused_by_status() {
        let limits = Limits::default();
        for (text, status) in [
            (&b"GARBAGE\r\n\r\n"[..], 400),
            (b"GET /metrics\r\nHost: x\r\n\r\n", 400),
            (b"GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
            (b"GET metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET http://a/metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"G(T /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /m\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            (b"GET /metrics HTTP/1.1\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n", 400),
            (b"GET /metrics HTTP/1.1\r\nHost: x\x00y\r\n\r\n", 400),
            (b"\x00\xff\xfe\r\n\r\n", 400),
        ] {
            let refused = read_all(text, &limits).unwrap_err();
            assert_eq!(refused.status, status, "{}", String::from_utf8_lossy(text));
            let response = String::from_utf8(refused.response().to_bytes()).unwrap();
            assert!(
                response.starts_with(&format!("HTTP/1.1 {status} ")),
                "{response}"
            );
            assert!(response.contains("\r\nConnection: close\r\n"), "{response}");
        }
        // A value may hold bytes that are not UTF-8 (obs-text).
        let latin = read_all(b"GET / HTTP/1.1\r\nHost: x\r\nX: caf\xe9\r\n\r\n", &limits);
        assert_eq!(latin.unwrap().unwrap().header("x"), Some("caf\u{fffd}"));
    }

    /// Random bytes, random mutations of a good request and every prefix: never a panic, never
    /// more held than the limits, and a refusal always has a status the port knows.
    #[test]
    fn no_bytes_make_the_reader_panic_or_hold_more_than_its_limits() {
        let limits = Limits {
            max_head_bytes: 512,
            max_body_bytes: 64,
            ..Limits::default()
        };
        let good =
            b"POST /flush?export=v HTTP/1.1\r\nHost: [::1]:80\r\nContent-Length: 3\r\n\r\nabc";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20_000 {
            let mut bytes = if round % 2 == 0 {
                good.to_vec()
            } else {
                (0..next() % 700).map(|_| next() as u8).collect()
            };
            for _ in 0..next() % 4 {
                if bytes.is_empty() {
                    break;
                }
                let at = (next() as usize) % bytes.len();
                bytes[at] = b"\r\n :/\x00A"[(next() % 7) as usize];
            }
            let mut reader = RequestReader::new();
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let take = 1 + (next() as usize) % rest.len();
                let (chunk, after) = rest.split_at(take);
                rest = after;
                match reader.push(chunk, &limits) {
                    Ok(None) => assert!(reader.held() <= 512 + 64 + chunk.len()),
                    Ok(Some(_)) => break,
                    Err(refusal) => {
                        assert!(!reason_phrase(refusal.status).is_empty(), "{refusal:?}");
                        break;
                    }
                }
            }
        }
    }
}
