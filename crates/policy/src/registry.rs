//! Builds eviction policies by name, one entry per policy: its name, libCacheSim's spellings of
//! it, the parameters it takes and where it comes from (docs/architecture.md, "Layers").
//!
//! A policy is written as libCacheSim's users write it, the name then `key=value` pairs after a
//! colon (`s3fifo:small-size-ratio=0.1`; see [`crate::params`]), in `sim`, `mrc` and hierarchy
//! configs alike.

use crate::admission::{self, Admitted};
use crate::eviction::{
    arc::Arc,
    belady::Belady,
    beladysize::{BeladySize, Sampling},
    cacheus::Cacheus,
    clock::Clock,
    clock2q_plus, clockpro,
    fifo::Fifo,
    gdsf::Gdsf,
    hyperbolic::Hyperbolic,
    lecar::LeCaR,
    lfu::Lfu,
    lfuda::{HitKey, Lfuda},
    lhd::Lhd,
    lirs::Lirs,
    lru::Lru,
    lru_k::{self, LruK, Subsidiary},
    lru_prob,
    mq::{self, Mq},
    random::Random,
    s3fifo::S3Fifo,
    sieve::Sieve,
    size::Size,
    slru::Slru,
    twoq::TwoQ,
    wtinylfu::WTinyLfu,
    EvictionPolicy,
};
use crate::params::{find_entry, Named, NamedSpec, ParamKind, ParamSpec, Params, SEED};

pub use crate::error::PolicyError;

/// Builds a policy of a capacity in bytes from checked parameters.
pub type BuildPolicy = fn(u64, &Params) -> Result<Box<dyn EvictionPolicy>, PolicyError>;

/// One policy the registry can build.
pub struct PolicyEntry {
    /// The name `--policy` takes and results print.
    pub name: &'static str,
    /// Other accepted names (libCacheSim's spellings).
    pub aliases: &'static [&'static str],
    pub params: &'static [ParamSpec],
    /// The paper and section, and the libCacheSim file it matches.
    pub source: &'static str,
    /// Whether an admission filter can sit in front of it (libCacheSim consults the filter in
    /// its common insert path, which some policies bypass).
    pub takes_admission: bool,
    pub build: BuildPolicy,
}

impl Named for PolicyEntry {
    fn name(&self) -> &'static str {
        self.name
    }

    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}

impl std::fmt::Debug for PolicyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Random's `uniform`: draw victims uniformly rather than with the weights of libCacheSim's
/// hash-table draw.
const UNIFORM: ParamSpec = ParamSpec {
    name: "uniform",
    kind: ParamKind::Bool,
    default: "false",
    doc: "draw residents uniformly instead of as libCacheSim's hash table does",
};

/// S3-FIFO's small queue size, which Clock2Q+ shares with it as `fifo-size-ratio`.
const SMALL_SIZE_RATIO: ParamSpec = ParamSpec {
    name: "small-size-ratio",
    kind: ParamKind::Float { min: 0.0, max: 1.0 },
    default: "0.1",
    doc: "share of the capacity for the small FIFO queue",
};

/// S3-FIFO's ghost queue size, which Clock2Q+ shares with it.
const GHOST_SIZE_RATIO: ParamSpec = ParamSpec {
    name: "ghost-size-ratio",
    kind: ParamKind::Float {
        min: 0.0,
        max: 64.0,
    },
    default: "0.9",
    doc: "bytes of evicted keys the ghost queue remembers, over the capacity",
};

/// Every policy, in the order `--policy all` runs them.
pub const POLICIES: &[PolicyEntry] = &[
    PolicyEntry {
        name: "lru",
        aliases: &[],
        params: &[],
        source: "least recently used; libCacheSim LRU.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Lru::new(capacity))),
    },
    PolicyEntry {
        name: "fifo",
        aliases: &[],
        params: &[],
        source: "first in, first out; libCacheSim FIFO.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Fifo::new(capacity))),
    },
    PolicyEntry {
        name: "clock",
        aliases: &[],
        params: &[
            ParamSpec {
                name: "init-freq",
                kind: ParamKind::Int { min: 0, max: 255 },
                default: "0",
                doc: "counter of a new object",
            },
            ParamSpec {
                name: "n-bit-counter",
                kind: ParamKind::Int { min: 1, max: 8 },
                default: "1",
                doc: "bits of each object's access counter",
            },
        ],
        source: "CLOCK (second chance); libCacheSim Clock.c",
        takes_admission: true,
        build: |capacity, params| {
            let clock = Clock::with_params(
                capacity,
                params.int("init-freq") as u8,
                params.int("n-bit-counter") as u32,
            )?;
            Ok(Box::new(clock))
        },
    },
    PolicyEntry {
        name: "sieve",
        aliases: &[],
        params: &[],
        source: "SIEVE (Zhang et al., NSDI'24); libCacheSim Sieve.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Sieve::new(capacity))),
    },
    PolicyEntry {
        name: "s3fifo",
        aliases: &["s3-fifo"],
        params: &[
            SMALL_SIZE_RATIO,
            GHOST_SIZE_RATIO,
            ParamSpec {
                name: "move-to-main-threshold",
                kind: ParamKind::Int { min: 1, max: 255 },
                default: "2",
                doc: "hits in the small queue that move an object to the main queue",
            },
        ],
        source: "S3-FIFO (Yang et al., SOSP'23, §4); libCacheSim S3FIFO.c",
        takes_admission: true,
        build: |capacity, params| {
            let s3fifo = S3Fifo::with_params(
                capacity,
                params.float("small-size-ratio"),
                params.float("ghost-size-ratio"),
                params.int("move-to-main-threshold") as u8,
            )?;
            Ok(Box::new(s3fifo))
        },
    },
    PolicyEntry {
        name: "lfu",
        aliases: &[],
        params: &[],
        source: "least frequently used, FIFO among ties; libCacheSim LFU.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Lfu::new(capacity))),
    },
    PolicyEntry {
        name: "arc",
        aliases: &[],
        params: &[],
        source: "ARC (Megiddo & Modha, FAST'03, Fig. 4); libCacheSim ARC.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Arc::new(capacity))),
    },
    PolicyEntry {
        name: "twoq",
        aliases: &["2q"],
        params: &[
            ParamSpec {
                name: "Ain-size-ratio",
                kind: ParamKind::Float { min: 0.0, max: 1.0 },
                default: "0.25",
                doc: "share of the capacity A1in keeps",
            },
            ParamSpec {
                name: "Aout-size-ratio",
                kind: ParamKind::Float {
                    min: 0.0,
                    max: 64.0,
                },
                default: "0.5",
                doc: "bytes of ghosts A1out remembers, over the capacity",
            },
        ],
        source: "2Q (Johnson & Shasha, VLDB'94, §3); libCacheSim TwoQ.c",
        takes_admission: true,
        build: |capacity, params| {
            Ok(Box::new(TwoQ::with_ratios(
                capacity,
                params.float("Ain-size-ratio"),
                params.float("Aout-size-ratio"),
            )))
        },
    },
    PolicyEntry {
        name: "lirs",
        aliases: &[],
        params: &[],
        source: "LIRS (Jiang & Zhang, SIGMETRICS'02, §3–4); libCacheSim LIRS.c",
        takes_admission: false,
        build: |capacity, _| Ok(Box::new(Lirs::new(capacity))),
    },
    PolicyEntry {
        name: "belady",
        aliases: &["opt"],
        params: &[],
        source: "Belady's MIN (1966), unit-size optimal; libCacheSim Belady.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Belady::new(capacity))),
    },
    PolicyEntry {
        name: "lecar",
        aliases: &[],
        params: &[
            ParamSpec {
                name: "update-weight",
                kind: ParamKind::Bool,
                default: "true",
                doc: "learn the experts' weights from regretted evictions (false: fixed mix)",
            },
            ParamSpec {
                name: "lru-weight",
                kind: ParamKind::Float { min: 0.0, max: 1.0 },
                default: "0.5",
                doc: "the LRU expert's first weight (the LFU expert's starts at 0.5)",
            },
            SEED,
        ],
        source: "LeCaR (Vietri et al., HotStorage'18, §3); libCacheSim LeCaR.c",
        takes_admission: true,
        build: |capacity, params| {
            Ok(Box::new(LeCaR::with_params(
                capacity,
                params.bool("update-weight"),
                params.float("lru-weight"),
                params.int("seed"),
            )))
        },
    },
    PolicyEntry {
        name: "random",
        aliases: &[],
        params: &[UNIFORM, SEED],
        source: "random replacement; libCacheSim Random.c",
        takes_admission: true,
        build: |capacity, params| {
            Ok(Box::new(Random::new(
                capacity,
                params.bool("uniform"),
                params.int("seed"),
            )))
        },
    },
    PolicyEntry {
        name: "cacheus",
        aliases: &[],
        params: &[SEED],
        source: "Cacheus (Rodriguez et al., FAST'21, §4); libCacheSim Cacheus.c, SR_LRU.c, \
                 CR_LFU.c",
        takes_admission: true,
        build: |capacity, params| Ok(Box::new(Cacheus::new(capacity, params.int("seed")))),
    },
    PolicyEntry {
        name: "lru-prob",
        aliases: &["lruprob", "lru_prob"],
        params: &[
            ParamSpec {
                name: "prob",
                kind: ParamKind::Float { min: 0.0, max: 1.0 },
                default: "0.5",
                doc: "chance that a hit moves the object to the head, as 1/⌊1/prob⌋",
            },
            SEED,
        ],
        source: "LRU with probabilistic promotion; libCacheSim LRUProb.c",
        takes_admission: true,
        build: |capacity, params| {
            Ok(Box::new(lru_prob::new(
                capacity,
                params.float("prob"),
                params.int("seed"),
            )))
        },
    },
    PolicyEntry {
        name: "hyperbolic",
        aliases: &[],
        params: &[
            ParamSpec {
                name: "n-sample",
                kind: ParamKind::Int { min: 1, max: 4096 },
                default: "64",
                doc: "residents sampled per eviction",
            },
            ParamSpec {
                default: "true",
                doc: "sample uniformly; false: with the weights of libCacheSim's hash table",
                ..UNIFORM
            },
            SEED,
        ],
        source: "Hyperbolic caching (Blankstein et al., ATC'17, §3); libCacheSim Hyperbolic.c",
        takes_admission: true,
        build: |capacity, params| {
            let hyperbolic = Hyperbolic::new(
                capacity,
                params.int("n-sample") as u32,
                params.bool("uniform"),
                params.int("seed"),
            )?;
            Ok(Box::new(hyperbolic))
        },
    },
    PolicyEntry {
        name: "lhd",
        aliases: &[],
        params: &[SEED],
        source: "LHD, least hit density (Beckmann et al., NSDI'18, §4–5); libCacheSim LHD/",
        takes_admission: true,
        build: |capacity, params| Ok(Box::new(Lhd::new(capacity, params.int("seed")))),
    },
    PolicyEntry {
        name: "slru",
        aliases: &[],
        params: &[
            ParamSpec {
                name: "n-seg",
                kind: ParamKind::Int { min: 1, max: 255 },
                default: "4",
                doc: "number of segments, each capacity / n-seg bytes",
            },
            ParamSpec {
                name: "seg-size",
                kind: ParamKind::Text("integer weights of the segments, lowest first, such as 1:4"),
                default: "",
                doc: "relative segment sizes, lowest (probationary) first; sets n-seg",
            },
        ],
        source: "segmented LRU (Karedla, Love & Wherry, IEEE Computer 1994); libCacheSim SLRU.c",
        takes_admission: true,
        build: |capacity, params| {
            let weights = params.text("seg-size");
            let segments = params.int("n-seg") as usize;
            if weights.is_empty() {
                return Ok(Box::new(Slru::with_segments(capacity, segments)));
            }
            let weights = Slru::parse_weights(weights)?;
            if params.given("n-seg") && weights.len() != segments {
                return Err(PolicyError::refused("slru", format!(
                    "n-seg={segments} but seg-size names {} segments",
                    weights.len()
                )));
            }
            Ok(Box::new(Slru::with_weights(capacity, &weights)?))
        },
    },
    PolicyEntry {
        name: "wtinylfu",
        aliases: &["w-tinylfu", "tinylfu"],
        params: &[
            ParamSpec {
                name: "main-cache",
                kind: ParamKind::Text(
                    "a policy that can serve as a main cache, such as slru or lru",
                ),
                default: "SLRU",
                doc: "the main cache's policy (slru is built with seg-size=1:4)",
            },
            ParamSpec {
                name: "window-size",
                kind: ParamKind::Float {
                    min: 0.0,
                    max: 0.999_999,
                },
                default: "0.01",
                doc: "share of the capacity for the window LRU",
            },
            ParamSpec {
                doc: "the frequency sketch's hash seeds; 0 hashes as libCacheSim",
                ..SEED
            },
        ],
        source:
            "W-TinyLFU (Einziger, Friedman & Manes, ACM TOS 2017, §3–4); libCacheSim WTinyLFU.c",
        takes_admission: true,
        build: |capacity, params| {
            let window_size = params.float("window-size");
            let main_capacity = WTinyLfu::main_capacity(capacity, window_size);
            let main = build_main_cache(params.text("main-cache"), main_capacity)?;
            Ok(Box::new(WTinyLfu::new(
                capacity,
                window_size,
                main,
                params.int("seed"),
            )))
        },
    },
    PolicyEntry {
        name: "clockpro",
        aliases: &["clock-pro"],
        params: &[
            ParamSpec {
                name: "init-ref",
                kind: ParamKind::Bool,
                default: "0",
                doc: "reference bit of a new page",
            },
            ParamSpec {
                name: "init-ratio-cold",
                kind: ParamKind::Float { min: 0.0, max: 1.0 },
                default: "0.5",
                doc: "share of the capacity the cold pages start with (libcachesim: they never get more)",
            },
            ParamSpec {
                name: "variant",
                kind: ParamKind::Choice(&["libcachesim", "paper"]),
                default: "libcachesim",
                doc: "libcachesim 0.3.5's decisions (refuses misses beyond the cold target, never evicts) or the paper's three hands",
            },
        ],
        source: "CLOCK-Pro (Jiang, Chen & Zhang, USENIX ATC'05, §3–4); libCacheSim ClockPro.c",
        takes_admission: true,
        build: |capacity, params| {
            let clockpro = clockpro::ClockPro::with_params(
                capacity,
                clockpro::Variant::from_name(params.choice("variant"))?,
                params.bool("init-ref"),
                params.float("init-ratio-cold"),
            )?;
            Ok(Box::new(clockpro))
        },
    },
    PolicyEntry {
        name: "clock2q+",
        aliases: &["clock2qplus", "clock2q-plus"],
        params: &[
            ParamSpec {
                name: "fifo-size-ratio",
                ..SMALL_SIZE_RATIO
            },
            GHOST_SIZE_RATIO,
            ParamSpec {
                name: "move-to-main-threshold",
                kind: ParamKind::Int { min: 0, max: 255 },
                default: "1",
                doc: "hits outside the correlation window that move a small-queue object to the main queue",
            },
            ParamSpec {
                name: "corr-window-ratio",
                kind: ParamKind::Float {
                    min: 0.0,
                    max: 64.0,
                },
                default: "0.5",
                doc: "correlation window over the small queue's size: younger objects' hits do not count",
            },
            ParamSpec {
                name: "corr-window-in-bytes",
                kind: ParamKind::Bool,
                default: "false",
                doc: "age objects by bytes admitted to the small queue (the paper's window at any size) instead of libcachesim's count of admissions",
            },
        ],
        source: "Clock2Q+ (Zhai et al., VLDB'26, arXiv 2511.21958); libCacheSim Clock2QPlus.c",
        takes_admission: false,
        build: |capacity, params| {
            let clock2q = clock2q_plus::with_params(
                capacity,
                params.float("fifo-size-ratio"),
                params.float("ghost-size-ratio"),
                params.int("move-to-main-threshold") as u8,
                params.float("corr-window-ratio"),
                params.bool("corr-window-in-bytes"),
            )?;
            Ok(Box::new(clock2q))
        },
    },
    PolicyEntry {
        name: "mq",
        aliases: &[],
        params: &[
            ParamSpec {
                name: "n-queue",
                kind: ParamKind::Int {
                    min: 1,
                    max: mq::MAX_QUEUES as u64,
                },
                default: "8",
                doc: "number of LRU queues, one per power of two of the reference count",
            },
            ParamSpec {
                name: "lifetime",
                kind: ParamKind::Int {
                    min: 1,
                    max: i64::MAX as u64 / 2,
                },
                default: "10000",
                doc: "hits and insertions an object may sit at a queue's LRU end before it is demoted",
            },
            ParamSpec {
                name: "Qout-size-ratio",
                kind: ParamKind::Float {
                    min: 0.0,
                    max: 64.0,
                },
                default: "4.0",
                doc: "bytes of evicted objects whose frequencies Qout remembers, over the capacity (more than 0)",
            },
        ],
        source: "MQ (Zhou, Philbin & Li, USENIX ATC'01, §4); libCacheSim MQ.c",
        takes_admission: true,
        build: |capacity, params| {
            let mq = Mq::with_params(
                capacity,
                params.int("n-queue") as usize,
                params.int("lifetime"),
                params.float("Qout-size-ratio"),
            )?;
            Ok(Box::new(mq))
        },
    },
    PolicyEntry {
        name: "lru-k",
        aliases: &["lruk"],
        params: &[
            ParamSpec {
                name: "k",
                kind: ParamKind::Int {
                    min: 1,
                    max: lru_k::MAX_K as u64,
                },
                default: "2",
                doc: "references whose times rank an object (the K-th most recent decides)",
            },
            ParamSpec {
                name: "subsidiary",
                kind: ParamKind::Choice(&["fifo", "lru"]),
                default: "fifo",
                doc: "order among objects short of k references: admission (libCacheSim) or last reference (the paper's example)",
            },
            ParamSpec {
                name: "retained-period",
                kind: ParamKind::Int {
                    min: 0,
                    max: u64::MAX,
                },
                default: "0",
                doc: "requests an evicted object's history is kept after its last reference (the paper's Retained Information Period); 0 forgets it, as libCacheSim",
            },
        ],
        source: "LRU-K (O'Neil, O'Neil & Weikum, SIGMOD'93, §2); libCacheSim LRU_K.cpp",
        takes_admission: true,
        build: |capacity, params| {
            let subsidiary = match params.choice("subsidiary") {
                "lru" => Subsidiary::Lru,
                _ => Subsidiary::Fifo,
            };
            let lru_k = LruK::with_params(
                capacity,
                params.int("k") as usize,
                subsidiary,
                params.int("retained-period"),
            )?;
            Ok(Box::new(lru_k))
        },
    },
    PolicyEntry {
        name: "gdsf",
        aliases: &[],
        params: &[ParamSpec {
            name: "evict-first",
            kind: ParamKind::Bool,
            default: "false",
            doc: "make room before pricing a new object (the paper) instead of after (libCacheSim)",
        }],
        source: "GreedyDual-Size-Frequency (Cherkasova, HP Labs HPL-98-69, 1998: Pr = L + Fr × Cost / Size); libCacheSim cpp/GDSF.cpp",
        takes_admission: true,
        build: |capacity, params| {
            Ok(Box::new(Gdsf::with_evict_first(
                capacity,
                params.bool("evict-first"),
            )))
        },
    },
    PolicyEntry {
        name: "lfuda",
        aliases: &[],
        params: &[ParamSpec {
            name: "hit-key",
            kind: ParamKind::Choice(&["plus-age", "count-plus-age"]),
            default: "plus-age",
            doc: "a hit's new key: old key + age (libCacheSim) or request count + age (the paper)",
        }],
        source: "LFU with Dynamic Aging (Arlitt et al., SIGMETRICS PER 27(4) 2000, LFU-DA: K = F + L); libCacheSim LFUDA.c",
        takes_admission: true,
        build: |capacity, params| {
            let hit_key = match params.choice("hit-key") {
                "count-plus-age" => HitKey::CountPlusAge,
                _ => HitKey::PlusAge,
            };
            Ok(Box::new(Lfuda::with_hit_key(capacity, hit_key)))
        },
    },
    PolicyEntry {
        name: "size",
        aliases: &[],
        params: &[],
        source: "SIZE, evict the largest (Williams et al., SIGCOMM'96 removal policies); libCacheSim Size.c",
        takes_admission: true,
        build: |capacity, _| Ok(Box::new(Size::new(capacity))),
    },
    PolicyEntry {
        name: "beladysize",
        aliases: &["belady-size"],
        params: &[
            ParamSpec {
                name: "n-sample",
                kind: ParamKind::Int {
                    min: 1,
                    max: 1 << 20,
                },
                default: "128",
                doc: "objects drawn at random per eviction",
            },
            ParamSpec {
                name: "sampling",
                kind: ParamKind::Choice(&["hash-table", "uniform"]),
                default: "hash-table",
                doc: "draw like libCacheSim's hash table (objects sharing a bucket less often) or uniformly",
            },
            SEED,
        ],
        source: "Belady's MIN (1966) ranked by next-access distance × size over sampled objects; libCacheSim BeladySize.c",
        takes_admission: true,
        build: |capacity, params| {
            let sampling = match params.choice("sampling") {
                "uniform" => Sampling::Uniform,
                _ => Sampling::HashTable,
            };
            Ok(Box::new(BeladySize::with_params(
                capacity,
                params.int("n-sample") as u32,
                sampling,
                params.int("seed"),
            )))
        },
    },
];

/// W-TinyLFU's main cache named `name` (no parameters), of `capacity` bytes: SLRU as
/// libCacheSim builds it there (`seg-size=1:4`), any other policy with its defaults, as long as
/// it can serve inside another.
fn build_main_cache(name: &str, capacity: u64) -> Result<Box<dyn EvictionPolicy>, PolicyError> {
    let entry = find(name.trim())
        .map_err(|error| PolicyError::refused("wtinylfu", format!("main-cache: {error}")))?;
    let main: Box<dyn EvictionPolicy> = if entry.name == "slru" {
        Box::new(Slru::with_weights(capacity, &[1, 4])?)
    } else {
        (entry.build)(capacity, &Params::parse(entry.name, entry.params, &[])?)?
    };
    if !main.serves_inside() {
        return Err(PolicyError::refused(
            "wtinylfu",
            format!(
                "main-cache={name}: {} cannot serve as a main cache (it cannot name its \
             next victim)",
                entry.name
            ),
        ));
    }
    Ok(main)
}

/// Names accepted by [`create`], in the order `--policy all` runs them.
pub fn policy_names() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().map(|entry| entry.name)
}

/// The entry of `name` (case-insensitive; libCacheSim's spellings are accepted too).
pub fn find(name: &str) -> Result<&'static PolicyEntry, PolicyError> {
    find_entry(POLICIES, name, "policy")
}

/// A checked policy with its parameters and optional admission filter, ready to build at any
/// capacity: what one `--policy` item and `--admission` describe.
#[derive(Clone, Debug)]
pub struct PolicySpec {
    entry: &'static PolicyEntry,
    params: Params,
    admission: Option<admission::FilterSpec>,
    label: String,
}

impl PolicySpec {
    /// Checks one policy as written (`"lru-k:k=2"`) and, when given, the admission filter in
    /// front of it (`"bloom"`, `"size:size=4096"`).
    pub fn parse(policy: &str, admission: Option<&str>) -> Result<PolicySpec, PolicyError> {
        PolicySpec::from_named(NamedSpec::parse(policy, "policy")?, admission)
    }

    fn from_named(named: NamedSpec, admission: Option<&str>) -> Result<PolicySpec, PolicyError> {
        let entry = find(&named.name)?;
        let params = Params::parse(entry.name, entry.params, &named.given)?;
        // Results carry the name as the user wrote it (`2q` stays `2q`), lowercased.
        let mut label = named.label();
        let admission = match admission {
            Some(text) => {
                if !entry.takes_admission {
                    return Err(PolicyError::NoAdmission {
                        policy: entry.name.to_string(),
                        filter: text.to_string(),
                    });
                }
                let filter = admission::FilterSpec::parse(text)?;
                label.push('+');
                label.push_str(filter.label());
                Some(filter)
            }
            None => None,
        };
        // Build once so that parameters only a whole cache can judge are refused now.
        (entry.build)(1 << 20, &params)?;
        Ok(PolicySpec {
            entry,
            params,
            admission,
            label,
        })
    }

    /// A comma-separated list (`all` for every policy), each with the same admission filter.
    pub fn parse_list(list: &str, admission: Option<&str>) -> Result<Vec<PolicySpec>, PolicyError> {
        let named = if list.trim().eq_ignore_ascii_case("all") {
            policy_names()
                .map(|name| NamedSpec {
                    name: name.to_string(),
                    given: Vec::new(),
                })
                .collect()
        } else {
            NamedSpec::parse_list(list, "policy")?
        };
        if named.is_empty() {
            return Err(PolicyError::NoPolicy {
                list: list.to_string(),
            });
        }
        named
            .into_iter()
            .map(|named| PolicySpec::from_named(named, admission))
            .collect()
    }

    /// The policy as results name it: its name as written, the parameters given, `+` and the
    /// filter.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The registry's entry.
    pub fn entry(&self) -> &'static PolicyEntry {
        self.entry
    }

    /// An empty cache of `capacity` bytes.
    pub fn build(&self, capacity: u64) -> Result<Box<dyn EvictionPolicy>, PolicyError> {
        let policy = (self.entry.build)(capacity, &self.params)?;
        Ok(match &self.admission {
            Some(filter) => Box::new(Admitted::new(policy, filter.build()?)),
            None => policy,
        })
    }
}

/// Builds the policy written as `spec` (a name, then any parameters: `"s3fifo"`,
/// `"s3fifo:small-size-ratio=0.2"`) with `capacity` bytes.
pub fn create(spec: &str, capacity: u64) -> Result<Box<dyn EvictionPolicy>, PolicyError> {
    PolicySpec::parse(spec, None)?.build(capacity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{steps, with_next_access};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Every policy, with and without an admission filter in front, keeps its invariants
        /// after every call of a random stream of gets, lookups with admits, and removes.
        #[test]
        fn every_policy_keeps_its_invariants(
            capacity in 1u64..400,
            steps in steps(64),
            filtered in any::<bool>(),
        ) {
            let requests = with_next_access(&steps);
            for entry in POLICIES {
                let admission = (filtered && entry.takes_admission).then_some("prob");
                let mut policy = PolicySpec::parse(entry.name, admission)
                    .and_then(|spec| spec.build(capacity))
                    .unwrap();
                let mut evicted = Vec::new();
                for (step, request) in steps.iter().zip(&requests) {
                    match step.action {
                        0 => {
                            policy.remove(step.key);
                        }
                        1 => {
                            if !policy.lookup(request) {
                                policy.admit(request, &mut evicted);
                            }
                        }
                        _ => {
                            policy.get(request, &mut evicted);
                        }
                    }
                    policy.drain_hit_evictions(&mut evicted);
                    evicted.clear();
                    if let Err(broken) = policy.check_invariants() {
                        return Err(TestCaseError::fail(format!(
                            "{} after {step:?}: {broken}",
                            entry.name
                        )));
                    }
                }
            }
        }
    }

    #[test]
    fn every_entry_builds_with_its_defaults_and_names_are_unique() {
        let mut names: Vec<&str> = Vec::new();
        for entry in POLICIES {
            create(entry.name, 1000).unwrap();
            for name in std::iter::once(&entry.name).chain(entry.aliases) {
                let name = name.to_ascii_lowercase();
                assert!(!names.contains(&name.as_str()), "{name} twice");
                names.push(Box::leak(name.into_boxed_str()));
            }
            for param in entry.params {
                let one = [(param.name.to_string(), param.default.to_string())];
                Params::parse(entry.name, entry.params, &one).unwrap();
            }
        }
    }

    #[test]
    fn parameters_reach_the_policy_and_bad_ones_are_refused() {
        let spec = PolicySpec::parse("S3-FIFO:small-size-ratio=0.5", None).unwrap();
        assert_eq!(spec.label(), "s3-fifo:small-size-ratio=0.5");
        assert_eq!(spec.entry().name, "s3fifo");
        assert_eq!(spec.build(100).unwrap().capacity_bytes(), 100);
        let error = |text: &str| PolicySpec::parse(text, None).unwrap_err().to_string();
        assert_eq!(
            error("s3fifo:small-size-ratio=2"),
            "s3fifo: small-size-ratio=2 is out of range: expected a number from 0 to 1"
        );
        assert!(error("lru:k=2").starts_with("lru: unknown parameter \"k\"; lru takes none"));
        assert!(error("nope").starts_with("unknown policy \"nope\"; expected one of: lru,"));
        assert!(error("clock:n-bit-counter=9").contains("n-bit-counter=9"));
        // The error names what is at fault, for callers that act on it, not only print it.
        assert_eq!(
            PolicySpec::parse("s3fifo:small-size-ratio=2", None).unwrap_err(),
            PolicyError::OutOfRange {
                policy: "s3fifo".into(),
                param: "small-size-ratio".into(),
                value: "2".into(),
                expected: "a number from 0 to 1".into(),
            }
        );
        let built = PolicySpec::parse("clock2q+:corr-window-ratio=-1", None)
            .and_then(|spec| spec.build(100))
            .map(drop);
        assert!(
            matches!(
                built,
                Err(PolicyError::OutOfRange { ref policy, .. }
                    | PolicyError::Refused { ref policy, .. }) if policy == "clock2q+"
            ),
            "{built:?}"
        );
    }

    #[test]
    fn slru_segments_and_wtinylfu_main_caches() {
        let error = |text: &str| PolicySpec::parse(text, None).unwrap_err().to_string();
        assert_eq!(
            PolicySpec::parse_list("slru:seg-size=1:4,n-seg=2,lru", None)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            error("slru:n-seg=3,seg-size=1:4"),
            "slru: n-seg=3 but seg-size names 2 segments"
        );
        assert!(error("slru:seg-size=1:x").contains("seg-size=1:x"));
        assert!(error("slru:seg-size=0:0").contains("positive sum"));
        for good in [
            "tinylfu",
            "w-tinylfu:main-cache=lru",
            "wtinylfu:main-cache=FIFO",
        ] {
            let spec = PolicySpec::parse(good, None).unwrap();
            assert_eq!(spec.entry().name, "wtinylfu");
            assert_eq!(spec.build(1000).unwrap().capacity_bytes(), 1000);
        }
        assert!(error("wtinylfu:main-cache=nope").starts_with("wtinylfu: main-cache: unknown"));
        assert!(error("wtinylfu:main-cache=lirs").contains("cannot serve as a main cache"));
        assert!(error("wtinylfu:window-size=1").contains("window-size=1"));
    }

    #[test]
    fn lists_and_admission() {
        let specs =
            PolicySpec::parse_list("lru,twoq:Ain-size-ratio=0.5,aout-size-ratio=1", None).unwrap();
        let labels: Vec<&str> = specs.iter().map(PolicySpec::label).collect();
        assert_eq!(labels, ["lru", "twoq:ain-size-ratio=0.5,aout-size-ratio=1"]);
        assert_eq!(
            PolicySpec::parse_list("all", None).unwrap().len(),
            POLICIES.len()
        );
        assert!(PolicySpec::parse_list(" , ", None).is_err());
        let error = PolicySpec::parse("lirs", Some("size"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "policy lirs cannot take an admission filter (--admission size)"
        );
    }
}
