//! The executor: one store thread carrying out the tier's decisions on the machine of the
//! module docs, and one background write-back thread.

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use heterarchy_device::codec::{fill_page, Codec, PAGE_BYTES, SECTORS_PER_PAGE};
use heterarchy_engine::poly::{Found, KnobSearch, Knobs, PolyAction, PolyTier, Window};
use heterarchy_engine::ParamError;
use heterarchy_policy::eviction::clock::Clock;
use heterarchy_policy::eviction::{Evicted, EvictionPolicy};
use heterarchy_trace::generate::{generator, Random, RequestKind, WorkloadSpec};
use heterarchy_trace::{Op, Request};
use rustc_hash::FxHashMap;

use super::{PolyMachine, PolyResult, PolyRun, PolyScheme};
use crate::error::PolyError;

/// Runs `workload` (its first `run.warmup_ops + run.ops` requests, as key-value operations on
/// records) on `machine` under `scheme`; deterministic for given arguments.
pub fn run_poly(
    machine: &PolyMachine,
    workload: &WorkloadSpec,
    scheme: PolyScheme,
    run: &PolyRun,
) -> Result<PolyResult, PolyError> {
    run_poly_phases(
        machine,
        &[(workload.clone(), run.warmup_ops + run.ops)],
        scheme,
        run,
    )
}

/// Runs phases of workloads one after another, `ops` operations of each (the first
/// `run.warmup_ops` of them unmeasured), for at most `run.ops` measured operations and
/// `run.duration_ns` of measured simulated time; the data's compressibility is the first
/// phase's.
pub fn run_poly_phases(
    machine: &PolyMachine,
    phases: &[(WorkloadSpec, u64)],
    scheme: PolyScheme,
    run: &PolyRun,
) -> Result<PolyResult, PolyError> {
    machine.validate()?;
    if run.ops == 0 || run.window_ns == 0 {
        return Err(PolyError::Invalid {
            key: "ops and window_ns",
            reason: "expected at least 1",
        });
    }
    let Some((first, _)) = phases.first() else {
        return Err(PolyError::Invalid {
            key: "phases",
            reason: "expected at least one workload",
        });
    };
    let mut search = match scheme {
        PolyScheme::Search(config) => Some(KnobSearch::new(config)?),
        _ => None,
    };
    let mut readers = Vec::new();
    for (workload, ops) in phases {
        let spec = WorkloadSpec {
            requests: *ops,
            kind: RequestKind::Kv,
            ..workload.clone()
        };
        readers.push(generator(&spec)?);
    }
    let requests = readers
        .into_iter()
        .flat_map(|mut reader| std::iter::from_fn(move || reader.next_request().transpose()));
    let mut store = Store::new(machine, run.codec, first.compressibility, first.seed);
    store.set_knobs(scheme.start())?;

    let mut trajectory = Vec::new();
    let mut read_ns = latency_histogram();
    let mut write_ns = latency_histogram();
    let mut measured_from_ns = 0;
    let mut window = Window::new(0);
    let mut done = 0u64;
    let mut queued: VecDeque<u64> = VecDeque::new();
    let mut queued_ns = 0u64;
    for request in requests {
        let request = request?;
        if done >= run.warmup_ops + run.ops
            || (done > run.warmup_ops && store.now_ns - measured_from_ns >= run.duration_ns)
        {
            break;
        }
        if done == run.warmup_ops {
            store.counters = Counters::default();
            measured_from_ns = store.now_ns;
            window = Window::new(store.now_ns);
        }
        let started_ns = store.now_ns;
        let writes = store.serve(&request);
        let service_ns = store.now_ns - started_ns;
        // Each client waits for the operations of the others queued before its own.
        queued.push_back(service_ns);
        queued_ns += service_ns;
        if queued.len() > machine.clients as usize {
            queued_ns -= queued.pop_front().expect("longer than the client count");
        }
        let latency_ns = queued_ns;
        done += 1;
        if done <= run.warmup_ops {
            continue;
        }
        let histogram = if writes { &mut write_ns } else { &mut read_ns };
        histogram.saturating_record(latency_ns.max(1));
        if let Some(search) = search.as_mut() {
            if let Some(throughput) = window.observe(store.now_ns, done, run.window_ns) {
                let step = search.observe(throughput);
                let at_s = (store.now_ns - measured_from_ns) as f64 / 1e9;
                trajectory.push((at_s, step));
                store.set_knobs(step.next)?;
                window = Window::new(store.now_ns);
            }
        }
    }
    let elapsed_ns = store.now_ns - measured_from_ns;
    let counters = store.counters;
    let knobs = store.tier.knobs();
    Ok(PolyResult {
        throughput: (done.saturating_sub(run.warmup_ops)) as f64 / (elapsed_ns.max(1) as f64 / 1e9),
        read_latency_us_p90: read_ns.value_at_quantile(0.9) as f64 / 1e3,
        write_latency_us_p90: write_ns.value_at_quantile(0.9) as f64 / 1e3,
        elapsed_s: elapsed_ns as f64 / 1e9,
        read_share: knobs.read_share,
        compressed_share: knobs.compressed_share,
        dram_hits: counters.dram_hits,
        read_cache_hits: counters.read_cache_hits,
        write_cache_hits: counters.write_cache_hits,
        compressed_hits: counters.compressed_hits,
        ssd_reads: counters.ssd_reads,
        sync_write_backs: counters.sync_write_backs,
        mean_sectors: store.mean_sectors(),
        trajectory,
    })
}

fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

#[derive(Clone, Copy, Default)]
struct Counters {
    dram_hits: u64,
    read_cache_hits: u64,
    write_cache_hits: u64,
    compressed_hits: u64,
    ssd_reads: u64,
    sync_write_backs: u64,
}

/// The machine's state: the store thread's clock, the page cache, the tier, and the
/// write-back thread.
struct Store<'a> {
    machine: &'a PolyMachine,
    now_ns: u64,
    page_cache: Clock,
    tier: PolyTier,
    actions: Vec<PolyAction>,
    evicted: Vec<Evicted>,
    random: Random,
    /// When each of the write-back thread's outstanding writes is next free, and the next
    /// write's latency once drawn.
    flusher_free_ns: Vec<u64>,
    flusher_next_ns: Option<u64>,
    /// Each page's compressed size with the codec, worked out on first use.
    codec: Codec,
    compressibility: f64,
    sectors: FxHashMap<u64, u16>,
    counters: Counters,
}

impl<'a> Store<'a> {
    fn new(machine: &'a PolyMachine, codec: Codec, compressibility: f64, seed: u64) -> Store<'a> {
        Store {
            machine,
            now_ns: 0,
            page_cache: Clock::new(machine.dram_pages),
            tier: PolyTier::new(machine.tier_pages),
            actions: Vec::new(),
            evicted: Vec::new(),
            random: Random::new(seed ^ 0x5eed_0004),
            flusher_free_ns: vec![0; machine.writeback_depth as usize],
            flusher_next_ns: None,
            codec,
            compressibility,
            sectors: FxHashMap::default(),
            counters: Counters::default(),
        }
    }

    /// The sectors `page`'s data takes compressed: the codec run on data of the workload's
    /// compressibility, once per page.
    fn sectors_of(&mut self, page: u64) -> u16 {
        let (codec, compressibility) = (self.codec, self.compressibility);
        *self.sectors.entry(page).or_insert_with(|| {
            if compressibility == 0.0 {
                return SECTORS_PER_PAGE;
            }
            let mut data = vec![0u8; PAGE_BYTES];
            fill_page(page, compressibility, &mut data);
            codec.compress(&data, &mut Vec::with_capacity(PAGE_BYTES))
        })
    }

    fn mean_sectors(&self) -> f64 {
        let total: u64 = self.sectors.values().map(|&s| u64::from(s)).sum();
        total as f64 / self.sectors.len().max(1) as f64
    }

    /// Serves one operation, advancing the clock by its latency; returns whether it wrote.
    fn serve(&mut self, request: &Request) -> bool {
        self.write_back_until(self.now_ns);
        let page = request.key / self.machine.records_per_page;
        let writes = matches!(
            request.op,
            Op::Set | Op::Add | Op::Replace | Op::Write | Op::Cas | Op::Append | Op::Prepend
        );
        let mut ns = self.machine.costs.op_cpu_ns + self.touch(page);
        if writes {
            ns += self.msync(page);
        }
        self.now_ns += ns;
        writes
    }

    /// Reaches `page` as the store does: a load if it is memory, else a fault that fills it.
    fn touch(&mut self, page: u64) -> u64 {
        let costs = self.machine.costs;
        let request = Request {
            key: page,
            ..Request::default()
        };
        if self.page_cache.lookup(&request) {
            self.counters.dram_hits += 1;
            return costs.memory_ns;
        }
        let sectors = self.sectors_of(page);
        self.actions.clear();
        let found = self.tier.fault(page, sectors, &mut self.actions);
        let mut ns = match found {
            Found::ReadCache => {
                self.counters.read_cache_hits += 1;
                costs.memory_ns
            }
            Found::WriteCache => {
                self.counters.write_cache_hits += 1;
                costs.fault_ns + costs.stack_ns
            }
            Found::Compressed { .. } => {
                self.counters.compressed_hits += 1;
                costs.fault_ns
            }
            Found::Miss => {
                self.counters.ssd_reads += 1;
                costs.fault_ns
            }
        };
        ns += self.carry_out();
        self.evicted.clear();
        self.page_cache.admit(&request, &mut self.evicted);
        for index in 0..self.evicted.len() {
            let victim = self.evicted[index].key;
            let sectors = self.sectors_of(victim);
            self.actions.clear();
            self.tier.evicted_above(victim, sectors, &mut self.actions);
            ns += self.carry_out();
        }
        ns
    }

    /// Persists `page` (an `msync`): a block write into the write cache, or to the SSD.
    fn msync(&mut self, page: u64) -> u64 {
        let sectors = self.sectors_of(page);
        self.actions.clear();
        self.tier.write(page, sectors, &mut self.actions);
        self.machine.costs.stack_ns + self.carry_out()
    }

    /// Carries out the tier's actions on the store thread; returns the time they take.
    fn carry_out(&mut self) -> u64 {
        let costs = self.machine.costs;
        let mut ns = 0;
        for action in std::mem::take(&mut self.actions) {
            ns += match action {
                PolyAction::ReadSsd { .. } => self.machine.ssd.read_ns(&mut self.random),
                PolyAction::WriteBack { .. } => {
                    self.counters.sync_write_backs += 1;
                    self.machine.ssd.write_ns(&mut self.random)
                }
                PolyAction::Compress { .. } => costs.compress_ns(),
                PolyAction::Decompress { .. } => costs.decompress_ns(),
                PolyAction::Evict { .. } => 0,
            };
        }
        ns
    }

    /// The write-back thread's writes that end by `now_ns`, one at a time, least recently
    /// written first.
    fn write_back_until(&mut self, now_ns: u64) {
        loop {
            let (lane, free_ns) = self.next_flusher_lane();
            let ssd = self.machine.ssd;
            let latency_ns = *self
                .flusher_next_ns
                .get_or_insert_with(|| ssd.write_ns(&mut self.random));
            if free_ns + latency_ns > now_ns {
                return;
            }
            self.actions.clear();
            if self.tier.write_back(1, &mut self.actions) == 0 {
                self.flusher_free_ns.fill(now_ns);
                return;
            }
            self.flusher_free_ns[lane] += latency_ns;
            self.flusher_next_ns = None;
        }
    }

    /// The write-back lane free first, and when.
    fn next_flusher_lane(&self) -> (usize, u64) {
        self.flusher_free_ns
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, free_ns)| free_ns)
            .expect("at least one write-back lane")
    }

    /// Applies knobs; the write-backs of revoked pages go to the write-back thread, and the
    /// compression of demoted pages to a core of its own (§3.2: revocation is in the
    /// background).
    fn set_knobs(&mut self, knobs: Knobs) -> Result<(), ParamError> {
        if knobs == self.tier.knobs() {
            return Ok(());
        }
        self.actions.clear();
        self.tier.set_knobs(knobs, &mut self.actions)?;
        let write_backs = self
            .actions
            .iter()
            .filter(|action| matches!(action, PolyAction::WriteBack { .. }))
            .count();
        for free_ns in &mut self.flusher_free_ns {
            *free_ns = (*free_ns).max(self.now_ns);
        }
        for _ in 0..write_backs {
            let (lane, _) = self.next_flusher_lane();
            self.flusher_free_ns[lane] += self.machine.ssd.write_ns(&mut self.random);
        }
        Ok(())
    }
}
