//! M2, the PM cost model (seed 000 §5.2.3, "Resource usage estimation"): each access costs
//! `1 / MaxIOPS(op, size)` of the device, MaxIOPS profiled once per device for random reads and
//! writes of 64 B to 4 KiB in 64 B steps. A tenant's utilization is the sum of its accesses'
//! costs per second: writes cost more than reads, small accesses more per byte, and the
//! prefetching and 256 B media unit that byte counting misses are in the profile, since the
//! profiler pays them too.
//!
//! Nyx learns the device only by timing its own accesses, as seed 000 §5.2.3's profiler
//! measures MaxIOPS: the profiler sees a [`TimedDevice`], never the model's internals.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;

use heterarchy_device::memory::MemoryOp;
use heterarchy_device::model::{DeviceModel, IoKind};
use serde::{Deserialize, Serialize};

use crate::error::ProfileError;

/// The profile's size step, and its first size.
pub const PROFILE_STEP_BYTES: u32 = 64;
/// The largest size profiled: seed 000 §5.2.3 stops at 4 KiB, "which obtain the device's
/// maximum bandwidth".
pub const PROFILE_MAX_BYTES: u32 = 4096;
/// Sizes profiled per operation.
pub const PROFILE_SIZES: usize = (PROFILE_MAX_BYTES / PROFILE_STEP_BYTES) as usize;

/// The profile's entry for an access of `bytes`: its size rounded up to 64 B, at most 4 KiB.
fn size_index(bytes: u32) -> usize {
    bytes
        .clamp(1, PROFILE_MAX_BYTES)
        .div_ceil(PROFILE_STEP_BYTES) as usize
        - 1
}

/// A device whose accesses Nyx can time: when one issued at `start_ns` completes.
pub trait TimedDevice {
    fn complete_ns(&mut self, start_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> u64;
}

/// The profiler moves data as the cache does (seed 000 §5.2.3: "the profiler mimics the random
/// accesses of cache instances"): loads with the prefetcher, whose waste the profile then
/// includes, and non-temporal stores.
impl TimedDevice for DeviceModel {
    fn complete_ns(&mut self, start_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> u64 {
        self.access(start_ns, MemoryOp::for_values(kind), offset, bytes)
            .done_ns
    }
}

/// How the profiler drives the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileLoad {
    /// Threads issuing back to back: enough to saturate the device.
    pub threads: u32,
    /// Accesses timed per size and operation.
    pub accesses: u32,
    /// Bytes of the device the random offsets fall in.
    pub span_bytes: u64,
    /// Offsets are multiples of this. 256 B, PM's media unit: then, as in seed 000's profile
    /// (Fig 5.3), a 64 B access costs what a 256 B one does, and sizes off the unit dip, since
    /// they straddle one more unit.
    pub align_bytes: u32,
    pub seed: u64,
}

impl Default for ProfileLoad {
    fn default() -> ProfileLoad {
        ProfileLoad {
            threads: 32,
            accesses: 4096,
            span_bytes: 1 << 30,
            align_bytes: 256,
            seed: 1,
        }
    }
}

/// MaxIOPS of random reads and writes by size (seed 000 Fig 5.3), for one device.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxIopsProfile {
    /// What was profiled (a fingerprint of the device's description): a profile of another
    /// device is stale.
    pub device: String,
    /// MaxIOPS of random reads of 64, 128, … 4096 bytes.
    pub read_iops: Vec<f64>,
    /// The same for writes.
    pub write_iops: Vec<f64>,
    /// `cost_ps` of each size, reads then writes, worked out on first use: every access is
    /// charged, and a division per access is a good part of the gate's cost.
    #[serde(skip)]
    costs_ps: OnceLock<Vec<u64>>,
}

/// Two profiles are the same when their device and tables are: the cost cache is theirs.
impl PartialEq for MaxIopsProfile {
    fn eq(&self, other: &MaxIopsProfile) -> bool {
        (&self.device, &self.read_iops, &self.write_iops)
            == (&other.device, &other.read_iops, &other.write_iops)
    }
}

impl MaxIopsProfile {
    /// A profile of `device` from its tables.
    pub fn new(device: &str, read_iops: Vec<f64>, write_iops: Vec<f64>) -> MaxIopsProfile {
        MaxIopsProfile {
            device: device.to_string(),
            read_iops,
            write_iops,
            costs_ps: OnceLock::new(),
        }
    }

    /// A device named "flat" whose accesses of every size take `read_iops` and `write_iops` a
    /// second (for tests, where the arithmetic should be plain).
    pub fn flat(read_iops: f64, write_iops: f64) -> MaxIopsProfile {
        MaxIopsProfile::new(
            "flat",
            vec![read_iops; PROFILE_SIZES],
            vec![write_iops; PROFILE_SIZES],
        )
    }

    /// Profiles `device` (named `fingerprint`) as seed 000 §5.2.3 does: for each operation and
    /// size, `load.threads` threads issue random accesses back to back; MaxIOPS is what they
    /// complete per second.
    pub fn measure(
        device: &mut dyn TimedDevice,
        fingerprint: &str,
        load: &ProfileLoad,
    ) -> MaxIopsProfile {
        let mut clock_ns = 0;
        let mut rng = load.seed | 1;
        let mut measure_op = |kind: IoKind| -> Vec<f64> {
            (1..=PROFILE_SIZES as u32)
                .map(|step| {
                    let bytes = step * PROFILE_STEP_BYTES;
                    let (start_ns, end_ns) =
                        saturate(device, kind, bytes, load, clock_ns, &mut rng);
                    // The next size starts on an idle device.
                    clock_ns = end_ns + 1_000_000;
                    f64::from(load.accesses.max(1)) * 1e9 / (end_ns - start_ns).max(1) as f64
                })
                .collect()
        };
        let read_iops = measure_op(IoKind::Read);
        let write_iops = measure_op(IoKind::Write);
        MaxIopsProfile::new(fingerprint, read_iops, write_iops)
    }

    /// The profiled MaxIOPS of `kind` at `bytes` rounded up to 64 B (at most 4 KiB).
    pub fn max_iops(&self, kind: IoKind, bytes: u32) -> f64 {
        let table = match kind {
            IoKind::Read => &self.read_iops,
            IoKind::Write => &self.write_iops,
        };
        table[size_index(bytes)]
    }

    /// What an access costs, in picoseconds of the device's time: `1 / MaxIOPS`. An access
    /// beyond 4 KiB costs a 4 KiB access per whole 4 KiB and the rest as its size (the source
    /// stops at 4 KiB; trace values reach tens of KiB).
    pub fn cost_ps(&self, kind: IoKind, bytes: u32) -> u64 {
        let costs = self.costs_ps.get_or_init(|| {
            [IoKind::Read, IoKind::Write]
                .into_iter()
                .flat_map(|kind| {
                    (1..=PROFILE_SIZES as u32).map(move |step| (kind, step * PROFILE_STEP_BYTES))
                })
                .map(|(kind, size)| (1e12 / self.max_iops(kind, size)).round() as u64)
                .collect()
        });
        let base = if kind == IoKind::Write {
            PROFILE_SIZES
        } else {
            0
        };
        let ps = |size: u32| costs[base + size_index(size)];
        let whole = u64::from(bytes / PROFILE_MAX_BYTES);
        let rest = bytes % PROFILE_MAX_BYTES;
        let mut cost = whole * ps(PROFILE_MAX_BYTES);
        if rest > 0 || bytes == 0 {
            cost += ps(rest.max(1));
        }
        cost
    }

    /// Whether the profile is whole and of the device `fingerprint` names; why not otherwise.
    pub fn check(&self, fingerprint: &str) -> Result<(), ProfileError> {
        if self.device != fingerprint {
            return Err(ProfileError::OtherDevice {
                profiled: self.device.clone(),
                device: fingerprint.to_string(),
            });
        }
        for (name, table) in [
            ("read_iops", &self.read_iops),
            ("write_iops", &self.write_iops),
        ] {
            if table.len() != PROFILE_SIZES {
                return Err(ProfileError::Damaged {
                    key: name.to_string(),
                    reason: format!(
                        "{} sizes; expected {PROFILE_SIZES} (64 B to 4 KiB in 64 B steps)",
                        table.len()
                    ),
                });
            }
            if let Some(bad) = table
                .iter()
                .position(|iops| !(iops.is_finite() && *iops > 0.0))
            {
                return Err(ProfileError::Damaged {
                    key: format!("{name}[{bad}]"),
                    reason: format!("{}; expected a positive number", table[bad]),
                });
            }
        }
        Ok(())
    }
}

/// Runs one size of the profile from `clock_ns`: returns when the first access was issued and
/// when the last completed.
fn saturate(
    device: &mut dyn TimedDevice,
    kind: IoKind,
    bytes: u32,
    load: &ProfileLoad,
    clock_ns: u64,
    rng: &mut u64,
) -> (u64, u64) {
    let align = u64::from(load.align_bytes.max(1));
    let slots = (load.span_bytes / align).max(1);
    let limit = load.span_bytes.saturating_sub(u64::from(bytes));
    // Threads by when each issues next; the model takes accesses in time order.
    let mut ready: BinaryHeap<Reverse<(u64, u32)>> = (0..load.threads.max(1))
        .map(|thread| Reverse((clock_ns, thread)))
        .collect();
    let mut end_ns = clock_ns;
    for _ in 0..load.accesses.max(1) {
        let Reverse((now_ns, thread)) = ready.pop().expect("threads");
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let offset = (*rng % slots * align).min(limit);
        let done_ns = device.complete_ns(now_ns, kind, offset, bytes);
        end_ns = end_ns.max(done_ns);
        ready.push(Reverse((done_ns, thread)));
    }
    (clock_ns, end_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_device::presets::preset;

    fn profile(name: &str) -> MaxIopsProfile {
        let spec = preset(name).unwrap();
        let mut model = DeviceModel::new(&spec);
        MaxIopsProfile::measure(&mut model, name, &ProfileLoad::default())
    }

    #[test]
    fn writes_cost_more_than_reads_and_sizes_round_up_to_64_bytes() {
        let profile = profile("optane-pm-x2");
        profile.check("optane-pm-x2").unwrap();
        for bytes in [64, 256, 1024, 4096] {
            println!(
                "{bytes:>5} B: read {:>10.0}/s, write {:>10.0}/s",
                profile.max_iops(IoKind::Read, bytes),
                profile.max_iops(IoKind::Write, bytes)
            );
        }
        for bytes in [64, 256, 1024, 4096] {
            assert!(
                profile.max_iops(IoKind::Write, bytes) < profile.max_iops(IoKind::Read, bytes),
                "{bytes} B"
            );
        }
        // Larger accesses: fewer per second, and a 4 KiB read costs a 4 KiB read's share.
        assert!(profile.max_iops(IoKind::Read, 4096) < profile.max_iops(IoKind::Read, 256));
        let cost = profile.cost_ps(IoKind::Read, 4096) as f64;
        assert!((cost - 1e12 / profile.max_iops(IoKind::Read, 4096)).abs() <= 1.0);
        // Sizes round up to 64 B; beyond 4 KiB whole 4 KiB pieces add up.
        assert_eq!(
            profile.cost_ps(IoKind::Read, 1),
            profile.cost_ps(IoKind::Read, 64)
        );
        assert_eq!(
            profile.cost_ps(IoKind::Write, 8192 + 64),
            2 * profile.cost_ps(IoKind::Write, 4096) + profile.cost_ps(IoKind::Write, 64)
        );
    }

    #[test]
    fn a_profile_of_another_device_or_a_damaged_one_is_refused() {
        let mut profile = profile("optane-pm");
        assert!(profile
            .check("optane-pm-x2")
            .unwrap_err()
            .to_string()
            .contains("optane-pm"));
        profile.write_iops.pop();
        assert!(profile
            .check("optane-pm")
            .unwrap_err()
            .to_string()
            .contains("write_iops"));
        profile.write_iops.push(f64::NAN);
        assert!(profile
            .check("optane-pm")
            .unwrap_err()
            .to_string()
            .contains("write_iops[63]"));
    }
}
