//! The cache's DRAM: one 4 KiB buffer per slot, each behind its own lock, tagged with the block
//! it holds. The staging table says who may write a slot (the one writer of a Pending slot) and
//! who may read it (readers of Valid, Evicting and Clean slots, and the evictor of an Evicting
//! one); the lock keeps a reader from seeing half a copy, and the tag lets a reader whose slot
//! was given to another block since the decision notice it and ask again.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A slot's bytes and the block they are.
pub struct SlotBuffer {
    pub lba: u64,
    pub bytes: Box<[u8]>,
}

/// Every slot's buffer.
pub struct SlotBuffers {
    slots: Vec<RwLock<SlotBuffer>>,
}

impl SlotBuffers {
    /// `count` zeroed buffers of `block_bytes`, holding no block.
    pub fn new(count: usize, block_bytes: usize) -> SlotBuffers {
        SlotBuffers {
            slots: (0..count)
                .map(|_| {
                    RwLock::new(SlotBuffer {
                        lba: u64::MAX,
                        bytes: vec![0; block_bytes].into_boxed_slice(),
                    })
                })
                .collect(),
        }
    }

    pub fn read(&self, slot: u32) -> RwLockReadGuard<'_, SlotBuffer> {
        self.slots[slot as usize]
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn write(&self, slot: u32) -> RwLockWriteGuard<'_, SlotBuffer> {
        self.slots[slot as usize]
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
