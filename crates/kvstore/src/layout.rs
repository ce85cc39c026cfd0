//! Where things lie on the store's storage: a double-buffered store header, then fixed-size
//! segments, each a header and records appended one after another.
//!
//! A record is a 40-byte header, the key and the value, padded to 8 bytes. The key is written
//! beside its value so that a restart can rebuild the DRAM index from the segments alone; it is
//! never read back while serving, so gets touch the value tier only for the value (seed 000
//! §5.2.5: keys and metadata in DRAM, values on PM). The fields that change in place (expiry
//! and flags on touch; liveness on delete) sit in their own aligned 8-byte words, which
//! persistent memory writes atomically, and outside the checksum, which covers the rest.

/// Bytes before the first segment: two copies of the store header.
pub const STORE_HEADER_BYTES: u64 = 4096;
/// Offset of each copy of the store header.
const STORE_HEADER_COPIES: [u64; 2] = [0, 2048];
/// Bytes of a segment's header; records start after it.
pub const SEGMENT_HEADER_BYTES: u32 = 64;
/// Bytes of a record's header.
pub const RECORD_HEADER_BYTES: u32 = 40;

const STORE_MAGIC: u64 = u64::from_le_bytes(*b"HTKVSTR1");
const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"HTKVSEG1");
const FORMAT_VERSION: u32 = 2;

/// Record state bits (byte 22 of the header).
pub const STATE_LIVE: u8 = 1;
/// Set by the meta protocol's invalidation: the value is served but marked stale.
pub const STATE_STALE: u8 = 2;

/// Bytes a record of `key_len` and `value_len` takes in its segment.
pub fn record_bytes(key_len: usize, value_len: usize) -> u64 {
    (u64::from(RECORD_HEADER_BYTES) + key_len as u64 + value_len as u64).next_multiple_of(8)
}

/// The store's header: geometry, and what a restart must know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreHeader {
    /// Which copy was written last wins.
    pub sequence: u64,
    pub segment_bytes: u32,
    /// Records with a sequence at or below this were flushed by flush_all.
    pub flushed_through: u64,
    /// The store was shut down cleanly: everything written reached the storage.
    pub clean: bool,
    /// The kernel's boot id when last written (/proc/sys/kernel/random/boot_id).
    pub boot_id: [u8; 36],
}

impl StoreHeader {
    const BYTES: usize = 76;

    fn encode(&self) -> [u8; Self::BYTES] {
        let mut bytes = [0u8; Self::BYTES];
        bytes[0..8].copy_from_slice(&STORE_MAGIC.to_le_bytes());
        bytes[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.segment_bytes.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.sequence.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.flushed_through.to_le_bytes());
        bytes[32..68].copy_from_slice(&self.boot_id);
        bytes[68] = u8::from(self.clean);
        let checksum = crc32fast::hash(&bytes[..72]);
        bytes[72..76].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    fn decode(bytes: &[u8; Self::BYTES]) -> Option<StoreHeader> {
        let word = |range: std::ops::Range<usize>| -> u64 {
            let mut buf = [0u8; 8];
            buf[..range.len()].copy_from_slice(&bytes[range]);
            u64::from_le_bytes(buf)
        };
        let intact = word(0..8) == STORE_MAGIC
            && word(8..12) == u64::from(FORMAT_VERSION)
            && word(72..76) == u64::from(crc32fast::hash(&bytes[..72]));
        intact.then(|| StoreHeader {
            segment_bytes: word(12..16) as u32,
            sequence: word(16..24),
            flushed_through: word(24..32),
            boot_id: bytes[32..68].try_into().expect("36 bytes"),
            clean: bytes[68] == 1,
        })
    }

    /// Where this header is written: the copy not holding the previous one, so a torn write
    /// leaves the previous header intact.
    pub fn offset(&self) -> u64 {
        STORE_HEADER_COPIES[(self.sequence % 2) as usize]
    }

    /// The bytes to write at [`offset`](Self::offset).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode().to_vec()
    }

    /// The newest intact copy in the first [`STORE_HEADER_BYTES`] of the storage.
    pub fn newest(area: &[u8]) -> Option<StoreHeader> {
        STORE_HEADER_COPIES
            .iter()
            .filter_map(|&offset| {
                let bytes = area.get(offset as usize..offset as usize + Self::BYTES)?;
                StoreHeader::decode(bytes.try_into().ok()?)
            })
            .max_by_key(|header| header.sequence)
    }
}

/// A segment's header: it is in use, since when, and which generation its records must carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Bumped each time the segment is reused, so records of its previous life are ignored.
    pub generation: u32,
    /// When it was opened (Unix seconds): the FIFO order of eviction.
    pub created_secs: u32,
    /// Ordering among segments opened in the same second.
    pub opened_sequence: u64,
    /// The TTL bucket its items were grouped in.
    pub bucket: u8,
    /// Free: its records are void. A free header still carries the generation, so the next
    /// use can count on.
    pub free: bool,
}

impl SegmentHeader {
    /// Encoded, checksummed.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES as usize] {
        let mut bytes = [0u8; SEGMENT_HEADER_BYTES as usize];
        bytes[0..8].copy_from_slice(&SEGMENT_MAGIC.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.generation.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.created_secs.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.opened_sequence.to_le_bytes());
        bytes[24] = self.bucket;
        bytes[25] = u8::from(self.free);
        let checksum = crc32fast::hash(&bytes[..60]);
        bytes[60..64].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// `None` for a header never written, or damaged.
    pub fn decode(bytes: &[u8]) -> Option<SegmentHeader> {
        let bytes: &[u8; SEGMENT_HEADER_BYTES as usize] = bytes
            .get(..SEGMENT_HEADER_BYTES as usize)?
            .try_into()
            .ok()?;
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let intact = u64_at(0) == SEGMENT_MAGIC && u32_at(60) == crc32fast::hash(&bytes[..60]);
        intact.then(|| SegmentHeader {
            generation: u32_at(8),
            created_secs: u32_at(12),
            opened_sequence: u64_at(16),
            bucket: bytes[24],
            free: bytes[25] == 1,
        })
    }
}

/// A record's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// The order records were written in: never 0, which marks the end of a segment's records.
    pub sequence: u64,
    pub expiry_raw: u32,
    pub client_flags: u32,
    pub value_len: u32,
    pub key_len: u16,
    pub state: u8,
    pub generation: u32,
    /// The item's CAS unique: its sequence, or the one a client gave (meta `E`).
    pub cas: u64,
}

impl RecordHeader {
    /// Encoded with the checksum of the fixed fields, `key` and `value` (0 when `checksum` is
    /// false: storage that does not outlive the process is never read back).
    pub fn encode(&self, key: &[u8], value: &[u8], checksum: bool) -> [u8; 40] {
        let mut bytes = [0u8; RECORD_HEADER_BYTES as usize];
        bytes[0..8].copy_from_slice(&self.sequence.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.expiry_word());
        bytes[16..24].copy_from_slice(&self.state_word());
        bytes[24..28].copy_from_slice(&self.generation.to_le_bytes());
        bytes[32..40].copy_from_slice(&self.cas.to_le_bytes());
        if checksum {
            let sum = Self::checksum(&bytes, key, value);
            bytes[28..32].copy_from_slice(&sum.to_le_bytes());
        }
        bytes
    }

    /// The in-place word at bytes 8..16: expiry and client flags.
    pub fn expiry_word(&self) -> [u8; 8] {
        let mut word = [0u8; 8];
        word[..4].copy_from_slice(&self.expiry_raw.to_le_bytes());
        word[4..].copy_from_slice(&self.client_flags.to_le_bytes());
        word
    }

    /// The in-place word at bytes 16..24: lengths and state.
    pub fn state_word(&self) -> [u8; 8] {
        let mut word = [0u8; 8];
        word[..4].copy_from_slice(&self.value_len.to_le_bytes());
        word[4..6].copy_from_slice(&self.key_len.to_le_bytes());
        word[6] = self.state;
        word
    }

    /// Offset of the expiry word within the record.
    pub const EXPIRY_WORD: u64 = 8;
    /// Offset of the state word within the record.
    pub const STATE_WORD: u64 = 16;

    fn checksum(header: &[u8; 40], key: &[u8], value: &[u8]) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&header[0..8]);
        // Client flags are fixed for a record's life; the expiry beside them is not.
        hasher.update(&header[12..16]);
        hasher.update(&header[16..22]);
        hasher.update(&header[24..28]);
        hasher.update(&header[32..40]);
        hasher.update(key);
        hasher.update(value);
        hasher.finalize()
    }

    /// Decodes a header; `None` at the end of the records (sequence 0) or for bytes that are
    /// not a header of `generation`.
    pub fn decode(bytes: &[u8; 40], generation: u32) -> Option<RecordHeader> {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let header = RecordHeader {
            sequence: u64::from_le_bytes(bytes[0..8].try_into().expect("8")),
            expiry_raw: u32_at(8),
            client_flags: u32_at(12),
            value_len: u32_at(16),
            key_len: u16::from_le_bytes([bytes[20], bytes[21]]),
            state: bytes[22],
            generation: u32_at(24),
            cas: u64::from_le_bytes(bytes[32..40].try_into().expect("8")),
        };
        (header.sequence != 0 && header.generation == generation && header.key_len > 0)
            .then_some(header)
    }

    /// True when the checksum in `bytes` matches `key` and `value`.
    pub fn verify(bytes: &[u8; 40], key: &[u8], value: &[u8]) -> bool {
        u32::from_le_bytes(bytes[28..32].try_into().expect("4"))
            == Self::checksum(bytes, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_header_newest_intact_copy_wins() {
        let mut area = vec![0u8; STORE_HEADER_BYTES as usize];
        let mut header = StoreHeader {
            sequence: 1,
            segment_bytes: 1 << 20,
            flushed_through: 7,
            clean: false,
            boot_id: [b'a'; 36],
        };
        for sequence in 1..=2 {
            header.sequence = sequence;
            header.flushed_through = 10 * sequence;
            let offset = header.offset() as usize;
            area[offset..offset + StoreHeader::BYTES].copy_from_slice(&header.to_bytes());
        }
        // the later of two intact copies is read
        assert_eq!(StoreHeader::newest(&area).unwrap().flushed_through, 20);
        // a torn latest copy falls back to the previous one
        header.sequence = 2;
        area[header.offset() as usize + 30] ^= 0xff;
        assert_eq!(StoreHeader::newest(&area).unwrap().flushed_through, 10);
        // nothing intact: a fresh store
        assert!(StoreHeader::newest(&[0u8; 4096]).is_none());
    }

    #[test]
    fn segment_headers_round_trip_and_zero_is_unwritten() {
        let header = SegmentHeader {
            generation: 3,
            created_secs: 99,
            opened_sequence: 12,
            bucket: 4,
            free: false,
        };
        assert_eq!(SegmentHeader::decode(&header.encode()), Some(header));
        // a zeroed header was never written
        assert_eq!(SegmentHeader::decode(&[0u8; 64]), None);
    }

    #[test]
    fn records_check_their_contents_but_not_the_words_changed_in_place() {
        let header = RecordHeader {
            sequence: 5,
            expiry_raw: 100,
            client_flags: 9,
            value_len: 3,
            key_len: 2,
            state: STATE_LIVE,
            generation: 1,
            cas: 77,
        };
        let mut bytes = header.encode(b"ke", b"val", true);
        assert_eq!(RecordHeader::decode(&bytes, 1), Some(header));
        assert!(RecordHeader::verify(&bytes, b"ke", b"val"));
        // another generation's record is not this segment's
        assert_eq!(RecordHeader::decode(&bytes, 2), None);
        // a changed value fails the checksum
        assert!(!RecordHeader::verify(&bytes, b"ke", b"vaX"));
        // a touch (new expiry) and a delete (state) keep the checksum valid
        bytes[8..12].copy_from_slice(&500u32.to_le_bytes());
        bytes[22] = 0;
        assert!(RecordHeader::verify(&bytes, b"ke", b"val"));
        // so does the CAS unique
        bytes[32] ^= 1;
        assert!(!RecordHeader::verify(&bytes, b"ke", b"val"));
        // records are 8-byte aligned
        assert_eq!(record_bytes(2, 3), 48);
    }
}
