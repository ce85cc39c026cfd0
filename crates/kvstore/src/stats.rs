//! A tenant store's counters, named as memcached's `stats` names them (memcached
//! doc/protocol.txt, "General-purpose statistics"), so that existing dashboards read them.

/// Counters since start, and the current occupancy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub get_hits: u64,
    pub get_misses: u64,
    pub touch_hits: u64,
    pub touch_misses: u64,
    pub cas_hits: u64,
    pub cas_misses: u64,
    pub cas_badval: u64,
    pub delete_hits: u64,
    pub delete_misses: u64,
    pub incr_hits: u64,
    pub incr_misses: u64,
    pub decr_hits: u64,
    pub decr_misses: u64,
    /// Items stored since start.
    pub total_items: u64,
    /// Live items evicted for room.
    pub evictions: u64,
    /// Evicted without ever being read.
    pub evicted_unfetched: u64,
    /// Expired items whose space was taken back.
    pub reclaimed: u64,
    /// Expired without ever being read.
    pub expired_unfetched: u64,
    /// Items dropped by flush_all.
    pub flushed_items: u64,
    /// Items now.
    pub curr_items: u64,
    /// Bytes of live records now (keys, values and their headers).
    pub bytes: u64,
    /// The quota: bytes of the value store (its header and segments).
    pub limit_maxbytes: u64,
    /// Segments holding records.
    pub segments_in_use: u64,
    /// Segments freed by moving their live items to new segments, instead of evicting them.
    pub segments_compacted: u64,
    /// DRAM the index takes (entries and keys), about.
    pub index_bytes: u64,
    /// The limit on that; 0 when there is none.
    pub index_max_bytes: u64,
}

impl StoreStats {
    /// Counts an incr or decr that found its item or not.
    pub fn count_arithmetic(&mut self, incr: bool, hit: bool) {
        let counter = match (incr, hit) {
            (true, true) => &mut self.incr_hits,
            (true, false) => &mut self.incr_misses,
            (false, true) => &mut self.decr_hits,
            (false, false) => &mut self.decr_misses,
        };
        *counter += 1;
    }

    /// Every counter as (memcached name, value), in memcached's order.
    pub fn named(&self) -> [(&'static str, u64); 27] {
        [
            ("get_hits", self.get_hits),
            ("get_misses", self.get_misses),
            ("get_expired", self.expired_unfetched),
            ("get_flushed", self.flushed_items),
            ("delete_misses", self.delete_misses),
            ("delete_hits", self.delete_hits),
            ("incr_misses", self.incr_misses),
            ("incr_hits", self.incr_hits),
            ("decr_misses", self.decr_misses),
            ("decr_hits", self.decr_hits),
            ("cas_misses", self.cas_misses),
            ("cas_hits", self.cas_hits),
            ("cas_badval", self.cas_badval),
            ("touch_hits", self.touch_hits),
            ("touch_misses", self.touch_misses),
            ("limit_maxbytes", self.limit_maxbytes),
            ("bytes", self.bytes),
            ("curr_items", self.curr_items),
            ("total_items", self.total_items),
            ("expired_unfetched", self.expired_unfetched),
            ("evicted_unfetched", self.evicted_unfetched),
            ("evictions", self.evictions),
            ("reclaimed", self.reclaimed),
            ("segments_in_use", self.segments_in_use),
            ("segments_compacted", self.segments_compacted),
            ("index_bytes", self.index_bytes),
            ("index_max_bytes", self.index_max_bytes),
        ]
    }
}
