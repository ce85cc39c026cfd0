//! Which pages of a memory-mapped persistent-memory file were stored to through the CPU cache
//! since the last flush, so that a flush writes back those pages' lines alone rather than every
//! line of the mapping (docs/pm-block-device.md, "Persistence by file system"): on a 128 MiB
//! tier a whole-mapping flush is two million line write-backs, several milliseconds per FLUSH.

use std::sync::atomic::{AtomicU64, Ordering};

/// The granularity of the record: a page of the mapping.
pub(crate) const PAGE_BYTES: u64 = 4096;

/// One bit per page of a mapping: set by a write, cleared by the flush that writes it back.
pub(crate) struct UnflushedPages {
    words: Box<[AtomicU64]>,
    pages: u64,
}

impl UnflushedPages {
    /// No page unflushed, for a mapping of `bytes`.
    pub(crate) fn new(bytes: u64) -> UnflushedPages {
        let pages = bytes.div_ceil(PAGE_BYTES);
        UnflushedPages {
            words: (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            pages,
        }
    }

    /// Notes that `len` bytes from `offset` were stored to (after the stores: a flush that
    /// finds the bit then writes back lines that hold them).
    pub(crate) fn mark(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (first, last) = (offset / PAGE_BYTES, (offset + len - 1) / PAGE_BYTES);
        assert!(
            last < self.pages,
            "page {last} lies beyond the mapping's {} pages",
            self.pages
        );
        for word in first / 64..=last / 64 {
            let low = if word == first / 64 { first % 64 } else { 0 };
            let high = if word == last / 64 { last % 64 } else { 63 };
            let bits = (u64::MAX >> (63 - high)) & (u64::MAX << low);
            self.words[word as usize].fetch_or(bits, Ordering::Release);
        }
    }

    /// Clears every page noted so far and calls `each(offset, len)` for each run of them, in
    /// order of offset; a page noted while this runs is left for the next call, or taken now.
    pub(crate) fn take(&self, mut each: impl FnMut(u64, u64)) {
        let mut run: Option<(u64, u64)> = None;
        for (index, word) in self.words.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                let page = index as u64 * 64 + u64::from(bits.trailing_zeros());
                bits &= bits - 1;
                run = match run {
                    Some((start, end)) if end == page => Some((start, page + 1)),
                    Some((start, end)) => {
                        each(start * PAGE_BYTES, (end - start) * PAGE_BYTES);
                        Some((page, page + 1))
                    }
                    None => Some((page, page + 1)),
                };
            }
        }
        if let Some((start, end)) = run {
            each(start * PAGE_BYTES, (end - start) * PAGE_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(pages: &UnflushedPages) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        pages.take(|offset, len| runs.push((offset, len)));
        runs
    }

    #[test]
    fn runs_of_marked_pages_are_taken_once_in_order() {
        let pages = UnflushedPages::new(200 * PAGE_BYTES);
        pages.mark(5 * PAGE_BYTES + 100, 1);
        pages.mark(62 * PAGE_BYTES, 4 * PAGE_BYTES); // across a word: pages 62..=65
        pages.mark(66 * PAGE_BYTES + 1, PAGE_BYTES); // pages 66 and 67
        pages.mark(199 * PAGE_BYTES, PAGE_BYTES);
        pages.mark(0, 0);
        assert_eq!(
            taken(&pages),
            [
                (5 * PAGE_BYTES, PAGE_BYTES),
                (62 * PAGE_BYTES, 6 * PAGE_BYTES),
                (199 * PAGE_BYTES, PAGE_BYTES)
            ]
        );
        assert_eq!(taken(&pages), []);
    }

    #[test]
    fn a_whole_mapping_is_one_run() {
        let bytes = 130 * PAGE_BYTES + 7;
        let pages = UnflushedPages::new(bytes);
        pages.mark(0, bytes);
        assert_eq!(taken(&pages), [(0, 131 * PAGE_BYTES)]);
    }
}
