//! The Block Translation Table's on-media format (seed 001 §2.2, Figure 1; the Linux kernel's
//! `Documentation/driver-api/nvdimm/btt.rst` for the fields and their order). Pure encoding and
//! decoding, no I/O, so that recovery and fuzzing can take any bytes.
//!
//! Storage is split into arenas, each laid out as
//!
//! ```text
//! info block (4 KiB) | data blocks | map | flog | info block copy (4 KiB)
//! ```
//!
//! with every area 4 KiB-aligned. Differences from the Linux format, all deliberate:
//! - the info block's version is ours (major [`VERSION_MAJOR`]); a Linux BTT is refused, not read;
//! - the internal block size equals the external one (512 B or 4 KiB): no padding of 512 B
//!   sectors to a cache line;
//! - a flog group holds two 16-byte sections and 32 bytes of padding (the kernel's older
//!   layout; the newer kernel's four-slot groups are not detected);
//! - arenas may be made smaller than the kernel's 16 MiB minimum, to exercise the multi-arena
//!   paths on small test devices.

/// Size of an info block and the alignment of every area.
pub const INFO_BYTES: u64 = 4096;
/// What an info block starts with.
pub const SIGNATURE: &[u8; 16] = b"BTT_ARENA_INFO\0\0";
/// Our on-media format: a reader refuses any other major version.
pub const VERSION_MAJOR: u16 = 0x4854;
/// Minor version: additions a reader of the same major may ignore.
pub const VERSION_MINOR: u16 = 1;
/// Info-block flag: the arena is damaged and may only be read.
pub const FLAG_ERROR: u32 = 1;
/// Bytes of one lane's flog group: two sections and padding to a cache line.
pub const FLOG_GROUP_BYTES: u64 = 64;
/// Bytes of one map entry.
pub const MAP_ENTRY_BYTES: u64 = 4;
/// Most lanes, and so most free blocks per arena (the kernel's `ND_MAX_LANES`).
pub const MAX_LANES: u32 = 256;
/// The largest arena (the kernel's 512 GiB): map entries address 30 bits of blocks.
pub const MAX_ARENA_BYTES: u64 = 1 << 39;

const CHECKSUM_OFFSET: usize = INFO_BYTES as usize - 8;

/// Why bytes are not a usable BTT structure, with the values found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Fewer bytes than an info block.
    #[error("an info block needs 4096 bytes, got {0}")]
    Short(usize),
    /// No info block signature.
    #[error("no BTT info block signature")]
    NoSignature,
    /// The checksum does not match the block.
    #[error("info block checksum mismatch")]
    Checksum,
    /// Another major version of the format.
    #[error(
        "BTT format version {major}.{minor}, expected {VERSION_MAJOR}.x (a Linux BTT is not read)"
    )]
    Version { major: u16, minor: u16 },
    /// An info block of another size.
    #[error("info block size {0}, expected 4096")]
    InfoSize(u32),
    /// Block sizes other than 512 or 4096, or unequal.
    #[error("block sizes {external} and {internal}, expected 512 or 4096, equal")]
    BlockSizes { external: u32, internal: u32 },
    /// Block counts that do not add up.
    #[error("{external} blocks offered and {free} free, in {internal} blocks")]
    BlockCounts {
        external: u32,
        free: u32,
        internal: u32,
    },
    /// Areas that overlap, are unaligned or leave the arena.
    #[error(
        "areas out of order, unaligned or past the arena's {arena_bytes} bytes: data at \
         {data_offset}, map at {map_offset}, flog at {flog_offset}, copy at {info2_offset}"
    )]
    Areas {
        arena_bytes: u64,
        data_offset: u64,
        map_offset: u64,
        flog_offset: u64,
        info2_offset: u64,
    },
    /// A flog pair no writer can have left.
    #[error("flog sequence numbers {0} and {1}")]
    FlogSequence(u32, u32),
}

/// An arena's info block: its geometry, as offsets from the arena's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoBlock {
    /// The BTT's identity, the same in every arena.
    pub uuid: [u8; 16],
    /// The container's identity (a namespace's in Linux); zeroes here.
    pub parent_uuid: [u8; 16],
    /// [`FLAG_ERROR`] or nothing.
    pub flags: u32,
    pub version_major: u16,
    pub version_minor: u16,
    /// Bytes of a block as callers see it (a sector).
    pub external_lba_bytes: u32,
    /// Blocks the arena offers.
    pub external_nlba: u32,
    /// Bytes of a block of the data area (equal to the external size here).
    pub internal_lba_bytes: u32,
    /// Blocks of the data area: the offered ones and the free ones.
    pub internal_nlba: u32,
    /// Free blocks, one per lane.
    pub nfree: u32,
    /// Offset of the next arena's info block from this one's, 0 for the last arena.
    pub next_offset: u64,
    pub data_offset: u64,
    pub map_offset: u64,
    pub flog_offset: u64,
    /// Offset of the info block's copy.
    pub info2_offset: u64,
}

impl InfoBlock {
    /// The 4 KiB image, checksum included (little-endian throughout).
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; INFO_BYTES as usize];
        bytes[0..16].copy_from_slice(SIGNATURE);
        bytes[16..32].copy_from_slice(&self.uuid);
        bytes[32..48].copy_from_slice(&self.parent_uuid);
        bytes[48..52].copy_from_slice(&self.flags.to_le_bytes());
        bytes[52..54].copy_from_slice(&self.version_major.to_le_bytes());
        bytes[54..56].copy_from_slice(&self.version_minor.to_le_bytes());
        let words = [
            self.external_lba_bytes,
            self.external_nlba,
            self.internal_lba_bytes,
            self.internal_nlba,
            self.nfree,
            INFO_BYTES as u32,
        ];
        for (index, word) in words.iter().enumerate() {
            let at = 56 + 4 * index;
            bytes[at..at + 4].copy_from_slice(&word.to_le_bytes());
        }
        let offsets = [
            self.next_offset,
            self.data_offset,
            self.map_offset,
            self.flog_offset,
            self.info2_offset,
        ];
        for (index, offset) in offsets.iter().enumerate() {
            let at = 80 + 8 * index;
            bytes[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        }
        let checksum = fletcher64(&bytes);
        bytes[CHECKSUM_OFFSET..].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// Reads an info block, checking its signature, checksum and version; `arena_bytes` is the
    /// room the arena has, which every area must fit in.
    pub fn decode(bytes: &[u8], arena_bytes: u64) -> Result<InfoBlock, LayoutError> {
        let bytes: &[u8; INFO_BYTES as usize] = bytes
            .get(..INFO_BYTES as usize)
            .and_then(|head| head.try_into().ok())
            .ok_or(LayoutError::Short(bytes.len()))?;
        if &bytes[0..16] != SIGNATURE {
            return Err(LayoutError::NoSignature);
        }
        let stored = u64::from_le_bytes(bytes[CHECKSUM_OFFSET..].try_into().expect("8 bytes"));
        let mut zeroed = *bytes;
        zeroed[CHECKSUM_OFFSET..].fill(0);
        if fletcher64(&zeroed) != stored {
            return Err(LayoutError::Checksum);
        }
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let info = InfoBlock {
            uuid: bytes[16..32].try_into().expect("16"),
            parent_uuid: bytes[32..48].try_into().expect("16"),
            flags: u32_at(48),
            version_major: u16_at(52),
            version_minor: u16_at(54),
            external_lba_bytes: u32_at(56),
            external_nlba: u32_at(60),
            internal_lba_bytes: u32_at(64),
            internal_nlba: u32_at(68),
            nfree: u32_at(72),
            next_offset: u64_at(80),
            data_offset: u64_at(88),
            map_offset: u64_at(96),
            flog_offset: u64_at(104),
            info2_offset: u64_at(112),
        };
        if info.version_major != VERSION_MAJOR {
            return Err(LayoutError::Version {
                major: info.version_major,
                minor: info.version_minor,
            });
        }
        if u32_at(76) != INFO_BYTES as u32 {
            return Err(LayoutError::InfoSize(u32_at(76)));
        }
        info.check(arena_bytes)?;
        Ok(info)
    }

    /// The geometry is consistent and fits in `arena_bytes`: what a checksum cannot vouch for
    /// when a bug, not a crash, wrote the block.
    fn check(&self, arena_bytes: u64) -> Result<(), LayoutError> {
        if !matches!(self.external_lba_bytes, 512 | 4096)
            || self.internal_lba_bytes != self.external_lba_bytes
        {
            return Err(LayoutError::BlockSizes {
                external: self.external_lba_bytes,
                internal: self.internal_lba_bytes,
            });
        }
        if self.nfree == 0
            || self.nfree > MAX_LANES
            || self.internal_nlba != self.external_nlba.wrapping_add(self.nfree)
            || self.external_nlba == 0
        {
            return Err(LayoutError::BlockCounts {
                external: self.external_nlba,
                free: self.nfree,
                internal: self.internal_nlba,
            });
        }
        // Offsets come from storage: sums saturate rather than wrap into a false fit.
        let end = |offset: u64, count: u32, bytes: u64| {
            offset.saturating_add(u64::from(count).saturating_mul(bytes))
        };
        let data_end = end(
            self.data_offset,
            self.internal_nlba,
            u64::from(self.internal_lba_bytes),
        );
        let map_end = end(self.map_offset, self.external_nlba, MAP_ENTRY_BYTES);
        let flog_end = end(self.flog_offset, self.nfree, FLOG_GROUP_BYTES);
        let info2_end = self.info2_offset.saturating_add(INFO_BYTES);
        let ordered = INFO_BYTES <= self.data_offset
            && data_end <= self.map_offset
            && map_end <= self.flog_offset
            && flog_end <= self.info2_offset
            && info2_end <= arena_bytes
            && (self.next_offset == 0 || info2_end <= self.next_offset);
        let aligned = [
            self.data_offset,
            self.map_offset,
            self.flog_offset,
            self.info2_offset,
            self.next_offset,
        ]
        .iter()
        .all(|offset| offset % INFO_BYTES == 0);
        if !ordered || !aligned {
            return Err(LayoutError::Areas {
                arena_bytes,
                data_offset: self.data_offset,
                map_offset: self.map_offset,
                flog_offset: self.flog_offset,
                info2_offset: self.info2_offset,
            });
        }
        Ok(())
    }
}

/// Fletcher-64 over little-endian 32-bit words, as BTT info blocks are summed (the checksum
/// field reads as zero while summing).
pub fn fletcher64(bytes: &[u8]) -> u64 {
    let (mut low, mut high) = (0u32, 0u32);
    for word in bytes.chunks(4) {
        let mut padded = [0u8; 4];
        padded[..word.len()].copy_from_slice(word);
        low = low.wrapping_add(u32::from_le_bytes(padded));
        high = high.wrapping_add(low);
    }
    (u64::from(high) << 32) | u64::from(low)
}

/// Where an arena's areas lie, offsets from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaGeometry {
    /// Bytes of a block.
    pub lba_bytes: u32,
    /// Blocks offered.
    pub external_nlba: u32,
    /// Free blocks, one per lane.
    pub nfree: u32,
    pub data_offset: u64,
    pub map_offset: u64,
    pub flog_offset: u64,
    pub info2_offset: u64,
}

fn align_up(value: u64) -> u64 {
    value.div_ceil(INFO_BYTES) * INFO_BYTES
}

impl ArenaGeometry {
    /// The largest arena that fits in `arena_bytes` with blocks of `lba_bytes` and `nfree` free
    /// blocks; `None` when not even one offered block fits.
    pub fn plan(arena_bytes: u64, lba_bytes: u32, nfree: u32) -> Option<ArenaGeometry> {
        let block = u64::from(lba_bytes);
        let flog_bytes = align_up(u64::from(nfree) * FLOG_GROUP_BYTES);
        let room = arena_bytes.checked_sub(2 * INFO_BYTES + flog_bytes)?;
        // Each offered block costs its data and a map entry; the free ones, data only. Start
        // from the estimate and step down until the aligned areas fit.
        let estimate = (room.saturating_sub(u64::from(nfree) * block)) / (block + MAP_ENTRY_BYTES);
        let mut external = estimate.min(u64::from(u32::MAX) - u64::from(nfree));
        loop {
            if external == 0 {
                return None;
            }
            let data_bytes = align_up((external + u64::from(nfree)) * block);
            let map_bytes = align_up(external * MAP_ENTRY_BYTES);
            if data_bytes + map_bytes <= room {
                let data_offset = INFO_BYTES;
                let map_offset = data_offset + data_bytes;
                let flog_offset = map_offset + map_bytes;
                return Some(ArenaGeometry {
                    lba_bytes,
                    external_nlba: external as u32,
                    nfree,
                    data_offset,
                    map_offset,
                    flog_offset,
                    info2_offset: arena_bytes - INFO_BYTES,
                });
            }
            external -= 1;
        }
    }

    /// The info block describing this geometry.
    pub fn info(&self, uuid: [u8; 16], next_offset: u64) -> InfoBlock {
        InfoBlock {
            uuid,
            parent_uuid: [0; 16],
            flags: 0,
            version_major: VERSION_MAJOR,
            version_minor: VERSION_MINOR,
            external_lba_bytes: self.lba_bytes,
            external_nlba: self.external_nlba,
            internal_lba_bytes: self.lba_bytes,
            internal_nlba: self.external_nlba + self.nfree,
            nfree: self.nfree,
            next_offset,
            data_offset: self.data_offset,
            map_offset: self.map_offset,
            flog_offset: self.flog_offset,
            info2_offset: self.info2_offset,
        }
    }
}

/// How storage of `total_bytes` splits into arenas of at most `max_arena_bytes`, as
/// `(offset, bytes)`: full arenas, then the rest if it holds at least `min_arena_bytes`.
pub fn arena_spans(
    total_bytes: u64,
    max_arena_bytes: u64,
    min_arena_bytes: u64,
) -> Vec<(u64, u64)> {
    let max = (max_arena_bytes / INFO_BYTES * INFO_BYTES).clamp(INFO_BYTES, MAX_ARENA_BYTES);
    let mut spans = Vec::new();
    let mut offset = 0;
    while total_bytes - offset >= max {
        spans.push((offset, max));
        offset += max;
    }
    let rest = (total_bytes - offset) / INFO_BYTES * INFO_BYTES;
    if rest >= min_arena_bytes.max(INFO_BYTES) {
        spans.push((offset, rest));
    }
    spans
}

/// What a map entry says of its block: bits 31 (Z) and 30 (E) are flags, the rest a block
/// number of the data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Never written since formatting: the block of the same number (identity).
    Initial,
    /// Written: this data block.
    Block(u32),
    /// Trimmed: reads return zeroes (the data block is kept, as in Linux, so that the number
    /// of blocks stays constant).
    Zero(u32),
    /// Marked bad: reads fail, a write clears it.
    Error(u32),
}

const Z_FLAG: u32 = 1 << 31;
const E_FLAG: u32 = 1 << 30;
/// The block-number bits of a map entry.
pub const BLOCK_MASK: u32 = !(Z_FLAG | E_FLAG);

impl Mapping {
    /// Decodes a raw entry.
    pub fn decode(raw: u32) -> Mapping {
        let block = raw & BLOCK_MASK;
        match (raw & Z_FLAG != 0, raw & E_FLAG != 0) {
            (false, false) => Mapping::Initial,
            (true, true) => Mapping::Block(block),
            (true, false) => Mapping::Zero(block),
            (false, true) => Mapping::Error(block),
        }
    }

    /// The raw entry.
    pub fn encode(self) -> u32 {
        match self {
            Mapping::Initial => 0,
            Mapping::Block(block) => (block & BLOCK_MASK) | Z_FLAG | E_FLAG,
            Mapping::Zero(block) => (block & BLOCK_MASK) | Z_FLAG,
            Mapping::Error(block) => (block & BLOCK_MASK) | E_FLAG,
        }
    }

    /// The data block that holds (or held) premap block `premap`'s contents.
    pub fn block(self, premap: u32) -> u32 {
        match self {
            Mapping::Initial => premap,
            Mapping::Block(block) | Mapping::Zero(block) | Mapping::Error(block) => block,
        }
    }
}

/// One section of a lane's flog: the last switch of a premap block from `old_map` to
/// `new_map` (data block numbers), with a sequence number 1, 2 or 3 (0: never written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlogEntry {
    pub lba: u32,
    pub old_map: u32,
    pub new_map: u32,
    pub seq: u32,
}

impl FlogEntry {
    /// Bytes of one section.
    pub const BYTES: usize = 16;

    /// The section's 16 bytes; `seq` is the last 4, which a writer stores last.
    pub fn encode(&self) -> [u8; 16] {
        let mut bytes = [0u8; 16];
        for (index, word) in [self.lba, self.old_map, self.new_map, self.seq]
            .iter()
            .enumerate()
        {
            bytes[4 * index..4 * index + 4].copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// A section from its 16 bytes.
    pub fn decode(bytes: &[u8; 16]) -> FlogEntry {
        let word = |index: usize| {
            u32::from_le_bytes(bytes[4 * index..4 * index + 4].try_into().expect("4"))
        };
        FlogEntry {
            lba: word(0),
            old_map: word(1),
            new_map: word(2),
            seq: word(3),
        }
    }
}

/// The sequence number after `seq`: 1 → 2 → 3 → 1.
pub fn next_seq(seq: u32) -> u32 {
    seq % 3 + 1
}

/// Which of a lane's two sections is the newer: the one whose sequence follows the other's, or
/// the only one written. `Err` when neither is written or the pair cannot have been made by
/// writers (equal or out-of-range numbers).
pub fn newest_section(sections: &[FlogEntry; 2]) -> Result<usize, LayoutError> {
    let [a, b] = [sections[0].seq, sections[1].seq];
    match (a, b) {
        (1..=3, 0) => Ok(0),
        (0, 1..=3) => Ok(1),
        (1..=3, 1..=3) if next_seq(b) == a => Ok(0),
        (1..=3, 1..=3) if next_seq(a) == b => Ok(1),
        _ => Err(LayoutError::FlogSequence(a, b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> ArenaGeometry {
        ArenaGeometry::plan(4 << 20, 4096, 4).unwrap()
    }

    #[test]
    fn info_blocks_round_trip_and_refuse_damage() {
        let info = geometry().info([7; 16], 0);
        let bytes = info.encode();
        assert_eq!(InfoBlock::decode(&bytes, 4 << 20), Ok(info.clone()));
        // any flipped byte is caught, the checksum's own included
        for at in [0, 20, 60, 100, 2000, INFO_BYTES as usize - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(InfoBlock::decode(&damaged, 4 << 20).is_err(), "byte {at}");
        }
        // too little room for what it describes, or too few bytes
        assert!(matches!(
            InfoBlock::decode(&bytes, 2 << 20),
            Err(LayoutError::Areas {
                arena_bytes: 0x20_0000,
                ..
            })
        ));
        assert_eq!(
            InfoBlock::decode(&bytes[..100], 4 << 20),
            Err(LayoutError::Short(100))
        );
        // another version is refused by name
        let other = InfoBlock {
            version_major: 2,
            ..info
        };
        let refused = InfoBlock::decode(&other.encode(), 4 << 20).unwrap_err();
        assert_eq!(refused, LayoutError::Version { major: 2, minor: 1 });
        assert!(refused.to_string().contains("version 2.1,"), "{refused}");
    }

    #[test]
    fn an_arena_fills_its_room_with_aligned_areas() {
        for (bytes, lba, nfree) in [
            (4u64 << 20, 4096u32, 4u32),
            (1 << 20, 512, 256),
            (64 << 20, 4096, 256),
        ] {
            let g = ArenaGeometry::plan(bytes, lba, nfree).unwrap();
            let info = g.info([1; 16], 0);
            InfoBlock::decode(&info.encode(), bytes).unwrap();
            // not one more offered block would fit
            let data = u64::from(g.external_nlba + 1 + nfree) * u64::from(lba);
            let map = u64::from(g.external_nlba + 1) * MAP_ENTRY_BYTES;
            let flog = align_up(u64::from(nfree) * FLOG_GROUP_BYTES);
            assert!(
                align_up(data) + align_up(map) + flog + 2 * INFO_BYTES > bytes,
                "{g:?}"
            );
        }
        assert_eq!(ArenaGeometry::plan(3 * INFO_BYTES, 4096, 1), None);
    }

    #[test]
    fn storage_splits_into_full_arenas_and_a_rest() {
        assert_eq!(
            arena_spans(10 << 20, 4 << 20, 1 << 20),
            [(0, 4 << 20), (4 << 20, 4 << 20), (8 << 20, 2 << 20)]
        );
        // a rest below the minimum is left unused
        assert_eq!(
            arena_spans(9 << 20, 4 << 20, 2 << 20),
            [(0, 4 << 20), (4 << 20, 4 << 20)]
        );
        assert_eq!(arena_spans(1 << 20, 4 << 20, 1 << 20), [(0, 1 << 20)]);
        assert!(arena_spans(1 << 20, 4 << 20, 2 << 20).is_empty());
    }

    #[test]
    fn map_entries_keep_their_flags_and_block() {
        for mapping in [
            Mapping::Initial,
            Mapping::Block(5),
            Mapping::Zero(BLOCK_MASK),
            Mapping::Error(0),
        ] {
            assert_eq!(Mapping::decode(mapping.encode()), mapping);
        }
        assert_eq!(Mapping::Initial.block(9), 9);
        assert_eq!(Mapping::Zero(3).block(9), 3);
        assert_eq!(Mapping::decode(0xC000_0007), Mapping::Block(7));
    }

    #[test]
    fn the_newer_flog_section_follows_the_other() {
        let entry = |seq| FlogEntry {
            seq,
            ..FlogEntry::default()
        };
        assert_eq!([1, 2, 3].map(next_seq), [2, 3, 1]);
        assert_eq!(newest_section(&[entry(1), entry(0)]), Ok(0));
        assert_eq!(newest_section(&[entry(1), entry(2)]), Ok(1));
        assert_eq!(newest_section(&[entry(3), entry(2)]), Ok(0));
        assert_eq!(newest_section(&[entry(1), entry(3)]), Ok(0));
        for bad in [[0, 0], [2, 2], [4, 1]] {
            assert!(
                newest_section(&[entry(bad[0]), entry(bad[1])]).is_err(),
                "{bad:?}"
            );
        }
        let section = FlogEntry {
            lba: 1,
            old_map: 2,
            new_map: 3,
            seq: 2,
        };
        assert_eq!(FlogEntry::decode(&section.encode()), section);
        // the sequence number is the section's last word, written last
        assert_eq!(section.encode()[12..], 2u32.to_le_bytes());
    }

    proptest::proptest! {
        /// Whatever geometry a damaged or hostile info block carries behind a valid checksum,
        /// decoding says yes or no and never panics; a yes fits its arena.
        #[test]
        fn any_geometry_decodes_or_is_refused(
            changes in proptest::collection::vec((56usize..120, proptest::num::u8::ANY), 1..8),
            arena_bytes in 0u64..(1 << 40),
        ) {
            let mut bytes = geometry().info([3; 16], 0).encode();
            for (at, value) in changes {
                bytes[at] = value;
            }
            bytes[CHECKSUM_OFFSET..].fill(0);
            let checksum = fletcher64(&bytes);
            bytes[CHECKSUM_OFFSET..].copy_from_slice(&checksum.to_le_bytes());
            if let Ok(info) = InfoBlock::decode(&bytes, arena_bytes) {
                proptest::prop_assert!(info.info2_offset + INFO_BYTES <= arena_bytes);
            }
        }
    }
}
