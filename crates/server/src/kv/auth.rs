//! Per-tenant authentication for the text protocol (docs/reliability.md, "TLS and
//! authentication"), as memcached's `-Y` auth file does it (memcached doc/protocol.txt,
//! "Authentication"): a tenant whose config names an `auth_file` refuses every command of a new
//! connection with `CLIENT_ERROR unauthenticated` until the client sends a `set` whose data is
//! "username password", which is answered `STORED` when a line of the file says
//! `username:password`. The key, flags and exptime of that `set` are ignored and nothing is
//! stored. The error lines are memcached 1.6.18's, checked against the real server; unlike it,
//! every pipelined request gets its own answer.

use std::path::Path;

use heterarchy_memcache::{Request, StoreMode};

use crate::error::{AuthError, ConfigError};

/// The longest token a client may authenticate with; a longer `set` is answered
/// [`BAD_TOKEN`] (memcached bounds its token buffer too).
pub const MAX_TOKEN_BYTES: usize = 1024;

/// What every command gets before authentication.
pub const UNAUTHENTICATED: &str = "CLIENT_ERROR unauthenticated";
/// A token that names no user of the file, or the wrong password.
pub const FAILED: &str = "CLIENT_ERROR authentication failure";
/// A token without the space between user and password, or too long.
pub const BAD_TOKEN: &str = "CLIENT_ERROR bad authentication token format";
/// A token accepted.
pub const ACCEPTED: &str = "STORED";

/// The users of one auth file.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthFile {
    /// (username, password) by line.
    users: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for AuthFile {
    /// Names the users, never their passwords.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self
            .users
            .iter()
            .map(|(user, _)| String::from_utf8_lossy(user))
            .collect();
        formatter
            .debug_struct("AuthFile")
            .field("users", &names)
            .finish()
    }
}

impl AuthFile {
    /// Reads `path`: a `username:password` per line (split at the first colon); empty lines
    /// are skipped. The error names the file and the line.
    pub fn load(path: &Path) -> Result<AuthFile, ConfigError> {
        heterarchy_device::secure_file::warn_if_exposed(path);
        let bytes = std::fs::read(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        AuthFile::parse(&bytes).map_err(|e| ConfigError::within(format!("{}: ", path.display()), e))
    }

    /// Parses the file's bytes; the error names the line.
    pub fn parse(bytes: &[u8]) -> Result<AuthFile, AuthError> {
        let mut users = Vec::new();
        for (index, line) in bytes.split(|&byte| byte == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let expected = "expected username:password";
            let bad = |reason: String| AuthError::Line {
                line: index + 1,
                reason,
            };
            let colon = line
                .iter()
                .position(|&byte| byte == b':')
                .ok_or_else(|| bad(format!("no colon; {expected}")))?;
            let (user, password) = (&line[..colon], &line[colon + 1..]);
            if user.is_empty() || user.contains(&b' ') {
                return Err(bad(format!(
                    "an empty username or one with a space; {expected}"
                )));
            }
            if user.len() + 1 + password.len() > MAX_TOKEN_BYTES {
                return Err(bad(format!(
                    "longer than the {MAX_TOKEN_BYTES}-byte token a client can send"
                )));
            }
            users.push((user.to_vec(), password.to_vec()));
        }
        if users.is_empty() {
            return Err(AuthError::Empty);
        }
        Ok(AuthFile { users })
    }

    /// How many users it has.
    pub fn users(&self) -> usize {
        self.users.len()
    }

    /// The answer to a token a client sent: [`ACCEPTED`], [`FAILED`] or [`BAD_TOKEN`].
    pub fn check(&self, token: &[u8]) -> &'static str {
        if token.len() > MAX_TOKEN_BYTES {
            return BAD_TOKEN;
        }
        let Some(space) = token.iter().position(|&byte| byte == b' ') else {
            return BAD_TOKEN;
        };
        let (user, password) = (&token[..space], &token[space + 1..]);
        // Every entry is compared, each in time independent of where the bytes differ, so
        // timing tells a guesser neither which users exist nor how much of a password is right.
        let mut matched = false;
        for (known_user, known_password) in &self.users {
            matched |= same_bytes(user, known_user) & same_bytes(password, known_password);
        }
        match matched {
            true => ACCEPTED,
            false => FAILED,
        }
    }
}

/// Whether `a` and `b` are equal, taking a time that depends on their lengths only.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let mut difference = (a.len() != b.len()) as u8;
    for index in 0..a.len().max(b.len()) {
        let left = a.get(index).copied().unwrap_or(0);
        let right = b.get(index).copied().unwrap_or(0);
        difference |= left ^ right;
    }
    std::hint::black_box(difference) == 0
}

/// What an unauthenticated connection does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Authenticated: answer this line, and serve everything from now on.
    Accepted(&'static str),
    /// Answer this line; the connection stays unauthenticated.
    Refused(&'static str),
}

/// The answer of an unauthenticated connection to `request`: only a `set` may authenticate.
pub fn admit(auth: &AuthFile, request: &Request) -> Gate {
    match request {
        Request::Store {
            mode: StoreMode::Set,
            data,
            ..
        } => match auth.check(data) {
            ACCEPTED => Gate::Accepted(ACCEPTED),
            refusal => Gate::Refused(refusal),
        },
        _ => Gate::Refused(UNAUTHENTICATED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_memcache::{parse, Limits};

    fn alice_and_bob() -> AuthFile {
        AuthFile::parse(b"alice:secret\n\nbob:pass:with:colons\r\n").unwrap()
    }

    #[test]
    fn a_file_is_read_line_by_line_and_bad_lines_are_named() {
        assert_eq!(alice_and_bob().users(), 2);
        for (bytes, line) in [
            (&b"alice:secret\nnocolon\n"[..], "line 2:"),
            (b":nouser\n", "line 1:"),
            (b"a b:c\n", "line 1:"),
            (b"\n\n", "no username"),
        ] {
            let error = AuthFile::parse(bytes).unwrap_err().to_string();
            assert!(error.starts_with(line), "{error}");
        }
        let long = format!("u:{}\n", "p".repeat(MAX_TOKEN_BYTES));
        assert!(AuthFile::parse(long.as_bytes()).is_err());
        let dir = tempfile::tempdir().unwrap();
        let error = AuthFile::load(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing: cannot read"), "{error}");
    }

    #[test]
    fn tokens_are_checked_as_memcached_checks_them() {
        let auth = alice_and_bob();
        assert_eq!(auth.check(b"alice secret"), ACCEPTED);
        assert_eq!(auth.check(b"bob pass:with:colons"), ACCEPTED);
        assert_eq!(auth.check(b"alice wrong"), FAILED);
        assert_eq!(auth.check(b"alice secre"), FAILED);
        assert_eq!(auth.check(b"alice secretX"), FAILED);
        // The password is everything after the first space.
        assert_eq!(auth.check(b"alice  secret"), FAILED);
        assert_eq!(auth.check(b"carol secret"), FAILED);
        assert_eq!(auth.check(b"alicesecret"), BAD_TOKEN);
        let long = vec![b'x'; MAX_TOKEN_BYTES + 1];
        assert_eq!(auth.check(&long), BAD_TOKEN);
        assert!(!format!("{auth:?}").contains("secret"), "{auth:?}");
    }

    #[test]
    fn only_a_set_authenticates() {
        let auth = alice_and_bob();
        let limits = Limits::default();
        for (input, gate) in [
            (
                &b"set k 0 0 12\r\nalice secret\r\n"[..],
                Gate::Accepted(ACCEPTED),
            ),
            (b"set k 0 0 11\r\nalice wrong\r\n", Gate::Refused(FAILED)),
            (
                b"add k 0 0 12\r\nalice secret\r\n",
                Gate::Refused(UNAUTHENTICATED),
            ),
            (b"get k\r\n", Gate::Refused(UNAUTHENTICATED)),
            (b"mg k v\r\n", Gate::Refused(UNAUTHENTICATED)),
            (
                b"ms k 12\r\nalice secret\r\n",
                Gate::Refused(UNAUTHENTICATED),
            ),
            (b"version\r\n", Gate::Refused(UNAUTHENTICATED)),
        ] {
            let parsed = parse(input, &limits).unwrap();
            assert_eq!(admit(&auth, &parsed.request), gate, "{input:?}");
        }
    }
}
