//! The DRAM index of one tenant's store (seed 000 §5.2.5: keys and metadata in DRAM, values on
//! the value tier): its items by key, and the DRAM they take, which a store's `index_max_bytes`
//! bounds.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::expiry::Expiry;
use crate::key::Key;

/// An item in the DRAM index.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub key: Key,
    /// The CAS unique.
    pub cas: u64,
    pub segment: u32,
    pub offset: u32,
    pub value_len: u32,
    pub client_flags: u32,
    pub expiry: Expiry,
    pub accessed_secs: u32,
    pub fetched: bool,
    pub stale: bool,
    /// A client was handed the right to recache it (the meta protocol's W flag).
    pub win_sent: bool,
}

/// DRAM one index entry takes: the entry, the table's control byte, and its key's bytes when
/// they are too long to be held in the entry.
pub fn index_entry_bytes(key_len: usize) -> u64 {
    (std::mem::size_of::<Item>() + 1 + Key::heap_bytes(key_len)) as u64
}

/// Items by key.
pub(crate) struct Index {
    table: HashTable<Item>,
    hasher: foldhash::quality::RandomState,
    /// DRAM the index takes, by [`index_entry_bytes`].
    bytes: u64,
}

impl Index {
    /// An empty index whose hashes `hasher` makes (randomly keyed, so clients cannot choose
    /// colliding keys).
    pub fn new(hasher: foldhash::quality::RandomState) -> Index {
        Index {
            table: HashTable::new(),
            hasher,
            bytes: 0,
        }
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// DRAM the index takes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every item, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &Item> {
        self.table.iter()
    }

    pub fn find(&self, key: &[u8], hash: u64) -> Option<&Item> {
        self.table.find(hash, |item| *item.key == *key)
    }

    pub fn find_mut(&mut self, key: &[u8], hash: u64) -> Option<&mut Item> {
        self.table.find_mut(hash, |item| *item.key == *key)
    }

    /// Adds `item`, whose key is not in the index, with `hash` its key's hash.
    pub fn insert(&mut self, hash: u64, item: Item) {
        self.bytes += index_entry_bytes(item.key.len());
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, item, |item| hasher.hash_one(&*item.key));
    }

    /// Takes `key`'s item out.
    pub fn remove(&mut self, key: &[u8], hash: u64) -> Option<Item> {
        let entry = self.table.find_entry(hash, |item| *item.key == *key).ok()?;
        let item = entry.remove().0;
        Some(self.removed(item))
    }

    /// The item whose record is at `offset` of `segment`, if the index still points there
    /// (`hash` its key's hash).
    pub fn find_at_mut(&mut self, hash: u64, segment: u32, offset: u32) -> Option<&mut Item> {
        self.table.find_mut(hash, |item| {
            item.segment == segment && item.offset == offset
        })
    }

    /// Takes out the item whose record is at `offset` of `segment`, if the index still points
    /// there (`hash` its key's hash).
    pub fn remove_at(&mut self, hash: u64, segment: u32, offset: u32) -> Option<Item> {
        let entry = self
            .table
            .find_entry(hash, |item| {
                item.segment == segment && item.offset == offset
            })
            .ok()?;
        let item = entry.remove().0;
        Some(self.removed(item))
    }

    fn removed(&mut self, item: Item) -> Item {
        let bytes = index_entry_bytes(item.key.len());
        // Counted when the item went in: less left would be a bug, never a wrapped count that
        // makes the index look full for ever.
        debug_assert!(bytes <= self.bytes, "{bytes} of {} index bytes", self.bytes);
        self.bytes = self.bytes.saturating_sub(bytes);
        item
    }

    pub fn clear(&mut self) {
        self.table.clear();
        self.bytes = 0;
    }
}
