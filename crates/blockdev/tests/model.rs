//! The staged device against a model, over many seeded histories of real threads (seed 001
//! §4.4's flush and FUA ordering, checked online): writers (each block has one), readers,
//! flushes and FUA writes on a small cache over a BTT that records the last version written to
//! each block. A read returns a whole block no older than the last write acknowledged before it
//! began and no newer than the last issued before it ended; a completed flush or FUA write has
//! put every write acknowledged before it on the device; after the last flush the device holds
//! exactly what was acknowledged last. The seed and scheme are printed on failure.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use heterarchy_blockdev::{StagedDevice, StagedOptions, BLOCK_BYTES};
use heterarchy_device::backend::btt::{BttBackend, BttOptions};
use heterarchy_device::backend::{
    self_described_version, self_describing_block, Backend, RamBackend,
};
use heterarchy_engine::staging::StagingScheme;

mod common;
use common::Rng;

const BLOCKS: u64 = 24;
const WRITERS: u64 = 3;
const SLOTS: u64 = 6;

/// A BTT on RAM (so that a block is written atomically, as the staged device assumes of its
/// storage) that notes the version of every whole block written to it.
struct Recorder {
    ram: BttBackend,
    last_written: Vec<AtomicU64>,
}

impl Backend for Recorder {
    fn size_bytes(&self) -> u64 {
        BLOCKS * BLOCK_BYTES as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.ram.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.ram.write_at(offset, data)?;
        let block = offset / BLOCK_BYTES as u64;
        if let Ok(version) = self_described_version(data, block) {
            self.last_written[block as usize].store(version, Ordering::SeqCst);
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn is_persistent(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        "recorder".into()
    }
}

fn history(scheme: StagingScheme, seed: u64) -> Result<(), String> {
    let media = RamBackend::new(4 << 20).unwrap();
    let options = BttOptions {
        min_arena_bytes: 1 << 20,
        nfree: 8,
        ..BttOptions::default()
    };
    let recorder = Arc::new(Recorder {
        ram: BttBackend::open(Box::new(media), options).unwrap(),
        last_written: (0..BLOCKS).map(|_| AtomicU64::new(0)).collect(),
    });
    let device = StagedDevice::open(
        Box::new(Arc::clone(&recorder)),
        StagedOptions {
            scheme,
            cache_bytes: SLOTS * BLOCK_BYTES as u64,
            evictors: 2,
        },
    )
    .unwrap();
    let acked: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
    let issued: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
    let failure = std::sync::Mutex::new(None::<String>);
    let fail = |why: String| {
        failure.lock().unwrap().get_or_insert(why);
    };
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let (device, acked, issued, recorder, fail) =
                (&device, &acked, &issued, &recorder, &fail);
            scope.spawn(move || {
                let mut rng = Rng(seed ^ (writer + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                for round in 1..=150u64 {
                    let block = writer + WRITERS * rng.below(BLOCKS / WRITERS);
                    let version = round * WRITERS + writer;
                    issued[block as usize].store(version, Ordering::SeqCst);
                    let fua = rng.below(8) == 0;
                    let data = self_describing_block(block, version, BLOCK_BYTES);
                    if let Err(error) = device.write(block * BLOCK_BYTES as u64, &data, fua) {
                        return fail(format!("write of block {block}: {error}"));
                    }
                    acked[block as usize].store(version, Ordering::SeqCst);
                    if fua {
                        let on_device = recorder.last_written[block as usize].load(Ordering::SeqCst);
                        if on_device < version {
                            return fail(format!(
                                "FUA write {version} of block {block} answered, device has {on_device}"
                            ));
                        }
                    }
                }
            });
        }
        let (device, acked, issued, fail) = (&device, &acked, &issued, &fail);
        scope.spawn(move || {
            let mut rng = Rng(seed.rotate_left(17) | 1);
            let mut buf = vec![0u8; BLOCK_BYTES];
            for _ in 0..300 {
                let block = rng.below(BLOCKS);
                let floor = acked[block as usize].load(Ordering::SeqCst);
                if let Err(error) = device.read(block * BLOCK_BYTES as u64, &mut buf) {
                    return fail(format!("read of block {block}: {error}"));
                }
                let ceiling = issued[block as usize].load(Ordering::SeqCst);
                match self_described_version(&buf, block) {
                    Ok(version) if (floor..=ceiling).contains(&version) => {}
                    Ok(version) => {
                        return fail(format!(
                            "read of block {block} gave version {version}, acknowledged {floor}, issued {ceiling}"
                        ))
                    }
                    Err(why) => return fail(format!("read: {why}")),
                }
            }
        });
        let recorder = &recorder;
        scope.spawn(move || {
            for _ in 0..20 {
                let owed: Vec<u64> = acked.iter().map(|v| v.load(Ordering::SeqCst)).collect();
                if let Err(error) = device.flush() {
                    return fail(format!("flush: {error}"));
                }
                for (block, &version) in owed.iter().enumerate() {
                    let on_device = recorder.last_written[block].load(Ordering::SeqCst);
                    if on_device < version {
                        return fail(format!(
                            "flush done, block {block} has {on_device} on the device, {version} acknowledged before"
                        ));
                    }
                }
                std::thread::yield_now();
            }
        });
    });
    if let Some(why) = failure.into_inner().unwrap() {
        return Err(why);
    }
    device.flush().map_err(|error| error.to_string())?;
    for (block, (acked, written)) in acked.iter().zip(&recorder.last_written).enumerate() {
        let (expected, found) = (acked.load(Ordering::SeqCst), written.load(Ordering::SeqCst));
        if expected != found {
            return Err(format!(
                "after the last flush block {block} has {found}, {expected} acknowledged"
            ));
        }
    }
    Ok(())
}

#[test]
fn every_scheme_answers_like_a_block_device_over_seeded_histories() {
    for scheme in StagingScheme::ALL {
        for seed in 1..=12u64 {
            let seed = seed.wrapping_mul(0x2545_F491_4F6C_DD1D);
            if let Err(why) = history(scheme, seed) {
                panic!("{scheme}, seed {seed}: {why}");
            }
        }
    }
}

#[test]
fn parts_of_blocks_merge_with_the_rest_and_trims_drop_cached_copies() {
    for scheme in StagingScheme::ALL {
        let ram = Arc::new(RamBackend::new(16 * BLOCK_BYTES as u64).unwrap());
        let device = StagedDevice::open(
            Box::new(Arc::clone(&ram)),
            StagedOptions {
                scheme,
                cache_bytes: 2 * BLOCK_BYTES as u64,
                evictors: 1,
            },
        )
        .unwrap();
        ram.write_at(0, &[1u8; 3 * BLOCK_BYTES]).unwrap();
        // 100 bytes straddling blocks 0 and 1, then more of block 1, all cached or not.
        device
            .write(BLOCK_BYTES as u64 - 50, &[2u8; 100], false)
            .unwrap();
        device
            .write(BLOCK_BYTES as u64 + 50, &[3u8; 10], false)
            .unwrap();
        let mut back = vec![0u8; 3 * BLOCK_BYTES];
        device.read(0, &mut back).unwrap();
        let mut expected = vec![1u8; 3 * BLOCK_BYTES];
        expected[BLOCK_BYTES - 50..BLOCK_BYTES + 50].fill(2);
        expected[BLOCK_BYTES + 50..BLOCK_BYTES + 60].fill(3);
        assert_eq!(back, expected, "{scheme}");
        device.flush().unwrap();
        let mut on_ram = vec![0u8; 3 * BLOCK_BYTES];
        ram.read_at(0, &mut on_ram).unwrap();
        assert_eq!(on_ram, expected, "{scheme}: flushed");
        // Out of range is an error, never a panic.
        assert!(device
            .write(16 * BLOCK_BYTES as u64, &[0u8; 1], false)
            .is_err());
        assert!(device
            .read(15 * BLOCK_BYTES as u64 + 1, &mut [0u8; BLOCK_BYTES])
            .is_err());
        device
            .write(8 * BLOCK_BYTES as u64, &[9u8; BLOCK_BYTES], false)
            .unwrap();
        device
            .trim(8 * BLOCK_BYTES as u64 - 1, BLOCK_BYTES as u64 + 2)
            .unwrap();
        device.flush().unwrap();
        // Trimmed while cached: never written back (RAM keeps what it had).
        ram.read_at(8 * BLOCK_BYTES as u64, &mut on_ram[..BLOCK_BYTES])
            .unwrap();
        if scheme != StagingScheme::None {
            assert_eq!(&on_ram[..BLOCK_BYTES], &[0u8; BLOCK_BYTES][..], "{scheme}");
        }
    }
}
