//! Resident objects in one dense array, found by key: the whole index of the sampling policies
//! (Random, Hyperbolic, LHD), which pick eviction candidates uniformly among residents in O(1)
//! by drawing a position in the array. Removal swaps the last object into the hole, so the
//! array never has gaps; positions are therefore not stable across removals.

use super::key_table::KeyTable;
use super::prefetch::prefetch_read;
use super::rng::Lehmer64;
use crate::eviction::{Evicted, Space};

/// One resident object and the policy's data about it.
#[derive(Clone, Copy, Debug)]
pub struct Resident<T> {
    pub key: u64,
    pub size: u32,
    pub data: T,
}

impl<T> Resident<T> {
    /// What leaves when this object is evicted.
    #[inline]
    pub fn evicted(&self) -> Evicted {
        Evicted {
            key: self.key,
            size: self.size,
        }
    }
}

/// Residents with per-object data `T`, at positions `0..len()`.
#[derive(Clone, Debug)]
pub struct DenseResidents<T> {
    /// Key → position in `residents`.
    positions: KeyTable,
    residents: Vec<Resident<T>>,
    bytes: u64,
}

impl<T> Default for DenseResidents<T> {
    fn default() -> Self {
        DenseResidents {
            positions: KeyTable::default(),
            residents: Vec::new(),
            bytes: 0,
        }
    }
}

impl<T> DenseResidents<T> {
    /// The position of `key`, if resident.
    #[inline]
    pub fn find(&self, key: u64) -> Option<u32> {
        self.positions.get(key)
    }

    /// Number of residents.
    #[inline]
    pub fn len(&self) -> usize {
        self.residents.len()
    }

    /// True when nothing is resident.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.residents.is_empty()
    }

    /// Bytes of the residents.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The residents as a cache of `capacity_bytes`.
    #[inline]
    pub fn space(&self, capacity_bytes: u64) -> Space {
        Space {
            capacity_bytes,
            used_bytes: self.bytes,
            objects: self.residents.len(),
        }
    }

    /// Checks that the counted bytes are the residents' and that the key table finds each
    /// resident at its position.
    pub fn check_invariants(&self) -> Result<(), String> {
        let bytes: u64 = self.residents.iter().map(|r| u64::from(r.size)).sum();
        if bytes != self.bytes {
            return Err(format!(
                "residents of {bytes} bytes counted as {}",
                self.bytes
            ));
        }
        if self.positions.len() != self.residents.len() {
            return Err(format!(
                "{} keys in the table for {} residents",
                self.positions.len(),
                self.residents.len()
            ));
        }
        for (position, resident) in self.residents.iter().enumerate() {
            if self.positions.get(resident.key) != Some(position as u32) {
                return Err(format!(
                    "key {} is not found at its position {position}",
                    resident.key
                ));
            }
        }
        Ok(())
    }

    /// The resident at `position`.
    #[inline]
    pub fn get(&self, position: u32) -> &Resident<T> {
        &self.residents[position as usize]
    }

    /// The resident at `position`, mutably.
    #[inline]
    pub fn get_mut(&mut self, position: u32) -> &mut Resident<T> {
        &mut self.residents[position as usize]
    }

    /// A uniformly random position; the set must not be empty.
    #[inline]
    pub fn random_position(&self, rng: &mut Lehmer64) -> u32 {
        debug_assert!(!self.is_empty());
        rng.below(self.residents.len() as u64) as u32
    }

    /// Adds an object that is not resident and returns its position (the last).
    #[inline]
    pub fn insert(&mut self, key: u64, size: u32, data: T) -> u32 {
        debug_assert!(self.find(key).is_none());
        let position = self.residents.len() as u32;
        self.residents.push(Resident { key, size, data });
        self.positions.insert(key, position);
        self.bytes += u64::from(size);
        position
    }

    /// Removes the resident at `position`; the last resident takes its place.
    #[inline]
    pub fn remove_at(&mut self, position: u32) -> Resident<T> {
        let gone = self.residents.swap_remove(position as usize);
        self.positions.remove(gone.key);
        if let Some(moved) = self.residents.get(position as usize) {
            *self
                .positions
                .get_mut(moved.key)
                .expect("every resident has a position") = position;
        }
        debug_assert!(self.bytes >= u64::from(gone.size));
        self.bytes = self.bytes.saturating_sub(u64::from(gone.size));
        gone
    }

    /// Removes `key` if resident.
    pub fn remove(&mut self, key: u64) -> Option<Resident<T>> {
        let position = self.find(key)?;
        Some(self.remove_at(position))
    }

    /// Starts loading the table slot of `key`.
    #[inline]
    pub fn prefetch_slot(&self, key: u64) {
        self.positions.prefetch(key);
    }

    /// Starts loading the resident `key`, if it is one.
    #[inline]
    pub fn prefetch_resident(&self, key: u64) {
        if let Some(position) = self.find(key) {
            prefetch_read(self.get(position));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_fills_the_hole_with_the_last_resident() {
        let mut set = DenseResidents::default();
        for key in 10..15u64 {
            set.insert(key, key as u32, key * 2);
        }
        assert_eq!((set.len(), set.bytes()), (5, 60));
        let gone = set.remove_at(1);
        assert_eq!((gone.key, gone.data), (11, 22));
        assert_eq!(set.find(14), Some(1), "the last moved into the hole");
        assert_eq!(set.get(1).data, 28);
        assert!(set.remove(14).is_some());
        assert_eq!(set.remove(14).map(|r| r.key), None);
        let last = set.find(13).unwrap();
        assert_eq!(
            set.remove_at(last).key,
            13,
            "removing the last moves nothing"
        );
        let keys: Vec<u64> = (0..set.len() as u32).map(|p| set.get(p).key).collect();
        assert_eq!(keys, [10, 12]);
        assert_eq!(set.bytes(), 22);
        for key in keys {
            assert_eq!(set.get(set.find(key).unwrap()).key, key);
        }
    }

    #[test]
    fn random_positions_reach_every_resident() {
        let mut set = DenseResidents::default();
        for key in 0..8u64 {
            set.insert(key, 1, ());
        }
        let mut rng = Lehmer64::new(3);
        let mut seen = [false; 8];
        for _ in 0..200 {
            seen[set.random_position(&mut rng) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
