//! Persistent memory through a memory-mapped file (docs/architecture.md, "The device
//! layer": persistence by cache-line flush and fence, msync where the file is not on DAX, and crash
//! injection that drops unflushed lines and tears unflushed 8-byte words).
//!
//! The file is opened and created by [`crate::secure_file`]'s rules (mode 0600, no symbolic
//! links, preallocated) and mapped as PMDK's `pmem_map_file` maps, which then tells how stores
//! are made durable (docs/pm-block-device.md, "Persistence by file system"):
//!
//! - `MAP_SHARED_VALIDATE | MAP_SYNC` first: the kernel accepts it only on DAX (ext4 or xfs
//!   mounted `dax`), and then keeps the file's metadata durable at every write fault, so stores
//!   reach the persistence domain once their cache lines are flushed and fenced, as on Optane PM
//!   in App Direct mode (seed 000 §2.2);
//! - refused (EOPNOTSUPP or EINVAL: any other file system), a plain `MAP_SHARED` mapping,
//!   persisted by `msync(MS_SYNC)` of the page-aligned range, since the page cache stands
//!   between the mapping and the file — except on tmpfs (`/dev/shm`), which has no power-cut
//!   durability to lose: there the persist is the cache-line flush and fence, the cost real PM
//!   would charge, and `msync` would add nothing;
//! - as with PMDK, `PMEM_IS_PMEM_FORCE=1` in the environment flushes lines on any file.
//!
//! [`Backend::describe`] says which of these a backend got.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::unflushed::UnflushedPages;
use super::{check_range, Backend, SharedBytes};

/// The CPU's persistence unit.
const CACHE_LINE: u64 = 64;

/// How stores are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PmemPersistence {
    /// Cache-line flush and store fence: the file is mapped `MAP_SYNC` on DAX, lies on tmpfs,
    /// or `PMEM_IS_PMEM_FORCE=1` says to (module docs).
    Dax,
    /// msync: the page cache stands between the mapping and the file.
    Msync,
    /// Crash injection: the shadow of persisted lines is what a crash leaves, so a persist is
    /// recorded there and goes no further, cheap and line by line as on DAX.
    Emulated,
}

/// What an injected crash did to the lines written since their last persist.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashOutcome {
    /// Lines whose new contents survived whole.
    pub kept_lines: u64,
    /// Lines that went back to their last persisted contents.
    pub dropped_lines: u64,
    /// Lines that survived in part, 8-byte word by word.
    pub torn_lines: u64,
}

/// The image a machine crash would leave: the persisted contents, and which lines have been
/// written since.
struct CrashShadow {
    persisted: Vec<u8>,
    unpersisted_lines: BTreeSet<u64>,
    /// Crashed and not restarted: writes and persists fail, as on a machine without power.
    stopped: bool,
}

/// A memory-mapped file standing for persistent memory.
pub struct PmemBackend {
    bytes: SharedBytes,
    /// Owns the mapping `bytes` points into.
    map: Mapping,
    _file: File,
    path: PathBuf,
    persistence: PmemPersistence,
    /// Why the file got its persistence: for [`Backend::describe`].
    reason: &'static str,
    /// How this CPU writes a line back.
    line_flush: LineFlush,
    /// Whether this CPU streams 32 bytes a store (AVX).
    wide_stores: bool,
    /// Present once crash injection is on; every write and persist updates it.
    crash: Option<Mutex<CrashShadow>>,
    /// Pages stored to through the CPU cache since the last flush: what a flush writes back
    /// when lines are flushed (not msync, which the kernel tracks).
    unflushed: UnflushedPages,
}

impl PmemBackend {
    /// Maps `path`, created or extended to `size_bytes` (never shrunk, preallocated),
    /// read-write and shared (module docs). A block or character device is mapped as it is and
    /// must hold `size_bytes`.
    pub fn open(path: &Path, size_bytes: u64) -> io::Result<PmemBackend> {
        if size_bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: persistent memory of 0 bytes", path.display()),
            ));
        }
        let opened = crate::secure_file::open_storage(path, Some(size_bytes), 0)?;
        let file = opened.file;
        if opened.device {
            let held = {
                use std::io::{Seek, SeekFrom};
                (&file).seek(SeekFrom::End(0))?
            };
            if held < size_bytes {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: the device holds {held} bytes, {size_bytes} asked",
                        path.display()
                    ),
                ));
            }
        }
        let length = usize::try_from(size_bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mapping too large"))?;
        let (mut map, synchronous) = Mapping::new(&file, length).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot map {}: {error}", path.display()),
            )
        })?;
        let forced = std::env::var("PMEM_IS_PMEM_FORCE").is_ok_and(|value| value == "1");
        let line_flush_works = cfg!(target_arch = "x86_64");
        let (persistence, reason) = if synchronous && line_flush_works {
            (PmemPersistence::Dax, "dax: MAP_SYNC, cache-line flush")
        } else if forced && line_flush_works {
            (
                PmemPersistence::Dax,
                "PMEM_IS_PMEM_FORCE=1: cache-line flush",
            )
        } else if on_tmpfs(&file) {
            (
                PmemPersistence::Dax,
                "tmpfs: cache-line flush, no power-cut durability",
            )
        } else {
            (PmemPersistence::Msync, "msync")
        };
        Ok(PmemBackend {
            bytes: map.shared_bytes(),
            map,
            _file: file,
            path: path.to_path_buf(),
            persistence,
            reason,
            line_flush: LineFlush::detect(),
            wide_stores: has_avx(),
            crash: None,
            unflushed: UnflushedPages::new(size_bytes),
        })
    }

    /// From now on, remembers what was persisted so that [`crash`](Self::crash) can lose what
    /// was not. Costs a copy of the whole mapping. The backend then stands for persistent memory
    /// on DAX whatever the file system: persists are cheap and line by line, and only a crash
    /// tells what reached the medium.
    pub fn enable_crash_injection(&mut self) {
        self.persistence = PmemPersistence::Emulated;
        let mut persisted = vec![0; self.bytes.len() as usize];
        self.bytes
            .copy_out(0, &mut persisted)
            .expect("the whole mapping is in range");
        self.crash = Some(Mutex::new(CrashShadow {
            persisted,
            unpersisted_lines: BTreeSet::new(),
            stopped: false,
        }));
    }

    fn shadow(&self) -> Option<MutexGuard<'_, CrashShadow>> {
        self.crash.as_ref().map(|shadow| {
            shadow
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        })
    }

    /// Simulates a machine crash: each line written since its last persist keeps its new
    /// contents, loses them, or tears 8-byte word by word, at random from `seed`. The mapping
    /// (and file) then hold the image a restart would find. Without crash injection enabled,
    /// nothing is lost. With it, every write and persist is whole before or after the crash
    /// whatever threads are writing, and after it they fail until [`restart`](Self::restart):
    /// threads of the crashed machine cannot write into the next one's memory.
    pub fn crash(&self, seed: u64) -> io::Result<CrashOutcome> {
        let mut outcome = CrashOutcome::default();
        let Some(mut shadow) = self.shadow() else {
            return Ok(outcome);
        };
        shadow.stopped = true;
        let mut random = Xoshiro256PlusPlus::seed_from_u64(seed);
        let size = self.bytes.len() as usize;
        for &line in &shadow.unpersisted_lines {
            let start = (line * CACHE_LINE) as usize;
            let end = (start + CACHE_LINE as usize).min(size);
            match random.gen_range(0..3) {
                0 => outcome.kept_lines += 1,
                1 => {
                    self.bytes
                        .copy_in(start as u64, &shadow.persisted[start..end])?;
                    outcome.dropped_lines += 1;
                }
                _ => {
                    for word in (start..end).step_by(8) {
                        let word_end = (word + 8).min(end);
                        if random.gen_bool(0.5) {
                            self.bytes
                                .copy_in(word as u64, &shadow.persisted[word..word_end])?;
                        }
                    }
                    outcome.torn_lines += 1;
                }
            }
        }
        shadow.unpersisted_lines.clear();
        let shadow = &mut *shadow;
        self.bytes.copy_out(0, &mut shadow.persisted)?;
        self.map.sync(0, self.bytes.len() as usize)?;
        Ok(outcome)
    }

    /// Powers the machine on again after a [`crash`](Self::crash): writes and persists work.
    pub fn restart(&self) {
        if let Some(mut shadow) = self.shadow() {
            shadow.stopped = false;
        }
    }

    /// Runs `write`, which changes `len` bytes at `offset`, and notes the lines unpersisted;
    /// with crash injection on, under the shadow's lock and only while the machine runs.
    fn written(
        &self,
        offset: u64,
        len: u64,
        write: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        if self.crash.is_none() {
            // No shadow to keep: the common case, on every write of the BTT's path.
            write()?;
            self.unflushed.mark(offset, len);
            return Ok(());
        }
        let shadow = self.running_shadow()?;
        write()?;
        self.unflushed.mark(offset, len);
        if let Some(mut shadow) = shadow {
            if len > 0 {
                let first = offset / CACHE_LINE;
                let last = (offset + len - 1) / CACHE_LINE;
                shadow.unpersisted_lines.extend(first..=last);
            }
        }
        Ok(())
    }

    /// With crash injection on, the shadow, locked for the caller's whole operation, or an
    /// error once the machine has crashed; `None` without crash injection.
    fn running_shadow(&self) -> io::Result<Option<MutexGuard<'_, CrashShadow>>> {
        match self.shadow() {
            Some(shadow) if shadow.stopped => Err(crashed()),
            shadow => Ok(shadow),
        }
    }

    /// Runs `persist` for `len` bytes at `offset` and copies the lines into the shadow; with
    /// crash injection on, under the shadow's lock and only while the machine runs.
    fn persisted(
        &self,
        offset: u64,
        len: u64,
        persist: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        if self.crash.is_none() {
            return persist();
        }
        let shadow = self.running_shadow()?;
        persist()?;
        let Some(mut shadow) = shadow else {
            return Ok(());
        };
        let first = offset / CACHE_LINE;
        let end = (offset + len).div_ceil(CACHE_LINE);
        let lines: Vec<u64> = shadow
            .unpersisted_lines
            .range(first..end)
            .copied()
            .collect();
        let size = self.bytes.len() as usize;
        for line in lines {
            let start = (line * CACHE_LINE) as usize;
            let stop = (start + CACHE_LINE as usize).min(size);
            self.bytes
                .copy_out(start as u64, &mut shadow.persisted[start..stop])
                .expect("a line of the mapping is in range");
            shadow.unpersisted_lines.remove(&line);
        }
        Ok(())
    }
}

fn crashed() -> io::Error {
    io::Error::other("the persistent memory crashed (injected) and was not restarted")
}

/// A shared read-write mapping of a whole file (or its first `len` bytes), unmapped when
/// dropped.
struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory, valid until dropped; it hands out no references.
unsafe impl Send for Mapping {}
// SAFETY: as above; its only methods are msync and the pointer, which are thread-safe.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` shared: synchronously (`MAP_SYNC`, true in the answer) where
    /// the kernel can, plainly otherwise.
    fn new(file: &File, len: usize) -> io::Result<(Mapping, bool)> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        match Mapping::map(file, len, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC) {
            Ok(map) => return Ok((map, true)),
            // Not DAX (EOPNOTSUPP), or a kernel without MAP_SYNC (EINVAL): map plainly.
            Err(error) if matches!(error.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => {
            }
            Err(error) => return Err(error),
        }
        Ok((Mapping::map(file, len, libc::MAP_SHARED)?, false))
    }

    fn map(file: &File, len: usize, flags: libc::c_int) -> io::Result<Mapping> {
        // SAFETY: a new mapping of an open descriptor, at an address the kernel picks; the file
        // is this user's own (secure_file), and changed behind the server's back only by it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                std::os::fd::AsRawFd::as_raw_fd(file),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            base: base.cast(),
            len,
        })
    }

    fn shared_bytes(&mut self) -> SharedBytes {
        SharedBytes::raw(self.base, self.len)
    }

    /// `msync(MS_SYNC)` of the pages holding `len` bytes at `offset`.
    fn sync(&self, offset: usize, len: usize) -> io::Result<()> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|page| page.is_power_of_two())
            .unwrap_or(4096);
        let start = offset / page * page;
        let end = (offset + len).min(self.len);
        if end <= start {
            return Ok(());
        }
        // SAFETY: the page-aligned range lies within the mapping.
        let done = unsafe { libc::msync(self.base.add(start).cast(), end - start, libc::MS_SYNC) };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `map`, no longer used (SharedBytes dies with it).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// True when `file` lies on tmpfs (`/dev/shm`): memory, with nothing to lose at a power cut
/// that a flush could have saved.
fn on_tmpfs(file: &File) -> bool {
    // SAFETY: statfs is plain data, filled by fstatfs on an open descriptor.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let done = unsafe { libc::fstatfs(std::os::fd::AsRawFd::as_raw_fd(file), &mut stat) };
    // The two are of different integer types on different targets.
    #[allow(clippy::unnecessary_cast)]
    let tmpfs = stat.f_type as i64 == libc::TMPFS_MAGIC as i64;
    done == 0 && tmpfs
}

/// Flushes the CPU cache lines of `len` bytes from `start` (mapped memory) and fences.
#[cfg(target_arch = "x86_64")]
fn flush_lines(start: *const u8, len: usize, how: LineFlush) {
    use std::arch::asm;
    use std::arch::x86_64::{_mm_clflush, _mm_sfence};
    let first = start as usize / CACHE_LINE as usize * CACHE_LINE as usize;
    let end = start as usize + len;
    for line in (first..end).step_by(CACHE_LINE as usize) {
        // SAFETY: every line written back overlaps the mapped range; the instructions write a
        // cache line back to memory (clflushopt and clflush also drop it from the cache) and
        // have no other effect on memory; the CPU has them (LineFlush::detect).
        unsafe {
            match how {
                LineFlush::Clwb => {
                    asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags))
                }
                LineFlush::ClflushOpt => {
                    asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags))
                }
                LineFlush::Clflush => _mm_clflush(line as *const u8),
            }
        }
    }
    // SAFETY: a fence has no memory-safety preconditions.
    unsafe { _mm_sfence() };
}

#[cfg(not(target_arch = "x86_64"))]
fn flush_lines(_start: *const u8, _len: usize, _how: LineFlush) {}

#[cfg(target_arch = "x86_64")]
fn has_avx() -> bool {
    std::arch::is_x86_feature_detected!("avx")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx() -> bool {
    false
}

/// How a cache line is written back to persistent memory: clwb keeps the line cached,
/// clflushopt drops it without ordering against other flushes, clflush (which every x86-64 CPU
/// has) drops it and orders; each later fenced once for the whole range (seed 000 §2.2's
/// persist: flush, then fence). The fastest this CPU has, as PMDK picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineFlush {
    Clwb,
    ClflushOpt,
    Clflush,
}

impl LineFlush {
    #[cfg(target_arch = "x86_64")]
    fn detect() -> LineFlush {
        // CPUID leaf 7, sub-leaf 0: EBX bit 24 is CLWB, bit 23 CLFLUSHOPT.
        // SAFETY: leaf 7 exists on every x86-64 CPU this runs on; CPUID has no side effects.
        // (Safe to call from Rust 1.87 on; the workspace builds with older ones too.)
        #[allow(unused_unsafe)]
        let features = unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.ebx;
        if features & (1 << 24) != 0 {
            LineFlush::Clwb
        } else if features & (1 << 23) != 0 {
            LineFlush::ClflushOpt
        } else {
            LineFlush::Clflush
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn detect() -> LineFlush {
        LineFlush::Clflush
    }
}

/// Copies `data` to `target` (mapped memory with room for it) with non-temporal stores where
/// the target is aligned for them — 32 bytes at a time when the CPU has AVX (`wide`), else 16
/// — regular stores at the unaligned edges, then a store fence so the weakly ordered NT stores
/// come before anything written later. Returns how many bytes at the front and at the back
/// went through the cache (they need writing back to be durable).
///
/// # Safety
/// `target..target + data.len()` must be valid for writes; `wide` only where the CPU has AVX.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(target: *mut u8, data: &[u8], wide: bool) -> (usize, usize) {
    use std::arch::x86_64::_mm_sfence;
    let unit = if wide { 32 } else { 16 };
    let head = target.align_offset(unit).min(data.len());
    std::ptr::copy_nonoverlapping(data.as_ptr(), target, head);
    let body = (data.len() - head) / unit * unit;
    let (to, from) = (target.add(head), &data[head..head + body]);
    if wide {
        stream_avx(to, from);
    } else {
        stream_sse(to, from);
    }
    let tail = head + body;
    std::ptr::copy_nonoverlapping(data.as_ptr().add(tail), target.add(tail), data.len() - tail);
    _mm_sfence();
    (head, data.len() - tail)
}

/// Streams `data` (a multiple of 16 bytes) to 16-byte-aligned `target`, a cache line (four
/// stores) per turn where it can: a plain loop, fewer instructions than an iterator adapter.
///
/// # Safety
/// As [`stream_copy`]'s, with `target` 16-byte aligned.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_sse(target: *mut u8, data: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    // The source loads are unaligned by design.
    let store = |at: usize| {
        let value = _mm_loadu_si128(data.as_ptr().add(at).cast::<__m128i>());
        _mm_stream_si128(target.add(at).cast::<__m128i>(), value);
    };
    let mut at = 0;
    while at + 64 <= data.len() {
        store(at);
        store(at + 16);
        store(at + 32);
        store(at + 48);
        at += 64;
    }
    while at < data.len() {
        store(at);
        at += 16;
    }
}

/// [`stream_sse`] 32 bytes a store, two to a cache line.
///
/// # Safety
/// As [`stream_copy`]'s, with `target` 32-byte aligned, `data` a multiple of 32 bytes, and AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_avx(target: *mut u8, data: &[u8]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    let store = |at: usize| {
        let value = _mm256_loadu_si256(data.as_ptr().add(at).cast::<__m256i>());
        _mm256_stream_si256(target.add(at).cast::<__m256i>(), value);
    };
    let mut at = 0;
    while at + 128 <= data.len() {
        store(at);
        store(at + 32);
        store(at + 64);
        store(at + 96);
        at += 128;
    }
    while at < data.len() {
        store(at);
        at += 32;
    }
}

/// # Safety
/// `target..target + data.len()` must be valid for writes.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_copy(target: *mut u8, data: &[u8], _wide: bool) -> (usize, usize) {
    std::ptr::copy_nonoverlapping(data.as_ptr(), target, data.len());
    (data.len(), 0)
}

impl Backend for PmemBackend {
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
        self.written(offset, data.len() as u64, || {
            self.bytes.copy_in(offset, data)
        })
    }

    fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size_bytes(), offset, data.len() as u64)?;
        self.written(offset, data.len() as u64, || {
            // SAFETY: the range was checked to lie within the mapping.
            unsafe { stream_copy(self.bytes.range(offset, data.len()), data, self.wide_stores) };
            Ok(())
        })
    }

    fn write_persisted(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.persistence != PmemPersistence::Dax {
            self.write_streaming(offset, data)?;
            return self.persist(offset, data.len() as u64);
        }
        check_range(self.size_bytes(), offset, data.len() as u64)?;
        let target = self.bytes.range(offset, data.len());
        // SAFETY: the range was checked to lie within the mapping; wide stores only with AVX.
        let (head, tail) = unsafe { stream_copy(target, data, self.wide_stores) };
        // The streaming stores are durable once fenced (stream_copy fences); the unaligned
        // edges were stored through the cache and are written back here.
        if head > 0 {
            flush_lines(target, head, self.line_flush);
        }
        if tail > 0 {
            // SAFETY: the tail lies within the range checked above.
            flush_lines(
                unsafe { target.add(data.len() - tail) },
                tail,
                self.line_flush,
            );
        }
        Ok(())
    }

    fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size_bytes(), offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.persisted(offset, len, || {
            match self.persistence {
                PmemPersistence::Dax => flush_lines(
                    self.bytes.range(offset, len as usize),
                    len as usize,
                    self.line_flush,
                ),
                PmemPersistence::Msync => self.map.sync(offset as usize, len as usize)?,
                PmemPersistence::Emulated => {}
            }
            Ok(())
        })
    }

    fn flush(&self) -> io::Result<()> {
        self.persisted(0, self.size_bytes(), || {
            match self.persistence {
                // Every store went through `written`, which noted its pages; what
                // `write_persisted` and `persist` covered is written back already.
                PmemPersistence::Dax => self.unflushed.take(|offset, len| {
                    // The last page may run past a mapping of no whole number of pages.
                    let len = len.min(self.bytes.len() - offset) as usize;
                    flush_lines(self.bytes.range(offset, len), len, self.line_flush)
                }),
                PmemPersistence::Msync => self.map.sync(0, self.bytes.len() as usize)?,
                PmemPersistence::Emulated => {}
            }
            Ok(())
        })
    }

    fn persist_is_cheap(&self) -> bool {
        self.persistence != PmemPersistence::Msync
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        let how = match self.persistence {
            PmemPersistence::Emulated => "crash injection",
            _ => self.reason,
        };
        format!("pmem {} ({how})", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pm");
        let pmem = PmemBackend::open(&path, 1 << 20).unwrap();
        crate::backend::tests::exercise(&pmem);
        drop(pmem);
        let again = PmemBackend::open(&path, 1 << 20).unwrap();
        let mut tail = [0; 3];
        again.read_at((1 << 20) - 3, &mut tail).unwrap();
        assert_eq!(&tail, b"end");
    }

    /// The persistence a file gets from where it lies: tmpfs flushes lines (nothing to lose at
    /// a power cut), a file system that refuses MAP_SYNC msyncs, DAX with MAP_SYNC flushes lines.
    #[test]
    fn persistence_follows_the_file_system() {
        if std::env::var_os("PMEM_IS_PMEM_FORCE").is_some() {
            eprintln!("skipped: PMEM_IS_PMEM_FORCE decides");
            return;
        }
        let shm = Path::new("/dev/shm");
        let mut places = vec![tempfile::tempdir().unwrap()];
        if shm.is_dir() {
            places.push(tempfile::tempdir_in(shm).unwrap());
        }
        for dir in &places {
            let path = dir.path().join("pm");
            let pmem = PmemBackend::open(&path, 1 << 16).unwrap();
            let described = pmem.describe();
            let tmpfs = on_tmpfs(&pmem._file);
            if tmpfs {
                assert!(
                    described.contains("(tmpfs: cache-line flush"),
                    "{described}"
                );
                assert!(pmem.persist_is_cheap());
            } else if described.contains("MAP_SYNC") {
                assert!(pmem.persist_is_cheap(), "{described}");
            } else {
                assert!(described.ends_with("(msync)"), "{described}");
                assert!(!pmem.persist_is_cheap());
            }
            // Either way a persist works, page-aligned or not.
            pmem.write_at(5000, b"kept").unwrap();
            pmem.persist(5000, 4).unwrap();
            pmem.flush().unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn a_planted_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let link = dir.path().join("pm");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = PmemBackend::open(&link, 1 << 16).err().unwrap();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::metadata(&target).unwrap().len(), 0);
    }

    #[test]
    fn streaming_writes_read_back_at_any_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let pmem = PmemBackend::open(&dir.path().join("pm"), 1 << 16).unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 13 % 256) as u8).collect();
        for (offset, length) in [(0, 1000), (3, 997), (17, 15), (64, 16), (100, 0), (5, 33)] {
            pmem.write_streaming(offset, &data[..length]).unwrap();
            let mut back = vec![0; length];
            pmem.read_at(offset, &mut back).unwrap();
            // every byte lands, whatever the alignment of either end
            assert_eq!(back, data[..length], "offset {offset} length {length}");
        }
        // out of range is an error, as for write_at
        assert!(pmem.write_streaming((1 << 16) - 2, b"abc").is_err());
    }

    #[test]
    fn a_crash_loses_only_unpersisted_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut pmem = PmemBackend::open(&dir.path().join("pm"), 1 << 16).unwrap();
        pmem.enable_crash_injection();
        pmem.write_at(0, &[1; 4096]).unwrap();
        pmem.persist(0, 4096).unwrap();
        pmem.write_at(0, &[2; 4096]).unwrap();
        pmem.write_at(8192, &[3; 64]).unwrap();
        pmem.persist(8192, 64).unwrap();
        let outcome = pmem.crash(7).unwrap();
        assert_eq!(
            outcome.kept_lines + outcome.dropped_lines + outcome.torn_lines,
            64
        );
        assert!(outcome.dropped_lines > 0 && outcome.torn_lines > 0);
        let mut page = vec![0; 4096];
        pmem.read_at(0, &mut page).unwrap();
        for word in page.chunks(8) {
            assert!(word == [1; 8] || word == [2; 8], "{word:?}");
        }
        assert!(page.contains(&1) && page.contains(&2));
        let mut persisted = [0; 64];
        pmem.read_at(8192, &mut persisted).unwrap();
        assert_eq!(persisted, [3; 64]);
        assert_eq!(pmem.crash(8).unwrap(), CrashOutcome::default());
    }

    /// Threads write and persist their own lines, version after version, while the machine
    /// crashes under them at a seeded moment: every line holds its last persisted version or
    /// the one after it, word by word, never older; the threads' writes fail from the crash
    /// until the restart.
    #[test]
    fn a_crash_under_concurrent_writers_keeps_every_persisted_write() {
        const THREADS: u64 = 4;
        let dir = tempfile::tempdir().unwrap();
        let mut persisted_writes = 0;
        for seed in 0..20u64 {
            let mut pmem =
                PmemBackend::open(&dir.path().join(format!("pm{seed}")), 1 << 16).unwrap();
            pmem.enable_crash_injection();
            let persisted: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
            let refused = std::thread::scope(|scope| {
                let writers: Vec<_> = (0..THREADS)
                    .map(|thread| {
                        let (pmem, persisted) = (&pmem, &persisted);
                        scope.spawn(move || {
                            let offset = thread * CACHE_LINE;
                            for version in 1u64.. {
                                let line = version.to_le_bytes().repeat(8);
                                let done = pmem
                                    .write_at(offset, &line)
                                    .and_then(|()| pmem.persist(offset, CACHE_LINE));
                                if done.is_err() {
                                    return version;
                                }
                                persisted[thread as usize].store(version, Ordering::SeqCst);
                            }
                            unreachable!()
                        })
                    })
                    .collect();
                // Let the writers run a seeded while, then the power fails.
                let spins = 1_000 + seed * 5_000;
                for _ in 0..spins {
                    std::hint::spin_loop();
                }
                pmem.crash(seed).unwrap();
                writers
                    .into_iter()
                    .map(|writer| writer.join().unwrap())
                    .collect::<Vec<_>>()
            });
            for thread in 0..THREADS {
                let last = persisted[thread as usize].load(Ordering::SeqCst);
                persisted_writes += last;
                assert!(refused[thread as usize] > last, "seed {seed}");
                let mut line = [0u8; CACHE_LINE as usize];
                pmem.read_at(thread * CACHE_LINE, &mut line).unwrap();
                for word in line.chunks(8) {
                    let version = u64::from_le_bytes(word.try_into().unwrap());
                    assert!(
                        version == last || version == last + 1,
                        "seed {seed}, thread {thread}: {version} after persisting {last}"
                    );
                }
            }
            assert!(pmem.write_at(0, b"dead").is_err(), "seed {seed}");
            pmem.restart();
            pmem.write_at(0, b"live").unwrap();
            pmem.persist(0, 4).unwrap();
        }
        assert!(
            persisted_writes > 100,
            "{persisted_writes} writes persisted before the crashes"
        );
    }
}
