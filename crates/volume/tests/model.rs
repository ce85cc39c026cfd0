//! A cached volume against a plain byte array: every mode, small caches (so lines are evicted
//! and written back all the time), unaligned requests, trims, flushes and cleaning. Whatever
//! the cache does, reads must return what was written.

use heterarchy_engine::WriteMode;
use heterarchy_volume::{CutoffPolicy, Volume, VolumeConfig};
use proptest::prelude::*;

const VOLUME_BYTES: u64 = 256 * 1024;
const LINE: u64 = 4096;

#[derive(Clone, Debug)]
enum Action {
    Read {
        offset: u64,
        len: u64,
    },
    Write {
        offset: u64,
        len: u64,
        fill: u8,
        fua: bool,
    },
    Zero {
        offset: u64,
        len: u64,
    },
    TrimLines {
        first: u64,
        count: u64,
    },
    Flush,
    Clean,
    Background,
}

fn action() -> impl Strategy<Value = Action> {
    let span = (0..VOLUME_BYTES - 1)
        .prop_flat_map(|offset| (Just(offset), 1..=(VOLUME_BYTES - offset).min(3 * LINE)));
    prop_oneof![
        4 => span.clone().prop_map(|(offset, len)| Action::Read { offset, len }),
        4 => (span.clone(), any::<u8>(), prop::bool::weighted(0.1))
            .prop_map(|((offset, len), fill, fua)| Action::Write { offset, len, fill, fua }),
        1 => span.prop_map(|(offset, len)| Action::Zero { offset, len }),
        1 => (0..VOLUME_BYTES / LINE - 2, 1..3u64)
            .prop_map(|(first, count)| Action::TrimLines { first, count }),
        1 => Just(Action::Flush),
        1 => Just(Action::Clean),
        1 => Just(Action::Background),
    ]
}

fn mode() -> impl Strategy<Value = WriteMode> {
    prop::sample::select(WriteMode::ALL.to_vec())
}

fn config(mode: WriteMode, cache: &str, backing: &str) -> VolumeConfig {
    let mut config = VolumeConfig::new("model", backing.parse().unwrap(), cache.parse().unwrap());
    config.cache_line = LINE;
    config.caching.mode = mode;
    config.caching.cleaning = heterarchy_engine::CleaningPolicy::Acp;
    config.seq_cutoff.policy = CutoffPolicy::Always;
    config.seq_cutoff.threshold = 16 * 1024;
    config
}

/// Bytes a trim leaves are undefined: the model forgets them.
fn run(volume: &Volume, actions: &[Action]) -> Result<(), TestCaseError> {
    let mut model = vec![0u8; VOLUME_BYTES as usize];
    let mut known = vec![true; VOLUME_BYTES as usize];
    for action in actions {
        match *action {
            Action::Read { offset, len } => {
                let mut buf = vec![0xee; len as usize];
                volume.read(offset, &mut buf).unwrap();
                for (i, byte) in buf.iter().enumerate() {
                    let at = offset as usize + i;
                    if known[at] {
                        prop_assert_eq!(*byte, model[at], "byte {} after {:?}", at, action);
                    }
                }
            }
            Action::Write {
                offset,
                len,
                fill,
                fua,
            } => {
                let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                volume.write(offset, &data, fua).unwrap();
                let range = offset as usize..(offset + len) as usize;
                model[range.clone()].copy_from_slice(&data);
                known[range].fill(true);
            }
            Action::Zero { offset, len } => {
                volume.write_zeroes(offset, len, false).unwrap();
                let range = offset as usize..(offset + len) as usize;
                model[range.clone()].fill(0);
                known[range].fill(true);
            }
            Action::TrimLines { first, count } => {
                volume.trim(first * LINE, count * LINE).unwrap();
                known[(first * LINE) as usize..((first + count) * LINE) as usize].fill(false);
            }
            Action::Flush => volume.flush().unwrap(),
            Action::Clean => {
                volume.clean().unwrap();
                prop_assert_eq!(volume.stats().dirty_lines, 0);
            }
            Action::Background => {
                volume.background().unwrap();
            }
        }
        let stats = volume.stats();
        prop_assert!(stats.resident_lines <= stats.slots);
        if let Err(broken) = volume.check_invariants() {
            return Err(TestCaseError::fail(format!("after {action:?}: {broken}")));
        }
    }
    Ok(())
}

/// Cache tiers, fastest first: small enough that most requests evict somewhere.
const HIERARCHIES: [&[&str]; 3] = [
    // 8 slots of 4 KiB for 64 lines.
    &["ram:48k"],
    &["ram:24k", "ram:48k"],
    &["ram:16k", "ram:32k", "ram:48k"],
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn reads_return_what_was_written(
        mode in mode(),
        tiers in prop::sample::select(HIERARCHIES.to_vec()),
        exclusive in any::<bool>(),
        actions in prop::collection::vec(action(), 1..80),
    ) {
        let mut config = config(mode, tiers[0], &format!("ram:{VOLUME_BYTES}"));
        config.cache = tiers.iter().map(|tier| tier.parse().unwrap()).collect();
        if exclusive {
            config.caching.layout = heterarchy_engine::TierLayout::Exclusive;
        }
        let volume = Volume::open(&config).unwrap();
        run(&volume, &actions)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// A BTT as the backing store, as any file is: its 4 KiB sectors take the volume's
    /// 512-byte ones, and what is read is what was written, across a reopening.
    #[test]
    fn a_btt_backing_store_serves_like_a_file(
        mode in mode(),
        actions in prop::collection::vec(action(), 1..60),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let backing = format!("btt:{}:16m:4k", dir.path().join("btt").display());
        let volume = Volume::open(&config(mode, "ram:48k", &backing)).unwrap();
        run(&volume, &actions)?;
        let mut before = vec![0u8; VOLUME_BYTES as usize];
        volume.read(0, &mut before).unwrap();
        volume.flush().unwrap();
        drop(volume);
        let volume = Volume::open(&config(mode, "ram:48k", &backing)).unwrap();
        let mut after = vec![0u8; VOLUME_BYTES as usize];
        volume.read(0, &mut after).unwrap();
        prop_assert!(before == after, "the BTT kept what the volume flushed");
    }
}

#[test]
fn write_back_keeps_data_in_the_cache_until_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    let spec = format!("file:{}:{VOLUME_BYTES}", backing.display());
    let volume = Volume::open(&config(WriteMode::Wb, "ram:128k", &spec)).unwrap();
    volume.write(8192, &[7; 4096], false).unwrap();
    assert_eq!(
        std::fs::read(&backing).unwrap()[8192],
        0,
        "write-back leaves the backing"
    );
    let stats = volume.stats();
    assert_eq!((stats.dirty_lines, stats.hits, stats.misses), (1, 0, 1));
    let mut back = [0; 4096];
    volume.read(8192, &mut back).unwrap();
    assert_eq!(back, [7; 4096]);
    assert_eq!(volume.stats().hits, 1);
    volume.flush().unwrap();
    assert_eq!(
        std::fs::read(&backing).unwrap()[8192],
        7,
        "a RAM cache writes dirty data back on FLUSH"
    );
    assert_eq!(volume.stats().dirty_lines, 0);
}

#[test]
fn a_persistent_cache_is_found_again_dirty_lines_and_all() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    let cache = dir.path().join("pm");
    let config = config(
        WriteMode::Wb,
        &format!("pmem:{}:128k", cache.display()),
        &format!("file:{}:{VOLUME_BYTES}", backing.display()),
    );
    {
        let volume = Volume::open(&config).unwrap();
        volume.write(4096, &[3; 8192], false).unwrap();
        volume.write(100, &[4; 10], false).unwrap();
        volume.read(65_536, &mut [0; 4096]).unwrap();
        volume.flush().unwrap();
        assert_eq!(volume.stats().dirty_lines, 3);
    }
    assert!(std::fs::read(&backing).unwrap().iter().all(|&b| b == 0));
    let volume = Volume::open(&config).unwrap();
    let stats = volume.stats();
    assert_eq!((stats.restored_lines, stats.dirty_lines), (4, 3));
    let mut back = vec![0; 12_288];
    volume.read(0, &mut back).unwrap();
    assert_eq!(&back[100..110], &[4; 10]);
    assert_eq!(&back[4096..12_288], &[3; 8192][..]);
    assert_eq!(volume.stats().hits, 3);
    assert_eq!(volume.clean().unwrap(), 3);
    assert_eq!(std::fs::read(&backing).unwrap()[4096], 3);

    // Another line size: a cache with dirty lines refuses, a clean one is reformatted.
    let mut other = config.clone();
    other.cache_line = 2 * LINE;
    let reopened = Volume::open(&other).unwrap();
    assert_eq!(reopened.stats().restored_lines, 0);
    reopened.write(0, &[1; 4096], false).unwrap();
    reopened.flush().unwrap();
    drop(reopened);
    let error = Volume::open(&config).err().unwrap().to_string();
    assert!(error.contains("holds 1 dirty lines"), "{error}");
    let mut forced = config.clone();
    forced.force = true;
    assert_eq!(Volume::open(&forced).unwrap().stats().restored_lines, 0);
}

#[test]
fn a_write_through_restart_cleans_what_write_back_left() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    let cache = format!("pmem:{}:128k", dir.path().join("pm").display());
    let backing_spec = format!("file:{}:{VOLUME_BYTES}", backing.display());
    let volume = Volume::open(&config(WriteMode::Wb, &cache, &backing_spec)).unwrap();
    volume.write(0, &[9; 4096], true).unwrap();
    drop(volume);
    let volume = Volume::open(&config(WriteMode::Wt, &cache, &backing_spec)).unwrap();
    assert_eq!(volume.stats().dirty_lines, 0);
    assert_eq!(std::fs::read(&backing).unwrap()[0], 9);
}

#[test]
fn out_of_range_requests_are_refused() {
    let volume = Volume::open(&config(WriteMode::Wt, "ram:48k", "ram:64k")).unwrap();
    let error = volume.read(65_000, &mut [0; 1000]).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert!(volume.write(u64::MAX, &[1], false).is_err());
    assert!(volume.trim(0, 1 << 20).is_err());
    assert_eq!(volume.stats().reads, 0);
}

#[test]
fn a_volume_shut_down_refuses_requests_after_cleaning() {
    let volume = Volume::open(&config(WriteMode::Wb, "ram:48k", "ram:64k")).unwrap();
    volume.write(0, &[5; 4096], false).unwrap();
    assert_eq!(volume.shut_down().unwrap(), 1);
    let error = volume.write(0, &[6; 4096], false).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionAborted);
    assert!(volume.read(0, &mut [0; 512]).is_err() && volume.flush().is_err());
}

#[test]
fn a_backing_store_of_odd_size_is_served_in_whole_sectors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd");
    std::fs::write(&path, vec![1u8; 100_000]).unwrap();
    let spec = format!("file:{}", path.display());
    let volume = Volume::open(&config(WriteMode::Wb, "ram:48k", &spec)).unwrap();
    assert_eq!(volume.size_bytes(), 99_840);
    volume.write(99_112, &[2; 728], false).unwrap();
    volume.write(99_812, &[3; 28], true).unwrap();
    let mut tail = vec![0; 728];
    volume.read(99_112, &mut tail).unwrap();
    assert_eq!(&tail[..700], &[2; 700][..]);
    assert_eq!(&tail[700..], &[3; 28][..]);
    assert!(volume.read(99_840, &mut [0; 1]).is_err());
    let tiny = dir.path().join("tiny");
    std::fs::write(&tiny, [0u8; 100]).unwrap();
    let error = Volume::open(&config(
        WriteMode::Wt,
        "ram:1m",
        &format!("file:{}", tiny.display()),
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(error.contains("no whole 512-byte sector"), "{error}");
}
