//! heterarchy's key-value cache store (seed 000 §5.2.5, "PM-optimized Pelikan";
//! docs/kv-cache.md): one store per tenant, a DRAM hash index holding keys and metadata over
//! values in fixed-size segments on a storage backend — RAM, or persistent memory written with
//! non-temporal stores — with TTL-grouped segments, segment eviction, and warm restart from
//! persistent memory.

mod expiry;
mod index;
mod key;
mod layout;
mod media;
mod recover;
mod request;
mod segments;
mod stats;
mod storage;
mod store;

pub use expiry::{Expiry, RELATIVE_LIMIT_SECS};
pub use index::index_entry_bytes;
pub use recover::Recovery;
pub use request::{Arithmetic, Counted, Delete, Deleted, Found, Lookup, Mode, Stored, Write};
pub use stats::StoreStats;
pub use storage::Storage;
pub use store::{Store, StoreConfig, DEFAULT_ITEM_MAX_BYTES, DEFAULT_SEGMENT_BYTES};
