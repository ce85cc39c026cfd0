//! Storage backends: the real storage a live volume or key-value store reads and writes (issue
//! 5, item 1; DESIGN.md "Device models": "live, real storage completes them on the real
//! clock").
//!
//! One small trait, [`Backend`], over byte-addressed storage of fixed size: RAM, a file or block
//! device (pread/pwrite, optional O_DIRECT, fdatasync on flush), and persistent memory through a
//! memory-mapped file (cache-line flush and fence on DAX, msync otherwise, with crash injection).
//! A [`Throttle`] paces any of them like a device preset, so a DRAM-backed file behaves like the
//! preset's device.

mod file;
mod pmem;
mod ram;
mod spec;
mod throttle;

use std::io;

pub use file::FileBackend;
pub use pmem::{CrashOutcome, PmemBackend};
pub use ram::RamBackend;
pub use spec::{open_backend, BackendSpec};
pub use throttle::{wait_until, Throttle};

/// Byte-addressed storage of a fixed size.
///
/// Writes are visible to later reads at once. They survive a crash of the process once written,
/// and a crash of the machine (or an injected one) once [`persist`](Backend::persist)ed or
/// [`flush`](Backend::flush)ed. Every offset and length is checked: out of range is an
/// `InvalidInput` error, never a panic.
pub trait Backend: Send {
    /// Size in bytes.
    fn size_bytes(&self) -> u64;

    /// Fills `buf` from byte `offset`.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Appends `len` bytes from `offset` to `out`. Memory-backed storage copies them straight
    /// from its bytes; the default reads them into zeroed room.
    fn append_to(&mut self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let start = out.len();
        out.resize(start + len, 0);
        let read = self.read_at(offset, &mut out[start..]);
        if read.is_err() {
            out.truncate(start);
        }
        read
    }

    /// Writes `data` at byte `offset`.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Writes `data` at byte `offset` in the way fastest for data not read back soon: on
    /// persistent memory, non-temporal stores that bypass the CPU cache (seed 000 §5.2.5: NT
    /// stores beat regular stores on random PM writes, Table 5.2). The default is
    /// [`write_at`](Backend::write_at).
    fn write_streaming(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_at(offset, data)
    }

    /// Makes `len` bytes from `offset` durable before anything written later: an ordering point
    /// (cache-line flush and fence on persistent memory). Storage whose durability comes only
    /// with [`flush`](Backend::flush) does nothing here.
    fn persist(&mut self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// Makes every completed write durable (fdatasync, msync, or a fence).
    fn flush(&mut self) -> io::Result<()>;

    /// Tells the storage that `len` bytes from `offset` are no longer needed; their contents
    /// are undefined afterwards. The default keeps them.
    fn discard(&mut self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// True when [`persist`](Backend::persist) costs about a store fence (persistent memory on
    /// DAX), so that a caller may make every small write durable before answering it.
    fn persist_is_cheap(&self) -> bool {
        false
    }

    /// True when the contents outlive the process (everything but RAM).
    fn is_persistent(&self) -> bool;

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

/// Reads `buf.len()` bytes at `offset` of memory-backed storage.
fn copy_out(bytes: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<()> {
    check_range(bytes.len() as u64, offset, buf.len() as u64)?;
    let start = offset as usize;
    buf.copy_from_slice(&bytes[start..start + buf.len()]);
    Ok(())
}

/// Appends `len` bytes at `offset` of memory-backed storage to `out`.
fn append_out(bytes: &[u8], offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
    check_range(bytes.len() as u64, offset, len as u64)?;
    let start = offset as usize;
    out.extend_from_slice(&bytes[start..start + len]);
    Ok(())
}

/// Writes `data` at `offset` of memory-backed storage.
fn copy_in(bytes: &mut [u8], offset: u64, data: &[u8]) -> io::Result<()> {
    check_range(bytes.len() as u64, offset, data.len() as u64)?;
    let start = offset as usize;
    bytes[start..start + data.len()].copy_from_slice(data);
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes, reads back and checks the bounds of any backend of at least 64 KiB.
    pub fn exercise(backend: &mut dyn Backend) {
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
