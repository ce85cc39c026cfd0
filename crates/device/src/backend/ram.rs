//! Volatile storage in process memory: a cache tier that needs nothing underneath, or a scratch
//! backing store for tests.

use std::io;

use super::{check_range, Backend};

/// Storage in a zero-filled buffer (the pages come from the OS on first touch).
pub struct RamBackend {
    bytes: Vec<u8>,
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
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(size).map_err(|_| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("cannot allocate {size_bytes} bytes"),
            )
        })?;
        bytes.resize(size, 0);
        Ok(RamBackend { bytes })
    }
}

impl Backend for RamBackend {
    fn size_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size_bytes(), offset, buf.len() as u64)?;
        let start = offset as usize;
        buf.copy_from_slice(&self.bytes[start..start + buf.len()]);
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size_bytes(), offset, data.len() as u64)?;
        let start = offset as usize;
        self.bytes[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn is_persistent(&self) -> bool {
        false
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
        let mut ram = RamBackend::new(1 << 20).unwrap();
        crate::backend::tests::exercise(&mut ram);
        assert!(!ram.is_persistent());
    }
}
