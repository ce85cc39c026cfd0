//! A block device as a server exports it (docs/architecture.md, "Serving"): read, write
//! (with FUA), write zeroes, trim, flush, by blocking calls from any thread. The NBD server
//! carries out such calls on its I/O workers, many in flight at once. The PM block devices
//! (`heterarchy_blockdev`) and the cached volume, which has a faster path of its own
//! (`heterarchy_volume`), implement it; it lives here, below both, so that neither depends on
//! the other.

use std::io;

/// What a block export offers its clients.
pub trait BlockDevice: Send + Sync {
    /// The export name clients ask for.
    fn name(&self) -> &str;
    fn size_bytes(&self) -> u64;
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// With `fua`, durable before it returns.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()>;
    /// Writes `len` zero bytes at `offset`, a block-sized piece at a time; a range that runs
    /// past the end is refused before any piece is written.
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        const PIECE: u64 = 64 * 1024;
        crate::backend::check_range(self.size_bytes(), offset, len)?;
        let zeroes = vec![0u8; PIECE.min(len) as usize];
        let mut done = 0;
        while done < len {
            let part = PIECE.min(len - done);
            self.write(offset + done, &zeroes[..part as usize], fua)?;
            done += part;
        }
        Ok(())
    }
    /// Tells the device `len` bytes at `offset` are no longer needed.
    fn trim(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Makes every write completed before it durable.
    fn flush(&self) -> io::Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Bytes in memory, counting the writes that reach them.
    struct Memory {
        bytes: Mutex<Vec<u8>>,
        writes: Mutex<usize>,
    }

    impl BlockDevice for Memory {
        fn name(&self) -> &str {
            "memory"
        }
        fn size_bytes(&self) -> u64 {
            self.bytes.lock().unwrap().len() as u64
        }
        fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            let bytes = self.bytes.lock().unwrap();
            buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write(&self, offset: u64, data: &[u8], _fua: bool) -> io::Result<()> {
            crate::backend::check_range(self.size_bytes(), offset, data.len() as u64)?;
            *self.writes.lock().unwrap() += 1;
            let mut bytes = self.bytes.lock().unwrap();
            bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn trim(&self, _offset: u64, _len: u64) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_zeroes_past_the_end_writes_nothing() {
        let device = Memory {
            bytes: Mutex::new(vec![7u8; 256 * 1024]),
            writes: Mutex::new(0),
        };
        let error = device
            .write_zeroes(64 * 1024, 256 * 1024, false)
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(*device.writes.lock().unwrap(), 0);
        assert!(device.bytes.lock().unwrap().iter().all(|&byte| byte == 7));
        device
            .write_zeroes(64 * 1024, 128 * 1024 + 1, false)
            .unwrap();
        let bytes = device.bytes.lock().unwrap();
        assert_eq!(bytes[64 * 1024 - 1], 7);
        assert!(bytes[64 * 1024..192 * 1024 + 1]
            .iter()
            .all(|&byte| byte == 0));
        assert_eq!(bytes[192 * 1024 + 1], 7);
    }
}
