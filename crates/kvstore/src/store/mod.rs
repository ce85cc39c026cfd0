//! One tenant's cache: memcached's commands over a DRAM hash index and values in segments on a
//! storage backend, as the PM-optimized Pelikan of seed 000 §5.2.5 places them — index, keys
//! and metadata in DRAM, values on the value tier written with non-temporal stores. The
//! tenant's quota is its storage: it can only ever evict its own items.
//!
//! Times are passed in (Unix seconds), so the store is deterministic under test.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use heterarchy_device::backend::{Backend, Throttle};
use heterarchy_engine::nyx::{MaxIopsProfile, Regulator};

mod space;

use crate::expiry::Expiry;
use crate::index::{index_entry_bytes, Index, Item};
use crate::layout::{
    record_bytes, RecordHeader, StoreHeader, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, STATE_LIVE,
    STATE_STALE,
};
use crate::media::Media;
use crate::recover::{self, Recovery};
use crate::request::{Arithmetic, Counted, Delete, Deleted, Found, Lookup, Mode, Stored, Write};
use crate::segments::Segments;
use crate::stats::StoreStats;

/// Default segment size, as Pelikan's `segment_size`.
pub const DEFAULT_SEGMENT_BYTES: u32 = 1 << 20;
/// Default item size limit, as memcached's `-I`.
pub const DEFAULT_ITEM_MAX_BYTES: u32 = 1 << 20;

/// How a store is laid out and limited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes of each segment; an item (key, value and a 40-byte header) must fit in one.
    pub segment_bytes: u32,
    /// Largest item (key, value and header) accepted.
    pub item_max_bytes: u32,
    /// DRAM the index may take (see [`index_entry_bytes`]); past it the oldest segments are
    /// evicted as if the value tier were full. This is what bounds a tenant whose values are
    /// on cheap persistent memory: NyxCache's servers hold index and keys in DRAM and values on
    /// PM (seed 000 §5.2.5), so DRAM, not PM, runs out first with small values. `None`: only
    /// the value tier bounds the store.
    pub index_max_bytes: Option<u64>,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            item_max_bytes: DEFAULT_ITEM_MAX_BYTES,
            index_max_bytes: None,
        }
    }
}

/// One record to write: an item's key and value and what its header says of it.
#[derive(Clone, Copy)]
pub(crate) struct NewRecord<'a> {
    pub key: &'a [u8],
    /// The key's hash in the index.
    pub hash: u64,
    pub value: &'a [u8],
    pub client_flags: u32,
    pub expiry: Expiry,
    /// `STATE_LIVE`, with `STATE_STALE` for an item marked stale.
    pub state: u8,
    /// The CAS unique it keeps (a moved item's, or one a client gave); `None`: its sequence
    /// number.
    pub cas: Option<u64>,
}

/// One tenant's cache.
pub struct Store {
    media: Media,
    config: StoreConfig,
    index: Index,
    pub(crate) segments: Segments,
    next_sequence: u64,
    header: StoreHeader,
    /// A delayed flush_all: everything stored before this time goes then.
    pending_flush_secs: Option<u32>,
    stats: StoreStats,
    record: Vec<u8>,
    /// Shut down: every request fails from then on, so that nothing is answered after the
    /// store was made durable and marked clean.
    shut: bool,
}

impl Store {
    /// Opens a store on `backend`: finds the items a previous run left on persistent storage
    /// (see [`Recovery`]), or starts empty. `now_secs` is the current Unix time.
    pub fn open(
        backend: Box<dyn Backend>,
        config: StoreConfig,
        now_secs: u32,
    ) -> io::Result<(Store, Recovery)> {
        check_config(&config, backend.size_bytes())?;
        let hasher = foldhash::quality::RandomState::default();
        let found = recover::scan(backend.as_ref(), &config, &hasher, now_secs)?;
        let index = Index::new(hasher);
        let mut store = Store {
            media: Media::new(backend),
            segments: found.segments,
            index,
            next_sequence: found.next_sequence,
            header: found.header,
            config,
            pending_flush_secs: None,
            stats: StoreStats::default(),
            record: Vec::new(),
            shut: false,
        };
        for item in found.items {
            let hash = store.index.hash(&item.key);
            store.index.insert(hash, item);
        }
        store.stats.total_items = store.index.len() as u64;
        // A restart with less DRAM for the index than before keeps the newest items.
        store.make_index_room(now_secs, 0)?;
        store.header.clean = false;
        store.media.write_store_header(&mut store.header)?;
        Ok((store, found.recovery))
    }

    /// Times every storage access like a device model from now on (an emulated PM tier); see
    /// [`take_device_deadline`](Store::take_device_deadline).
    pub fn set_throttle(&mut self, throttle: Arc<Throttle>) {
        self.media.set_throttle(throttle);
    }

    /// Puts every storage access through the tenant's NyxCache gate (seed 000 §5.2.3): delayed
    /// as the controller says, charged by `profile`. Only a throttled store has a device to
    /// share.
    pub fn set_gate(&mut self, gate: Arc<Regulator>, profile: Arc<MaxIopsProfile>) {
        self.media.set_gate(gate, profile);
    }

    /// When a throttled tier would have completed the accesses made since the last call, one
    /// after another; an answer is due then, not before. None without a throttle.
    pub fn take_device_deadline(&mut self) -> Option<Instant> {
        self.media.take_deadline()
    }

    /// Makes everything durable and marks the store cleanly shut down, so the next start
    /// trusts all of it; every request fails from then on.
    pub fn shut_down(&mut self) -> io::Result<()> {
        self.shut = true;
        self.media.flush()?;
        self.header.clean = true;
        self.media.write_store_header(&mut self.header)?;
        self.media.flush()
    }

    /// Checks what the store keeps between requests, for tests that want corruption caught at
    /// the step that made it: the segment pool's accounting (see `Segments::check_invariants`),
    /// every item pointing at a record its segment wrote, each segment's live bytes the bytes
    /// of the records its items point at, and the index's DRAM count its entries'. The message
    /// names the segment or key.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.segments.check_invariants()?;
        let mut live = vec![0u64; self.segments.segments.len()];
        let mut index_bytes = 0;
        for item in self.index.iter() {
            let key = String::from_utf8_lossy(&item.key);
            let Some(segment) = self.segments.segments.get(item.segment as usize) else {
                return Err(format!(
                    "key {key} is in segment {}, past the pool",
                    item.segment
                ));
            };
            let recorded = segment
                .records
                .binary_search_by_key(&item.offset, |&(_, offset)| offset)
                .is_ok();
            if segment.header.free || !recorded {
                return Err(format!(
                    "key {key} points at byte {} of segment {}, where no record is",
                    item.offset, item.segment
                ));
            }
            live[item.segment as usize] += record_bytes(item.key.len(), item.value_len as usize);
            index_bytes += index_entry_bytes(item.key.len());
        }
        for (index, (segment, live)) in self.segments.segments.iter().zip(live).enumerate() {
            if segment.live_bytes != live {
                return Err(format!(
                    "segment {index} counts {} live bytes, its items' records take {live}",
                    segment.live_bytes
                ));
            }
        }
        if index_bytes != self.index.bytes() {
            return Err(format!(
                "the index counts {} bytes of DRAM, its entries take {index_bytes}",
                self.index.bytes()
            ));
        }
        Ok(())
    }

    /// The counters, with the current item count and bytes.
    pub fn stats(&self) -> StoreStats {
        let mut stats = self.stats;
        stats.curr_items = self.index.len() as u64;
        stats.bytes = self.segments.segments.iter().map(|s| s.live_bytes).sum();
        stats.limit_maxbytes = self.media.backend().size_bytes();
        stats.segments_in_use = self.segments.in_use() as u64;
        stats.index_bytes = self.index.bytes();
        stats.index_max_bytes = self.config.index_max_bytes.unwrap_or(0);
        stats
    }

    /// What the store is on.
    pub fn describe(&self) -> String {
        self.media.backend().describe()
    }

    /// Fails once the store is shut down.
    fn check_open(&self) -> io::Result<()> {
        match self.shut {
            true => Err(io::Error::other("the store is shut down")),
            false => Ok(()),
        }
    }

    /// Looks `key` up (get, gets, gat, mg).
    pub fn get(&mut self, now_secs: u32, key: &[u8], lookup: &Lookup) -> io::Result<Option<Found>> {
        self.check_open()?;
        self.apply_pending_flush(now_secs);
        let hash = self.index.hash(key);
        let found = self.live(now_secs, key, hash, |item| access(item, lookup, now_secs))?;
        let Some(mut found) = found else {
            self.stats.get_misses += 1;
            let Some(expiry) = lookup.vivify else {
                return Ok(None);
            };
            // The first client to miss creates an empty item and wins the right to fill it.
            let write = Write {
                key,
                value: b"",
                client_flags: 0,
                expiry,
                mode: Mode::Add,
                compare_cas: None,
                invalidate: false,
                new_cas: lookup.new_cas,
            };
            if !matches!(self.store(now_secs, &write)?, Stored::Stored(_)) {
                return Ok(None);
            }
            let item = self.index.find_mut(key, hash).expect("just stored");
            item.win_sent = true;
            let mut found = found_of(item, now_secs);
            found.win = true;
            return Ok(Some(found));
        };
        self.stats.get_hits += 1;
        if let Some(expiry) = lookup.touch {
            found.expiry = expiry;
            self.stats.touch_hits += 1;
            self.set_expiry(key, hash, expiry)?;
        }
        Ok(Some(found))
    }

    /// Appends the value of `found` (from [`get`](Self::get), with no write since) to `out`.
    pub fn read_value(&mut self, found: &Found, out: &mut Vec<u8>) -> io::Result<()> {
        self.check_open()?;
        let (segment, offset, key_len) = found.location;
        let at = self.segments.base_offset(segment)
            + u64::from(offset)
            + u64::from(RECORD_HEADER_BYTES)
            + u64::from(key_len);
        self.media.read(at, found.value_len as usize, out)
    }

    /// Stores an item (set, add, replace, append, prepend, cas, ms).
    pub fn store(&mut self, now_secs: u32, write: &Write) -> io::Result<Stored> {
        self.check_open()?;
        self.apply_pending_flush(now_secs);
        let hash = self.index.hash(write.key);
        // What is needed of the item it replaces, without cloning its key.
        let current = self.live(now_secs, write.key, hash, |item| found_of(item, now_secs))?;
        let mut stale = false;
        if let Some(expected) = write.compare_cas {
            match &current {
                None => {
                    self.stats.cas_misses += 1;
                    return Ok(Stored::NotFound);
                }
                Some(item) if item.cas == expected => self.stats.cas_hits += 1,
                Some(item) if write.invalidate && expected < item.cas => stale = true,
                Some(_) => {
                    self.stats.cas_badval += 1;
                    return Ok(Stored::Exists);
                }
            }
        }
        let allowed = match write.mode {
            Mode::Set => true,
            Mode::Add => current.is_none(),
            Mode::Replace | Mode::Append | Mode::Prepend => current.is_some(),
        };
        if !allowed {
            return Ok(Stored::NotStored);
        }
        let (value, client_flags, expiry) = match (write.mode, &current) {
            (Mode::Append | Mode::Prepend, Some(item)) => {
                let mut joined = Vec::with_capacity(item.value_len as usize + write.value.len());
                if write.mode == Mode::Prepend {
                    joined.extend_from_slice(write.value);
                }
                self.read_value(item, &mut joined)?;
                if write.mode == Mode::Append {
                    joined.extend_from_slice(write.value);
                }
                (
                    std::borrow::Cow::Owned(joined),
                    item.client_flags,
                    item.expiry,
                )
            }
            _ => (
                std::borrow::Cow::Borrowed(write.value),
                write.client_flags,
                write.expiry,
            ),
        };
        if !self.fits(write.key.len(), value.len()) {
            return Ok(Stored::TooLarge);
        }
        let state = if stale {
            STATE_LIVE | STATE_STALE
        } else {
            STATE_LIVE
        };
        let cas = self.put(
            now_secs,
            NewRecord {
                key: write.key,
                hash,
                value: &value,
                client_flags,
                expiry,
                state,
                cas: write.new_cas,
            },
        )?;
        Ok(Stored::Stored(cas))
    }

    /// Deletes `key` (delete, md), or marks it stale or empties it as `how` says.
    pub fn delete(&mut self, now_secs: u32, key: &[u8], how: &Delete) -> io::Result<Deleted> {
        self.check_open()?;
        self.apply_pending_flush(now_secs);
        let hash = self.index.hash(key);
        let Some(item) = self.live(now_secs, key, hash, |item| item.clone())? else {
            self.stats.delete_misses += 1;
            return Ok(Deleted::NotFound);
        };
        if how.compare_cas.is_some_and(|cas| cas != item.cas) {
            return Ok(Deleted::Exists);
        }
        self.stats.delete_hits += 1;
        if let Some(expiry) = how.invalidate {
            let value = self.read_item_value(&item)?;
            let expiry = expiry.unwrap_or(item.expiry);
            let state = STATE_LIVE | STATE_STALE;
            self.put(
                now_secs,
                NewRecord {
                    key,
                    hash,
                    value: &value,
                    client_flags: item.client_flags,
                    expiry,
                    state,
                    cas: how.new_cas,
                },
            )?;
            if let Some(entry) = self.index.find_mut(key, hash) {
                entry.win_sent = false;
            }
        } else if how.drop_value {
            self.put(
                now_secs,
                NewRecord {
                    key,
                    hash,
                    value: b"",
                    client_flags: item.client_flags,
                    expiry: item.expiry,
                    state: STATE_LIVE,
                    cas: how.new_cas,
                },
            )?;
        } else {
            self.remove(key, hash)?;
        }
        Ok(Deleted::Deleted)
    }

    /// Drops `key` if it is there, unlike [`delete`](Self::delete) counting no delete: what a
    /// set refused as too large leaves behind, so that no stale value outlives the failed
    /// update (memcached does the same).
    pub fn discard(&mut self, now_secs: u32, key: &[u8]) -> io::Result<()> {
        self.check_open()?;
        let hash = self.index.hash(key);
        match self.live(now_secs, key, hash, |_| ())? {
            Some(()) => self.remove(key, hash),
            None => Ok(()),
        }
    }

    /// Increments or decrements a decimal value (incr, decr, ma): increments wrap at 2^64,
    /// decrements stop at 0, and a shorter result is padded with spaces to the old length, as
    /// memcached does in place.
    pub fn arithmetic(
        &mut self,
        now_secs: u32,
        key: &[u8],
        request: &Arithmetic,
    ) -> io::Result<Counted> {
        self.check_open()?;
        self.apply_pending_flush(now_secs);
        let hash = self.index.hash(key);
        let Some(item) = self.live(now_secs, key, hash, |item| item.clone())? else {
            self.stats.count_arithmetic(request.incr, false);
            let Some((expiry, initial)) = request.vivify else {
                return Ok(Counted::NotFound);
            };
            let digits = initial.to_string();
            let cas = self.put(
                now_secs,
                NewRecord {
                    key,
                    hash,
                    value: digits.as_bytes(),
                    client_flags: 0,
                    expiry,
                    state: STATE_LIVE,
                    cas: request.new_cas,
                },
            )?;
            return Ok(Counted::Value {
                value: initial,
                cas,
                expiry,
            });
        };
        if request.compare_cas.is_some_and(|cas| cas != item.cas) {
            return Ok(Counted::Exists);
        }
        let old = self.read_item_value(&item)?;
        let Some(current) = parse_counter(&old) else {
            return Ok(Counted::NonNumeric);
        };
        self.stats.count_arithmetic(request.incr, true);
        let value = if request.incr {
            current.wrapping_add(request.delta)
        } else {
            current.saturating_sub(request.delta)
        };
        let mut digits = value.to_string().into_bytes();
        if digits.len() < old.len() {
            digits.resize(old.len(), b' ');
        }
        let expiry = request.touch.unwrap_or(item.expiry);
        let cas = self.put(
            now_secs,
            NewRecord {
                key,
                hash,
                value: &digits,
                client_flags: item.client_flags,
                expiry,
                state: STATE_LIVE,
                cas: request.new_cas,
            },
        )?;
        Ok(Counted::Value { value, cas, expiry })
    }

    /// Sets a new expiry on `key` (touch); false when it is not there.
    pub fn touch(&mut self, now_secs: u32, key: &[u8], expiry: Expiry) -> io::Result<bool> {
        self.check_open()?;
        self.apply_pending_flush(now_secs);
        let hash = self.index.hash(key);
        let accessed = self.live(now_secs, key, hash, |item| item.accessed_secs = now_secs)?;
        if accessed.is_none() {
            self.stats.touch_misses += 1;
            return Ok(false);
        }
        self.stats.touch_hits += 1;
        self.set_expiry(key, hash, expiry)?;
        Ok(true)
    }

    /// Drops every item now, or everything stored before `now_secs + delay_secs` once that time
    /// comes (flush_all).
    pub fn flush_all(&mut self, now_secs: u32, delay_secs: u32) -> io::Result<()> {
        self.check_open()?;
        if delay_secs > 0 {
            self.pending_flush_secs = Some(now_secs.saturating_add(delay_secs));
            return Ok(());
        }
        self.pending_flush_secs = None;
        self.stats.flushed_items += self.index.len() as u64;
        self.index.clear();
        self.segments.release_all();
        // Records at or below this sequence are void at the next start.
        self.header.flushed_through = self.next_sequence - 1;
        self.media.write_store_header(&mut self.header)
    }

    fn apply_pending_flush(&mut self, now_secs: u32) {
        if self.pending_flush_secs.is_some_and(|at| now_secs >= at) {
            // A failure to persist the flush mark only means a restart may find the items.
            let _ = self.flush_all(now_secs, 0);
        }
    }

    /// What `on_live` makes of `key`'s item, if it has one that has not expired; an expired
    /// one is removed. One probe of the index: every command starts here.
    fn live<R>(
        &mut self,
        now_secs: u32,
        key: &[u8],
        hash: u64,
        on_live: impl FnOnce(&mut Item) -> R,
    ) -> io::Result<Option<R>> {
        let fetched = match self.index.find_mut(key, hash) {
            None => return Ok(None),
            Some(item) if !item.expiry.has_passed(now_secs) => return Ok(Some(on_live(item))),
            Some(item) => item.fetched,
        };
        self.drop_expired(key, hash, fetched)?;
        Ok(None)
    }

    /// Removes an item found expired, counting it as reclaimed.
    fn drop_expired(&mut self, key: &[u8], hash: u64, fetched: bool) -> io::Result<()> {
        if !fetched {
            self.stats.expired_unfetched += 1;
        }
        self.stats.reclaimed += 1;
        self.remove(key, hash)
    }

    fn fits(&self, key_len: usize, value_len: usize) -> bool {
        let bytes = record_bytes(key_len, value_len);
        bytes <= u64::from(self.config.item_max_bytes)
            && bytes <= u64::from(self.config.segment_bytes - SEGMENT_HEADER_BYTES)
    }

    /// Writes `record` and points the index at it, voiding the one it replaces; returns the
    /// new CAS unique.
    fn put(&mut self, now_secs: u32, record: NewRecord<'_>) -> io::Result<u64> {
        let NewRecord {
            key, hash, value, ..
        } = record;
        if self.config.index_max_bytes.is_some() && self.index.find(key, hash).is_none() {
            self.make_index_room(now_secs, index_entry_bytes(key.len()))?;
        }
        let bytes = record_bytes(key.len(), value.len());
        let (segment, offset) = self.room_for(now_secs, record.expiry, bytes)?;
        let cas = self.append_record((segment, offset), &record)?;
        let stale = record.state & STATE_STALE != 0;
        let replaced = match self.index.find_mut(key, hash) {
            Some(item) => {
                let old = (
                    item.segment,
                    item.offset,
                    record_bytes(item.key.len(), item.value_len as usize),
                );
                item.cas = cas;
                item.segment = segment;
                item.offset = offset;
                item.value_len = value.len() as u32;
                item.client_flags = record.client_flags;
                item.expiry = record.expiry;
                item.accessed_secs = now_secs;
                item.fetched = false;
                item.stale = stale;
                item.win_sent = false;
                Some(old)
            }
            None => {
                let item = Item {
                    key: key.into(),
                    cas,
                    segment,
                    offset,
                    value_len: value.len() as u32,
                    client_flags: record.client_flags,
                    expiry: record.expiry,
                    accessed_secs: now_secs,
                    fetched: false,
                    stale,
                    win_sent: false,
                };
                self.index.insert(hash, item);
                None
            }
        };
        // Void the record this one replaces before the reply, and only once this one is
        // durable (which `write_record` made it): a crash in between leaves both, and the newer sequence wins at restart; a
        // void that never reached the medium would bring the old value back once the new one
        // is evicted.
        if let Some((old_segment, old_offset, old_bytes)) = replaced {
            self.void_record(old_segment, old_offset, old_bytes)?;
        }
        self.stats.total_items += 1;
        Ok(cas)
    }

    /// Writes `record` at `at` (segment, offset) with the next sequence number, durably as the
    /// media's writes are, and notes it in its segment; returns its CAS unique (the record's, or
    /// the sequence number). Pointing the index at it is the caller's part.
    fn append_record(
        &mut self,
        (segment, offset): (u32, u32),
        record: &NewRecord<'_>,
    ) -> io::Result<u64> {
        let NewRecord {
            key,
            hash,
            value,
            client_flags,
            expiry,
            state,
            cas: given_cas,
        } = *record;
        let bytes = record_bytes(key.len(), value.len());
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let cas = given_cas.unwrap_or(sequence);
        let header = RecordHeader {
            sequence,
            cas,
            expiry_raw: expiry.to_raw(),
            client_flags,
            value_len: value.len() as u32,
            key_len: key.len() as u16,
            state,
            generation: self.segments.segments[segment as usize].header.generation,
        };
        self.record.clear();
        self.record
            .extend_from_slice(&header.encode(key, value, self.media.durable()));
        self.record.extend_from_slice(key);
        self.record.extend_from_slice(value);
        self.record.resize(bytes as usize, 0);
        let at = self.segments.base_offset(segment) + u64::from(offset);
        self.media.write_record(at, &self.record)?;
        self.segments.segments[segment as usize].note_record(hash, offset, bytes, expiry);
        Ok(cas)
    }

    fn remove(&mut self, key: &[u8], hash: u64) -> io::Result<()> {
        let Some(item) = self.index.remove(key, hash) else {
            return Ok(());
        };
        let bytes = record_bytes(item.key.len(), item.value_len as usize);
        self.void_record(item.segment, item.offset, bytes)
    }

    /// Marks a record dead: in the segment's accounting, and on persistent storage in its
    /// state word.
    fn void_record(&mut self, segment: u32, offset: u32, bytes: u64) -> io::Result<()> {
        self.segments.segments[segment as usize].forget_live(bytes);
        let at = self.segments.base_offset(segment) + u64::from(offset);
        self.media.void_record(at)
    }

    fn set_expiry(&mut self, key: &[u8], hash: u64, expiry: Expiry) -> io::Result<()> {
        let Some(item) = self.index.find_mut(key, hash) else {
            return Ok(());
        };
        item.expiry = expiry;
        let (segment, offset, client_flags) = (item.segment, item.offset, item.client_flags);
        self.segments.segments[segment as usize].extend_expiry(expiry);
        let at = self.segments.base_offset(segment) + u64::from(offset);
        self.media.write_expiry(at, expiry, client_flags)
    }

    fn read_item_value(&mut self, item: &Item) -> io::Result<Vec<u8>> {
        let found = found_of(item, 0);
        let mut value = Vec::with_capacity(item.value_len as usize);
        self.read_value(&found, &mut value)?;
        Ok(value)
    }
}

fn found_of(item: &Item, now_secs: u32) -> Found {
    Found {
        client_flags: item.client_flags,
        cas: item.cas,
        value_len: item.value_len,
        expiry: item.expiry,
        idle_secs: now_secs.saturating_sub(item.accessed_secs),
        hit_before: item.fetched,
        stale: item.stale,
        win: false,
        already_won: false,
        location: (item.segment, item.offset, item.key.len() as u16),
    }
}

/// What a hit on `item` finds, with its access state updated as `lookup` asks.
fn access(item: &mut Item, lookup: &Lookup, now_secs: u32) -> Found {
    let mut found = found_of(item, now_secs);
    let wants_recache = item.stale
        || lookup.recache_below_secs.is_some_and(|below| {
            item.expiry
                .remaining_secs(now_secs)
                .is_some_and(|left| left < below)
        });
    // One client at a time is handed the right to recache; the others learn it is taken.
    if item.win_sent {
        found.already_won = true;
    } else if wants_recache {
        item.win_sent = true;
        found.win = true;
    }
    if !lookup.no_bump {
        item.fetched = true;
        item.accessed_secs = now_secs;
    }
    found
}

/// A counter's value: decimal digits, with the spaces an in-place decrement may have left
/// (memcached reads it with strtoull).
fn parse_counter(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn check_config(config: &StoreConfig, storage_bytes: u64) -> io::Result<()> {
    let invalid = |message: String| Err(io::Error::new(io::ErrorKind::InvalidInput, message));
    if config.segment_bytes < 4096 || config.segment_bytes & 7 != 0 {
        return invalid(format!(
            "segment size {} bytes: expected at least 4 KiB, a multiple of 8",
            config.segment_bytes
        ));
    }
    if Segments::count_for(storage_bytes, config.segment_bytes) < 2 {
        return invalid(format!(
            "{storage_bytes} bytes of storage hold fewer than two {} KiB segments",
            config.segment_bytes >> 10
        ));
    }
    Ok(())
}
