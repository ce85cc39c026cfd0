//! What the controller knows about one cached line (which tiers hold it, which of their
//! copies are dirty) and the most tiers it manages: plain data that the dirty bookkeeping, the
//! cleaners and admission share, importing nothing of the cache above it.

use heterarchy_policy::util::key_table::TableValue;

/// Most cache tiers a controller manages: residency and dirtiness are bits of a byte, and the
/// backing store's device number must fit a move's device mask beside them.
pub const MAX_CACHE_TIERS: usize = 4;

/// What the controller knows about one cached line; stored in a prefetching key table, so a
/// line with no resident copy is the table's empty value and is never stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Line {
    /// Bytes of the line, as installed.
    pub size: u32,
    /// Bit `t` set: cache tier `t` holds a copy.
    pub resident: u8,
    /// Bit `t` set: tier `t`'s copy is newer than the level below it.
    pub dirty: u8,
    /// Which dirtying write was the line's latest (a wrapping count over all lines), so the
    /// ALRU queue can tell its entry from stale ones. Eight bytes per line keep table slots at
    /// 16 bytes, four to a cache line, so a prefetched slot is whole.
    pub dirty_generation: u16,
}

impl TableValue for Line {
    const EMPTY: Line = Line {
        size: 0,
        resident: 0,
        dirty: 0,
        dirty_generation: 0,
    };

    #[inline]
    fn is_empty(&self) -> bool {
        self.resident == 0
    }
}

impl Line {
    /// A line no tier holds yet.
    #[inline]
    pub fn absent(size: u32) -> Line {
        Line {
            size,
            ..Line::EMPTY
        }
    }

    #[inline]
    pub fn holds(&self, tier: usize) -> bool {
        self.resident & (1 << tier) != 0
    }

    #[inline]
    pub fn is_dirty(&self, tier: usize) -> bool {
        self.dirty & (1 << tier) != 0
    }

    #[inline]
    pub fn any_dirty(&self) -> bool {
        self.dirty != 0
    }

    /// The highest (fastest) tier holding a copy: the one whose copy is the newest.
    #[inline]
    pub fn top_tier(&self) -> Option<usize> {
        (self.resident != 0).then(|| self.resident.trailing_zeros() as usize)
    }

    /// The highest tier whose copy is dirty: the newest data not yet everywhere below.
    #[inline]
    pub fn top_dirty_tier(&self) -> Option<usize> {
        (self.dirty != 0).then(|| self.dirty.trailing_zeros() as usize)
    }

    #[inline]
    pub fn set_resident(&mut self, tier: usize) {
        self.resident |= 1 << tier;
    }

    /// Drops tier `tier`'s copy from the residency bits; its dirty bit must already be clear.
    #[inline]
    pub fn clear_resident(&mut self, tier: usize) {
        debug_assert!(!self.is_dirty(tier));
        self.resident &= !(1 << tier);
    }
}

// Residency and dirtiness are bits of a `u8`, one per tier, and a move's device mask holds the
// tiers and the backing store beside them.
const _: () = assert!(MAX_CACHE_TIERS < u8::BITS as usize);
