//! Every access a tenant's store makes to its storage: records written with streaming stores
//! (seed 000 §5.2.5: values on PM written non-temporally), values read back, the state and
//! expiry words updated in place, segment and store headers. Each access is timed on the tier's
//! throttle when it has one (on a shared PM every access counts, not only values) and made
//! durable where each write must be. The timing holds no one: it says when the device would be
//! done, and whoever answers the request waits for that.

use std::cell::Cell;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use heterarchy_device::backend::{Backend, Throttle};
use heterarchy_device::memory::MemoryOp;
use heterarchy_engine::nyx::{MaxIopsProfile, Regulator};

use crate::expiry::Expiry;
use crate::layout::{RecordHeader, SegmentHeader, StoreHeader, SEGMENT_HEADER_BYTES};

/// A store's storage and how it is accessed.
pub(crate) struct Media {
    backend: Box<dyn Backend>,
    throttle: Option<Arc<Throttle>>,
    /// When the device completes the accesses made since the last
    /// [`take_deadline`](Media::take_deadline): each starts when the one before completes, as
    /// one thread's accesses do.
    busy_until: Cell<Option<Instant>>,
    /// The tenant's gate on a shared device, and the device's cost profile.
    gate: Option<(Arc<Regulator>, Arc<MaxIopsProfile>)>,
    /// Every write is made durable before it is answered (persistent memory on DAX).
    persist_each_write: bool,
    /// Records carry checksums, and state words and headers are kept: the storage outlives
    /// the process.
    durable: bool,
}

impl Media {
    pub fn new(backend: Box<dyn Backend>) -> Media {
        Media {
            persist_each_write: backend.persist_is_cheap(),
            durable: backend.is_persistent(),
            backend,
            throttle: None,
            busy_until: Cell::new(None),
            gate: None,
        }
    }

    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// Puts every access through `gate` from now on (NyxCache's M1 and M2, seed 000 §5.2.3):
    /// delayed or stalled as the controller says, charged its cost by `profile`, then timed.
    /// Only with a throttle: the gate's times are on the shared device's clock.
    pub fn set_gate(&mut self, gate: Arc<Regulator>, profile: Arc<MaxIopsProfile>) {
        self.gate = Some((gate, profile));
    }

    /// Whether the storage outlives the process (records carry checksums, headers are kept).
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// Paces every access like a device model from now on (an emulated PM tier).
    pub fn set_throttle(&mut self, throttle: Arc<Throttle>) {
        self.throttle = Some(throttle);
    }

    /// Writes a whole record at `at` with streaming stores; durable on return where each write
    /// must be.
    pub fn write_record(&self, at: u64, record: &[u8]) -> io::Result<()> {
        self.backend.write_streaming(at, record)?;
        self.pace(MemoryOp::NtStore, at, record.len());
        if self.persist_each_write {
            self.backend.persist(at, record.len() as u64)?;
        }
        Ok(())
    }

    /// Appends `len` bytes at `at` to `out`.
    pub fn read(&self, at: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        self.backend.append_to(at, len, out)?;
        self.pace(MemoryOp::Load, at, len);
        Ok(())
    }

    /// Marks the record at `at` dead in its state word.
    pub fn void_record(&self, at: u64) -> io::Result<()> {
        if !self.durable {
            return Ok(());
        }
        let word_at = at + RecordHeader::STATE_WORD;
        let mut word = [0u8; 8];
        self.backend.read_at(word_at, &mut word)?;
        self.pace(MemoryOp::Load, word_at, word.len());
        word[6] = 0;
        self.write_word(word_at, &word)
    }

    /// Gives the record at `at` a new expiry in its expiry word (which holds its flags too).
    pub fn write_expiry(&self, at: u64, expiry: Expiry, client_flags: u32) -> io::Result<()> {
        if !self.durable {
            return Ok(());
        }
        let mut word = [0u8; 8];
        word[..4].copy_from_slice(&expiry.to_raw().to_le_bytes());
        word[4..].copy_from_slice(&client_flags.to_le_bytes());
        self.write_word(at + RecordHeader::EXPIRY_WORD, &word)
    }

    fn write_word(&self, at: u64, word: &[u8; 8]) -> io::Result<()> {
        self.backend.write_at(at, word)?;
        // A word is stored in place through the cache, and flushed where it must be durable.
        let op = if self.persist_each_write {
            MemoryOp::StoreClwb
        } else {
            MemoryOp::Store
        };
        self.pace(op, at, word.len());
        if self.persist_each_write {
            self.backend.persist(at, 8)?;
        }
        Ok(())
    }

    /// Writes the header of the segment at `at`, and an end mark in its first record slot
    /// (whatever the segment held before), durably.
    pub fn write_segment_header(&self, at: u64, header: &SegmentHeader) -> io::Result<()> {
        if !self.durable {
            return Ok(());
        }
        let mut bytes = header.encode().to_vec();
        bytes.extend_from_slice(&[0u8; 8]);
        debug_assert_eq!(bytes.len(), SEGMENT_HEADER_BYTES as usize + 8);
        self.write_durably(at, &bytes)
    }

    /// Writes the store's header, one sequence number newer, durably.
    pub fn write_store_header(&self, header: &mut StoreHeader) -> io::Result<()> {
        if !self.durable {
            return Ok(());
        }
        header.sequence += 1;
        self.write_durably(header.offset(), &header.to_bytes())
    }

    fn write_durably(&self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.backend.write_at(at, bytes)?;
        self.pace(MemoryOp::StoreClwb, at, bytes.len());
        self.backend.persist(at, bytes.len() as u64)
    }

    /// Makes every write so far durable.
    pub fn flush(&self) -> io::Result<()> {
        self.backend.flush()
    }

    /// When the device completes the accesses made since the last call (none without a
    /// throttle, or without accesses); the next access starts afresh.
    pub fn take_deadline(&self) -> Option<Instant> {
        self.busy_until.take()
    }

    /// Times the access on the throttled tier, after the accesses before it; the caller is not
    /// held (a server holds the answer instead, serving others meanwhile).
    fn pace(&self, op: MemoryOp, offset: u64, bytes: usize) {
        let Some(throttle) = &self.throttle else {
            return;
        };
        let now = Instant::now();
        let mut start = self.busy_until.get().map_or(now, |busy| busy.max(now));
        if let Some((gate, profile)) = &self.gate {
            if gate.may_hold() {
                start = throttle.instant_at(gate.admit_ns(throttle.ns_at(start)));
            }
            gate.charge(profile, op.kind(), bytes as u32);
        }
        // The shared model is asked now: an access booked at a later start would hold every
        // other tenant's accesses behind it (the model's channels serve in time order). The
        // time this tenant's own earlier accesses and its gate hold the access comes on top.
        let done = throttle.complete_access_at(now, op, offset, bytes as u32) + (start - now);
        self.busy_until.set(Some(done));
    }
}
