//! Storage backends: the real storage a live volume or key-value store reads and writes
//! (docs/architecture.md, "The device layer").
//!
//! One small trait, [`Backend`], over byte-addressed storage of fixed size: RAM, a file or block
//! device (pread/pwrite, optional O_DIRECT, fdatasync on flush), and persistent memory through a
//! memory-mapped file (cache-line flush and fence on DAX, msync otherwise, with crash injection).
//! A [`Throttle`] paces any of them like a device preset, so a DRAM-backed file behaves like the
//! preset's device.
//!
//! Storage is used from many threads at once, as a device is (docs/architecture.md, "The device
//! layer"): every method takes `&self`, and one backend (and one throttle, and one
//! [`QueueDepth`]) serves every thread that reaches the device. Accesses to disjoint bytes never
//! interfere; like a real device, storage does not order accesses to the same bytes, so
//! concurrent accesses that overlap, one of them a write, leave what is read or stored
//! unspecified: callers order them (a volume does, line by line).

pub mod btt;
mod campaign;
mod crash;
mod fault;
mod file;
mod paced;
mod pmem;
mod queue;
mod ram;
mod spec;
mod throttle;
mod unflushed;

use std::io;
use std::sync::Arc;

pub use campaign::{run_crash_campaign, CampaignTally, Damage, FIRST_SEED_VAR};
pub use crash::{self_described_version, self_describing_block, CrashAfter, CrashBudget};
pub use fault::{with_faults, FaultControl, FaultSpec, FaultyBackend};
/// Config fields holding a [`FaultSpec`].
pub mod fault_spec {
    pub use super::fault::deserialize_optional;
}
pub use file::FileBackend;
pub use paced::PacedBackend;
pub use pmem::{CrashOutcome, PmemBackend};
pub use queue::QueueDepth;
pub use ram::RamBackend;
pub use spec::{open_backend, open_backend_paced, BackendSpec};
pub use throttle::{precise_sleeps, wait_until, Throttle, Throttles};

/// Byte-addressed storage of a fixed size.
///
/// Writes are visible to later reads at once. They survive a crash of the process once written,
/// and a crash of the machine (or an injected one) once [`persist`](Backend::persist)ed or
/// [`flush`](Backend::flush)ed. Every offset and length is checked: out of range is an
/// `InvalidInput` error, never a panic. Methods take `&self`: see the module docs for what
/// concurrent callers may expect.
pub trait Backend: Send + Sync {
    /// Size in bytes.
    fn size_bytes(&self) -> u64;

    /// Fills `buf` from byte `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Appends `len` bytes from `offset` to `out`. Memory-backed storage copies them straight
    /// from its bytes; the default reads them into zeroed room.
    fn append_to(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let start = out.len();
        out.resize(start + len, 0);
        let read = self.read_at(offset, &mut out[start..]);
        if read.is_err() {
            out.truncate(start);
        }
        read
    }

    /// Writes `data` at byte `offset`.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Writes `data` at byte `offset` in the way fastest for data not read back soon: on
    /// persistent memory, non-temporal stores that bypass the CPU cache (seed 000 §5.2.5: NT
    /// stores beat regular stores on random PM writes, Table 5.2). The default is
    /// [`write_at`](Backend::write_at).
    fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_at(offset, data)
    }

    /// Writes `data` at `offset` and makes it durable before anything written later: a
    /// [`write_streaming`](Backend::write_streaming) then a [`persist`](Backend::persist) by
    /// default; persistent memory on DAX needs only the streaming stores' fence.
    fn write_persisted(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_streaming(offset, data)?;
        self.persist(offset, data.len() as u64)
    }

    /// Makes `len` bytes from `offset` durable before anything written later: an ordering point
    /// (cache-line flush and fence on persistent memory). Storage whose durability comes only
    /// with [`flush`](Backend::flush) does nothing here.
    fn persist(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// Makes every completed write durable (fdatasync, msync, or a fence).
    fn flush(&self) -> io::Result<()>;

    /// Tells the storage that `len` bytes from `offset` are no longer needed; their contents
    /// are undefined afterwards. The default keeps them.
    fn discard(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// True when [`persist`](Backend::persist) costs about a store fence (persistent memory on
    /// DAX), so that a caller may make every small write durable before answering it.
    fn persist_is_cheap(&self) -> bool {
        false
    }

    /// True when the contents outlive the process (everything but RAM).
    fn is_persistent(&self) -> bool;

    /// True when an operation may wait on a device (files and block devices); memory answers
    /// at once, so nothing queues in front of it.
    fn may_block(&self) -> bool {
        false
    }

    /// [`read_at`](Backend::read_at) if it can be done without waiting for a device, else an
    /// error of kind `WouldBlock` having read nothing the caller may rely on: for a thread that
    /// must not wait (an event loop), which then hands the work to one that may. Memory always
    /// reads; a buffered file reads what the page cache holds; O_DIRECT always would block.
    fn read_at_once(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.may_block() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.read_at(offset, buf)
    }

    /// True when a write lands at once in memory (the process's, or the page cache), as it
    /// does for everything but O_DIRECT and block devices; making it durable is another matter.
    fn writes_at_once(&self) -> bool {
        !self.may_block()
    }

    /// What it is, for logs and stats: `ram 64 MiB`, `file /path`, ...
    fn describe(&self) -> String;
}

/// Checks that `len` bytes from `offset` lie within `size`.
pub fn check_range(size: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{len} bytes at offset {offset} run past the end ({size} bytes)"),
        )),
    }
}

/// Storage behind a pointer is storage: an `Arc` of a backend (a test keeps a handle to crash
/// what the code under test uses) or a `Box` of one (a backend chosen at run time, wrapped).
macro_rules! forward_backend {
    ($pointer:ident) => {
        impl<B: Backend + ?Sized> Backend for $pointer<B> {
            fn size_bytes(&self) -> u64 {
                (**self).size_bytes()
            }
            fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
                (**self).read_at(offset, buf)
            }
            fn append_to(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
                (**self).append_to(offset, len, out)
            }
            fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
                (**self).write_at(offset, data)
            }
            fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
                (**self).write_streaming(offset, data)
            }
            fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
                (**self).persist(offset, len)
            }
            fn flush(&self) -> io::Result<()> {
                (**self).flush()
            }
            fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
                (**self).discard(offset, len)
            }
            fn persist_is_cheap(&self) -> bool {
                (**self).persist_is_cheap()
            }
            fn is_persistent(&self) -> bool {
                (**self).is_persistent()
            }
            fn may_block(&self) -> bool {
                (**self).may_block()
            }
            fn read_at_once(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
                (**self).read_at_once(offset, buf)
            }
            fn writes_at_once(&self) -> bool {
                (**self).writes_at_once()
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
        }
    };
}
forward_backend!(Arc);
forward_backend!(Box);

/// Memory that many threads read and write through shared references: a mapping's bytes,
/// reached by raw pointer so that no `&mut [u8]` is ever formed over bytes another thread may
/// be using. Overlapping accesses are the caller's to order (module docs).
struct SharedBytes {
    base: *mut u8,
    len: usize,
}

// SAFETY: the bytes are plain memory owned by the mapping beside it for as long as the backend
// lives; every access is bounds-checked and copies bytes, never handing out references.
unsafe impl Send for SharedBytes {}
// SAFETY: as above; concurrent overlapping accesses yield unspecified bytes, not unsafety of
// any Rust object, since no reference into the bytes outlives a copy.
unsafe impl Sync for SharedBytes {}

impl SharedBytes {
    /// The bytes of `map`, which must outlive the value.
    fn of(map: &mut memmap2::MmapMut) -> SharedBytes {
        SharedBytes::raw(map.as_mut_ptr(), map.len())
    }

    /// `len` bytes mapped at `base`, which must stay mapped as long as the value lives.
    fn raw(base: *mut u8, len: usize) -> SharedBytes {
        SharedBytes { base, len }
    }

    fn len(&self) -> u64 {
        self.len as u64
    }

    /// Reads `buf.len()` bytes at `offset`.
    fn copy_out(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len() as u64)?;
        // SAFETY: the range was checked to lie within the mapping; `buf` is caller memory that
        // cannot overlap the mapping's bytes through a shared reference.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(offset as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        Ok(())
    }

    /// Appends `len` bytes at `offset` to `out`.
    fn append_out(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        check_range(self.len(), offset, len as u64)?;
        out.reserve(len);
        let start = out.len();
        // SAFETY: the source range was checked; `reserve` made room for `len` more bytes, which
        // are initialized by the copy before the length grows.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(offset as usize),
                out.as_mut_ptr().add(start),
                len,
            );
            out.set_len(start + len);
        }
        Ok(())
    }

    /// Writes `data` at `offset`.
    fn copy_in(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.len(), offset, data.len() as u64)?;
        // SAFETY: the range was checked to lie within the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(offset as usize), data.len())
        };
        Ok(())
    }

    /// A raw view of `len` bytes at `offset`, already bounds-checked by the caller, for copies
    /// that need the address (non-temporal stores, cache-line flushes).
    fn range(&self, offset: u64, len: usize) -> *mut u8 {
        debug_assert!(offset + len as u64 <= self.len());
        // SAFETY: in bounds, as the caller checked.
        unsafe { self.base.add(offset as usize) }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes, reads back and checks the bounds of any backend of at least 64 KiB.
    pub fn exercise(backend: &dyn Backend) {
        let size = backend.size_bytes();
        assert!(size >= 65_536);
        let pattern: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        backend.write_at(1234, &pattern).unwrap();
        backend.write_at(size - 3, b"end").unwrap();
        backend.persist(1234, pattern.len() as u64).unwrap();
        backend.flush().unwrap();
        let mut back = vec![0; pattern.len()];
        backend.read_at(1234, &mut back).unwrap();
        assert_eq!(back, pattern);
        let mut tail = [0; 3];
        backend.read_at(size - 3, &mut tail).unwrap();
        assert_eq!(&tail, b"end");
        let error = backend.write_at(size - 2, b"end").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        let error = backend.read_at(u64::MAX, &mut tail).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        let mut appended = b"head".to_vec();
        backend
            .append_to(1234, pattern.len(), &mut appended)
            .unwrap();
        assert_eq!(&appended[..4], b"head");
        assert_eq!(&appended[4..], &pattern[..]);
        let error = backend.append_to(size - 2, 3, &mut appended).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            appended.len(),
            4 + pattern.len(),
            "a failed append adds nothing"
        );
    }

    #[test]
    fn ranges_past_the_end_are_rejected() {
        assert!(check_range(100, 0, 100).is_ok());
        assert!(check_range(100, 100, 0).is_ok());
        assert!(check_range(100, 1, 100).is_err());
        assert!(check_range(100, u64::MAX, 2).is_err());
    }
}
