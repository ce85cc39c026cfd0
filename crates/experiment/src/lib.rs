//! The seed papers' experiments, reproduced on the device models (docs/architecture.md,
//! "Testing": the seeds' figures as experiments whose tests assert the shape).
//!
//! Each experiment is one module: it runs the timed simulator over the hierarchies and
//! workloads of one figure or table and returns its [`Output`] — one JSON object per row, the
//! charts, and the thesis' numbers beside ours. `heterarchy experiment NAME` prints and draws
//! them; the shape tests call the modules' typed functions.

pub mod caiti;
pub mod kv;
pub mod micro;
pub mod nhc_alpha;
pub mod nhc_hotspot;
pub mod nhc_orthus_cas;
pub mod nhc_prior_work;
pub mod nhc_targets;
pub mod nhc_write_modes;
pub mod nhc_ycsb;
pub mod nhc_ycsb_d;
pub mod nhc_zippydb;
pub mod nyx;
pub mod output;
pub mod poly;
pub mod timeline;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use heterarchy_device::codec::CodecCost;
use heterarchy_device::DeviceSpec;
use heterarchy_engine::{AdmissionScheme, CacheConfig, CacheController};
use heterarchy_sim::parallel::map_parallel;
use heterarchy_sim::timed::{run_timed_phases, Load, Phase, TimedResult};
use heterarchy_trace::generate::{generator, WorkloadSpec};

pub use output::{Comparison, Output};

/// How far an experiment has got, in simulation runs; another thread may watch it.
#[derive(Debug, Default)]
pub struct Progress {
    done: AtomicUsize,
    total: AtomicUsize,
}

impl Progress {
    /// Runs finished and runs known so far.
    pub fn get(&self) -> (usize, usize) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }
}

/// How big a run to make.
#[derive(Clone, Debug)]
pub struct Options {
    /// Multiplies every experiment's measured run lengths (1 is the figure's own; tests use
    /// less).
    pub scale: f64,
    /// Worker threads for independent runs.
    pub threads: usize,
    pub progress: Arc<Progress>,
    /// What compressing costs in the PolyEMT experiments: a codec measured on this machine,
    /// or `None` for the paper's figures (deterministic, for tests).
    pub codec_cost: Option<CodecCost>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            scale: 1.0,
            threads: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
            progress: Arc::default(),
            codec_cost: None,
        }
    }
}

impl Options {
    /// The default options with measured runs `scale` times as long.
    pub fn scaled(scale: f64) -> Options {
        Options {
            scale,
            ..Options::default()
        }
    }

    /// Every setting under classic caching and under NHC: one (classic, NHC) pair of runs per
    /// setting, in order.
    pub fn run_classic_and_nhc<T: Sync>(
        &self,
        settings: &[T],
        run: impl Fn(&T, AdmissionScheme) -> Result<TimedResult, ExperimentError> + Sync,
    ) -> Result<Vec<(TimedResult, TimedResult)>, ExperimentError> {
        let jobs: Vec<(usize, AdmissionScheme)> = (0..settings.len())
            .flat_map(|index| {
                [
                    (index, AdmissionScheme::Classic),
                    (index, AdmissionScheme::Nhc),
                ]
            })
            .collect();
        let mut results = self
            .run_all(&jobs, |&(index, scheme)| run(&settings[index], scheme))
            .into_iter();
        let mut pairs = Vec::with_capacity(settings.len());
        while let (Some(classic), Some(nhc)) = (results.next(), results.next()) {
            pairs.push((classic?, nhc?));
        }
        Ok(pairs)
    }

    /// `run` over every job on the worker threads, results in job order, counting progress.
    pub fn run_all<T: Sync, R: Send>(&self, jobs: &[T], run: impl Fn(&T) -> R + Sync) -> Vec<R> {
        self.progress.total.fetch_add(jobs.len(), Ordering::Relaxed);
        map_parallel(jobs, self.threads, |job| {
            let result = run(job);
            self.progress.done.fetch_add(1, Ordering::Relaxed);
            result
        })
    }
}

/// Why an experiment could not run (a bad preset or workload: a bug, since both are built in),
/// naming the preset, or carrying the failing layer's own error.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A device preset that does not exist.
    #[error("{0}: no such device preset")]
    NoPreset(String),
    /// A trace that cannot be read.
    #[error(transparent)]
    Trace(#[from] heterarchy_trace::TraceError),
    /// A workload spec that cannot be generated.
    #[error(transparent)]
    Workload(#[from] heterarchy_trace::generate::SpecError),
    /// A cache configuration the controller refuses.
    #[error(transparent)]
    Config(#[from] heterarchy_engine::ConfigError),
    /// A PolyEMT knob or parameter out of its range.
    #[error(transparent)]
    Param(#[from] heterarchy_engine::ParamError),
    /// A PolyEMT run that cannot start or go on.
    #[error(transparent)]
    Poly(#[from] heterarchy_sim::PolyError),
}

/// One experiment of the registry.
pub struct Experiment {
    /// The name `heterarchy experiment` takes.
    pub name: &'static str,
    /// The figure or table it reproduces.
    pub reproduces: &'static str,
    pub description: &'static str,
    pub run: fn(&Options) -> Result<Output, ExperimentError>,
}

/// Every experiment, in the thesis' order.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "nhc-orthus-cas",
        reproduces: "seed 000 Figure 4.7",
        description: "NHC against classic caching on five hierarchies, 95% and 80% hits, \
                  Load-0.5 to Load-2.0 (Orthus-CAS microbenchmark)",
        run: nhc_orthus_cas::run,
    },
    Experiment {
        name: "nhc-write-modes",
        reproduces: "seed 000 Figure 4.8",
        description: "NHC's speedup under write-around, write-back and write-through over write \
                  and dirty-read ratios (concurrency 16, 95% hits)",
        run: nhc_write_modes::run,
    },
    Experiment {
        name: "nhc-targets",
        reproduces: "seed 000 Table 4.2",
        description: "NHC tuned for throughput, mean or p99 latency against classic caching",
        run: nhc_targets::run,
    },
    Experiment {
        name: "nhc-ycsb-c",
        reproduces: "seed 000 Figures 4.9 and 4.10",
        description: "YCSB-C on Optane SSD + flash over 1 to 32 threads, and the read bandwidth \
                  of each device (Orthus-KV)",
        run: nhc_ycsb::run_ycsb_c,
    },
    Experiment {
        name: "nhc-ycsb",
        reproduces: "seed 000 Figure 4.11",
        description: "YCSB A, B, E and F at 32 threads (Orthus-KV)",
        run: nhc_ycsb::run_ycsb,
    },
    Experiment {
        name: "nhc-zippydb",
        reproduces: "seed 000 Figure 4.12",
        description: "A ZippyDB-like diurnal load over two compressed days (Orthus-KV)",
        run: nhc_zippydb::run,
    },
    Experiment {
        name: "nhc-hotspot",
        reproduces: "seed 000 Figure 4.13",
        description: "The hot spot jumps at 10 s (YCSB-C, 16 KiB values, 32 threads)",
        run: nhc_hotspot::run,
    },
    Experiment {
        name: "nhc-ycsb-d",
        reproduces: "seed 000 Figure 4.14",
        description: "YCSB-D: NHC, NHC always admitting, classic caching over time",
        run: nhc_ycsb_d::run,
    },
    Experiment {
        name: "nhc-prior-work",
        reproduces: "seed 000 Figure 4.15",
        description: "NHC against SIB+, SIB++ and LBICA, static and with the write ratio \
                  redrawn every 10 s down to 0.5 s",
        run: nhc_prior_work::run,
    },
    Experiment {
        name: "nhc-alpha",
        reproduces: "Algorithm 1's α (open in seed 000)",
        description: "NHC's gain and returns to State 1 over α on changing and static workloads",
        run: nhc_alpha::run,
    },
    Experiment {
        name: "caiti-iodepth",
        reproduces: "seed 001 Figure 5a, 5d",
        description: "Random 4 KiB writes on raw PM, the BTT alone and the BTT under each \
                  staging cache, iodepth 32 to 1024",
        run: caiti::run_iodepth,
    },
    Experiment {
        name: "caiti-jobs",
        reproduces: "seed 001 Figure 5e",
        description: "Every stack over 1 to 32 jobs at iodepth 32",
        run: caiti::run_jobs,
    },
    Experiment {
        name: "caiti-breakdown",
        reproduces: "seed 001 Figures 6a and 6c",
        description: "Where each stack's time goes, the write outcomes, Caiti's ablations",
        run: caiti::run_breakdown,
    },
    Experiment {
        name: "caiti-fsync",
        reproduces: "seed 001 Figure 2b",
        description: "Flush latency after 512 KiB to 128 MiB of random writes",
        run: caiti::run_fsync,
    },
    Experiment {
        name: "caiti-fsync-every",
        reproduces: "seed 001 Figure 2a",
        description: "Every stack with a flush after every 128 writes",
        run: caiti::run_fsync_every,
    },
    Experiment {
        name: "caiti-cache-size",
        reproduces: "seed 001 Table 1",
        description: "Mean latency with 64 MiB to 2 GiB of cache, and the DRAM metadata per slot",
        run: caiti::run_cache_size,
    },
    Experiment {
        name: "nyx-profile",
        reproduces: "seed 000 Figure 5.3",
        description: "NyxCache's MaxIOPS profile of random reads and writes, 64 B to 4 KiB",
        run: nyx::run_profile,
    },
    Experiment {
        name: "nyx-interference",
        reproduces: "seed 000 Figure 5.1",
        description: "A single-thread 256 B reader beside 4 KiB reads and 64 to 512 B stores",
        run: nyx::run_interference,
    },
    Experiment {
        name: "nyx-limit",
        reproduces: "seed 000 Figures 5.6a-b",
        description: "Resource limit in device cost against a bandwidth limit: L's throughput \
                  and U's over L's access patterns",
        run: nyx::run_limit,
    },
    Experiment {
        name: "nyx-qos",
        reproduces: "seed 000 Figure 5.8",
        description: "An LC tenant's p99 target: Nyx's interference analysis against \
                  Caladan-style throttling of the busiest BE tenant",
        run: nyx::run_qos,
    },
    Experiment {
        name: "nyx-fair",
        reproduces: "seed 000 Figure 5.9b",
        description: "Fair slowdown for a light cache beside 12 kinds of co-runner",
        run: nyx::run_fair,
    },
    Experiment {
        name: "nyx-proportional",
        reproduces: "seed 000 Figures 5.10-5.12",
        description: "Weighted shares in device cost against bandwidth, and donation of a light \
                  tenant's idle share",
        run: nyx::run_proportional,
    },
    Experiment {
        name: "nyx-estimate",
        reproduces: "seed 000 Figure 5.5b",
        description: "What measuring each tenant alone costs: 2 to 12 tenants, every 0.5 to 10 s",
        run: nyx::run_estimate,
    },
    Experiment {
        name: "nyx-spike",
        reproduces: "seed 000 Figure 5.13",
        description: "S1 and C1 beside C2's write spikes, C2 limited in device cost or in bytes",
        run: nyx::run_spike,
    },
    Experiment {
        name: "nyx-critical",
        reproduces: "seed 000 Figure 5.14",
        description: "S1's hard slowdown limit of 1.5 through diurnal C1 and C2",
        run: nyx::run_critical,
    },
    Experiment {
        name: "nyx-hit-ratio",
        reproduces: "seed 000 Figure 5.7",
        description: "A limited cache's hits and requests at hit ratios from 100% to 30%",
        run: nyx::run_hit_ratio,
    },
    Experiment {
        name: "nyx-experiment-step",
        reproduces: "seed 000 Figure 5.15",
        description: "QoS under ExperimentSteps of 125 MB/s to 1 GB/s",
        run: nyx::run_experiment_step,
    },
    Experiment {
        name: "nyx-donate-step",
        reproduces: "seed 000 Figure 5.16",
        description: "Proportional sharing's donor under DonateSteps of 10% to 60%",
        run: nyx::run_donate_step,
    },
    Experiment {
        name: "nyx-pelikan",
        reproduces: "seed 000 Figure 5.4",
        description: "Nyx-Pelikan's keys in DRAM and NT-stored values against Pelikan on PM",
        run: nyx::run_pelikan,
    },
    Experiment {
        name: "poly-roles",
        reproduces: "seed 004 Figures 10 and 11",
        description: "PolyEMT's tier as memory, as write cache, at fixed shares and split by \
                  the functional search, over YCSB A-F",
        run: poly::run_roles,
    },
    Experiment {
        name: "poly-compression",
        reproduces: "seed 004 Figures 10 and 12",
        description: "PolyEMT's roles with and without compression: throughput, p90 tails, \
                  final shares",
        run: poly::run_compression,
    },
    Experiment {
        name: "poly-convergence",
        reproduces: "seed 004 Table 2 and Figure 13",
        description: "PolyEMT's search window by window, and YCSB-C turning into YCSB-A",
        run: poly::run_convergence,
    },
    Experiment {
        name: "poly-tco",
        reproduces: "seed 004 Table 3",
        description: "Datacenter cost of three ways to provision BB-DRAM, from the workloads' \
                  measured needs",
        run: poly::run_tco,
    },
    Experiment {
        name: "poly-offline",
        reproduces: "seed 004 Table 2 (offline reference)",
        description: "PolyEMT's online search against an exhaustive sweep of both knobs",
        run: poly::run_offline,
    },
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS
        .iter()
        .find(|experiment| experiment.name == name)
}

/// Runs `config` with cache tiers of `tier_bytes` over `devices`, on a workload of phases
/// (start, spec; times in ns of virtual time).
pub(crate) fn run_phases(
    config: &CacheConfig,
    tier_bytes: &[u64],
    devices: &[DeviceSpec],
    phases: &[(u64, WorkloadSpec)],
    load: &Load,
    seed: u64,
) -> Result<TimedResult, ExperimentError> {
    let mut controller = CacheController::new(config, tier_bytes, seed)?;
    let mut readers = phases
        .iter()
        .map(|(from_ns, spec)| Ok((*from_ns, generator(spec)?)))
        .collect::<Result<Vec<_>, ExperimentError>>()?;
    let mut phases: Vec<Phase> = readers
        .iter_mut()
        .map(|(from_ns, reader)| Phase {
            from_ns: *from_ns,
            reader: &mut **reader,
        })
        .collect();
    Ok(run_timed_phases(
        &mut controller,
        devices,
        &mut phases,
        load,
        &mut |_| {},
    )?)
}

/// A device preset by name; the names used here are built in.
pub(crate) fn preset(name: &str) -> Result<heterarchy_device::DeviceSpec, ExperimentError> {
    heterarchy_device::presets::preset(name)
        .ok_or_else(|| ExperimentError::NoPreset(name.to_string()))
}
