//! A volume's counters and state, for `heterarchy volume stats` and Prometheus metrics (issue 5,
//! item 5: "hits, misses, dirty blocks, per-device bandwidth, NHC state").

use serde::{Deserialize, Serialize};

use heterarchy_engine::{CacheController, Controller, WriteMode};

use crate::slots::Slots;

/// What the volume counts as it serves.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub cutoff_bypasses: u64,
    pub writebacks: u64,
    /// Lines found in the cache at start.
    pub restored_lines: u64,
    /// Per device (cache, backing).
    pub device_read_bytes: [u64; 2],
    pub device_write_bytes: [u64; 2],
}

/// One device's traffic.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceStats {
    /// `cache` or `backing`.
    pub role: String,
    pub storage: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Averages since the volume opened.
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
}

/// The admission tuner's latest settings (seed 000 §4.3).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AdmissionStats {
    pub state: String,
    pub load_admit: f64,
    pub data_admit: bool,
    pub intervals: u64,
}

/// A snapshot of one volume.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VolumeStats {
    pub name: String,
    pub mode: String,
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
    /// Line accesses planned by the controller, and those the cache held.
    pub line_requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: f64,
    pub writebacks: u64,
    pub cutoff_bypasses: u64,
    pub devices: Vec<DeviceStats>,
    pub admission: Option<AdmissionStats>,
}

/// What a volume's stats are read from.
pub(crate) struct StatsSource<'a> {
    pub name: &'a str,
    pub mode: WriteMode,
    pub size_bytes: u64,
    pub line_bytes: u32,
    pub uptime_s: f64,
    pub controller: &'a CacheController,
    pub slots: &'a Slots,
    pub counters: &'a Counters,
    /// How the cache and the backing store describe themselves.
    pub storage: [String; 2],
}

impl VolumeStats {
    pub(crate) fn gather(source: StatsSource<'_>) -> VolumeStats {
        let StatsSource {
            name,
            mode,
            size_bytes,
            line_bytes,
            uptime_s,
            controller,
            slots,
            counters,
            storage,
        } = source;
        let engine = controller.stats();
        let per_s = |bytes: u64| bytes as f64 / 1e6 / uptime_s.max(1e-9);
        let devices = ["cache", "backing"]
            .into_iter()
            .zip(storage)
            .enumerate()
            .map(|(index, (role, storage))| DeviceStats {
                role: role.to_string(),
                storage,
                read_bytes: counters.device_read_bytes[index],
                write_bytes: counters.device_write_bytes[index],
                read_mb_per_s: per_s(counters.device_read_bytes[index]),
                write_mb_per_s: per_s(counters.device_write_bytes[index]),
            })
            .collect();
        let admission = controller.tuning_history().map(|history| {
            let last = history.points.last();
            AdmissionStats {
                state: last.map_or("starting", |point| point.state).to_string(),
                load_admit: last
                    .and_then(|p| p.load_admit.first().copied())
                    .unwrap_or(1.0),
                data_admit: last
                    .and_then(|p| p.data_admit.first().copied())
                    .unwrap_or(true),
                intervals: history.intervals,
            }
        });
        VolumeStats {
            name: name.to_string(),
            mode: mode.name().to_string(),
            size_bytes,
            line_bytes,
            uptime_s,
            slots: slots.geometry().slot_count,
            resident_lines: slots.len() as u64,
            dirty_lines: slots.dirty_count() as u64,
            restored_lines: counters.restored_lines,
            reads: counters.reads,
            writes: counters.writes,
            read_bytes: counters.read_bytes,
            write_bytes: counters.write_bytes,
            flushes: counters.flushes,
            trims: counters.trims,
            line_requests: engine.requests,
            hits: engine.hits,
            misses: engine.requests - engine.hits,
            hit_ratio: engine.hit_ratio(),
            writebacks: counters.writebacks,
            cutoff_bypasses: counters.cutoff_bypasses,
            devices,
            admission,
        }
    }
}
