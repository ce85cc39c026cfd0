//! The tier's memory as the live PolyEMT device lays it out (seed 004 §4's Write-Back Cache and
//! Compression-Store, pages compressed to multiples of a 0.5 KB sector): a superblock, a table
//! of records, and a heap of 512 B sectors holding every page the tier has, uncompressed
//! (8 sectors) or compressed (1 to 8). The records and their recovery are this crate's own: the
//! paper describes no recovery.
//!
//! Only the write cache's pages are persistent. Each has a record at the index of its first
//! sector: its volume page, a sequence number, its size, whether it is compressed, and
//! checksums of the record and of the data. A page is written (and persisted) before its
//! record, and a newer copy's record before the older copy's is cleared, so after a crash the
//! valid record of highest sequence for a page is its latest acknowledged data. Read-cache
//! pages and their compressed copies have no record: they are gone after a restart, as
//! volatile memory is.
//!
//! The heap has an eighth more sectors than the tier's pages need, for the holes compressed
//! pages of different sizes leave and for a page's new copy beside its old one; uncompressed
//! pages take whole slots of 8 sectors at the low end and compressed ones any run from the high
//! end, so that the holes stay among the latter, and once the compressed pages are shed every
//! free slot can take a whole page again (an uncompressed page off its slot would leave holes
//! no page fits).

use std::collections::BTreeMap;
use std::io;

use heterarchy_device::backend::Backend;
use heterarchy_device::codec::{SECTORS_PER_PAGE, SECTOR_BYTES};

const MAGIC: u64 = u64::from_le_bytes(*b"HTPOLY01");
const SUPERBLOCK_BYTES: u64 = 4096;
const RECORD_BYTES: u64 = 32;
/// Sectors of heap per page of tier: 8, and one more for holes.
const HEAP_SECTORS_PER_PAGE: u64 = SECTORS_PER_PAGE as u64 + 1;
/// Memory a page of tier takes: its heap sectors and their records.
const BYTES_PER_PAGE: u64 = HEAP_SECTORS_PER_PAGE * (SECTOR_BYTES as u64 + RECORD_BYTES);

/// A persistent page's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub page: u64,
    pub seq: u64,
    pub sectors: u16,
    /// Bytes of data in the sectors (a compressed page's exact length).
    pub length: u16,
    pub compressed: bool,
    pub data_crc: u32,
}

impl Record {
    fn encode(&self) -> [u8; RECORD_BYTES as usize] {
        let mut bytes = [0u8; RECORD_BYTES as usize];
        bytes[0..8].copy_from_slice(&self.page.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.seq.to_le_bytes());
        bytes[16..18].copy_from_slice(&self.sectors.to_le_bytes());
        bytes[18..20].copy_from_slice(&self.length.to_le_bytes());
        bytes[20] = u8::from(self.compressed);
        bytes[24..28].copy_from_slice(&self.data_crc.to_le_bytes());
        let crc = crc32fast::hash(&bytes[..28]);
        bytes[28..32].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// The record `bytes` hold, if they hold a whole one.
    fn decode(bytes: &[u8]) -> Option<Record> {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let seq = u64_at(8);
        if seq == 0 || u32_at(28) != crc32fast::hash(&bytes[..28]) {
            return None;
        }
        let sectors = u16::from_le_bytes([bytes[16], bytes[17]]);
        let length = u16::from_le_bytes([bytes[18], bytes[19]]);
        if sectors == 0
            || sectors > SECTORS_PER_PAGE
            || usize::from(length) > usize::from(sectors) * SECTOR_BYTES
        {
            return None;
        }
        Some(Record {
            page: u64_at(0),
            seq,
            sectors,
            length,
            compressed: bytes[20] != 0,
            data_crc: u32_at(24),
        })
    }
}

/// A persistent page found at open: its record and its data as stored.
pub(crate) type Survivor = (Record, Vec<u8>);

/// The tier's memory: see the module docs.
pub(crate) struct Region {
    memory: Box<dyn Backend>,
    pages: u64,
    heap_sectors: u64,
    records_at: u64,
    heap_at: u64,
    /// Free runs of the heap: first sector → length.
    free: BTreeMap<u64, u64>,
    next_seq: u64,
}

impl Region {
    /// The pages of tier a memory of `bytes` holds.
    pub fn pages_in(bytes: u64) -> u64 {
        bytes.saturating_sub(2 * SUPERBLOCK_BYTES) / BYTES_PER_PAGE
    }

    /// Opens `memory`: the persistent pages a previous run left (the latest copy of each, its
    /// data whole). The caller writes them elsewhere and then [`format`](Self::format)s the
    /// region; until then it allocates nothing.
    pub fn open(memory: Box<dyn Backend>) -> io::Result<(Region, Vec<Survivor>)> {
        let pages = Region::pages_in(memory.size_bytes());
        if pages == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: too small for a page of tier (at least {} bytes)",
                    memory.describe(),
                    2 * SUPERBLOCK_BYTES + BYTES_PER_PAGE
                ),
            ));
        }
        let heap_sectors = pages * HEAP_SECTORS_PER_PAGE;
        let records_at = SUPERBLOCK_BYTES;
        let heap_at = (records_at + heap_sectors * RECORD_BYTES).next_multiple_of(4096);
        let region = Region {
            memory,
            pages,
            heap_sectors,
            records_at,
            heap_at,
            free: BTreeMap::new(),
            next_seq: 1,
        };
        let survivors = region.survivors()?;
        Ok((region, survivors))
    }

    /// Pages of tier it holds: its pages, where the eighth spare leaves three whole slots
    /// beside them (fewer in a region of less than 24 pages). While a request is carried out a
    /// page may stand in two places, its new copy beside its old: one page being placed whose
    /// old compressed copy may straddle two slots, and one being compressed out of its slot
    /// (every other compressed page can be shed).
    pub fn pages(&self) -> u64 {
        let slots = self.heap_sectors / u64::from(SECTORS_PER_PAGE);
        self.pages.min(slots.saturating_sub(3)).max(1)
    }

    /// The latest whole copy of each persistent page, when the superblock is ours.
    fn survivors(&self) -> io::Result<Vec<Survivor>> {
        let mut superblock = [0u8; 16];
        self.memory.read_at(0, &mut superblock)?;
        let magic = u64::from_le_bytes(superblock[0..8].try_into().expect("8"));
        let pages = u64::from_le_bytes(superblock[8..16].try_into().expect("8"));
        if magic != MAGIC {
            return Ok(Vec::new());
        }
        if pages != self.pages {
            // Its records would be read at the wrong places: refuse rather than lose them.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: holds a tier of {pages} pages, not {}: open it at the size it was made \
                     with, so that its write cache is written back",
                    self.memory.describe(),
                    self.pages
                ),
            ));
        }
        let mut table = vec![0u8; (self.heap_sectors * RECORD_BYTES) as usize];
        self.memory.read_at(self.records_at, &mut table)?;
        let mut latest: BTreeMap<u64, (Record, Vec<u8>)> = BTreeMap::new();
        for (first, bytes) in table.chunks(RECORD_BYTES as usize).enumerate() {
            let Some(record) = Record::decode(bytes) else {
                continue;
            };
            if first as u64 + u64::from(record.sectors) > self.heap_sectors {
                continue;
            }
            let mut data = vec![0u8; usize::from(record.length)];
            self.read(first as u64, &mut data)?;
            if crc32fast::hash(&data) != record.data_crc {
                continue; // its data never became whole: an older copy stands
            }
            if latest
                .get(&record.page)
                .is_none_or(|(r, _)| r.seq < record.seq)
            {
                latest.insert(record.page, (record, data));
            }
        }
        Ok(latest.into_values().collect())
    }

    /// Empties the region: no records, every sector free.
    pub fn format(&mut self) -> io::Result<()> {
        let zeroes = vec![0u8; 64 << 10];
        let table_bytes = self.heap_sectors * RECORD_BYTES;
        let mut done = 0;
        while done < table_bytes {
            let part = (table_bytes - done).min(zeroes.len() as u64);
            self.memory
                .write_streaming(self.records_at + done, &zeroes[..part as usize])?;
            done += part;
        }
        self.memory.persist(self.records_at, table_bytes)?;
        let mut superblock = [0u8; 16];
        superblock[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        superblock[8..16].copy_from_slice(&self.pages.to_le_bytes());
        self.memory.write_persisted(0, &superblock)?;
        self.memory.flush()?;
        self.free.clear();
        self.free.insert(0, self.heap_sectors);
        self.next_seq = 1;
        Ok(())
    }

    /// A run of `sectors` free sectors: the lowest whole slot for a whole page, the highest run
    /// long enough for a compressed one; `None` when there is none.
    pub fn allocate(&mut self, sectors: u16) -> Option<u64> {
        let want = u64::from(sectors);
        if sectors == SECTORS_PER_PAGE {
            // The first whole slot.
            let (start, len, slot) = self.free.iter().find_map(|(&start, &len)| {
                let slot = start.next_multiple_of(want);
                (slot + want <= start + len).then_some((start, len, slot))
            })?;
            self.free.remove(&start);
            if slot > start {
                self.free.insert(start, slot - start);
            }
            if slot + want < start + len {
                self.free.insert(slot + want, start + len - slot - want);
            }
            return Some(slot);
        }
        let (&start, &len) = self.free.iter().rev().find(|(_, &len)| len >= want)?;
        self.free.remove(&start);
        if len > want {
            self.free.insert(start, len - want);
        }
        Some(start + len - want)
    }

    /// Returns a run to the heap, merged with its free neighbours.
    pub fn release(&mut self, first: u64, sectors: u16) {
        let (mut start, mut len) = (first, u64::from(sectors));
        if let Some((&before, &before_len)) = self.free.range(..start).next_back() {
            if before + before_len == start {
                self.free.remove(&before);
                start = before;
                len += before_len;
            }
        }
        if let Some(&after_len) = self.free.get(&(first + u64::from(sectors))) {
            self.free.remove(&(first + u64::from(sectors)));
            len += after_len;
        }
        self.free.insert(start, len);
    }

    fn sector_offset(&self, first: u64) -> u64 {
        self.heap_at + first * SECTOR_BYTES as u64
    }

    /// Writes `data` at sector `first`, persisted when `persistent`.
    pub fn write(&self, first: u64, data: &[u8], persistent: bool) -> io::Result<()> {
        let offset = self.sector_offset(first);
        if persistent {
            self.memory.write_persisted(offset, data)
        } else {
            self.memory.write_streaming(offset, data)
        }
    }

    /// Reads `out.len()` bytes from sector `first`.
    pub fn read(&self, first: u64, out: &mut [u8]) -> io::Result<()> {
        self.memory.read_at(self.sector_offset(first), out)
    }

    /// Persists the record of the page whose data is at sector `first` (persisted already).
    pub fn write_record(
        &mut self,
        first: u64,
        page: u64,
        compressed: bool,
        data: &[u8],
    ) -> io::Result<()> {
        let record = Record {
            page,
            seq: self.next_seq,
            sectors: data.len().div_ceil(SECTOR_BYTES) as u16,
            length: data.len() as u16,
            compressed,
            data_crc: crc32fast::hash(data),
        };
        self.next_seq += 1;
        self.memory
            .write_persisted(self.records_at + first * RECORD_BYTES, &record.encode())
    }

    /// Clears the record at sector `first`.
    pub fn clear_record(&self, first: u64) -> io::Result<()> {
        self.memory.write_persisted(
            self.records_at + first * RECORD_BYTES,
            &[0u8; RECORD_BYTES as usize],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_device::backend::RamBackend;

    #[test]
    fn records_round_trip_and_torn_ones_are_refused() {
        let record = Record {
            page: 77,
            seq: 5,
            sectors: 3,
            length: 1500,
            compressed: true,
            data_crc: 0xdead_beef,
        };
        let mut bytes = record.encode();
        assert_eq!(Record::decode(&bytes), Some(record));
        bytes[3] ^= 1;
        assert_eq!(Record::decode(&bytes), None);
        assert_eq!(Record::decode(&[0u8; 32]), None);
    }

    #[test]
    fn whole_pages_come_from_the_low_end_and_compressed_ones_from_the_high_end() {
        let memory = Box::new(RamBackend::new(1 << 20).unwrap());
        let (mut region, survivors) = Region::open(memory).unwrap();
        assert!(survivors.is_empty());
        region.format().unwrap();
        let heap = region.pages() * HEAP_SECTORS_PER_PAGE;
        assert_eq!(region.allocate(8), Some(0));
        assert_eq!(region.allocate(3), Some(heap - 3));
        assert_eq!(region.allocate(8), Some(8));
        region.release(0, 8);
        region.release(8, 8);
        assert_eq!(region.free.get(&0), Some(&(heap - 3)), "merged back");
        region.release(heap - 3, 3);
        assert_eq!(region.free.len(), 1);
        // Whole pages take whole slots only: a compressed page in the first slot moves the next
        // whole page to the second, and freeing it leaves the first slot whole again.
        assert_eq!(region.allocate(8), Some(0));
        region.release(0, 5);
        assert_eq!(region.allocate(8), Some(8));
        region.release(5, 3);
        assert_eq!(region.allocate(8), Some(0));
        region.release(0, 8);
        region.release(8, 8);
        // A region of another size is refused, not formatted over.
        let memory = Box::new(RamBackend::new(2 << 20).unwrap());
        memory.write_at(0, &MAGIC.to_le_bytes()).unwrap();
        memory.write_at(8, &3u64.to_le_bytes()).unwrap();
        let error = Region::open(memory).err().unwrap().to_string();
        assert!(error.contains("holds a tier of 3 pages"), "{error}");
        // Nothing beyond the heap.
        let mut taken = 0;
        while region.allocate(1).is_some() {
            taken += 1;
        }
        assert_eq!(taken, heap);
    }
}
