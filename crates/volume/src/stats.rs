//! A volume's counters and state, for `heterarchy volume stats` and Prometheus metrics
//! (docs/block-volumes.md, "Stats, metrics and the dashboard"): hits, misses, dirty blocks,
//! per-device bandwidth and NHC state, per tier.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use heterarchy_engine::{CacheController, Controller, WriteMode};

use crate::failure::Failure;
use crate::sectors::Storage;

/// What the volume counts as it serves; requests on many threads count at once.
#[derive(Debug, Default)]
pub struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
    pub flushes: AtomicU64,
    pub trims: AtomicU64,
    pub cutoff_bypasses: AtomicU64,
    /// Pieces of requests a failing cache device could not serve, carried out on the backing
    /// store instead (`crate::failure`).
    pub went_around: AtomicU64,
    pub writebacks: AtomicU64,
    /// Lines found in the persistent tiers at start.
    pub restored_lines: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// One device's traffic.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceStats {
    /// `tier0`, `tier1`, ... (fastest first) or `backing`.
    pub role: String,
    pub storage: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Averages since the volume opened.
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    /// Operations that failed (docs/architecture.md, "Faults").
    #[serde(default)]
    pub errors: u64,
}

/// One cache tier's state and what the controller did with it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TierStats {
    pub tier: usize,
    pub storage: String,
    pub persistent: bool,
    pub slots: u64,
    pub resident_lines: u64,
    pub dirty_lines: u64,
    /// Line accesses whose highest copy was in this tier.
    pub hits: u64,
    pub installs: u64,
    pub evictions: u64,
}

/// The admission tuner's latest settings (seed 000 §4.3), for the top pair of levels.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AdmissionStats {
    pub state: String,
    pub load_admit: f64,
    pub data_admit: bool,
    pub intervals: u64,
    /// Every pair's settings, top first (tier i over the level below it).
    pub pairs: Vec<PairSettings>,
}

/// One pair of levels' NHC knobs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PairSettings {
    pub load_admit: f64,
    pub data_admit: bool,
}

/// A snapshot of one volume. The cache-wide figures add the tiers up.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VolumeStats {
    pub name: String,
    pub mode: String,
    /// `caching`, or `pass-through: WHY` once the cache is given up (docs/architecture.md,
    /// "Faults").
    #[serde(default)]
    pub state: String,
    /// Lines whose data only a failing cache holds: requests touching them fail until they
    /// can be written back.
    #[serde(default)]
    pub stranded_lines: u64,
    pub layout: String,
    pub size_bytes: u64,
    pub line_bytes: u32,
    pub uptime_s: f64,
    pub slots: u64,
    pub resident_lines: u64,
    pub dirty_lines: u64,
    pub restored_lines: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub trims: u64,
    /// Line accesses planned by the controller, and those some cache tier held.
    pub line_requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: f64,
    pub writebacks: u64,
    pub cutoff_bypasses: u64,
    /// Pieces of requests a failing cache device could not serve, carried out on the backing
    /// store instead (docs/reliability.md, "What survives what").
    #[serde(default)]
    pub went_around: u64,
    pub tiers: Vec<TierStats>,
    pub devices: Vec<DeviceStats>,
    pub admission: Option<AdmissionStats>,
}

/// What a volume's stats are read from.
pub(crate) struct StatsSource<'a> {
    pub name: &'a str,
    pub mode: WriteMode,
    pub layout: &'a str,
    pub size_bytes: u64,
    pub uptime_s: f64,
    pub controller: &'a CacheController,
    pub storage: &'a Storage,
    pub counters: &'a Counters,
    pub failure: &'a Failure,
}

impl VolumeStats {
    pub(crate) fn gather(source: StatsSource<'_>) -> VolumeStats {
        let StatsSource {
            name,
            mode,
            layout,
            size_bytes,
            uptime_s,
            controller,
            storage,
            counters,
            failure,
        } = source;
        let engine = controller.stats();
        let per_s = |bytes: u64| bytes as f64 / 1e6 / uptime_s.max(1e-9);
        let tier_count = storage.tiers();
        let devices = storage
            .devices
            .iter()
            .enumerate()
            .map(|(index, device)| {
                let (read_bytes, write_bytes) = device.traffic();
                DeviceStats {
                    role: if index == tier_count {
                        "backing".to_string()
                    } else {
                        format!("tier{index}")
                    },
                    storage: device.backend.describe(),
                    read_bytes,
                    write_bytes,
                    read_mb_per_s: per_s(read_bytes),
                    write_mb_per_s: per_s(write_bytes),
                    errors: device.errors(),
                }
            })
            .collect();
        let tiers: Vec<TierStats> = storage.devices[..tier_count]
            .iter()
            .enumerate()
            .map(|(tier, device)| {
                let slots = device.slots();
                let (resident_lines, dirty_lines) = slots.counts();
                TierStats {
                    tier,
                    storage: device.backend.describe(),
                    persistent: slots.is_persistent(),
                    slots: slots.geometry().slot_count,
                    resident_lines,
                    dirty_lines,
                    hits: engine.hits_per_tier[tier],
                    installs: engine.installs_per_tier[tier],
                    evictions: engine.evictions_per_tier[tier],
                }
            })
            .collect();
        let admission = controller.tuning_history().map(|history| {
            let last = history.points.last();
            let pairs: Vec<PairSettings> = last.map_or_else(Vec::new, |point| {
                point
                    .load_admit
                    .iter()
                    .zip(&point.data_admit)
                    .map(|(&load_admit, &data_admit)| PairSettings {
                        load_admit,
                        data_admit,
                    })
                    .collect()
            });
            AdmissionStats {
                state: last.map_or("starting", |point| point.state).to_string(),
                load_admit: pairs.first().map_or(1.0, |pair| pair.load_admit),
                data_admit: pairs.first().is_none_or(|pair| pair.data_admit),
                intervals: history.intervals,
                pairs,
            }
        });
        VolumeStats {
            name: name.to_string(),
            mode: mode.name().to_string(),
            state: failure.reason().map_or_else(
                || "caching".to_string(),
                |why| format!("pass-through: {why}"),
            ),
            stranded_lines: failure.stranded_lines(),
            layout: layout.to_string(),
            size_bytes,
            line_bytes: storage.line_bytes,
            uptime_s,
            slots: tiers.iter().map(|tier| tier.slots).sum(),
            resident_lines: tiers.iter().map(|tier| tier.resident_lines).sum(),
            dirty_lines: tiers.iter().map(|tier| tier.dirty_lines).sum(),
            restored_lines: Counters::get(&counters.restored_lines),
            reads: Counters::get(&counters.reads),
            writes: Counters::get(&counters.writes),
            read_bytes: Counters::get(&counters.read_bytes),
            write_bytes: Counters::get(&counters.write_bytes),
            flushes: Counters::get(&counters.flushes),
            trims: Counters::get(&counters.trims),
            line_requests: engine.requests,
            hits: engine.hits,
            misses: engine.requests - engine.hits,
            hit_ratio: engine.hit_ratio(),
            writebacks: Counters::get(&counters.writebacks),
            cutoff_bypasses: Counters::get(&counters.cutoff_bypasses),
            went_around: Counters::get(&counters.went_around),
            tiers,
            devices,
            admission,
        }
    }
}
