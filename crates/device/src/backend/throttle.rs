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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::ThrottleError;
use crate::memory::MemoryOp;
use crate::model::{DeviceModel, IoKind};
use crate::presets::resolve_device;
use crate::spec::{DeviceError, DeviceSpec};

/// A device model run on the real clock, shared by its users.
pub struct Throttle {
    model: Mutex<DeviceModel>,
    /// The model's time zero: every user's accesses are placed on this one clock, so that users
    /// who started at different times still queue on the same channels at the same moments.
    epoch: Instant,
}

impl Throttle {
    /// Paces like `spec` (a preset or a device file).
    pub fn new(spec: &DeviceSpec) -> Throttle {
        Throttle {
            model: Mutex::new(DeviceModel::new(spec)),
            epoch: Instant::now(),
        }
    }

    /// When an access of `bytes` at `offset`, issued at `start`, completes.
    pub fn complete_at(&self, start: Instant, kind: IoKind, offset: u64, bytes: u32) -> Instant {
        let done_ns = self.complete_ns(self.ns_at(start), kind, offset, bytes);
        self.instant_at(done_ns)
    }

    /// When a load or store of `bytes` at `offset`, issued at `start`, lets its thread go on
    /// (a byte-addressable device's, [`crate::memory`]).
    pub fn complete_access_at(
        &self,
        start: Instant,
        op: MemoryOp,
        offset: u64,
        bytes: u32,
    ) -> Instant {
        let done_ns = self
            .model()
            .access(self.ns_at(start), op, offset, bytes)
            .done_ns;
        self.instant_at(done_ns)
    }

    /// The model, whoever panicked holding it last (its state is a handful of times, always
    /// consistent).
    fn model(&self) -> MutexGuard<'_, DeviceModel> {
        self.model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `at` on the model's clock: ns since the throttle was made (0 before).
    pub fn ns_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// The instant `ns` on the model's clock stands for.
    pub fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// The same on the model's clock (ns since the throttle was made). Accesses issued out of
    /// order (threads race to the lock) queue behind channels already busy, which is all the
    /// model needs.
    fn complete_ns(&self, start_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> u64 {
        self.model().submit(start_ns, kind, offset, bytes)
    }
}

/// The throttles of one server: physical devices declared by name, one model each, shared by
/// every tier, volume or tenant that names the device (so that they queue on its channels
/// together and a writer's interference reaches every reader); any other name, a preset or a
/// device file, paces a device of its own.
#[derive(Default)]
pub struct Throttles {
    shared: HashMap<String, Arc<Throttle>>,
}

impl Throttles {
    /// Declares `devices`, each (name, what it is like: a preset or a device file). Errors name
    /// the device.
    pub fn new<'a>(
        devices: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Throttles, ThrottleError> {
        let mut shared = HashMap::new();
        for (name, like) in devices {
            let spec = resolve_device(like, None).map_err(|error| ThrottleError::Device {
                name: name.to_string(),
                error,
            })?;
            if shared
                .insert(name.to_string(), Arc::new(Throttle::new(&spec)))
                .is_some()
            {
                return Err(ThrottleError::DeclaredTwice {
                    name: name.to_string(),
                });
            }
        }
        Ok(Throttles { shared })
    }

    /// The throttle `name` stands for: a declared device's, or a new one like the preset or
    /// device file it names.
    pub fn get(&self, name: &str) -> Result<Arc<Throttle>, DeviceError> {
        if let Some(throttle) = self.shared.get(name) {
            return Ok(Arc::clone(throttle));
        }
        resolve_device(name, None).map(|spec| Arc::new(Throttle::new(&spec)))
    }
}

/// Makes the calling thread's sleeps and timed waits end when asked rather than up to the
/// kernel's default timer slack (50 us) late: a paced answer must not be late by more than the
/// device it paces takes. Cheap to call again.
pub fn precise_sleeps() {
    thread_local! {
        static PRECISE: () = {
            // SAFETY: PR_SET_TIMERSLACK takes a number and changes only this thread's slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        };
    }
    PRECISE.with(|_| {});
}

/// Waits until `due`: sleeps while more than a few microseconds away, then spins, so that waits
/// of a few microseconds (a PM access) are kept without a thread spinning through a disk's
/// milliseconds; the sleeps are [`precise_sleeps`].
pub fn wait_until(due: Instant) {
    const SPIN: Duration = Duration::from_micros(20);
    precise_sleeps();
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

    #[test]
    fn a_declared_device_is_one_model_for_everyone_who_names_it() {
        let throttles = Throttles::new([("pm0", "optane-pm")]).unwrap();
        let (a, b) = (throttles.get("pm0").unwrap(), throttles.get("pm0").unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        // Two users of one device queue on its channels: the second access waits, though it
        // was issued at the same moment.
        let now = Instant::now();
        let first = a.complete_at(now, IoKind::Write, 0, 1 << 20);
        let second = b.complete_at(now, IoKind::Write, 1 << 20, 1 << 20);
        assert!(second > first, "{first:?} {second:?}");
        // A preset's name makes a device of its own each time.
        let (c, d) = (
            throttles.get("optane-pm").unwrap(),
            throttles.get("optane-pm").unwrap(),
        );
        assert!(!Arc::ptr_eq(&c, &d));
        assert!(throttles
            .get("floppy")
            .err()
            .is_some_and(|error| error.to_string().contains("floppy")));
        assert!(Throttles::new([("x", "optane-pm"), ("x", "hdd")]).is_err());
    }
}
