//! A key → value hash table that can prefetch, for policies whose simulation speed is bound by
//! cache misses on the table and on the nodes its values (slab indices) point to.
//!
//! Open addressing with linear probing and backward-shift deletion (no tombstones), 16-byte
//! slots, a multiplicative (Fibonacci) hash whose top bits pick the home slot, and a load
//! factor kept at most 5/8. Unlike `std`'s map it exposes [`KeyTable::prefetch`], so a
//! simulation loop can ask for the slot of a request several requests ahead and overlap the
//! memory latency of many lookups.

use super::prefetch::prefetch_read;
use super::NIL;

/// A value a [`KeyTable`] can hold: one value is reserved to mark empty slots.
pub trait TableValue: Copy {
    /// The value that marks an empty slot; it cannot be stored.
    const EMPTY: Self;
    /// True for [`TableValue::EMPTY`].
    fn is_empty(&self) -> bool;
}

impl TableValue for u32 {
    const EMPTY: u32 = NIL;
    #[inline]
    fn is_empty(&self) -> bool {
        *self == NIL
    }
}

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Slot<V> {
    key: u64,
    value: V,
}

/// Smallest table: 16 slots.
const MIN_BITS: u32 = 4;

/// Maps `u64` keys to values (by default `u32` slab indices other than [`NIL`]).
#[derive(Clone, Debug)]
pub struct KeyTable<V: TableValue = u32> {
    slots: Vec<Slot<V>>,
    /// `64 - log2(slots.len())`: the hash's top bits index the table.
    shift: u32,
    len: usize,
}

impl<V: TableValue> Default for KeyTable<V> {
    fn default() -> Self {
        KeyTable::with_capacity(0)
    }
}

impl<V: TableValue> KeyTable<V> {
    const EMPTY_SLOT: Slot<V> = Slot {
        key: 0,
        value: V::EMPTY,
    };

    /// An empty table with room for `capacity` keys before it grows.
    pub fn with_capacity(capacity: usize) -> KeyTable<V> {
        let mut bits = MIN_BITS;
        while (1usize << bits) * 5 / 8 < capacity {
            bits += 1;
        }
        KeyTable {
            slots: vec![Self::EMPTY_SLOT; 1 << bits],
            shift: 64 - bits,
            len: 0,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Asks the CPU to start loading `key`'s home slot; a hint with no effect on results.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        prefetch_read(&self.slots[self.home(key)]);
    }

    /// The position of `key`'s slot, if present.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let mask = self.mask();
        let mut index = self.home(key);
        loop {
            let slot = &self.slots[index];
            if slot.value.is_empty() {
                return None;
            }
            if slot.key == key {
                return Some(index);
            }
            index = (index + 1) & mask;
        }
    }

    /// The value stored for `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<V> {
        self.find(key).map(|index| self.slots[index].value)
    }

    /// The value stored for `key`, to change in place (it must not become
    /// [`TableValue::EMPTY`]; use [`KeyTable::remove`]).
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        self.find(key).map(|index| &mut self.slots[index].value)
    }

    /// Stores `value` (not [`TableValue::EMPTY`]) for `key`, replacing any previous value.
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) {
        debug_assert!(!value.is_empty());
        if (self.len + 1) * 8 > self.slots.len() * 5 {
            self.grow();
        }
        let mask = self.mask();
        let mut index = self.home(key);
        loop {
            let slot = &mut self.slots[index];
            if slot.value.is_empty() {
                *slot = Slot { key, value };
                self.len += 1;
                return;
            }
            if slot.key == key {
                slot.value = value;
                return;
            }
            index = (index + 1) & mask;
        }
    }

    /// Removes `key`; returns its value if it was there.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let mut hole = self.find(key)?;
        let mask = self.mask();
        let value = self.slots[hole].value;
        // Backward shift: pull later members of the probe run into the hole unless their home
        // lies cyclically after the hole (they would become unreachable).
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let slot = self.slots[next];
            if slot.value.is_empty() {
                break;
            }
            let home = self.home(slot.key);
            let distance_from_home = next.wrapping_sub(home) & mask;
            let distance_from_hole = next.wrapping_sub(hole) & mask;
            if distance_from_home >= distance_from_hole {
                self.slots[hole] = slot;
                hole = next;
            }
        }
        self.slots[hole] = Self::EMPTY_SLOT;
        self.len -= 1;
        Some(value)
    }

    fn grow(&mut self) {
        let doubled = vec![Self::EMPTY_SLOT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.shift -= 1;
        self.len = 0;
        for slot in old {
            if !slot.value.is_empty() {
                self.insert(slot.key, slot.value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn insert_get_remove_and_grow() {
        let mut table: KeyTable = KeyTable::default();
        for key in 0..1000u64 {
            table.insert(key * 7919, key as u32);
        }
        assert_eq!(table.len(), 1000);
        assert!(table.slots.len() * 5 >= 1000 * 8, "load factor at most 5/8");
        for key in 0..1000u64 {
            assert_eq!(table.get(key * 7919), Some(key as u32));
        }
        table.insert(7919, 5);
        assert_eq!((table.get(7919), table.len()), (Some(5), 1000), "replaces");
        for key in (0..1000u64).step_by(2) {
            assert_eq!(table.remove(key * 7919), Some(key as u32));
        }
        assert_eq!(table.remove(0), None);
        *table.get_mut(3 * 7919).expect("odd keys stay") = 77;
        assert_eq!(table.get(3 * 7919), Some(77));
        *table.get_mut(3 * 7919).expect("odd keys stay") = 3;
        assert_eq!(table.get_mut(2 * 7919), None);
        for key in 0..1000u64 {
            let expected = (key % 2 == 1).then_some(if key == 1 { 5 } else { key as u32 });
            assert_eq!(table.get(key * 7919), expected);
        }
    }

    proptest! {
        /// Keys confined to a few home slots force long probe runs that wrap around the end.
        #[test]
        fn agrees_with_a_hash_map(ops in proptest::collection::vec((0u64..64, 0u32..3, any::<bool>()), 1..600)) {
            let mut table: KeyTable = KeyTable::with_capacity(8);
            let mut model = HashMap::new();
            for (step, (key, spread, insert)) in ops.into_iter().enumerate() {
                // Multiples of 2^60 hash to few home slots; small keys spread out.
                let key = if spread == 0 { key << 58 } else { key };
                if insert {
                    table.insert(key, step as u32);
                    model.insert(key, step as u32);
                } else {
                    prop_assert_eq!(table.remove(key), model.remove(&key));
                }
                prop_assert_eq!(table.len(), model.len());
                for (&key, &value) in &model {
                    prop_assert_eq!(table.get(key), Some(value));
                }
            }
        }
    }
}
