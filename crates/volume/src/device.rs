//! One device of a volume's hierarchy, as the plan numbers it (docs/architecture.md, "The device
//! layer"): its storage, its slot table if it is a cache tier, the throttle that paces it like
//! a preset, and its queue depth. Every request thread reaches the device through here, so its
//! traffic is counted once and its outstanding operations are bounded once.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use heterarchy_device::backend::{Backend, QueueDepth, Throttle};

use crate::job::Mode;
use crate::slots::TierSlots;

/// A cache tier or the backing store.
pub struct Device {
    pub backend: Box<dyn Backend>,
    /// The tier's slots; `None` for the backing store.
    pub slots: Option<TierSlots>,
    /// The model the device is paced like, shared with every other user of the device.
    pub throttle: Option<Arc<Throttle>>,
    /// Bounds outstanding operations on devices that block (files, block devices); memory
    /// answers at once and has none.
    queue: Option<QueueDepth>,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    /// Operations that failed (not counting refusals to wait or out-of-range requests).
    errors: AtomicU64,
    /// The device said it is gone.
    gone: AtomicBool,
}

impl Device {
    /// `backend`, with its slot table if it is a cache tier; storage that may block gets a
    /// queue of `queue_depth`.
    pub fn new(
        backend: Box<dyn Backend>,
        slots: Option<TierSlots>,
        throttle: Option<Arc<Throttle>>,
        queue_depth: usize,
    ) -> Device {
        Device {
            queue: backend.may_block().then(|| QueueDepth::new(queue_depth)),
            backend,
            slots,
            throttle,
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            gone: AtomicBool::new(false),
        }
    }

    /// The slot table of a cache tier.
    pub fn slots(&self) -> &TierSlots {
        self.slots.as_ref().expect("a cache tier has slots")
    }

    fn queued<T>(&self, operation: impl FnOnce() -> T) -> T {
        match &self.queue {
            Some(queue) => queue.run(operation),
            None => operation(),
        }
    }

    /// Counts a failed operation's error (docs/architecture.md, "Faults"): a refusal to wait
    /// or an out-of-range request says nothing about the device; `NotFound` says it is gone.
    pub fn note<T>(&self, result: io::Result<T>) -> io::Result<T> {
        if let Err(error) = &result {
            match error.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::InvalidInput => {}
                kind => {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    if kind == io::ErrorKind::NotFound {
                        self.gone.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        result
    }

    /// Operations that failed since the volume opened.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// True once the device has said it is gone.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.note(self.queued(|| self.backend.read_at(offset, buf)))
    }

    /// Reads without waiting for the device, or fails with `WouldBlock` (see
    /// [`Backend::read_at_once`]).
    pub fn read_at_once(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.note(self.backend.read_at_once(offset, buf))?;
        self.read_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Reads as `mode` allows.
    pub fn read_in(&self, mode: Mode, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match mode {
            Mode::Wait => self.read_at(offset, buf),
            Mode::AtOnce => self.read_at_once(offset, buf),
        }
    }

    /// True when this device never makes a thread wait: writes land in memory (reads from a
    /// buffered file may still find the page cache without the data). A paced device counts
    /// as quick: its data moves at once, and the answer is held until the model says.
    pub fn is_quick(&self) -> bool {
        self.backend.writes_at_once()
    }

    pub fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        self.note(self.queued(|| self.backend.write_at(offset, data)))
    }

    pub fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        self.note(self.backend.persist(offset, len))
    }

    pub fn flush(&self) -> io::Result<()> {
        self.note(self.queued(|| self.backend.flush()))
    }

    pub fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.note(self.queued(|| self.backend.discard(offset, len)))
    }

    /// Bytes read and written since the volume opened.
    pub fn traffic(&self) -> (u64, u64) {
        (
            self.read_bytes.load(Ordering::Relaxed),
            self.write_bytes.load(Ordering::Relaxed),
        )
    }
}
