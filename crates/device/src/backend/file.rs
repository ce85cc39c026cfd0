//! Files and block devices through pread/pwrite (optionally O_DIRECT), made durable by
//! fdatasync.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{check_range, Backend};

/// O_DIRECT wants buffers, offsets and lengths aligned to the logical block size; 4 KiB covers
/// every device in use.
const DIRECT_ALIGN: usize = 4096;

/// A file or block device.
pub struct FileBackend {
    file: File,
    path: PathBuf,
    size_bytes: u64,
    /// Aligned bounce buffers for O_DIRECT, one per thread doing I/O at the moment (`None` for
    /// buffered I/O).
    direct: Option<Mutex<Vec<AlignedBuffer>>>,
    block_device: bool,
}

impl FileBackend {
    /// Opens `path` read-write by [`crate::secure_file`]'s rules. A regular file is created
    /// (mode 0600) or extended to `size_bytes` when given (preallocated, never shrunk); a block
    /// device has its own size, which `size_bytes`, if given, must not exceed. `direct` bypasses
    /// the page cache (O_DIRECT).
    pub fn open(path: &Path, size_bytes: Option<u64>, direct: bool) -> io::Result<FileBackend> {
        // A block device's size is its own: asked for, the size is checked below, not grown to.
        let flags = if direct { libc::O_DIRECT } else { 0 };
        let opened = crate::secure_file::open_storage(path, size_bytes, flags)?;
        let (file, is_block) = (opened.file, opened.device);
        let mut size = if is_block {
            block_device_size(&file).map_err(|error| annotate(path, "cannot size", error))?
        } else {
            file.metadata()?.len()
        };
        if let (Some(wanted), true) = (size_bytes, is_block) {
            if wanted > size {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: block device has {size} bytes, {wanted} asked",
                        path.display()
                    ),
                ));
            }
            size = wanted;
        }
        if size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: empty; give a size to create it", path.display()),
            ));
        }
        Ok(FileBackend {
            file,
            path: path.to_path_buf(),
            size_bytes: size,
            direct: direct.then(|| Mutex::new(Vec::new())),
            block_device: is_block,
        })
    }
}

/// The aligned window of `bounce` around `len` bytes at `offset` (O_DIRECT moves whole aligned
/// blocks), filled from the file when `load`: for a read, or a write that covers blocks only in
/// part. Returns the window's file offset, where the bytes start in it, and the window.
fn direct_window<'a>(
    file: &File,
    bounce: &'a mut AlignedBuffer,
    size: u64,
    offset: u64,
    len: usize,
    load: bool,
) -> io::Result<(u64, usize, &'a mut [u8])> {
    let align = DIRECT_ALIGN as u64;
    let start = offset / align * align;
    let end = (offset + len as u64).div_ceil(align) * align;
    let span = (end - start) as usize;
    bounce.ensure(span);
    let window = &mut bounce.slice_mut()[..span];
    if load {
        read_fully(file, window, start, size)?;
    }
    Ok((start, (offset - start) as usize, window))
}

/// `path: what: error`, keeping the error's kind.
fn annotate(path: &Path, what: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{what} {}: {error}", path.display()))
}

/// Reads `window` at `offset`, zero-filling what lies past the end of the file (the last block
/// of an unaligned file).
fn read_fully(file: &File, window: &mut [u8], offset: u64, size: u64) -> io::Result<()> {
    let mut done = 0;
    while done < window.len() {
        match file.read_at(&mut window[done..], offset + done as u64) {
            Ok(0) => {
                if offset + done as u64 >= size.next_multiple_of(DIRECT_ALIGN as u64) {
                    window[done..].fill(0);
                    return Ok(());
                }
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            Ok(count) => done += count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

fn block_device_size(file: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut handle = file.try_clone()?;
    handle.seek(SeekFrom::End(0))
}

impl FileBackend {
    /// Runs `work` with a bounce buffer of this backend's pool (made when every one is in use).
    fn with_bounce<T>(
        &self,
        pool: &Mutex<Vec<AlignedBuffer>>,
        work: impl FnOnce(&mut AlignedBuffer) -> io::Result<T>,
    ) -> io::Result<T> {
        let lock = || pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut bounce = lock().pop().unwrap_or_else(|| AlignedBuffer::new(1 << 20));
        let result = work(&mut bounce);
        lock().push(bounce);
        result
    }
}

/// True when O_DIRECT can move `len` bytes at `offset` to or from `address` without a bounce
/// buffer: everything aligned to the block.
fn direct_ready(address: *const u8, offset: u64, len: usize) -> bool {
    (address as usize).is_multiple_of(DIRECT_ALIGN)
        && offset.is_multiple_of(DIRECT_ALIGN as u64)
        && len.is_multiple_of(DIRECT_ALIGN)
}

impl Backend for FileBackend {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size_bytes, offset, buf.len() as u64)?;
        match &self.direct {
            Some(pool) if !direct_ready(buf.as_ptr(), offset, buf.len()) => {
                self.with_bounce(pool, |bounce| {
                    let (_, head, window) = direct_window(
                        &self.file,
                        bounce,
                        self.size_bytes,
                        offset,
                        buf.len(),
                        true,
                    )?;
                    buf.copy_from_slice(&window[head..head + buf.len()]);
                    Ok(())
                })
            }
            _ => self.file.read_exact_at(buf, offset),
        }
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size_bytes, offset, data.len() as u64)?;
        match &self.direct {
            Some(pool) if !direct_ready(data.as_ptr(), offset, data.len()) => {
                self.with_bounce(pool, |bounce| {
                    let align = DIRECT_ALIGN as u64;
                    let whole_blocks =
                        offset.is_multiple_of(align) && (data.len() as u64).is_multiple_of(align);
                    let (start, head, window) = direct_window(
                        &self.file,
                        bounce,
                        self.size_bytes,
                        offset,
                        data.len(),
                        !whole_blocks,
                    )?;
                    window[head..head + data.len()].copy_from_slice(data);
                    self.file.write_all_at(window, start)
                })
            }
            _ => self.file.write_all_at(data, offset),
        }
    }

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size_bytes, offset, len)?;
        if self.block_device || len == 0 {
            return Ok(());
        }
        // Punching a hole keeps the size; where the file system cannot, the data simply stays.
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on an open descriptor with in-range arguments has no memory effects.
        let _ = unsafe {
            libc::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&self.file),
                mode,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        Ok(())
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn may_block(&self) -> bool {
        true
    }

    /// Buffered: `preadv2(RWF_NOWAIT)`, which reads only what the page cache holds (a short
    /// read counts as would-block: the rest would wait). O_DIRECT always goes to the device.
    fn read_at_once(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size_bytes, offset, buf.len() as u64)?;
        if self.direct.is_some() || self.block_device {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: one iovec over `buf`, valid for writes of its length, on an open descriptor.
        let read = unsafe {
            libc::preadv2(
                std::os::fd::AsRawFd::as_raw_fd(&self.file),
                &iov,
                1,
                offset as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        match read {
            count if count == buf.len() as isize => Ok(()),
            count if count >= 0 => Err(io::ErrorKind::WouldBlock.into()),
            _ => {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    // EAGAIN: not cached; EOPNOTSUPP: the kernel or file system cannot say.
                    Some(libc::EAGAIN | libc::EOPNOTSUPP) => Err(io::ErrorKind::WouldBlock.into()),
                    _ => Err(error),
                }
            }
        }
    }

    fn writes_at_once(&self) -> bool {
        self.direct.is_none() && !self.block_device
    }

    fn describe(&self) -> String {
        let kind = if self.block_device {
            "blockdev"
        } else {
            "file"
        };
        let direct = if self.direct.is_some() {
            " (O_DIRECT)"
        } else {
            ""
        };
        format!("{kind} {}{direct}", self.path.display())
    }
}

/// A heap buffer aligned for O_DIRECT.
struct AlignedBuffer {
    words: Vec<Page>,
}

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Page([u8; DIRECT_ALIGN]);

impl AlignedBuffer {
    fn new(bytes: usize) -> AlignedBuffer {
        let mut buffer = AlignedBuffer { words: Vec::new() };
        buffer.ensure(bytes);
        buffer
    }

    fn ensure(&mut self, bytes: usize) {
        let pages = bytes.div_ceil(DIRECT_ALIGN);
        if self.words.len() < pages {
            self.words.resize(pages, Page([0; DIRECT_ALIGN]));
        }
    }

    fn slice_mut(&mut self) -> &mut [u8] {
        // SAFETY: `Page` is plain bytes with no padding; the vector's pages are contiguous.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.words.as_mut_ptr().cast::<u8>(),
                self.words.len() * DIRECT_ALIGN,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_and_direct_files_read_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backing");
        let file = FileBackend::open(&path, Some(1 << 20), false).unwrap();
        crate::backend::tests::exercise(&file);
        // Just written, so in the page cache: read at once (or, where the kernel cannot say,
        // refused as would-block, never wrong).
        let mut back = vec![0; 3];
        match file.read_at_once((1 << 20) - 3, &mut back) {
            Ok(()) => assert_eq!(back, b"end"),
            Err(error) => assert_eq!(error.kind(), io::ErrorKind::WouldBlock),
        }
        assert!(file.writes_at_once());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        drop(file);
        // Some file systems (tmpfs) refuse O_DIRECT; the unaligned path is what matters.
        match FileBackend::open(&path, None, true) {
            Ok(direct) => {
                let mut back = vec![0; 3];
                direct.read_at((1 << 20) - 3, &mut back).unwrap();
                assert_eq!(back, b"end");
                crate::backend::tests::exercise(&direct);
                let mut byte = [0];
                let error = direct.read_at_once(0, &mut byte).unwrap_err();
                assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
                // An aligned buffer moves without a bounce.
                let mut page = AlignedBuffer::new(DIRECT_ALIGN);
                let page = &mut page.slice_mut()[..DIRECT_ALIGN];
                page.fill(7);
                direct.write_at(8192, page).unwrap();
                page.fill(0);
                direct.read_at(8192, page).unwrap();
                assert!(page.iter().all(|&byte| byte == 7));
            }
            Err(error) => assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}"),
        }
    }

    #[test]
    fn missing_file_without_size_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent");
        let error = FileBackend::open(&path, None, false).err().unwrap();
        assert!(error.to_string().contains("absent"), "{error}");
    }
}
