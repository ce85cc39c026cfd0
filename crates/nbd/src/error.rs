//! Why a setting of the NBD layer cannot be read; the protocol's own errors are
//! [`crate::ProtocolError`] and [`crate::ClientError`].

/// A TLS mode that is none of `off`, `on` and `require`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("\"{text}\"; expected off, on or require")]
pub struct TlsModeError {
    /// The mode as given.
    pub text: String,
}
