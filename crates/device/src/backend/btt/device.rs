//! A BTT over persistent memory as [`Backend`] storage: sectors of 512 B or 4 KiB, each written
//! atomically, across as many arenas as the medium holds (seed 001 §2.2: the kernel's "sector"
//! mode). Usable wherever a file is (`btt:PATH:SIZE[:512|:4k]`): reads and writes of any bytes
//! are taken, a part of a sector merged with the rest of it, so a volume's 512-byte sectors
//! work on 4 KiB BTT sectors too.

use std::io;

use super::arena::Arena;
use super::layout::{arena_spans, ArenaGeometry, INFO_BYTES, MAX_ARENA_BYTES, MAX_LANES};
use crate::backend::{check_range, Backend};

/// How a medium is split and laid out. Opening needs the options it was formatted with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BttOptions {
    /// Sector size: 512 or 4096.
    pub sector_bytes: u32,
    /// Largest arena (the kernel's 512 GiB).
    pub max_arena_bytes: u64,
    /// A rest smaller than this after the full arenas is left unused (the kernel: 16 MiB).
    pub min_arena_bytes: u64,
    /// Free blocks per arena: the writes one arena takes at once.
    pub nfree: u32,
}

impl Default for BttOptions {
    fn default() -> BttOptions {
        BttOptions {
            sector_bytes: 4096,
            max_arena_bytes: MAX_ARENA_BYTES,
            min_arena_bytes: 16 << 20,
            nfree: MAX_LANES,
        }
    }
}

/// One arena and where its sectors start in the device's numbering.
struct Placed {
    arena: Arena,
    first_sector: u64,
}

/// Sectors made atomic on a medium of persistent memory.
pub struct BttBackend {
    media: Box<dyn Backend>,
    arenas: Vec<Placed>,
    sector_bytes: u32,
    sectors: u64,
}

impl BttBackend {
    /// Opens the BTT on `media`, formatting it first when it is fresh (both places of the first
    /// info block are zeroes). Anything else that is not a BTT of these options is refused,
    /// never overwritten.
    pub fn open(media: Box<dyn Backend>, options: BttOptions) -> io::Result<BttBackend> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        if !matches!(options.sector_bytes, 512 | 4096) {
            return Err(invalid(format!(
                "BTT sectors of {} bytes: expected 512 or 4096",
                options.sector_bytes
            )));
        }
        let nfree = options.nfree.clamp(1, MAX_LANES);
        let spans = arena_spans(
            media.size_bytes(),
            options.max_arena_bytes,
            options.min_arena_bytes,
        );
        let plans: Vec<(u64, u64, ArenaGeometry)> = spans
            .iter()
            .filter_map(|&(offset, bytes)| {
                ArenaGeometry::plan(bytes, options.sector_bytes, nfree)
                    .map(|geometry| (offset, bytes, geometry))
            })
            .collect();
        if plans.is_empty() {
            return Err(invalid(format!(
                "{}: {} bytes hold no BTT arena of {} B sectors (at least {} bytes)",
                media.describe(),
                media.size_bytes(),
                options.sector_bytes,
                options.min_arena_bytes
            )));
        }
        // Fresh only when both copies of the first info block are zeroes: a BTT whose primary
        // alone was lost opens from the copy rather than being formatted over.
        let mut fresh = true;
        let (first_offset, first_bytes, _) = plans[0];
        for at in [first_offset, first_offset + first_bytes - INFO_BYTES] {
            let mut block = vec![0u8; INFO_BYTES as usize];
            media.read_at(at, &mut block)?;
            fresh &= block.iter().all(|&byte| byte == 0);
        }
        let uuid = arena_uuid(&media.describe(), media.size_bytes());
        let mut arenas = Vec::with_capacity(plans.len());
        let mut first_sector = 0;
        for (index, &(offset, bytes, geometry)) in plans.iter().enumerate() {
            let next_offset = plans.get(index + 1).map_or(0, |next| next.0 - offset);
            let arena = if fresh {
                Arena::format(&*media, offset, &geometry, uuid, next_offset)?
            } else {
                Arena::open(&*media, offset, bytes)?
            };
            if arena.block_bytes() != options.sector_bytes {
                return Err(invalid(format!(
                    "{}: a BTT of {} B sectors, opened as {} B",
                    media.describe(),
                    arena.block_bytes(),
                    options.sector_bytes
                )));
            }
            let sectors = u64::from(arena.blocks());
            arenas.push(Placed {
                arena,
                first_sector,
            });
            first_sector += sectors;
        }
        Ok(BttBackend {
            media,
            arenas,
            sector_bytes: options.sector_bytes,
            sectors: first_sector,
        })
    }

    /// Sector size in bytes.
    pub fn sector_bytes(&self) -> u32 {
        self.sector_bytes
    }

    /// Why some arena only reads, if one does.
    pub fn read_only(&self) -> Option<&str> {
        self.arenas
            .iter()
            .find_map(|placed| placed.arena.read_only())
    }

    /// Runs `each(arena, premap, byte in the sector, bytes of the caller's buffer)` for every
    /// sector that `len` bytes at `offset` touch, whole or in part.
    fn pieces(
        &self,
        offset: u64,
        len: usize,
        mut each: impl FnMut(&Arena, u32, usize, std::ops::Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        check_range(self.size_bytes(), offset, len as u64)?;
        let sector = u64::from(self.sector_bytes);
        let mut done = 0;
        while done < len {
            let position = offset + done as u64;
            let number = position / sector;
            let at = (position % sector) as usize;
            let part = (sector as usize - at).min(len - done);
            let index = self
                .arenas
                .partition_point(|placed| placed.first_sector <= number)
                - 1;
            let placed = &self.arenas[index];
            let premap = (number - placed.first_sector) as u32;
            each(&placed.arena, premap, at, done..done + part)?;
            done += part;
        }
        Ok(())
    }
}

/// An arena's identity: fixed by the medium's description and size, so formatting twice gives
/// the same bytes (the kernel draws a random UUID; nothing here reads it back).
fn arena_uuid(describe: &str, size: u64) -> [u8; 16] {
    let mut uuid = [0u8; 16];
    let mut state = size ^ 0x9E37_79B9_7F4A_7C15;
    for (index, byte) in describe.bytes().chain(*b"heterarchy btt").enumerate() {
        state = (state ^ u64::from(byte)).wrapping_mul(0x0100_0000_01B3);
        uuid[index % 16] ^= (state >> 32) as u8;
    }
    uuid
}

impl Backend for BttBackend {
    fn size_bytes(&self) -> u64 {
        self.sectors * u64::from(self.sector_bytes)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let sector = self.sector_bytes as usize;
        let mut whole = Vec::new();
        self.pieces(offset, buf.len(), |arena, premap, at, range| {
            if range.len() == sector {
                return arena.read_block(&*self.media, premap, &mut buf[range]);
            }
            whole.resize(sector, 0);
            arena.read_block(&*self.media, premap, &mut whole)?;
            buf[range.clone()].copy_from_slice(&whole[at..at + range.len()]);
            Ok(())
        })
    }

    /// Whole sectors are written as they are; a part of a sector is merged with the rest of
    /// it, and the merged sector is as atomic as any.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let sector = self.sector_bytes as usize;
        self.pieces(offset, data.len(), |arena, premap, at, range| {
            if range.len() == sector {
                arena.write_block(&*self.media, premap, &data[range])
            } else {
                arena.write_part(&*self.media, premap, at, &data[range])
            }
        })
    }

    /// Every write is durable when it returns.
    fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size_bytes(), offset, len)
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    /// Trims the whole sectors inside the range: they read as zeroes.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size_bytes(), offset, len)?;
        let sector = u64::from(self.sector_bytes);
        let first = offset.div_ceil(sector) * sector;
        let end = (offset + len) / sector * sector;
        if end <= first {
            return Ok(());
        }
        self.pieces(first, (end - first) as usize, |arena, premap, _, _| {
            arena.trim_block(&*self.media, premap)
        })
    }

    fn persist_is_cheap(&self) -> bool {
        true
    }

    fn is_persistent(&self) -> bool {
        self.media.is_persistent()
    }

    fn describe(&self) -> String {
        format!(
            "btt ({} B sectors, {} arenas) on {}",
            self.sector_bytes,
            self.arenas.len(),
            self.media.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::RamBackend;

    fn small(sector_bytes: u32) -> BttOptions {
        BttOptions {
            sector_bytes,
            max_arena_bytes: 1 << 20,
            min_arena_bytes: 256 << 10,
            nfree: 8,
        }
    }

    #[test]
    fn sectors_of_every_arena_read_back_after_reopening() {
        for sector in [512u32, 4096] {
            let ram = std::sync::Arc::new(RamBackend::new((3 << 20) + (300 << 10)).unwrap());
            let btt = BttBackend::open(Box::new(ram.clone()), small(sector)).unwrap();
            assert_eq!(btt.arenas.len(), 4, "three full arenas and the rest");
            assert!(btt.describe().contains("4 arenas"));
            let size = btt.size_bytes();
            let sector = u64::from(sector);
            // one sector in each arena, and a run across the first arenas' boundary
            let boundary = btt.arenas[1].first_sector * sector;
            let writes = [
                (0, 1u8),
                (boundary - sector, 2),
                (boundary, 3),
                (size - sector, 4),
            ];
            for (offset, value) in writes {
                btt.write_at(offset, &vec![value; sector as usize]).unwrap();
            }
            btt.write_at(boundary - sector, &vec![5; 2 * sector as usize])
                .unwrap();
            drop(btt);
            let btt = BttBackend::open(Box::new(ram.clone()), small(sector as u32)).unwrap();
            assert_eq!(btt.read_only(), None);
            let mut back = vec![0u8; 2 * sector as usize];
            btt.read_at(boundary - sector, &mut back).unwrap();
            assert_eq!(back, vec![5; 2 * sector as usize]);
            let mut last = vec![0u8; sector as usize];
            btt.read_at(size - sector, &mut last).unwrap();
            assert_eq!(last, vec![4; sector as usize]);
            // trimmed sectors read as zeroes; a partial sector at the edge is left alone
            btt.discard(0, sector + 10).unwrap();
            btt.read_at(0, &mut last).unwrap();
            assert_eq!(last, vec![0; sector as usize]);
            // a primary info block wiped whole opens from its copy, not formatted over
            drop(btt);
            ram.write_at(0, &[0; INFO_BYTES as usize]).unwrap();
            let btt = BttBackend::open(Box::new(ram.clone()), small(sector as u32)).unwrap();
            btt.read_at(size - sector, &mut last).unwrap();
            assert_eq!(last, vec![4; sector as usize]);
            drop(btt);
            // another sector size is refused
            let other = if sector == 512 { 4096 } else { 512 };
            let error = BttBackend::open(Box::new(ram), small(other)).err().unwrap();
            assert!(error.to_string().contains("opened as"), "{error}");
        }
    }

    #[test]
    fn parts_of_sectors_merge_and_concurrent_parts_of_one_sector_all_land() {
        let btt =
            BttBackend::open(Box::new(RamBackend::new(1 << 20).unwrap()), small(4096)).unwrap();
        btt.write_at(0, &[1; 8192]).unwrap();
        // 4 KiB across a sector boundary, and 512 bytes inside a sector
        btt.write_at(100, &[2; 4096]).unwrap();
        btt.write_at(5000, &[3; 512]).unwrap();
        let mut back = vec![0u8; 8192];
        btt.read_at(0, &mut back).unwrap();
        let mut expected = vec![1u8; 8192];
        expected[100..4196].fill(2);
        expected[5000..5512].fill(3);
        assert_eq!(back, expected);
        let mut part = [0u8; 10];
        btt.read_at(4190, &mut part).unwrap();
        assert_eq!(part, [2, 2, 2, 2, 2, 2, 1, 1, 1, 1]);
        // eight threads each writing its own 512 bytes of one sector, over and over: every
        // thread's last write is there (the storage contract: disjoint bytes never interfere)
        std::thread::scope(|scope| {
            for thread in 0..8u8 {
                let btt = &btt;
                scope.spawn(move || {
                    for round in 0..50u8 {
                        let at = 8192 + 512 * u64::from(thread);
                        btt.write_at(at, &[thread * 50 + round; 512]).unwrap();
                    }
                });
            }
        });
        let mut sector = vec![0u8; 4096];
        btt.read_at(8192, &mut sector).unwrap();
        for thread in 0..8u8 {
            let expected = [thread * 50 + 49; 512];
            assert_eq!(
                sector[512 * thread as usize..][..512],
                expected,
                "thread {thread}"
            );
        }
        assert!(btt.write_at(btt.size_bytes(), &[0; 4096]).is_err());
        assert!(btt.read_at(btt.size_bytes() - 10, &mut [0; 11]).is_err());
    }

    #[test]
    fn foreign_or_tiny_media_and_odd_sectors_are_refused() {
        // a medium that holds something else is not formatted over
        let foreign = RamBackend::new(1 << 20).unwrap();
        foreign.write_at(0, b"not a btt").unwrap();
        let error = BttBackend::open(Box::new(foreign), small(4096))
            .err()
            .unwrap();
        assert!(error.to_string().contains("signature"), "{error}");
        // too small for one arena
        let error = BttBackend::open(Box::new(RamBackend::new(100 << 10).unwrap()), small(4096))
            .err()
            .unwrap();
        assert!(error.to_string().contains("no BTT arena"), "{error}");
        let error = BttBackend::open(
            Box::new(RamBackend::new(1 << 20).unwrap()),
            BttOptions {
                sector_bytes: 1024,
                ..small(4096)
            },
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("512 or 4096"), "{error}");
    }
}
