//! Warm restart (docs/reliability.md, "What survives what"): the DRAM index rebuilt from the
//! segments a previous run left on persistent storage.
//!
//! What survives which failure:
//! - a clean shutdown (SIGTERM, SIGINT): every item;
//! - a crash of the process (kill -9, a panic): every write that was answered, since each is in
//!   the mapping before its reply goes out and the kernel keeps the mapping's pages;
//! - a crash of the machine, values on persistent memory with DAX: every write that was
//!   answered, since each is flushed and fenced before its reply;
//! - a crash of the machine, values in a file without DAX: nothing — the page cache may have
//!   written back a deleted or overwritten item without its newer state, so the store starts
//!   empty rather than risk serving it (a changed boot id tells that the machine restarted).
//!
//! Records torn by a crash fail their checksum and end their segment's scan; records of a
//! segment's earlier life carry an older generation and are ignored; items flushed by
//! flush_all lie at or below the header's flush mark.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io;

use heterarchy_device::backend::Backend;

use crate::expiry::Expiry;
use crate::index::Item;
use crate::key::Key;
use crate::layout::{
    record_bytes, RecordHeader, SegmentHeader, StoreHeader, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES, STATE_LIVE, STATE_STALE, STORE_HEADER_BYTES,
};
use crate::segments::{Segment, Segments};
use crate::store::StoreConfig;

/// What opening a store found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Storage that does not outlive the process, or holds no store yet: started empty.
    Fresh,
    /// Items found again.
    Recovered {
        items: u64,
        /// The previous run shut down cleanly.
        clean: bool,
    },
    /// A store was there but could not be trusted; started empty.
    Discarded { reason: String },
}

/// What the scan hands the store.
pub(crate) struct Scanned {
    pub segments: Segments,
    pub items: Vec<Item>,
    pub next_sequence: u64,
    pub header: StoreHeader,
    pub recovery: Recovery,
}

/// Reads the store's header and segments, and decides what to keep.
pub(crate) fn scan(
    backend: &dyn Backend,
    config: &StoreConfig,
    hasher: &impl BuildHasher,
    now_secs: u32,
) -> io::Result<Scanned> {
    let count = Segments::count_for(backend.size_bytes(), config.segment_bytes);
    let boot_id = current_boot_id();
    let fresh_header = StoreHeader {
        sequence: 0,
        segment_bytes: config.segment_bytes,
        flushed_through: 0,
        clean: false,
        boot_id,
    };
    if !backend.is_persistent() {
        return Ok(Scanned {
            segments: Segments::new(config.segment_bytes, &vec![0; count]),
            items: Vec::new(),
            next_sequence: 1,
            header: fresh_header,
            recovery: Recovery::Fresh,
        });
    }
    let mut area = vec![0u8; STORE_HEADER_BYTES as usize];
    backend.read_at(0, &mut area)?;
    let previous = StoreHeader::newest(&area);
    let discard = match &previous {
        None => Some(None),
        Some(header) if header.segment_bytes != config.segment_bytes => Some(Some(format!(
            "its segments were {} bytes, now {}",
            header.segment_bytes, config.segment_bytes
        ))),
        Some(header)
            if !header.clean && !backend.persist_is_cheap() && header.boot_id != boot_id =>
        {
            Some(Some(
                "the machine restarted after an unclean shutdown, and storage without DAX may \
                 have lost writes"
                    .to_string(),
            ))
        }
        Some(_) => None,
    };
    if let Some(reason) = discard {
        let mut header = fresh_header;
        header.sequence = previous.as_ref().map_or(0, |header| header.sequence);
        let segments = format(backend, config, count, hasher)?;
        let recovery = reason.map_or(Recovery::Fresh, |reason| Recovery::Discarded { reason });
        return Ok(Scanned {
            segments,
            items: Vec::new(),
            next_sequence: 1,
            header,
            recovery,
        });
    }
    let mut header = previous.expect("kept");
    header.boot_id = boot_id;
    let clean = header.clean;
    let mut segments = Segments::new(config.segment_bytes, &vec![0; count]);
    // Each item with the sequence of its record, the newest of a key's records winning.
    let mut items: HashMap<Key, (u64, Item)> = HashMap::new();
    let mut next_sequence = header.flushed_through + 1;
    let mut buffer = vec![0u8; config.segment_bytes as usize];
    for index in 0..count as u32 {
        backend.read_at(segments.base_offset(index), &mut buffer)?;
        let Some(segment_header) = SegmentHeader::decode(&buffer) else {
            continue;
        };
        segments.segments[index as usize].header.generation = segment_header.generation;
        if segment_header.free {
            continue;
        }
        let mut segment = Segment::empty(segment_header);
        let mut offset = SEGMENT_HEADER_BYTES as usize;
        while let Some(record) = read_record(&buffer, offset, segment_header.generation) {
            let (record_header, key, _) = record;
            let bytes = record_bytes(key.len(), record_header.value_len as usize);
            let expiry = Expiry::from_raw(record_header.expiry_raw);
            let hash = hasher.hash_one(key);
            segment.note_record(hash, offset as u32, bytes, expiry);
            next_sequence = next_sequence.max(record_header.sequence + 1);
            let live = record_header.state & STATE_LIVE != 0
                && record_header.sequence > header.flushed_through
                && !expiry.has_passed(now_secs);
            if !live {
                segment.forget_live(bytes);
            } else {
                let item = Item {
                    key: key.into(),
                    cas: record_header.cas,
                    segment: index,
                    offset: offset as u32,
                    value_len: record_header.value_len,
                    client_flags: record_header.client_flags,
                    expiry,
                    accessed_secs: now_secs,
                    fetched: false,
                    stale: record_header.state & STATE_STALE != 0,
                    win_sent: false,
                };
                let sequence = record_header.sequence;
                keep_newest(
                    &mut items,
                    (sequence, item),
                    &mut segments,
                    &mut segment,
                    index,
                );
            }
            offset += bytes as usize;
        }
        segments.restore(index, segment);
    }
    let empty: Vec<u32> = (0..count as u32)
        .filter(|&index| {
            let segment = &segments.segments[index as usize];
            !segment.header.free && segment.live_bytes == 0
        })
        .collect();
    for index in empty {
        segments.release(index);
    }
    let items: Vec<Item> = items.into_values().map(|(_, item)| item).collect();
    let recovery = Recovery::Recovered {
        items: items.len() as u64,
        clean,
    };
    Ok(Scanned {
        segments,
        items,
        next_sequence,
        header,
        recovery,
    })
}

/// The record at `offset` of a segment's bytes, if one of `generation` is there whole.
fn read_record(
    buffer: &[u8],
    offset: usize,
    generation: u32,
) -> Option<(RecordHeader, &[u8], &[u8])> {
    let header_bytes: &[u8; 40] = buffer
        .get(offset..offset + RECORD_HEADER_BYTES as usize)?
        .try_into()
        .ok()?;
    let header = RecordHeader::decode(header_bytes, generation)?;
    let key_start = offset + RECORD_HEADER_BYTES as usize;
    let value_start = key_start + usize::from(header.key_len);
    let key = buffer.get(key_start..value_start)?;
    let value = buffer.get(value_start..value_start + header.value_len as usize)?;
    RecordHeader::verify(header_bytes, key, value).then_some((header, key, value))
}

/// Keeps the newer of two records of one key; the older one's bytes are dead.
fn keep_newest(
    items: &mut HashMap<Key, (u64, Item)>,
    (sequence, item): (u64, Item),
    segments: &mut Segments,
    scanning: &mut Segment,
    scanning_index: u32,
) {
    let bytes_of = |item: &Item| record_bytes(item.key.len(), item.value_len as usize);
    let loser = match items.get(&item.key) {
        Some((kept, _)) if *kept > sequence => item,
        _ => match items.insert(item.key.clone(), (sequence, item)) {
            Some((_, older)) => older,
            None => return,
        },
    };
    let owner = if loser.segment == scanning_index {
        scanning
    } else {
        &mut segments.segments[loser.segment as usize]
    };
    owner.forget_live(bytes_of(&loser));
}

/// Writes every segment's header as free, each at a generation none of its old records carry.
fn format(
    backend: &dyn Backend,
    config: &StoreConfig,
    count: usize,
    hasher: &impl BuildHasher,
) -> io::Result<Segments> {
    let mut generations = Vec::with_capacity(count);
    let mut header_bytes = [0u8; SEGMENT_HEADER_BYTES as usize];
    for index in 0..count as u64 {
        let at = STORE_HEADER_BYTES + index * u64::from(config.segment_bytes);
        backend.read_at(at, &mut header_bytes)?;
        // A damaged or foreign header: a generation from the (randomly keyed) hasher.
        let generation = SegmentHeader::decode(&header_bytes)
            .map_or(hasher.hash_one(index) as u32, |old| {
                old.generation.wrapping_add(1)
            });
        let free = SegmentHeader {
            generation,
            created_secs: 0,
            opened_sequence: 0,
            bucket: 0,
            free: true,
        };
        backend.write_at(at, &free.encode())?;
        generations.push(generation);
    }
    backend.flush()?;
    Ok(Segments::new(config.segment_bytes, &generations))
}

/// The kernel's boot id: changes when the machine restarts.
fn current_boot_id() -> [u8; 36] {
    let mut id = [0u8; 36];
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let bytes = text.trim().as_bytes();
        let length = bytes.len().min(36);
        id[..length].copy_from_slice(&bytes[..length]);
    }
    id
}
