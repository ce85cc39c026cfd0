//! A cache tier's on-media format, so that a persistent tier is found again after a crash or a
//! restart (`crates/volume/tests/crash.rs`).
//!
//! ```text
//! 0        superblock (4 KiB): two sealed 64-byte blocks:
//!            geometry: magic, version, line size, slot count, backing size, data offset
//!            place: this tier's index, the tier count, the hierarchy's signature
//! 4096     entry table: two 64-byte entries per slot, written alternately
//! data     slot i at data_offset + i * line_bytes
//! ```
//!
//! The place says which tier of which hierarchy the device was formatted as, so that a restart
//! with the tiers in another order, number or size is noticed before a line is misread.
//!
//! An entry says which line a slot holds and which of its 512-byte sectors are valid and
//! dirty. Updates go to the slot's older copy with the next sequence number, so a torn update
//! (an injected crash tears unflushed 8-byte words) fails its checksum and the newer intact copy
//! — the state before the update — is the one read back.

use heterarchy_trace::generate::mix64;

use crate::error::GeometryError;

/// Validity and dirtiness are kept per sector.
pub const SECTOR_BYTES: u32 = 512;
/// Largest cache line: 128 sectors, one bit each in a `u128`.
pub const MAX_LINE_BYTES: u32 = 64 * 1024;
const SUPERBLOCK_BYTES: u64 = 4096;
const ENTRY_BYTES: u64 = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"HTRCHYVC");
/// Version 2 added the place block.
const VERSION: u64 = 2;
const PLACE_MAGIC: u64 = u64::from_le_bytes(*b"HTRCHYPL");
/// Entries of a free slot name this key.
const NO_KEY: u64 = u64::MAX;

/// Where everything lies on a formatted cache device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub line_bytes: u32,
    pub slot_count: u64,
    /// Size of the backing store the cache was formatted for.
    pub backing_bytes: u64,
    pub data_offset: u64,
}

impl Geometry {
    /// The most slots a cache device of `cache_bytes` holds with lines of `line_bytes`.
    pub fn for_cache(
        cache_bytes: u64,
        line_bytes: u32,
        backing_bytes: u64,
    ) -> Result<Geometry, GeometryError> {
        if !line_bytes.is_power_of_two() || !(4096..=MAX_LINE_BYTES).contains(&line_bytes) {
            return Err(GeometryError::LineSize { line_bytes });
        }
        let line = u64::from(line_bytes);
        // Entries for n slots take 128 n bytes, padded to a whole line before the data.
        let room = cache_bytes.saturating_sub(SUPERBLOCK_BYTES + line);
        let slot_count = room / (line + 2 * ENTRY_BYTES);
        if slot_count == 0 {
            return Err(GeometryError::TooSmall {
                cache_bytes,
                line_bytes,
            });
        }
        let table_end = SUPERBLOCK_BYTES + slot_count * 2 * ENTRY_BYTES;
        Ok(Geometry {
            line_bytes,
            slot_count,
            backing_bytes,
            data_offset: table_end.next_multiple_of(line),
        })
    }

    /// True when this layout lies within a device of `device_bytes` (a superblock read back may
    /// be damaged, and is then not to be believed): lines of a size a volume uses, the table
    /// before the data, every slot on the device.
    pub fn fits(&self, device_bytes: u64) -> bool {
        let line = u64::from(self.line_bytes);
        let table_end = self
            .slot_count
            .checked_mul(2 * ENTRY_BYTES)
            .and_then(|table| table.checked_add(SUPERBLOCK_BYTES));
        let data_end = self
            .slot_count
            .checked_mul(line)
            .and_then(|data| data.checked_add(self.data_offset));
        self.line_bytes.is_power_of_two()
            && (4096..=MAX_LINE_BYTES).contains(&self.line_bytes)
            && self.slot_count <= u64::from(u32::MAX)
            && self.backing_bytes >= line
            && table_end.is_some_and(|end| end <= self.data_offset)
            && data_end.is_some_and(|end| end <= device_bytes)
    }

    /// Byte offset of slot `slot`'s data.
    pub fn slot_offset(&self, slot: u32) -> u64 {
        self.data_offset + u64::from(slot) * u64::from(self.line_bytes)
    }

    /// Byte offset of copy `copy` (0 or 1) of slot `slot`'s entry.
    pub fn entry_offset(&self, slot: u32, copy: u64) -> u64 {
        SUPERBLOCK_BYTES + (u64::from(slot) * 2 + copy) * ENTRY_BYTES
    }

    /// Byte range of the entry table.
    pub fn table_range(&self) -> (u64, u64) {
        (SUPERBLOCK_BYTES, self.slot_count * 2 * ENTRY_BYTES)
    }

    /// The superblock's bytes.
    pub fn encode(&self) -> [u8; 64] {
        let words = [
            MAGIC,
            VERSION,
            u64::from(self.line_bytes),
            self.slot_count,
            self.backing_bytes,
            self.data_offset,
            0,
        ];
        seal(words)
    }

    /// Reads a superblock; `None` when there is none (an unformatted or damaged device).
    pub fn decode(bytes: &[u8; 64]) -> Option<Geometry> {
        let words = unseal(bytes)?;
        if words[0] != MAGIC || words[1] != VERSION {
            return None;
        }
        Some(Geometry {
            line_bytes: u32::try_from(words[2]).ok()?,
            slot_count: words[3],
            backing_bytes: words[4],
            data_offset: words[5],
        })
    }
}

/// Which tier of which hierarchy a device was formatted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// 0 is the top (fastest) tier.
    pub tier: u8,
    pub tiers: u8,
    /// [`Place::signature`] of the whole tier list.
    pub signature: u64,
}

impl Place {
    /// A hierarchy's signature: its layout and every tier's size, in order, so that another
    /// order, number or size of tiers gives another one.
    pub fn signature(exclusive: bool, tier_bytes: &[u64]) -> u64 {
        tier_bytes
            .iter()
            .fold(mix64(u64::from(exclusive) ^ 0x7469_6572), |hash, &bytes| {
                mix64(hash ^ bytes)
            })
    }

    /// The superblock's second block.
    pub fn encode(&self) -> [u8; 64] {
        seal([
            PLACE_MAGIC,
            u64::from(self.tier),
            u64::from(self.tiers),
            self.signature,
            0,
            0,
            0,
        ])
    }

    /// Reads the second block; `None` when there is none.
    pub fn decode(bytes: &[u8; 64]) -> Option<Place> {
        let words = unseal(bytes)?;
        (words[0] == PLACE_MAGIC).then_some(Place {
            tier: u8::try_from(words[1]).ok()?,
            tiers: u8::try_from(words[2]).ok()?,
            signature: words[3],
        })
    }
}

/// What a slot holds, as one entry copy records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Higher is newer; the copy written is `sequence % 2`.
    pub sequence: u64,
    /// The line held, `None` for a free slot.
    pub key: Option<u64>,
    /// Bit s set: sector s holds the line's current data.
    pub valid: u128,
    /// Bit s set: sector s is newer than the backing store's.
    pub dirty: u128,
}

impl Entry {
    pub fn encode(&self) -> [u8; 64] {
        seal([
            self.sequence,
            self.key.unwrap_or(NO_KEY),
            self.valid as u64,
            (self.valid >> 64) as u64,
            self.dirty as u64,
            (self.dirty >> 64) as u64,
            0,
        ])
    }

    /// An intact entry, or `None` (never written, or torn).
    pub fn decode(bytes: &[u8; 64]) -> Option<Entry> {
        let words = unseal(bytes)?;
        Some(Entry {
            sequence: words[0],
            key: (words[1] != NO_KEY).then_some(words[1]),
            valid: u128::from(words[2]) | u128::from(words[3]) << 64,
            dirty: u128::from(words[4]) | u128::from(words[5]) << 64,
        })
    }
}

/// Seven words and their checksum as 64 little-endian bytes.
fn seal(words: [u64; 7]) -> [u8; 64] {
    let mut bytes = [0; 64];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    bytes[56..].copy_from_slice(&checksum(&words).to_le_bytes());
    bytes
}

fn unseal(bytes: &[u8; 64]) -> Option<[u64; 7]> {
    let mut words = [0u64; 8];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
    }
    let body: [u64; 7] = words[..7].try_into().expect("7 words");
    (checksum(&body) == words[7]).then_some(body)
}

/// Never 0 for all-zero words, so zeroed media holds no entry.
fn checksum(words: &[u64; 7]) -> u64 {
    words
        .iter()
        .fold(0x9e37_79b9_7f4a_7c15, |hash, &word| mix64(hash ^ word))
}

/// The sector bits of `len` bytes at byte `start` of a line.
pub fn sector_bits(start: u32, len: u32) -> u128 {
    if len == 0 {
        return 0;
    }
    let first = start / SECTOR_BYTES;
    let last = (start + len - 1) / SECTOR_BYTES;
    let count = last - first + 1;
    let bits = if count >= 128 {
        u128::MAX
    } else {
        (1u128 << count) - 1
    };
    bits << first
}

/// Runs of set bits in `bits` as `(first sector, sector count)`.
pub fn runs(mut bits: u128) -> impl Iterator<Item = (u32, u32)> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let first = bits.trailing_zeros();
        let count = (bits >> first).trailing_ones();
        bits &= if first + count >= 128 {
            0
        } else {
            !(((1u128 << count) - 1) << first)
        };
        Some((first, count))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_round_trip_and_tell_hierarchies_apart() {
        let place = Place {
            tier: 1,
            tiers: 3,
            signature: Place::signature(false, &[1 << 20, 8 << 20, 64 << 20]),
        };
        assert_eq!(Place::decode(&place.encode()), Some(place));
        assert!(Place::decode(&[0; 64]).is_none());
        let sizes = [1 << 20, 8 << 20];
        let swapped = [8 << 20, 1 << 20];
        assert_ne!(
            Place::signature(false, &sizes),
            Place::signature(false, &swapped)
        );
        assert_ne!(
            Place::signature(false, &sizes),
            Place::signature(true, &sizes)
        );
        assert_ne!(
            Place::signature(false, &sizes),
            Place::signature(false, &sizes[..1])
        );
    }

    #[test]
    fn geometry_fits_the_device_and_round_trips() {
        let geometry = Geometry::for_cache(64 << 20, 65_536, 1 << 30).unwrap();
        let end = geometry.slot_offset(geometry.slot_count as u32);
        assert!(end <= 64 << 20, "{geometry:?}");
        assert_eq!(geometry.slot_count, 1020);
        assert!(
            geometry.entry_offset(geometry.slot_count as u32 - 1, 1) + 64 <= geometry.data_offset
        );
        assert_eq!(Geometry::decode(&geometry.encode()), Some(geometry));
        assert!(Geometry::decode(&[0; 64]).is_none());
        assert!(Geometry::for_cache(64 << 20, 3000, 0).is_err());
        assert!(Geometry::for_cache(70_000, 65_536, 0).is_err());
    }

    #[test]
    fn entries_round_trip_and_torn_ones_are_refused() {
        let entry = Entry {
            sequence: 9,
            key: Some(77),
            valid: u128::MAX - 5,
            dirty: 1 << 100,
        };
        let mut bytes = entry.encode();
        assert_eq!(Entry::decode(&bytes), Some(entry));
        bytes[20] ^= 1;
        assert_eq!(Entry::decode(&bytes), None);
        assert_eq!(Entry::decode(&[0; 64]), None);
        let free = Entry { key: None, ..entry };
        assert_eq!(Entry::decode(&free.encode()), Some(free));
    }

    #[test]
    fn sector_bits_and_runs_agree() {
        assert_eq!(sector_bits(0, 512), 1);
        assert_eq!(sector_bits(511, 2), 0b11);
        assert_eq!(sector_bits(4096, 4096), 0xff << 8);
        assert_eq!(sector_bits(0, 65_536), u128::MAX);
        assert_eq!(sector_bits(0, 0), 0);
        let bits = 0b1110_0110u128 | 1 << 127;
        assert_eq!(runs(bits).collect::<Vec<_>>(), [(1, 2), (5, 3), (127, 1)]);
        assert_eq!(runs(u128::MAX).collect::<Vec<_>>(), [(0, 128)]);
    }
}
