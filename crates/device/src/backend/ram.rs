//! Volatile storage in process memory: a cache tier that needs nothing underneath, or a scratch
//! backing store for tests.

use std::io;

use memmap2::{Advice, MmapMut};

use super::{Backend, SharedBytes};

/// Storage in anonymous memory, zero-filled, on huge pages where the kernel has them: a cache
/// read lands anywhere in it, and a TLB miss per 4 KiB read costs as much as the copy. Every
/// page is faulted in when it is made, so no request pays for a fault: a huge page's fault
/// zeroes 2 MiB and may stall for milliseconds compacting memory.
pub struct RamBackend {
    bytes: SharedBytes,
    /// Stands for memory whose contents outlive the process, so that what a persistent tier
    /// finds at restart can be tested from any bytes (the fuzz targets of on-media layouts).
    persistent: bool,
    /// Owns the memory `bytes` points into.
    _map: MmapMut,
}

impl RamBackend {
    /// `size_bytes` of zeroes.
    pub fn new(size_bytes: u64) -> io::Result<RamBackend> {
        let size = usize::try_from(size_bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{size_bytes} bytes do not fit in memory"),
            )
        })?;
        let bytes = MmapMut::map_anon(size).map_err(|error| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("cannot allocate {size_bytes} bytes: {error}"),
            )
        })?;
        // Only a hint: without transparent huge pages the mapping works the same.
        let _ = bytes.advise(Advice::HugePage);
        let mut map = bytes;
        map.fill(0);
        Ok(RamBackend {
            bytes: SharedBytes::of(&mut map),
            persistent: false,
            _map: map,
        })
    }

    /// `bytes`, standing for persistent memory found holding them: what a store reads at
    /// restart, without a file.
    pub fn persistent_holding(bytes: &[u8]) -> io::Result<RamBackend> {
        let mut backend = RamBackend::new(bytes.len() as u64)?;
        backend.bytes.copy_in(0, bytes)?;
        backend.persistent = true;
        Ok(backend)
    }
}

impl Backend for RamBackend {
    fn size_bytes(&self) -> u64 {
        self.bytes.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.bytes.copy_out(offset, buf)
    }

    fn append_to(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        self.bytes.append_out(offset, len, out)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.bytes.copy_in(offset, data)
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn is_persistent(&self) -> bool {
        self.persistent
    }

    fn describe(&self) -> String {
        format!("ram {} bytes", self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_was_written() {
        let ram = RamBackend::new(1 << 20).unwrap();
        crate::backend::tests::exercise(&ram);
        assert!(!ram.is_persistent());
    }
}
