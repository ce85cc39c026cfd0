//! What a device model predicts for a benchmark like fio's: a closed loop keeping `queue_depth`
//! accesses outstanding, optionally beside an open-loop background load (a co-runner).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::model::{DeviceModel, IoKind};
use crate::spec::DeviceSpec;

/// Address range accesses spread over when the device states no capacity.
const DEFAULT_SPAN_BYTES: u64 = 1 << 40;

/// A constant-rate stream of accesses running beside the measured one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackgroundLoad {
    pub kind: IoKind,
    pub bytes: u32,
    /// Offered load in bytes per second.
    pub rate_bytes_per_s: f64,
}

/// One benchmark run: what the measured clients issue and how long they run.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// Fraction of measured accesses that write (0 reads only, 1 writes only).
    pub write_fraction: f64,
    pub bytes: u32,
    pub queue_depth: u32,
    /// Byte offset of every access inside its granule (0: aligned).
    pub misalignment_bytes: u32,
    /// Each client walks consecutive addresses instead of random ones.
    pub sequential: bool,
    /// With `sequential`, all clients take turns on one stream (fio's one job at an I/O depth)
    /// instead of each walking its own.
    pub one_stream: bool,
    /// Accesses measured, after `warmup_accesses` that are not.
    pub accesses: u64,
    pub warmup_accesses: u64,
    /// Bytes written before the run, as on a device long in service (garbage collection).
    pub preconditioned_bytes: u64,
    pub background: Option<BackgroundLoad>,
    pub seed: u64,
}

impl Default for Probe {
    fn default() -> Self {
        Probe {
            write_fraction: 0.0,
            bytes: 4096,
            queue_depth: 1,
            misalignment_bytes: 0,
            sequential: false,
            one_stream: false,
            accesses: 20_000,
            warmup_accesses: 2_000,
            preconditioned_bytes: 0,
            background: None,
            seed: 1,
        }
    }
}

/// What the measured clients saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeResult {
    pub queue_depth: u32,
    pub mean_latency_ns: f64,
    pub iops: f64,
    pub bandwidth_bytes_per_s: f64,
}

/// Runs `probe` on a fresh model of `spec`.
pub fn run_probe(spec: &DeviceSpec, probe: &Probe) -> ProbeResult {
    let mut model = DeviceModel::new(spec);
    model.precondition(probe.preconditioned_bytes);
    let granularity = u64::from(spec.granularity_bytes);
    let span_granules = (spec.capacity_bytes().unwrap_or(DEFAULT_SPAN_BYTES) / granularity).max(1);
    // Sequential clients walk byte by byte: 1 KiB accesses share 4 KiB granules (Rule 3).
    let span_bytes = span_granules * granularity;
    let mut random = Xoshiro256PlusPlus::seed_from_u64(probe.seed);
    let queue_depth = probe.queue_depth.max(1);
    // Each client's next sequential byte; clients start far apart, granule-aligned, or all
    // share one stream.
    let streams = if probe.one_stream {
        1
    } else {
        u64::from(queue_depth)
    };
    let mut cursor: Vec<u64> = (0..streams)
        .map(|client| client * span_granules / streams * granularity)
        .collect();
    let mut next_address = |client: usize, random: &mut Xoshiro256PlusPlus| {
        let byte = if probe.sequential {
            let stream = if probe.one_stream { 0 } else { client };
            let byte = cursor[stream];
            cursor[stream] = (byte + u64::from(probe.bytes)) % span_bytes;
            byte
        } else {
            random.gen_range(0..span_granules) * granularity
        };
        byte + u64::from(probe.misalignment_bytes)
    };

    // Completion events of measured clients, earliest first.
    let mut pending: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut issued_at = vec![0u64; queue_depth as usize];
    for client in 0..queue_depth {
        let kind = pick_kind(probe.write_fraction, &mut random);
        let address = next_address(client as usize, &mut random);
        pending.push(Reverse((
            model.submit(0, kind, address, probe.bytes),
            client,
        )));
    }
    let background_interval_ns = probe
        .background
        .map(|load| f64::from(load.bytes) / load.rate_bytes_per_s * 1e9);
    let mut background_next_ns = 0.0;
    let mut background_address = span_granules / 2;

    let total = probe.warmup_accesses + probe.accesses;
    let mut completed = 0u64;
    let mut measured_latency_ns = 0.0;
    let mut measure_start_ns = 0u64;
    let mut last_completion_ns = 0u64;
    while let Some(Reverse((done_ns, client))) = pending.pop() {
        // Background accesses due before this completion go first, in time order.
        if let (Some(load), Some(interval)) = (probe.background, background_interval_ns) {
            while background_next_ns <= done_ns as f64 {
                let address = background_address * granularity;
                background_address = (background_address + 7919) % span_granules;
                model.submit(background_next_ns as u64, load.kind, address, load.bytes);
                background_next_ns += interval;
            }
        }
        completed += 1;
        if completed == probe.warmup_accesses {
            measure_start_ns = done_ns;
        }
        if completed > probe.warmup_accesses {
            measured_latency_ns += (done_ns - issued_at[client as usize]) as f64;
            last_completion_ns = done_ns;
        }
        if completed >= total {
            break;
        }
        let kind = pick_kind(probe.write_fraction, &mut random);
        let address = next_address(client as usize, &mut random);
        issued_at[client as usize] = done_ns;
        pending.push(Reverse((
            model.submit(done_ns, kind, address, probe.bytes),
            client,
        )));
    }
    let measured = completed.saturating_sub(probe.warmup_accesses).max(1);
    let elapsed_s = (last_completion_ns.saturating_sub(measure_start_ns)).max(1) as f64 / 1e9;
    let iops = measured as f64 / elapsed_s;
    ProbeResult {
        queue_depth,
        mean_latency_ns: measured_latency_ns / measured as f64,
        iops,
        bandwidth_bytes_per_s: iops * f64::from(probe.bytes),
    }
}

fn pick_kind(write_fraction: f64, random: &mut Xoshiro256PlusPlus) -> IoKind {
    if write_fraction > 0.0 && random.gen::<f64>() < write_fraction {
        IoKind::Write
    } else {
        IoKind::Read
    }
}
