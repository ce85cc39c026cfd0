//! Co-Active's cleaner on the live device (seed 001 §4.1; `engine::staging::coactive`): it
//! writes dirty blocks back only while no request is in the device, and then it does.

use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use heterarchy_blockdev::{StagedDevice, StagedOptions, BLOCK_BYTES};
use heterarchy_device::backend::{Backend, RamBackend};
use heterarchy_engine::staging::StagingScheme;

/// RAM whose reads wait while the gate is shut.
struct Gated {
    ram: RamBackend,
    /// Whether reads wait, and how many are waiting.
    gate: Mutex<(bool, u32)>,
    opened: Condvar,
}

impl Backend for Gated {
    fn size_bytes(&self) -> u64 {
        self.ram.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut gate = self.gate.lock().unwrap();
        gate.1 += 1;
        while gate.0 {
            gate = self.opened.wait(gate).unwrap();
        }
        gate.1 -= 1;
        drop(gate);
        self.ram.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.ram.write_at(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn is_persistent(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        "gated RAM".into()
    }
}

#[test]
fn coactive_cleans_only_while_no_request_is_in_the_device() {
    let gated = Arc::new(Gated {
        ram: RamBackend::new(32 * BLOCK_BYTES as u64).unwrap(),
        gate: Mutex::new((true, 0)),
        opened: Condvar::new(),
    });
    let device = Arc::new(
        StagedDevice::open(
            Box::new(Arc::clone(&gated)),
            StagedOptions {
                scheme: StagingScheme::CoActive,
                cache_bytes: 8 * BLOCK_BYTES as u64,
                evictors: 1,
            },
        )
        .unwrap(),
    );
    // A read of an uncached block, held at the device: a request in progress.
    let reader = {
        let device = Arc::clone(&device);
        std::thread::spawn(move || {
            let mut block = vec![0u8; BLOCK_BYTES];
            device.read(20 * BLOCK_BYTES as u64, &mut block)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while gated.gate.lock().unwrap().1 == 0 {
        assert!(
            Instant::now() < deadline,
            "the read never reached the device"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Blocks written once each: cold, so the cleaner's once the device idles.
    for block in 0..4u64 {
        device
            .write(
                block * BLOCK_BYTES as u64,
                &[block as u8 + 1; BLOCK_BYTES],
                false,
            )
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        device.stats().background_evictions,
        0,
        "cleaned while a read was in the device"
    );
    gated.gate.lock().unwrap().0 = false;
    gated.opened.notify_all();
    reader.join().unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while device.stats().background_evictions < 4 {
        assert!(
            Instant::now() < deadline,
            "idle, yet {} of 4 blocks written back",
            device.stats().background_evictions
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut on_ram = vec![0u8; BLOCK_BYTES];
    for block in 0..4u64 {
        gated
            .ram
            .read_at(block * BLOCK_BYTES as u64, &mut on_ram)
            .unwrap();
        assert_eq!(on_ram, vec![block as u8 + 1; BLOCK_BYTES], "block {block}");
    }
}
