//! The floor (docs/architecture.md, "Testing"): the least a request–response server over
//! loopback TCP can spend on a request, written for the measurement and nothing else. No
//! storage: an NBD read is answered with zeros, a memcached `get` with one constant value, a
//! `set` with `STORED`. Each request costs one `read` and one `write` system call, and the
//! event loop's `epoll_wait` is shared by every request that is ready when it returns.
//!
//! `scripts/bench-floor`, `scripts/bench-nbd` and `scripts/bench-kv` run it under the same
//! clients and settings as heterarchy's servers, and state each server's CPU time per request
//! as a multiple of the floor's: how far from the physical limit a server is, where a ratio
//! against nbdkit or memcached only says who is ahead.
//!
//! - [`event_loop`]: one mio loop that accepts connections and drives every session;
//! - [`link`]: a client's socket and the answers it has not taken yet;
//! - [`nbd`]: fixed-newstyle negotiation (on a thread per new client, outside the loop) and
//!   simple replies to `NBD_CMD_READ`;
//! - [`memcached`]: `get` and `set` of the text protocol.

pub mod event_loop;
pub mod link;
pub mod memcached;
pub mod nbd;

pub use event_loop::{Floor, Protocol};
