//! Requests tried at once, as the NBD server's event loops try them before handing them to a
//! worker (docs/architecture.md, "Serving"): a try either completes or gives the request back
//! untouched; it never fails a request that a worker would have carried out.

use std::io;

use heterarchy_device::backend::{Backend, RamBackend};
use heterarchy_engine::WriteMode;
use heterarchy_volume::{Attempt, Buffer, Command, CutoffPolicy, Volume, VolumeConfig};

const LINE: u64 = 64 * 1024;

/// A backing store whose reads always wait for the device, as a buffered file does for pages
/// the page cache lacks (a hole, or data evicted).
struct Cold(RamBackend);

impl Backend for Cold {
    fn size_bytes(&self) -> u64 {
        self.0.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_at(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn is_persistent(&self) -> bool {
        true
    }
    fn may_block(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        "cold ram".into()
    }
}

fn volume() -> Volume {
    let mut config = VolumeConfig::new(
        "at-once",
        "ram:1".parse().unwrap(),
        "ram:1".parse().unwrap(),
    );
    config.cache_line = LINE;
    config.caching.mode = WriteMode::Wb;
    config.seq_cutoff.policy = CutoffPolicy::Never;
    let cache: Box<dyn Backend> = Box::new(RamBackend::new(1 << 20).unwrap());
    let backing: Box<dyn Backend> = Box::new(Cold(RamBackend::new(1 << 20).unwrap()));
    Volume::with_backends(&config, vec![cache], backing).unwrap()
}

/// A read over a whole cached line and then a line the cache holds only part of: its second
/// piece needs the backing store for the rest, which would wait. Found by the kill -9 test of
/// PM over PM (a restart leaves many lines partly valid): the try failed the read with EIO,
/// "a piece after the first would have waited".
#[test]
fn a_read_whose_later_piece_needs_the_backing_store_is_handed_on_not_failed() {
    let volume = volume();
    let whole = vec![0x5a; LINE as usize];
    let part = vec![0xa5; 4096];
    volume.write(0, &whole, false).unwrap();
    volume.write(LINE, &part, false).unwrap();
    let mut out = vec![0u8; 2 * LINE as usize];
    let submission = volume.submit(Command::Read, 0, 2 * LINE).unwrap();
    let submission = match volume.try_complete(submission, Buffer::Read(&mut out)) {
        Attempt::Done(result) => panic!("the try completed ({result:?}) without the backing store"),
        Attempt::WouldBlock(submission) => submission,
    };
    volume.complete(submission, Buffer::Read(&mut out)).unwrap();
    let mut expected = whole.clone();
    expected.extend_from_slice(&part);
    expected.resize(2 * LINE as usize, 0);
    assert!(
        out == expected,
        "the read returned other data than was written"
    );
}

/// A FLUSH on a volume whose cache forgets on a crash (DRAM) waits for every request planned
/// before it, not only for those on lines dirty when it is planned: a miss that evicts a dirty
/// line makes the controller count it clean at once, while its data stays in DRAM until that
/// request writes it back. Found by the kill -9 test of RAM over PM over PM with four
/// connections: FLUSHes answered before such write-backs lost their writes.
#[test]
fn a_flush_waits_for_a_write_back_planned_before_it() {
    let mut config = VolumeConfig::new("flush", "ram:1".parse().unwrap(), "ram:1".parse().unwrap());
    config.cache_line = LINE;
    config.caching.mode = WriteMode::Wb;
    config.caching.cleaning = heterarchy_engine::CleaningPolicy::Nop;
    config.seq_cutoff.policy = CutoffPolicy::Never;
    // One line's slot, with the superblock and one entry's metadata.
    let cache: Box<dyn Backend> = Box::new(RamBackend::new(4096 + 2 * LINE + 128).unwrap());
    let backing = std::sync::Arc::new(RamBackend::new(1 << 20).unwrap());
    let volume = Volume::with_backends(
        &config,
        vec![cache],
        Box::new(std::sync::Arc::clone(&backing)),
    )
    .unwrap();
    let data = vec![0x77; 4096];
    volume.write(0, &data, false).unwrap();
    // A miss on the next line, planned but not carried out: it evicts the dirty line.
    let mut other = vec![0u8; 4096];
    let miss = volume.submit(Command::Read, LINE, 4096).unwrap();
    let flush = volume.submit(Command::Flush, 0, 0).unwrap();
    let flush = match volume.advance(flush, Buffer::None) {
        heterarchy_volume::Progress::Done(result) => {
            panic!("the FLUSH was answered ({result:?}) before the write-back planned before it")
        }
        heterarchy_volume::Progress::Paused(flush) => flush,
    };
    volume.complete(miss, Buffer::Read(&mut other)).unwrap();
    volume.complete(flush, Buffer::None).unwrap();
    let mut written = vec![0u8; 4096];
    backing.read_at(0, &mut written).unwrap();
    assert!(
        written == data,
        "the flushed write is not in the backing store"
    );
}
