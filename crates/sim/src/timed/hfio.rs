//! An HFIO-like experiment (seed 000 §4.2.2, Figures 4.4 and 4.5): random fixed-size block
//! requests against a two-device hierarchy, caching with LRU at hit rates set by the working set
//! against the cache size, and static splitting at split rates — throughput over hit or split
//! rate at a given concurrency.

use heterarchy_device::DeviceSpec;
use heterarchy_engine::{CacheConfig, CacheController, SplitController};
use heterarchy_trace::generate::{generator, WorkloadSpec};
use heterarchy_trace::TraceError;
use serde::Serialize;

use super::run::{run_timed, Load, TimedResult};

/// One HFIO setting: the hierarchy, the request mix and the load.
#[derive(Clone, Debug)]
pub struct Hfio {
    /// Cache device, then capacity device.
    pub devices: [DeviceSpec; 2],
    /// Request (and cache-line) size; the thesis fixes 32 KiB.
    pub block_bytes: u32,
    /// Lines the cache device holds.
    pub cache_lines: u64,
    /// Fraction of requests that write.
    pub write_ratio: f64,
    /// Requests outstanding (closed loop).
    pub concurrency: u32,
    /// Requests measured after warm-up.
    pub requests: u64,
    /// Requests run first to fill the cache ("long enough to fill the cache and deliver
    /// steady-state performance").
    pub warmup_requests: u64,
    pub seed: u64,
}

/// Throughput at one hit or split rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HfioPoint {
    /// The hit rate aimed at (caching) or the split rate (splitting).
    pub rate: f64,
    /// The hit ratio measured (caching) or the share served by the cache device (splitting).
    pub measured_hit_ratio: f64,
    pub throughput_bytes_per_s: f64,
    pub result: TimedResult,
}

impl Hfio {
    fn load(&self) -> Load {
        Load::closed(self.concurrency, self.requests, self.warmup_requests)
    }

    /// Uniform random requests over `keys` lines.
    fn workload(&self, keys: u64) -> Result<WorkloadSpec, TraceError> {
        let text = format!(
            "uniform:keys={keys},requests={},size={},kind=block,write={},seed={}",
            self.warmup_requests + self.requests,
            self.block_bytes,
            self.write_ratio,
            self.seed
        );
        WorkloadSpec::parse(&text)
            .map_err(|e| TraceError::file("<hfio workload>".as_ref(), e.to_string()))
    }

    fn run(
        &self,
        controller: &mut dyn heterarchy_engine::Controller,
        keys: u64,
    ) -> Result<TimedResult, TraceError> {
        let spec = self.workload(keys)?;
        let mut reader = generator(&spec)
            .map_err(|e| TraceError::file("<hfio workload>".as_ref(), e.to_string()))?;
        run_timed(controller, &self.devices, &mut *reader, &self.load())
    }

    /// Classic caching (LRU, write-through) at `hit_rate`: uniform accesses over
    /// cache_lines / hit_rate lines give that hit rate once the cache is full.
    pub fn caching(&self, hit_rate: f64) -> Result<HfioPoint, TraceError> {
        let keys = ((self.cache_lines as f64 / hit_rate.max(1e-6)).round() as u64).max(1);
        let config = CacheConfig::default();
        let capacity = self.cache_lines * u64::from(self.block_bytes);
        let mut controller = CacheController::new(&config, &[capacity], self.seed)
            .map_err(|e| TraceError::file("<hfio cache>".as_ref(), e.to_string()))?;
        let result = self.run(&mut controller, keys)?;
        Ok(point(hit_rate, result))
    }

    /// Static splitting at `split_rate` over a working set far larger than any cache (splitting
    /// has no cache: every key lives on one device).
    pub fn splitting(&self, split_rate: f64) -> Result<HfioPoint, TraceError> {
        let mut controller = SplitController::new(split_rate, self.seed);
        let result = self.run(&mut controller, self.cache_lines * 100)?;
        Ok(point(split_rate, result))
    }
}

fn point(rate: f64, result: TimedResult) -> HfioPoint {
    HfioPoint {
        rate,
        measured_hit_ratio: result.hit_ratio,
        throughput_bytes_per_s: result.throughput_bytes_per_s,
        result,
    }
}

/// The point of highest throughput.
pub fn best(points: &[HfioPoint]) -> &HfioPoint {
    points.iter().fold(&points[0], |best, point| {
        if point.throughput_bytes_per_s > best.throughput_bytes_per_s {
            point
        } else {
            best
        }
    })
}
