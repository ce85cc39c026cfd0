//! Static splitting, the baseline of seed 000 §4.2 (Eqs 4.8–4.9): a fixed fraction S of the
//! keys lives on the fast device and the rest on the slow one; every request goes to its key's
//! device, and nothing is installed or evicted.
//!
//! The split is by a seeded hash of the key, so it is deterministic, the same key always goes
//! to the same device, and the fraction of distinct keys on device 0 tends to S.

use heterarchy_trace::{Op, Request};

use crate::controller::{Controller, ControllerStats, Decision};
use crate::plan::{DeviceOp, IoKind, Plan};

/// SplitMix64's finalizer: a bijective mix whose output bits all depend on every input bit.
fn mix(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    value ^ (value >> 31)
}

/// The splitting baseline over two devices; see the module docs.
pub struct SplitController {
    /// Keys whose hash is below this go to device 0 (out of 2^64).
    threshold: u128,
    salt: u64,
    stats: ControllerStats,
}

impl SplitController {
    /// Sends the fraction `split_rate` of the keys to device 0 (S in the seed's Eqs 4.8–4.9);
    /// rates outside [0, 1] are clamped and NaN counts as 0. `seed` picks which keys.
    pub fn new(split_rate: f64, seed: u64) -> SplitController {
        let rate = if split_rate.is_nan() {
            0.0
        } else {
            split_rate.clamp(0.0, 1.0)
        };
        SplitController {
            threshold: (rate * 2f64.powi(64)) as u128,
            salt: mix(seed ^ 0x5EED_5EED_5EED_5EED),
            stats: ControllerStats {
                hits_per_tier: vec![0],
                installs_per_tier: vec![0],
                evictions_per_tier: vec![0],
                ..ControllerStats::default()
            },
        }
    }

    /// The device (0 or 1) that serves `key`.
    pub fn device_of(&self, key: u64) -> u8 {
        u8::from(u128::from(mix(key ^ self.salt)) >= self.threshold)
    }
}

impl Controller for SplitController {
    fn device_count(&self) -> usize {
        2
    }

    fn plan(&mut self, request: &Request, _now_ns: u64, plan: &mut Plan) -> Decision {
        self.stats.requests += 1;
        let kind = match request.op {
            // Nothing is cached, so a discard has nothing to drop.
            Op::Delete | Op::Trim => {
                return Decision {
                    hit_tier: None,
                    source: None,
                }
            }
            op if op.is_write() => {
                self.stats.writes += 1;
                IoKind::Write
            }
            _ => {
                self.stats.reads += 1;
                IoKind::Read
            }
        };
        let device = self.device_of(request.key);
        plan.push(DeviceOp {
            device,
            kind,
            key: request.key,
            bytes: request.size,
        });
        let served_fast = device == 0;
        if served_fast {
            self.stats.hits += 1;
            self.stats.hits_per_tier[0] += 1;
        }
        Decision {
            hit_tier: served_fast.then_some(0),
            source: (kind == IoKind::Read).then_some(device),
        }
    }

    fn background(&mut self, _now_ns: u64, _plan: &mut Plan) -> Option<u64> {
        None
    }

    fn stats(&self) -> &ControllerStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: u64, op: Op) -> Request {
        Request {
            op,
            ..Request::new(key, 4096)
        }
    }

    #[test]
    fn the_fraction_of_keys_on_the_fast_device_is_the_split_rate() {
        for rate in [0.0, 0.1, 0.5, 0.9, 1.0] {
            let split = SplitController::new(rate, 7);
            let fast = (0..100_000u64)
                .filter(|&key| split.device_of(key) == 0)
                .count();
            let fraction = fast as f64 / 100_000.0;
            assert!((fraction - rate).abs() < 0.01, "rate {rate}: {fraction}");
        }
    }

    #[test]
    fn reads_and_writes_go_to_the_keys_device_and_nothing_else() {
        let mut split = SplitController::new(0.5, 3);
        let mut plan = Plan::new();
        for key in 0..1000u64 {
            for op in [Op::Read, Op::Write] {
                plan.clear();
                let decision = split.plan(&request(key, op), 0, &mut plan);
                let device = split.device_of(key);
                let kind = if op == Op::Read {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                assert_eq!(
                    plan.ops(),
                    &[DeviceOp {
                        device,
                        kind,
                        key,
                        bytes: 4096
                    }]
                );
                assert_eq!(plan.stage_count(), 1);
                assert_eq!(decision.hit_tier, (device == 0).then_some(0));
            }
        }
        let stats = split.stats();
        assert_eq!(
            (stats.reads, stats.writes, stats.requests),
            (1000, 1000, 2000)
        );
        assert_eq!(stats.hits, stats.hits_per_tier[0]);
        assert!(split.background(0, &mut plan).is_none());
    }

    #[test]
    fn the_seed_picks_the_keys_deterministically() {
        let a = SplitController::new(0.5, 1);
        let b = SplitController::new(0.5, 1);
        let c = SplitController::new(0.5, 2);
        let devices = |s: &SplitController| (0..256u64).map(|k| s.device_of(k)).collect::<Vec<_>>();
        assert_eq!(devices(&a), devices(&b));
        assert_ne!(devices(&a), devices(&c));
        assert!(SplitController::new(f64::NAN, 1).device_of(5) == 1);
        assert!(SplitController::new(2.0, 1).device_of(5) == 0);
    }
}
