//! heterarchy's servers (docs/architecture.md, "Serving"): block volumes over NBD, with an HTTP
//! endpoint for Prometheus metrics, stats and flushing; started from a TOML config or one
//! export's command line.

pub mod admin;
pub mod config;
pub mod descriptors;
pub mod due_timer;
mod error;
pub mod kv;
pub mod listen;
pub mod nbd;
pub mod peers;
pub mod run;
pub mod socket;
pub mod stopping;
pub mod tls;

pub use config::ServeConfig;
pub use error::{AddressError, AuthError, BoxError, ConfigError, RunError, TlsError};
pub use listen::{ListenAddr, Listener};
