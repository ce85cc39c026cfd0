//! A block device as a server exports it (docs/architecture.md, "Serving"): read, write
//! (with FUA), write zeroes, trim, flush, by blocking calls from any thread. The NBD server
//! carries out such calls on its I/O workers, many in flight at once; the cached volume, which
//! has a faster path of its own, implements it too.

use std::io;

/// What a block export offers its clients.
pub trait BlockDevice: Send + Sync {
    /// The export name clients ask for.
    fn name(&self) -> &str;
    fn size_bytes(&self) -> u64;
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// With `fua`, durable before it returns.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()>;
    /// Writes `len` zero bytes at `offset`, a block-sized piece at a time.
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        const PIECE: u64 = 64 * 1024;
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
