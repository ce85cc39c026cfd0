//! What the integration tests share: the exports their servers offer.

use heterarchy_nbd::constants::*;
use heterarchy_nbd::{BlockSizes, ExportInfo};

/// The transmission flags of every test export.
pub const FLAGS: u16 = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_CAN_MULTI_CONN;

/// Exports "vol" (the default, 64 MiB) and "scratch" (1 MiB).
pub fn catalog() -> Vec<ExportInfo> {
    [("vol", 64 << 20), ("scratch", 1 << 20)]
        .into_iter()
        .map(|(name, size_bytes)| ExportInfo {
            name: name.into(),
            size_bytes,
            transmission_flags: FLAGS,
            block_sizes: BlockSizes::DEFAULT,
        })
        .collect()
}
