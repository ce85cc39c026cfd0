//! Orthus-KV's setting (seed 000 §4.5.2–4.5.3): the persistent block cache of a key-value store
//! on an Optane SSD over flash, write-around ("due to the LSM-tree's log-structured writes"),
//! the cache a third of the dataset ("33 GB, 1/3 of the 100 GB dataset"), threads as
//! closed-loop clients. Values are cached as objects of their own size (the devices count
//! whole 4 KiB pages, so a 1 KiB value costs a page as WiscKey's 4 KB blocks do); the dataset
//! is scaled down from 100 GB to keep runs short — hit ratios depend on the cache's share of
//! the dataset and the skew, not on its absolute size.

use heterarchy_device::DeviceSpec;
use heterarchy_engine::{AdmissionScheme, CacheConfig, WriteMode};
use heterarchy_sim::timed::{Arrivals, ClientStep, Load, TimedResult};
use heterarchy_trace::generate::WorkloadSpec;

use crate::{preset, run_phases, ExperimentError};

/// The cache's share of the dataset.
pub const CACHE_FRACTION: f64 = 1.0 / 3.0;

/// One Orthus-KV run: workload phases, clients, cache and load.
#[derive(Clone, Debug)]
pub struct Kv {
    /// The cache device, then the capacity device.
    pub devices: [DeviceSpec; 2],
    /// (start, spec) of each phase of the workload, ns of virtual time; the first starts at 0.
    pub phases: Vec<(u64, WorkloadSpec)>,
    pub cache_bytes: u64,
    pub load: Load,
    pub mode: WriteMode,
    pub seed: u64,
}

impl Kv {
    /// §4.5.2's setting for `spec` with `threads` clients: warmed up by three requests per
    /// key, then one second for the tuner to settle, then two measured (times `scale`).
    pub fn orthus_kv(spec: WorkloadSpec, threads: u32, scale: f64) -> Result<Kv, ExperimentError> {
        let mut kv = Kv::timeline(spec, threads)?;
        kv.load = Load {
            settle_ns: 1_000_000_000,
            measure_ns: Some((2e9 * scale) as u64),
            ..Load::closed(threads, u64::MAX, 3 * kv.phases[0].1.keys)
        };
        Ok(kv)
    }

    /// The same setting measured from time 0 to the end of the workload (for experiments that
    /// follow a run over time and end it themselves).
    pub fn timeline(spec: WorkloadSpec, threads: u32) -> Result<Kv, ExperimentError> {
        let dataset_bytes = spec.keys as f64 * spec.size.mean_bytes();
        Ok(Kv {
            devices: [preset("optane-ssd")?, preset("nvme-flash")?],
            cache_bytes: (dataset_bytes * CACHE_FRACTION) as u64,
            phases: vec![(0, spec)],
            load: Load::closed(threads, u64::MAX, 0),
            mode: WriteMode::Wa,
            seed: 1,
        })
    }

    /// Ends the run at `seconds` of virtual time.
    pub fn until(mut self, seconds: f64) -> Kv {
        self.load.max_time_ns = Some((seconds * 1e9) as u64);
        self
    }

    /// Clients change over time: `steps` of (start seconds, clients).
    pub fn with_clients(mut self, steps: &[(f64, u32)]) -> Kv {
        self.load.arrivals = Arrivals::Varying {
            steps: steps
                .iter()
                .map(|&(from_s, outstanding)| ClientStep {
                    from_ns: (from_s * 1e9) as u64,
                    outstanding,
                })
                .collect(),
        };
        self
    }

    /// The cache settings of `scheme` in this run's mode.
    pub fn cache_config(&self, scheme: AdmissionScheme) -> CacheConfig {
        CacheConfig {
            mode: self.mode,
            admission: scheme,
            ..CacheConfig::default()
        }
    }

    /// Runs `config`.
    pub fn run(&self, config: &CacheConfig) -> Result<TimedResult, ExperimentError> {
        run_phases(
            config,
            &[self.cache_bytes],
            &self.devices,
            &self.phases,
            &self.load,
            self.seed,
        )
    }

    /// Runs `scheme`.
    pub fn run_scheme(&self, scheme: AdmissionScheme) -> Result<TimedResult, ExperimentError> {
        self.run(&self.cache_config(scheme))
    }
}

/// A YCSB workload spec: `workload` (a–f), `keys`, values of `value_bytes`, Zipf `theta`,
/// key-value ops, effectively endless (runs end by time).
pub fn ycsb(workload: char, keys: u64, value_bytes: u32, theta: f64, seed: u64) -> WorkloadSpec {
    let text = format!(
        "ycsb-{workload}:keys={keys},requests=1099511627776,size={value_bytes},theta={theta},\
         kind=kv,seed={seed}"
    );
    WorkloadSpec::parse(&text).expect("a valid YCSB spec")
}
