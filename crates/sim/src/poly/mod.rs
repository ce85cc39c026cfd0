//! PolyEMT in the timed simulator (seed 004 §5; docs/simulation.md, "The timed simulator"): the
//! paper's machine, scaled, running a key-value store over an mmap'ed file. The tier's
//! decisions are `engine::poly`'s, the same code the live volume runs (docs/architecture.md,
//! "One policy code, two executors").
//!
//! The machine (§5.2): a data set of 38 units over a volatile DRAM page cache of 26 units and a
//! 6-unit memory tier (BB-DRAM) in front of an SSD. The store is one thread (Redis), so
//! operations run one after another and each costs what its page accesses cost:
//!
//! - a page in the DRAM page cache, or in the tier's read-cache role (memory handed to the
//!   buffer manager), is a load or store: [`AccessCosts::memory_ns`];
//! - any other page faults ([`AccessCosts::fault_ns`]) and is filled from the write cache
//!   through the storage stack ([`AccessCosts::stack_ns`], a block read of BB-DRAM), from the
//!   compressed store (a decompression), or from the SSD;
//! - an update stores into the page and `msync`s it: a block write through the storage stack
//!   into the write cache, or straight to the SSD when the tier has no write cache (DRAM-Ext).
//!
//! Clients (YCSB threads, one per core of the paper's 4-core VM; the paper does not say how
//! many) each keep one operation outstanding, and the store serves them in turn, so an
//! operation's latency is its own service time and that of the operations queued before it:
//! the last `clients` service times.
//!
//! The page cache and the tier are exclusive where both are memory: a read-cache page that is
//! touched moves up into the page cache, and the page cache's Clock victims move down into the
//! read-cache role (or the compressed store), so DRAM and the read-cache role act as one buffer
//! cache of their summed size, as in the paper's prototype. Write-cache pages stay in the tier
//! when the page cache holds a copy (synced pages stay in the buffer cache, §4).
//!
//! One background thread writes dirty write-cache pages back, least recently written first, one
//! SSD write at a time; when a write needs a slot and the least recently written page is still
//! dirty, the write waits for its write-back (the write cache's misses that "still go to the
//! SSD", §5.2). Knob changes hand their write-backs to that thread. The SSD's latencies are the
//! paper's under load ([`LoadedSsd`]).

mod run;
mod ssd;

use heterarchy_device::codec::{Codec, CodecCost, PAGE_BYTES};
use heterarchy_engine::poly::{Knobs, SearchConfig, SearchStep};
use serde::Serialize;

use crate::error::PolyError;

pub use run::{run_poly, run_poly_phases};
pub use ssd::LoadedSsd;

/// The paper's machine (§5.2: 1 M × 1 KB records, 26 GB DRAM + 6 GB BB-DRAM, ≈ 38 GB of data)
/// in units of pages.
#[derive(Clone, Debug, PartialEq)]
pub struct PolyMachine {
    /// Pages of data (the workload's records, `records_per_page` to a page).
    pub data_pages: u64,
    /// Pages of the volatile DRAM page cache.
    pub dram_pages: u64,
    /// Pages of the memory tier (BB-DRAM).
    pub tier_pages: u64,
    /// Records per 4 KiB page (1 KB records: 4).
    pub records_per_page: u64,
    /// YCSB client threads, each with one operation outstanding: an operation waits for those
    /// queued before it, so a read behind an `msync` to the SSD waits for the SSD too.
    pub clients: u32,
    /// Write-backs the background thread keeps outstanding.
    pub writeback_depth: u32,
    pub costs: AccessCosts,
    pub ssd: LoadedSsd,
}

impl PolyMachine {
    /// Seed 004 §5.2's proportions, 38 : 26 : 6, at `unit_pages` pages a unit.
    pub fn paper(unit_pages: u64) -> PolyMachine {
        PolyMachine {
            data_pages: 38 * unit_pages,
            dram_pages: 26 * unit_pages,
            tier_pages: 6 * unit_pages,
            records_per_page: 4,
            clients: 4,
            writeback_depth: 2,
            costs: AccessCosts::paper(),
            ssd: LoadedSsd::paper(),
        }
    }

    /// A one-line error naming the size that cannot work.
    pub fn validate(&self) -> Result<(), PolyError> {
        for (name, value) in [
            ("data_pages", self.data_pages),
            ("dram_pages", self.dram_pages),
            ("tier_pages", self.tier_pages),
            ("records_per_page", self.records_per_page),
            ("clients", u64::from(self.clients)),
            ("writeback_depth", u64::from(self.writeback_depth)),
        ] {
            if value == 0 {
                return Err(PolyError::Invalid {
                    key: name,
                    reason: "expected at least 1",
                });
            }
        }
        Ok(())
    }
}

/// What each access path costs, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AccessCosts {
    /// The store's own work per operation and the client's round trip.
    pub op_cpu_ns: u64,
    /// A page reached as memory: a load or store of DRAM, which BB-DRAM is (seed 004 §2); the
    /// paper gives no figure for it.
    pub memory_ns: u64,
    /// A page fault caught and resolved in user space (§4, Fig 8 ④–⑧).
    pub fault_ns: u64,
    /// A 4 KiB block I/O through the storage stack to BB-DRAM: what a write-cache page costs to
    /// reach, read or written (§2.1: "every read of NVM goes through the storage stack").
    pub stack_ns: u64,
    /// Compressing and decompressing, per KiB.
    pub compress_ns_per_kib: f64,
    pub decompress_ns_per_kib: f64,
}

impl AccessCosts {
    /// The costs the simulator charges unless told otherwise: compression at the paper's
    /// figures (Fig 4c: 11 µs to compress a 4 KiB page, 4 µs to decompress one), and software
    /// paths of the sizes the paper's prototype has. The op cost (20 µs: a client's round
    /// trip to a one-thread store over loopback) and the fault (3 µs: a SIGSEGV handler that
    /// maps a page) and storage-stack costs (8 µs: a 4 KiB bio through the block layer to a
    /// RAM-backed device and back) are our estimates; the paper gives none.
    pub fn paper() -> AccessCosts {
        AccessCosts {
            op_cpu_ns: 20_000,
            memory_ns: 100,
            fault_ns: 3_000,
            stack_ns: 8_000,
            compress_ns_per_kib: 11_000.0 / 4.0,
            decompress_ns_per_kib: 4_000.0 / 4.0,
        }
    }

    /// These costs with a codec's measured compression and decompression times.
    pub fn with_codec(self, cost: &CodecCost) -> AccessCosts {
        AccessCosts {
            compress_ns_per_kib: cost.compress_us_per_kib * 1e3,
            decompress_ns_per_kib: cost.decompress_us_per_kib * 1e3,
            ..self
        }
    }

    fn page_kib() -> f64 {
        PAGE_BYTES as f64 / 1024.0
    }

    fn compress_ns(&self) -> u64 {
        (self.compress_ns_per_kib * Self::page_kib()).round() as u64
    }

    fn decompress_ns(&self) -> u64 {
        (self.decompress_ns_per_kib * Self::page_kib()).round() as u64
    }
}

/// How the tier is run: the paper's baselines and designs (§5.2, Fig 10).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolyScheme {
    /// The tier as memory: a larger page cache; every `msync` goes to the SSD.
    DramExt,
    /// The tier as a persistent write cache only.
    WriteCache,
    /// Fixed shares, as set.
    Fixed(Knobs),
    /// The online search (functional only when `compress` is off).
    Search(SearchConfig),
}

impl PolyScheme {
    /// The knobs it starts with.
    fn start(&self) -> Knobs {
        match self {
            PolyScheme::DramExt => Knobs {
                read_share: 1.0,
                compressed_share: 0.0,
            },
            PolyScheme::WriteCache | PolyScheme::Search(_) => Knobs::WRITE_CACHE,
            PolyScheme::Fixed(knobs) => *knobs,
        }
    }
}

/// What a run measures and for how long.
#[derive(Clone, Debug, PartialEq)]
pub struct PolyRun {
    /// Operations run before measuring (warming the caches up at the starting knobs).
    pub warmup_ops: u64,
    /// Operations measured, at most.
    pub ops: u64,
    /// Simulated time measured, at most (`u64::MAX`: no limit).
    pub duration_ns: u64,
    /// The search's measurement window, simulated nanoseconds.
    pub window_ns: u64,
    /// The codec whose sizes the data takes when compressed.
    pub codec: Codec,
}

/// The numbers of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PolyResult {
    /// Operations per simulated second over the measured operations.
    pub throughput: f64,
    pub read_latency_us_p90: f64,
    pub write_latency_us_p90: f64,
    /// Simulated seconds the measured operations took.
    pub elapsed_s: f64,
    /// The knobs at the end.
    pub read_share: f64,
    pub compressed_share: f64,
    /// Where page accesses were served, and the writes that waited for the SSD.
    pub dram_hits: u64,
    pub read_cache_hits: u64,
    pub write_cache_hits: u64,
    pub compressed_hits: u64,
    pub ssd_reads: u64,
    pub sync_write_backs: u64,
    /// Mean sectors a compressed page took.
    pub mean_sectors: f64,
    /// The search's windows: when each ended (simulated seconds from the start of the
    /// measured operations) and what it decided.
    #[serde(skip)]
    pub trajectory: Vec<(f64, SearchStep)>,
}

impl PolyResult {
    /// The knobs at the end.
    pub fn knobs(&self) -> Knobs {
        Knobs {
            read_share: self.read_share,
            compressed_share: self.compressed_share,
        }
    }

    /// When the search last changed the knobs before holding (simulated seconds), if it did.
    pub fn converged_s(&self) -> Option<f64> {
        let mut converged = None;
        for (time_s, step) in &self.trajectory {
            if step.restarted {
                converged = None;
            }
            if step.next != step.measured {
                converged = Some(*time_s);
            }
        }
        converged
    }
}
