//! The generator: a [`TraceReader`] that computes requests from a [`WorkloadSpec`] on demand, in
//! constant memory, so the simulator runs on it exactly as on a trace file.

use super::keys::KeyPermutation;
use super::random::{mix64, Random};
use super::size::SizeDistribution;
use super::spec::{Pattern, RequestKind, SpecError, WorkloadSpec, YcsbWorkload, YCSB_ITEM_COUNT};
use super::zipf::ZipfSampler;
use crate::request::NEXT_ACCESS_UNKNOWN;
use crate::{Op, Request, TraceError, TraceReader};

/// Salt that separates the scrambled keys of a seed from its other streams.
const SCRAMBLE_SALT: u64 = 0x7363_7261_6d62_6c65;

/// Salt that separates the size stream of a seed from its permutation and request streams.
const SIZE_SALT: u64 = 0x7369_7a65_7361_6c74;

/// Streams the requests of one [`WorkloadSpec`].
pub struct Generator {
    kind: RequestKind,
    requests_left: u64,
    emitted: u64,
    nanos_per_request: f64,
    random: Random,
    chooser: KeyChooser,
    mix: Mix,
    /// Keys that exist: the initial keys plus YCSB inserts so far.
    records: u64,
    /// The rest of a multi-request operation (scan, read-modify-write).
    pending: Pending,
    size: SizeDistribution,
    size_salt: u64,
}

/// Picks the key of a point operation.
enum KeyChooser {
    Uniform,
    /// Zipf ranks over the initial keys, scattered by the permutation.
    Zipf {
        sampler: ZipfSampler,
        permutation: KeyPermutation,
    },
    /// Zipf ranks over YCSB's item count, hashed onto the keys.
    Scrambled {
        sampler: ZipfSampler,
        keys: u64,
        salt: u64,
    },
    /// The first `hot_keys` ranks get `hot_ops` of the accesses.
    Hotspot {
        hot_keys: u64,
        hot_ops: f64,
        permutation: KeyPermutation,
    },
    /// YCSB `latest`: Zipf ranks counted back from the newest key.
    Latest {
        sampler: ZipfSampler,
    },
    /// A hot range, then a hot key inside it.
    Ranges {
        ranges: u64,
        range_sampler: ZipfSampler,
        range_order: KeyPermutation,
        key_sampler: ZipfSampler,
        key_order: KeyPermutation,
    },
}

/// Decides what the next operation is.
enum Mix {
    Simple {
        write_ratio: f64,
        /// Writes pick uniformly among the first this many keys (`None`: as reads do).
        write_key_limit: Option<u64>,
        scan_probability: f64,
        scan_length: u32,
    },
    Ycsb {
        workload: YcsbWorkload,
        max_scan_length: u32,
    },
}

enum Pending {
    None,
    /// Scan continues at key `next` for `left` more requests.
    Scan {
        next: u64,
        left: u64,
    },
    /// The write half of a read-modify-write.
    Write {
        key: u64,
    },
}

/// The role of a request, turned into an [`Op`] by the request kind.
#[derive(Clone, Copy)]
enum Action {
    Read,
    Update,
    Insert,
    ScanStart,
    ScanNext,
}

impl Generator {
    /// A generator positioned at the first request of `spec`.
    pub fn new(spec: &WorkloadSpec) -> Result<Generator, SpecError> {
        spec.validate()?;
        let permutation = || KeyPermutation::new(spec.keys, spec.seed);
        let zipf = |theta| KeyChooser::Zipf {
            sampler: ZipfSampler::new(spec.keys, theta),
            permutation: permutation(),
        };
        let (chooser, mix) = match spec.pattern {
            Pattern::Ycsb {
                workload,
                theta,
                max_scan_length,
                scrambled,
            } => {
                let chooser = if workload == YcsbWorkload::D {
                    KeyChooser::Latest {
                        sampler: ZipfSampler::new(spec.keys, theta),
                    }
                } else if scrambled {
                    KeyChooser::Scrambled {
                        sampler: ZipfSampler::new(YCSB_ITEM_COUNT, theta),
                        keys: spec.keys,
                        salt: mix64(spec.seed ^ SCRAMBLE_SALT),
                    }
                } else {
                    zipf(theta)
                };
                let mix = Mix::Ycsb {
                    workload,
                    max_scan_length,
                };
                (chooser, mix)
            }
            simple => {
                let chooser = match simple {
                    Pattern::Zipf { theta } => zipf(theta),
                    Pattern::Hotspot { hot_data, hot_ops } => KeyChooser::Hotspot {
                        hot_keys: ((spec.keys as f64 * hot_data).round() as u64).max(1),
                        hot_ops,
                        permutation: permutation(),
                    },
                    Pattern::Ranges { ranges, theta } => {
                        let ranges = u64::from(ranges);
                        let range_keys = spec.keys / ranges;
                        KeyChooser::Ranges {
                            ranges,
                            range_sampler: ZipfSampler::new(ranges, theta),
                            range_order: KeyPermutation::new(ranges, spec.seed),
                            key_sampler: ZipfSampler::new(range_keys, theta),
                            key_order: KeyPermutation::new(range_keys, spec.seed ^ 1),
                        }
                    }
                    _ => KeyChooser::Uniform,
                };
                let mix = Mix::Simple {
                    write_ratio: spec.write_ratio,
                    write_key_limit: (spec.write_keys < 1.0)
                        .then(|| ((spec.keys as f64 * spec.write_keys).ceil() as u64).max(1)),
                    scan_probability: spec.scan_probability,
                    scan_length: spec.scan_length,
                };
                (chooser, mix)
            }
        };
        Ok(Generator {
            kind: spec.kind,
            requests_left: spec.requests,
            emitted: 0,
            nanos_per_request: 1e9 / spec.rate_per_s,
            random: Random::new(spec.seed),
            chooser,
            mix,
            records: spec.keys,
            pending: Pending::None,
            size: spec.size,
            size_salt: mix64(spec.seed ^ SIZE_SALT),
        })
    }

    /// The key of the next point operation.
    fn choose_key(&mut self) -> u64 {
        match &self.chooser {
            KeyChooser::Uniform => self.random.below(self.records),
            KeyChooser::Zipf {
                sampler,
                permutation,
            } => permutation.apply(sampler.sample(&mut self.random)),
            KeyChooser::Scrambled {
                sampler,
                keys,
                salt,
            } => mix64(sampler.sample(&mut self.random) ^ *salt) % *keys,
            KeyChooser::Hotspot {
                hot_keys,
                hot_ops,
                permutation,
            } => {
                let cold_keys = self.records - hot_keys;
                let rank = if cold_keys == 0 || self.random.unit() < *hot_ops {
                    self.random.below(*hot_keys)
                } else {
                    hot_keys + self.random.below(cold_keys)
                };
                permutation.apply(rank)
            }
            KeyChooser::Latest { sampler } => self.records - 1 - sampler.sample(&mut self.random),
            KeyChooser::Ranges {
                ranges,
                range_sampler,
                range_order,
                key_sampler,
                key_order,
            } => {
                let range = range_order.apply(range_sampler.sample(&mut self.random));
                let within = key_order.apply(key_sampler.sample(&mut self.random));
                // Ranges split the keys evenly; the first `keys % ranges` have one key more,
                // which only scans reach.
                let (base, extra) = (self.records / ranges, self.records % ranges);
                range * base + range.min(extra) + within
            }
        }
    }

    /// Starts the next operation: returns its first request and leaves the rest pending.
    fn start_operation(&mut self) -> (u64, Action) {
        match self.mix {
            Mix::Simple {
                write_ratio,
                write_key_limit,
                scan_probability,
                scan_length,
            } => {
                if scan_probability > 0.0 && self.random.unit() < scan_probability {
                    let length = u64::from(scan_length).min(self.records);
                    let start = self.random.below(self.records - length + 1);
                    return self.start_scan(start, length);
                }
                let key = self.choose_key();
                if self.random.unit() < write_ratio {
                    match write_key_limit {
                        Some(limit) => (self.random.below(limit), Action::Update),
                        None => (key, Action::Update),
                    }
                } else {
                    (key, Action::Read)
                }
            }
            Mix::Ycsb {
                workload,
                max_scan_length,
            } => {
                let draw = self.random.unit();
                match workload {
                    YcsbWorkload::A | YcsbWorkload::B => {
                        let read_fraction = if workload == YcsbWorkload::A {
                            0.5
                        } else {
                            0.95
                        };
                        let key = self.choose_key();
                        (
                            key,
                            if draw < read_fraction {
                                Action::Read
                            } else {
                                Action::Update
                            },
                        )
                    }
                    YcsbWorkload::C => (self.choose_key(), Action::Read),
                    YcsbWorkload::D | YcsbWorkload::E if draw >= 0.95 => self.insert(),
                    YcsbWorkload::D => (self.choose_key(), Action::Read),
                    YcsbWorkload::E => {
                        let start = self.choose_key();
                        let wanted = 1 + self.random.below(u64::from(max_scan_length));
                        // Like a database scan, it stops at the last existing key.
                        self.start_scan(start, wanted.min(self.records - start))
                    }
                    YcsbWorkload::F => {
                        let key = self.choose_key();
                        if draw >= 0.5 {
                            self.pending = Pending::Write { key };
                        }
                        (key, Action::Read)
                    }
                }
            }
        }
    }

    fn start_scan(&mut self, start: u64, length: u64) -> (u64, Action) {
        if length > 1 {
            self.pending = Pending::Scan {
                next: start + 1,
                left: length - 1,
            };
        }
        (start, Action::ScanStart)
    }

    /// Appends a new key, which becomes the most recent for `latest`.
    fn insert(&mut self) -> (u64, Action) {
        let key = self.records;
        self.records += 1;
        if let KeyChooser::Latest { sampler } = &mut self.chooser {
            sampler.set_items(self.records);
        }
        (key, Action::Insert)
    }

    fn op(&self, action: Action) -> Op {
        match (self.kind, action) {
            (RequestKind::Block, Action::Read | Action::ScanStart | Action::ScanNext) => Op::Read,
            (RequestKind::Block, Action::Update | Action::Insert) => Op::Write,
            (RequestKind::Kv, Action::Read | Action::ScanNext) => Op::Get,
            (RequestKind::Kv, Action::Update) => Op::Set,
            (RequestKind::Kv, Action::Insert) => Op::Add,
            (RequestKind::Kv, Action::ScanStart) => Op::Scan,
        }
    }
}

impl TraceReader for Generator {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        if self.requests_left == 0 {
            return Ok(None);
        }
        let (key, action) = match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::Scan { next, left } => {
                if left > 1 {
                    self.pending = Pending::Scan {
                        next: next + 1,
                        left: left - 1,
                    };
                }
                (next, Action::ScanNext)
            }
            Pending::Write { key } => (key, Action::Update),
            Pending::None => self.start_operation(),
        };
        let request = Request {
            time_ns: (self.emitted as f64 * self.nanos_per_request) as u64,
            key,
            size: self.size.size_of(key, self.size_salt),
            tenant: 0,
            op: self.op(action),
            next_access: NEXT_ACCESS_UNKNOWN,
        };
        self.emitted += 1;
        self.requests_left -= 1;
        Ok(Some(request))
    }
}
