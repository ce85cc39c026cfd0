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
    clock::Clock,
    fifo::Fifo,
    gdsf::Gdsf,
    lfu::Lfu,
    lfuda::{HitKey, Lfuda},
    lirs::Lirs,
    lru::Lru,
    s3fifo::S3Fifo,
    sieve::Sieve,
    size::Size,
    twoq::TwoQ,
    EvictionPolicy,
};
use crate::params::{NamedSpec, ParamKind, ParamSpec, Params};

pub use crate::params::PolicyError;

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

impl PolicyEntry {
    fn answers_to(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self
                .aliases
                .iter()
                .any(|alias| alias.eq_ignore_ascii_case(name))
    }
}

impl std::fmt::Debug for PolicyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

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
            ParamSpec {
                name: "small-size-ratio",
                kind: ParamKind::Float { min: 0.0, max: 1.0 },
                default: "0.1",
                doc: "share of the capacity for the small FIFO queue",
            },
            ParamSpec {
                name: "ghost-size-ratio",
                kind: ParamKind::Float {
                    min: 0.0,
                    max: 64.0,
                },
                default: "0.9",
                doc: "bytes of evicted keys the ghost queue remembers, over the capacity",
            },
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
            ParamSpec {
                name: "seed",
                kind: ParamKind::Int {
                    min: 0,
                    max: u64::MAX,
                },
                default: "0",
                doc: "seed of the draws",
            },
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

/// Names accepted by [`create`], in the order `--policy all` runs them.
pub fn policy_names() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().map(|entry| entry.name)
}

/// The entry of `name` (case-insensitive; libCacheSim's spellings are accepted too).
pub fn find(name: &str) -> Result<&'static PolicyEntry, PolicyError> {
    POLICIES
        .iter()
        .find(|entry| entry.answers_to(name))
        .ok_or_else(|| {
            PolicyError(format!(
                "unknown policy \"{name}\"; expected one of: {}",
                policy_names().collect::<Vec<_>>().join(", ")
            ))
        })
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
                    return Err(PolicyError(format!(
                        "policy {} cannot take an admission filter (--admission {text})",
                        entry.name
                    )));
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
            return Err(PolicyError(format!("no policy in \"{list}\"")));
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
    let named = NamedSpec::parse(spec, "policy")?;
    let entry = find(&named.name)?;
    let params = Params::parse(entry.name, entry.params, &named.given)?;
    (entry.build)(capacity, &params)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let error = |text: &str| PolicySpec::parse(text, None).unwrap_err().0;
        assert_eq!(
            error("s3fifo:small-size-ratio=2"),
            "s3fifo: small-size-ratio=2 is out of range: expected a number from 0 to 1"
        );
        assert!(error("lru:k=2").starts_with("lru: unknown parameter \"k\"; lru takes none"));
        assert!(error("nope").starts_with("unknown policy \"nope\"; expected one of: lru,"));
        assert!(error("clock:n-bit-counter=9").contains("n-bit-counter=9"));
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
        let error = PolicySpec::parse("lirs", Some("size")).unwrap_err().0;
        assert_eq!(
            error,
            "policy lirs cannot take an admission filter (--admission size)"
        );
    }
}
