//! Pacing live storage like a device preset (docs/architecture.md, "The device
//! layer": a throttle paces live storage like a preset, so a DRAM-backed file behaves like PM).
//!
//! The data moves at memory speed; the [`DeviceModel`] of the preset says, on the real clock,
//! when each access would have completed, and the caller holds the answer back until then. So
//! accesses overlap as the device's channels allow, while the data is never in flight.
//!
//! One throttle stands for one physical device: every thread, tier or tenant that reaches the
//! device shares it (behind an `Arc`), so their accesses queue on the same channels and a
//! writer's interference reaches every reader, as on the device (docs/architecture.md, "The
//! device layer").

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::{DeviceModel, IoKind};
use crate::spec::DeviceSpec;

/// A device model run on the real clock, shared by its users.
pub struct Throttle {
    model: Mutex<DeviceModel>,
}

impl Throttle {
    /// Paces like `spec` (a preset or a device file).
    pub fn new(spec: &DeviceSpec) -> Throttle {
        Throttle {
            model: Mutex::new(DeviceModel::new(spec)),
        }
    }

    /// When an access of `bytes` at `offset`, issued at `start_ns`, completes (both in ns of
    /// the caller's clock). Accesses issued out of order (threads race to the lock) queue
    /// behind channels already busy, which is all the model needs.
    pub fn complete_ns(&self, start_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> u64 {
        self.model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .submit(start_ns, kind, offset, bytes)
    }
}

/// Waits until `due`: sleeps while more than a scheduler tick away, then spins, so that waits of
/// a few microseconds (a PM access) are kept.
pub fn wait_until(due: Instant) {
    const SPIN: Duration = Duration::from_micros(80);
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;

    #[test]
    fn paces_like_the_preset() {
        let spec = preset("optane-ssd").unwrap();
        let throttle = Throttle::new(&spec);
        let alone = throttle.complete_ns(0, IoKind::Read, 0, 4096);
        let mut model = DeviceModel::new(&spec);
        assert_eq!(alone, model.submit(0, IoKind::Read, 0, 4096));
        assert!(
            alone >= 5_000,
            "an Optane SSD read takes microseconds: {alone}"
        );
        let start = Instant::now();
        wait_until(start + Duration::from_micros(200));
        assert!(start.elapsed() >= Duration::from_micros(200));
    }
}
