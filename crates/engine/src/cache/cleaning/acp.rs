//! ACP, Open CAS's aggressive cleaning policy ("Cleaner: ACP - Aggressive Cleaning Policy",
//! open-cas.github.io/ocf/design/cleaner; OCF `src/cleaning/acp.c`).
//!
//! The backing store's address space is cut into 100 MiB chunks, each counting its dirty lines
//! and sitting in one of 11 buckets by dirty percentage (0, up to 10 %, ..., up to 100 %); a
//! chunk moves one bucket per change, to the tail of the bucket above or the head of the one
//! below, as in OCF. A wake-up takes the first chunk of the highest non-empty bucket (bucket 0
//! holds clean chunks and is never cleaned), walks its lines in address order from where the
//! last wake-up stopped, and cleans up to `flush_max_buffers` dirty lines; it wakes again after
//! the wake-up time, or after 1 s when nothing is dirty.
//!
//! A line's address is its key (block traces put the block number in the key's low bits), and
//! a chunk holds `100 MiB / line size` consecutive keys.

use heterarchy_policy::util::key_table::KeyTable;
use rustc_hash::FxHashMap;

use super::MIN_IDLE_WAIT_NS;
use crate::cache::config::AcpConfig;
use crate::cache::line::Line;

/// Bytes of backing store per chunk (OCF `ACP_CHUNK_SIZE`).
const CHUNK_BYTES: u64 = 100 << 20;
/// Upper dirty percentage of each bucket (OCF `ACP_BUCKET_DEFAULTS`).
const BUCKET_PERCENTS: [u64; 11] = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
const TOP_BUCKET: u8 = (BUCKET_PERCENTS.len() - 1) as u8;
/// Wait when no chunk is dirty (OCF `ACP_BACKOFF_TIME_MS`).
const NOTHING_DIRTY_WAIT_NS: u64 = 1_000_000_000;
const NS_PER_MS: u64 = 1_000_000;
const NIL: u32 = u32::MAX;

/// Chunk identity: keys per chunk (from the line size) and the chunk number.
type ChunkId = (u64, u64);

fn chunk_of(key: u64, line_bytes: u32) -> ChunkId {
    let keys_per_chunk = (CHUNK_BYTES / u64::from(line_bytes.max(1))).max(1);
    (keys_per_chunk, key / keys_per_chunk)
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    id: ChunkId,
    dirty_lines: u64,
    bucket: u8,
    prev: u32,
    next: u32,
}

impl Chunk {
    fn first_key(&self) -> u64 {
        self.id.0 * self.id.1
    }

    fn end_key(&self) -> u64 {
        self.first_key().saturating_add(self.id.0)
    }

    fn threshold(&self, bucket: u8) -> u64 {
        self.id.0 * BUCKET_PERCENTS[bucket as usize] / 100
    }
}

/// Where the cleaning of the current chunk stands.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    chunk: u32,
    next_key: u64,
}

pub(crate) struct Acp {
    wake_up_ns: u64,
    flush_max_buffers: usize,
    chunks: Vec<Chunk>,
    index: FxHashMap<ChunkId, u32>,
    /// Head and tail chunk of each bucket's list.
    buckets: [(u32, u32); BUCKET_PERCENTS.len()],
    cursor: Option<Cursor>,
}

impl Acp {
    pub fn new(config: &AcpConfig) -> Acp {
        Acp {
            wake_up_ns: config.wake_up_ms.saturating_mul(NS_PER_MS),
            flush_max_buffers: config.flush_max_buffers as usize,
            chunks: Vec::new(),
            index: FxHashMap::default(),
            buckets: [(NIL, NIL); BUCKET_PERCENTS.len()],
            cursor: None,
        }
    }

    fn unlink(&mut self, index: u32) {
        let Chunk {
            prev, next, bucket, ..
        } = self.chunks[index as usize];
        match prev {
            NIL => self.buckets[bucket as usize].0 = next,
            prev => self.chunks[prev as usize].next = next,
        }
        match next {
            NIL => self.buckets[bucket as usize].1 = prev,
            next => self.chunks[next as usize].prev = prev,
        }
    }

    fn push_back(&mut self, index: u32, bucket: u8) {
        let tail = self.buckets[bucket as usize].1;
        let chunk = &mut self.chunks[index as usize];
        chunk.bucket = bucket;
        chunk.prev = tail;
        chunk.next = NIL;
        match tail {
            NIL => self.buckets[bucket as usize].0 = index,
            tail => self.chunks[tail as usize].next = index,
        }
        self.buckets[bucket as usize].1 = index;
    }

    fn push_front(&mut self, index: u32, bucket: u8) {
        let head = self.buckets[bucket as usize].0;
        let chunk = &mut self.chunks[index as usize];
        chunk.bucket = bucket;
        chunk.prev = NIL;
        chunk.next = head;
        match head {
            NIL => self.buckets[bucket as usize].1 = index,
            head => self.chunks[head as usize].prev = index,
        }
        self.buckets[bucket as usize].0 = index;
    }

    /// Moves a chunk one bucket up or down after its dirty count changed (OCF
    /// `_acp_update_bucket`).
    fn update_bucket(&mut self, index: u32) {
        let chunk = self.chunks[index as usize];
        if chunk.bucket < TOP_BUCKET && chunk.dirty_lines > chunk.threshold(chunk.bucket) {
            self.unlink(index);
            self.push_back(index, chunk.bucket + 1);
        } else if chunk.bucket > 0 && chunk.dirty_lines <= chunk.threshold(chunk.bucket - 1) {
            self.unlink(index);
            self.push_front(index, chunk.bucket - 1);
        }
    }

    pub fn line_dirtied(&mut self, key: u64, line_bytes: u32) {
        let id = chunk_of(key, line_bytes);
        let index = match self.index.get(&id) {
            Some(&index) => index,
            None => {
                let index = self.chunks.len() as u32;
                self.chunks.push(Chunk {
                    id,
                    dirty_lines: 0,
                    bucket: 0,
                    prev: NIL,
                    next: NIL,
                });
                self.index.insert(id, index);
                self.push_front(index, 0);
                index
            }
        };
        self.chunks[index as usize].dirty_lines += 1;
        self.update_bucket(index);
    }

    pub fn line_cleaned(&mut self, key: u64, line_bytes: u32) {
        let Some(&index) = self.index.get(&chunk_of(key, line_bytes)) else {
            debug_assert!(false, "a line cleaned in a chunk never dirtied");
            return;
        };
        let chunk = &mut self.chunks[index as usize];
        chunk.dirty_lines = chunk.dirty_lines.saturating_sub(1);
        self.update_bucket(index);
    }

    fn candidate(&self) -> Option<u32> {
        (1..=TOP_BUCKET)
            .rev()
            .map(|bucket| self.buckets[bucket as usize].0)
            .find(|&head| head != NIL)
    }

    pub fn due(&mut self, now_ns: u64, lines: &KeyTable<Line>, out: &mut Vec<u64>) -> u64 {
        let mut cursor = match self.cursor {
            Some(cursor) => cursor,
            None => match self.candidate() {
                Some(chunk) => Cursor {
                    chunk,
                    next_key: self.chunks[chunk as usize].first_key(),
                },
                None => return now_ns.saturating_add(NOTHING_DIRTY_WAIT_NS),
            },
        };
        let chunk = self.chunks[cursor.chunk as usize];
        let end_key = chunk.end_key();
        let start = out.len();
        // OCF walks on to the chunk's end. The chunk's dirty count covers the lines ahead of
        // the cursor and any behind it, so once this walk has found that many, none is left
        // ahead and the walk stops early with the same result.
        let mut found = 0;
        while cursor.next_key < end_key
            && found < self.flush_max_buffers as u64
            && found < chunk.dirty_lines
        {
            let key = cursor.next_key;
            cursor.next_key += 1;
            if let Some(line) = lines.get(key) {
                if line.any_dirty() && chunk_of(key, line.size) == chunk.id {
                    found += 1;
                    out.push(key);
                }
            }
        }
        let chunk_done = cursor.next_key >= end_key || found >= chunk.dirty_lines;
        self.cursor = (!chunk_done).then_some(cursor);
        if out.len() > start {
            now_ns.saturating_add(self.wake_up_ns)
        } else {
            now_ns.saturating_add(self.wake_up_ns.max(MIN_IDLE_WAIT_NS))
        }
    }

    #[cfg(test)]
    fn bucket_of(&self, key: u64, line_bytes: u32) -> u8 {
        self.chunks[self.index[&chunk_of(key, line_bytes)] as usize].bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: u32 = 4096;
    const KEYS_PER_CHUNK: u64 = CHUNK_BYTES / LINE as u64;

    fn dirty(lines: &mut KeyTable<Line>, acp: &mut Acp, key: u64) {
        let mut line = Line::absent(LINE);
        line.set_resident(0);
        line.dirty = 1;
        lines.insert(key, line);
        acp.line_dirtied(key, LINE);
    }

    fn clean(lines: &mut KeyTable<Line>, acp: &mut Acp, key: u64) {
        let mut line = lines.get(key).unwrap();
        line.dirty = 0;
        lines.insert(key, line);
        acp.line_cleaned(key, LINE);
    }

    #[test]
    fn chunks_climb_and_fall_through_buckets() {
        let mut acp = Acp::new(&AcpConfig::default());
        let mut lines = KeyTable::default();
        dirty(&mut lines, &mut acp, 0);
        assert_eq!(acp.bucket_of(0, LINE), 1);
        let tenth = KEYS_PER_CHUNK / 10;
        for key in 1..=tenth {
            dirty(&mut lines, &mut acp, key);
        }
        // 10 % + 1 dirty: above bucket 1's threshold.
        assert_eq!(acp.bucket_of(0, LINE), 2);
        clean(&mut lines, &mut acp, 0);
        assert_eq!(acp.bucket_of(0, LINE), 1);
    }

    #[test]
    fn cleans_the_dirtiest_chunk_first_in_address_order() {
        let config = AcpConfig {
            wake_up_ms: 10,
            flush_max_buffers: 3,
        };
        let mut acp = Acp::new(&config);
        let mut lines = KeyTable::default();
        // Chunk 1 gets 1 dirty line; chunk 0 gets more than 10 % of its lines.
        dirty(&mut lines, &mut acp, KEYS_PER_CHUNK + 5);
        for key in (0..=KEYS_PER_CHUNK / 10).rev() {
            dirty(&mut lines, &mut acp, key);
        }
        let mut out = Vec::new();
        let next = acp.due(1_000, &lines, &mut out);
        assert_eq!(out, vec![0, 1, 2]);
        assert_eq!(next, 1_000 + 10 * NS_PER_MS);
        for key in out.drain(..) {
            clean(&mut lines, &mut acp, key);
        }
        acp.due(2_000, &lines, &mut out);
        assert_eq!(out, vec![3, 4, 5], "the walk resumes where it stopped");
    }

    #[test]
    fn waits_a_second_when_nothing_is_dirty() {
        let mut acp = Acp::new(&AcpConfig::default());
        let lines = KeyTable::default();
        let mut out = Vec::new();
        assert_eq!(acp.due(5, &lines, &mut out), 5 + NOTHING_DIRTY_WAIT_NS);
        assert!(out.is_empty());
    }
}
