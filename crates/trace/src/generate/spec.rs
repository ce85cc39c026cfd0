//! What a generated workload looks like: [`WorkloadSpec`], built from serde (JSON, TOML) or from
//! a CLI string such as `zipf:theta=0.9,keys=1000000,requests=10000000,size=4096,seed=1`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::size::{parse_real, SizeDistribution};

/// The largest key count: ranks stay exact in an f64 and block keys keep their volume bits.
pub const MAX_KEYS: u64 = 1 << 44;

/// The Zipf exponent YCSB's `zipfian` and `latest` distributions use (its `ZIPFIAN_CONSTANT`).
pub const YCSB_THETA: f64 = 0.99;

/// The items YCSB's `ScrambledZipfianGenerator` draws ranks from (its `ITEM_COUNT`).
pub const YCSB_ITEM_COUNT: u64 = 10_000_000_000;

/// YCSB's default `maxscanlength`.
pub const YCSB_MAX_SCAN_LENGTH: u32 = 100;

/// A workload spec that cannot be used, as one line naming the spec, the field and what was
/// expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// The spec string, when the spec was given as one.
    pub spec: Option<String>,
    /// The field at fault (`keys`, `size`), when one is.
    pub field: Option<String>,
    /// What was expected, and what was found.
    pub reason: String,
}

impl SpecError {
    /// Field `field` of a spec cannot be used, for `reason`.
    pub fn field(field: &str, reason: impl Into<String>) -> SpecError {
        SpecError {
            spec: None,
            field: Some(field.to_string()),
            reason: reason.into(),
        }
    }

    /// The error as found in the spec string `text`.
    pub fn in_spec(self, text: &str) -> SpecError {
        SpecError {
            spec: Some(text.to_string()),
            ..self
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(spec) = &self.spec {
            write!(f, "workload spec \"{spec}\": ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.reason)
    }
}

/// How keys and operations are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Pattern {
    /// Every key equally likely.
    Uniform,
    /// Key of popularity rank k (from 1) with probability ∝ 1/k^θ, θ > 0.
    Zipf { theta: f64 },
    /// A fraction `hot_data` of the keys receives a fraction `hot_ops` of the accesses, each
    /// part uniform inside (YCSB's `hotspot` distribution).
    Hotspot { hot_data: f64, hot_ops: f64 },
    /// Hot key ranges, as the ZippyDB workload of Cao et al. (FAST 2020) models them: the keys
    /// split into `ranges` contiguous ranges of equal size; an access picks a range by
    /// Zipf(θ) over the ranges (in a seeded order), then a key inside it by Zipf(θ).
    Ranges { ranges: u32, theta: f64 },
    /// One of the YCSB core workloads (Cooper et al., SoCC 2010), with its fixed operation mix.
    Ycsb {
        workload: YcsbWorkload,
        /// Exponent of the `zipfian` and `latest` distributions.
        #[serde(default = "ycsb_theta")]
        theta: f64,
        /// Scans of workload E are 1 to this many keys long, uniformly.
        #[serde(default = "ycsb_max_scan_length")]
        max_scan_length: u32,
        /// Zipf keys as YCSB itself draws them (`scrambled=true`): its
        /// `ScrambledZipfianGenerator` draws a rank among [`YCSB_ITEM_COUNT`] items and hashes
        /// it onto the records, so the ranks past the record count (≈ 39% of requests over a
        /// million records at θ = 0.99) land uniformly. Otherwise ranks are exactly Zipf over
        /// the records. Workload D's `latest` keys are not scrambled, in YCSB either.
        #[serde(default)]
        scrambled: bool,
    },
}

fn ycsb_theta() -> f64 {
    YCSB_THETA
}

fn ycsb_max_scan_length() -> u32 {
    YCSB_MAX_SCAN_LENGTH
}

/// The YCSB core workloads, as the `workloads/workload[a-f]` files of YCSB define them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum YcsbWorkload {
    /// 50% reads, 50% updates, zipfian keys.
    A,
    /// 95% reads, 5% updates, zipfian keys.
    B,
    /// 100% reads, zipfian keys.
    C,
    /// 95% reads, 5% inserts; reads follow the `latest` distribution (recent inserts are hot).
    D,
    /// 95% scans, 5% inserts; scans start at a zipfian key and cover 1 to `max_scan_length`
    /// consecutive keys, uniformly.
    E,
    /// 50% reads, 50% read-modify-writes (a read then a write of the same key), zipfian keys.
    F,
}

impl YcsbWorkload {
    /// Every workload, in order.
    pub const ALL: [YcsbWorkload; 6] = [
        YcsbWorkload::A,
        YcsbWorkload::B,
        YcsbWorkload::C,
        YcsbWorkload::D,
        YcsbWorkload::E,
        YcsbWorkload::F,
    ];

    /// The lower-case letter.
    pub fn letter(self) -> char {
        match self {
            YcsbWorkload::A => 'a',
            YcsbWorkload::B => 'b',
            YcsbWorkload::C => 'c',
            YcsbWorkload::D => 'd',
            YcsbWorkload::E => 'e',
            YcsbWorkload::F => 'f',
        }
    }
}

/// Which op vocabulary requests use (`kind=block|kv`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestKind {
    /// `Read` and `Write`, as a block trace (scans are runs of reads).
    Block,
    /// `Get` and `Set` (YCSB inserts are `Add`; a scan is one `Scan` followed by `Get`s), as a
    /// key-value trace.
    #[default]
    Kv,
}

/// A seeded synthetic workload. The same spec gives the same requests bit for bit.
///
/// Keys are object ids in [0, `keys`) (YCSB inserts append `keys`, `keys`+1, ...); popularity
/// ranks map to keys through a fixed seeded permutation, so hot keys are scattered, while scans
/// walk consecutive keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadSpec {
    /// How keys and operations are chosen.
    pub pattern: Pattern,
    /// Distinct keys at the start.
    pub keys: u64,
    /// Requests generated (a scan or a read-modify-write is several requests; the last one may
    /// be cut short).
    pub requests: u64,
    /// Object sizes, a function of the key.
    pub size: SizeDistribution,
    /// Block-style or key-value-style ops.
    pub kind: RequestKind,
    /// Probability that a request writes (`write=`; not for YCSB, whose mixes are fixed).
    pub write_ratio: f64,
    /// Writes go to this fraction of the keys only, uniformly (`write_keys=`; not for YCSB):
    /// the dirty-read ratio of seed 000 §4.5.1.2, "if writes go to 80% of the working set,
    /// then 80% of the reads will be dirty".
    pub write_keys: f64,
    /// Probability that an operation is a sequential scan instead (`scan=`; not for YCSB).
    /// Scans start at a uniformly chosen key, as backups and table scans do.
    pub scan_probability: f64,
    /// Keys per scan (`scan_len=`; for YCSB E it sets `max_scan_length` instead).
    pub scan_length: u32,
    /// Requests per second of the constant-rate clock: request i is at i · 10⁹ / rate ns.
    pub rate_per_s: f64,
    /// The fraction of its size a page of the data saves when compressed (`compress=`; 0 is
    /// random data): the data an executor writes and compresses (seed 004 §2.2, Fig 4b:
    /// applications gain 2–7× with compression). Requests do not depend on it.
    pub compressibility: f64,
    /// Seeds the request stream, the rank-to-key permutation and the sizes.
    pub seed: u64,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            pattern: Pattern::Zipf { theta: YCSB_THETA },
            keys: 100_000,
            requests: 1_000_000,
            size: SizeDistribution::default(),
            kind: RequestKind::default(),
            write_ratio: 0.0,
            write_keys: 1.0,
            scan_probability: 0.0,
            scan_length: 64,
            rate_per_s: 1e6,
            compressibility: 0.0,
            seed: 1,
        }
    }
}

/// The spec-string fields, in the order [`WorkloadSpec`]'s `Display` writes them.
const FIELDS: &str =
    "keys, requests, theta, scrambled, hot_data, hot_ops, write, write_keys, scan, scan_len, \
     size, kind, rate, compress, seed";

impl WorkloadSpec {
    /// Parses `PATTERN[:FIELD=VALUE,...]`, where PATTERN is `uniform`, `zipf`, `hotspot`,
    /// `ranges` or `ycsb-a` ... `ycsb-f` and FIELD one of keys, requests, theta, hot_data,
    /// hot_ops, ranges, write, write_keys, scan, scan_len, size, kind, rate, compress, seed; unnamed
    /// fields keep their defaults.
    pub fn parse(text: &str) -> Result<WorkloadSpec, SpecError> {
        let fail = |field: &str, message: String| SpecError::field(field, message).in_spec(text);
        let (name, fields) = text.trim().split_once(':').unwrap_or((text.trim(), ""));
        let mut spec = WorkloadSpec {
            pattern: pattern_named(name).ok_or_else(|| {
                fail(
                    "pattern",
                    format!(
                        "expected uniform, zipf, hotspot, ranges or ycsb-a ... ycsb-f, found \
                         \"{name}\""
                    ),
                )
            })?,
            ..WorkloadSpec::default()
        };
        let mut seen: Vec<&str> = Vec::new();
        let items = fields.split(',').filter(|_| !fields.trim().is_empty());
        for item in items {
            let Some((field, value)) = item.split_once('=') else {
                return Err(match item.trim() {
                    "" => fail(
                        "fields",
                        "expected FIELD=VALUE between commas, found nothing".into(),
                    ),
                    field => fail(field, format!("expected {field}=VALUE")),
                });
            };
            let (field, value) = (field.trim(), value.trim());
            if seen.contains(&field) {
                return Err(fail(field, "given twice".into()));
            }
            seen.push(field);
            spec.set_field(field, value)
                .map_err(|message| fail(field, message))?;
        }
        spec.validate().map_err(|error| error.in_spec(text))?;
        Ok(spec)
    }

    /// Sets one spec-string field; the error says what was expected.
    fn set_field(&mut self, field: &str, value: &str) -> Result<(), String> {
        let is_ycsb = matches!(self.pattern, Pattern::Ycsb { .. });
        match (field, &mut self.pattern) {
            ("keys", _) => self.keys = parse_count(value)?,
            ("requests", _) => self.requests = parse_count(value)?,
            (
                "theta",
                Pattern::Zipf { theta }
                | Pattern::Ycsb { theta, .. }
                | Pattern::Ranges { theta, .. },
            ) => *theta = parse_real(value)?,
            ("ranges", Pattern::Ranges { ranges, .. }) => *ranges = parse_length(value)?,
            ("hot_data", Pattern::Hotspot { hot_data, .. }) => *hot_data = parse_real(value)?,
            ("hot_ops", Pattern::Hotspot { hot_ops, .. }) => *hot_ops = parse_real(value)?,
            ("write", _) if !is_ycsb => self.write_ratio = parse_real(value)?,
            ("write_keys", _) if !is_ycsb => self.write_keys = parse_real(value)?,
            ("scan", _) if !is_ycsb => self.scan_probability = parse_real(value)?,
            (
                "scan_len",
                Pattern::Ycsb {
                    workload: YcsbWorkload::E,
                    max_scan_length,
                    ..
                },
            ) => *max_scan_length = parse_length(value)?,
            ("scrambled", Pattern::Ycsb { scrambled, .. }) => *scrambled = parse_flag(value)?,
            ("scan_len", _) if !is_ycsb => self.scan_length = parse_length(value)?,
            ("size", _) => self.size = SizeDistribution::parse_text(value)?,
            ("kind", _) => {
                self.kind = match value.to_ascii_lowercase().as_str() {
                    "block" => RequestKind::Block,
                    "kv" => RequestKind::Kv,
                    _ => return Err(format!("expected block or kv, found \"{value}\"")),
                }
            }
            ("rate", _) => self.rate_per_s = parse_real(value)?,
            ("compress", _) => self.compressibility = parse_real(value)?,
            ("seed", _) => self.seed = parse_count(value)?,
            (
                "theta" | "hot_data" | "hot_ops" | "write" | "write_keys" | "scan" | "scan_len"
                | "scrambled",
                _,
            ) => return Err(format!("does not apply to {}", self.pattern_name())),
            _ => return Err(format!("unknown field; expected one of {FIELDS}")),
        }
        Ok(())
    }

    /// Checks every parameter (parsing does it; call it on specs built otherwise).
    pub fn validate(&self) -> Result<(), SpecError> {
        let fail = |field: &str, message: String| Err(SpecError::field(field, message));
        if !(1..=MAX_KEYS).contains(&self.keys) {
            return fail(
                "keys",
                format!("expected 1 to {MAX_KEYS} keys, found {}", self.keys),
            );
        }
        match self.pattern {
            Pattern::Zipf { theta }
            | Pattern::Ycsb { theta, .. }
            | Pattern::Ranges { theta, .. }
                if !(theta.is_finite() && theta > 0.0) =>
            {
                return fail("theta", format!("expected a number > 0, found {theta}"))
            }
            Pattern::Ranges { ranges, .. } if ranges == 0 || u64::from(ranges) > self.keys => {
                return fail(
                    "ranges",
                    format!(
                        "expected 1 to {} ranges (one key each at least), found {ranges}",
                        self.keys
                    ),
                )
            }
            Pattern::Hotspot { hot_data, .. } if !(hot_data > 0.0 && hot_data < 1.0) => {
                return fail(
                    "hot_data",
                    format!("expected a fraction in (0, 1), found {hot_data}"),
                )
            }
            Pattern::Hotspot { hot_ops, .. } if !(0.0..=1.0).contains(&hot_ops) => {
                return fail(
                    "hot_ops",
                    format!("expected a fraction in [0, 1], found {hot_ops}"),
                )
            }
            Pattern::Ycsb {
                max_scan_length: 0, ..
            } => {
                return fail(
                    "scan_len",
                    "expected at least 1 key per scan, found 0".into(),
                )
            }
            Pattern::Ycsb { workload, .. }
                if self.write_ratio != 0.0
                    || self.scan_probability != 0.0
                    || self.write_keys != 1.0 =>
            {
                return fail(
                    if self.write_ratio != 0.0 {
                        "write"
                    } else if self.write_keys != 1.0 {
                        "write_keys"
                    } else {
                        "scan"
                    },
                    format!(
                        "does not apply to ycsb-{}, whose mix is fixed",
                        workload.letter()
                    ),
                )
            }
            _ => {}
        }
        if !(0.0..=1.0).contains(&self.write_ratio) {
            return fail(
                "write",
                format!("expected a fraction in [0, 1], found {}", self.write_ratio),
            );
        }
        if !(self.write_keys > 0.0 && self.write_keys <= 1.0) {
            return fail(
                "write_keys",
                format!("expected a fraction in (0, 1], found {}", self.write_keys),
            );
        }
        if !(0.0..=1.0).contains(&self.scan_probability) {
            return fail(
                "scan",
                format!(
                    "expected a fraction in [0, 1], found {}",
                    self.scan_probability
                ),
            );
        }
        if self.scan_length == 0 {
            return fail(
                "scan_len",
                "expected at least 1 key per scan, found 0".into(),
            );
        }
        if !(self.rate_per_s.is_finite() && self.rate_per_s > 0.0) {
            return fail(
                "rate",
                format!(
                    "expected requests per second > 0, found {}",
                    self.rate_per_s
                ),
            );
        }
        if !(0.0..1.0).contains(&self.compressibility) {
            return fail(
                "compress",
                format!(
                    "expected the fraction a page saves, in [0, 1), found {}",
                    self.compressibility
                ),
            );
        }
        self.size.validate()
    }

    /// `uniform`, `zipf`, `hotspot` or `ycsb-a` ... `ycsb-f`.
    pub fn pattern_name(&self) -> String {
        match self.pattern {
            Pattern::Uniform => "uniform".into(),
            Pattern::Zipf { .. } => "zipf".into(),
            Pattern::Hotspot { .. } => "hotspot".into(),
            Pattern::Ranges { .. } => "ranges".into(),
            Pattern::Ycsb { workload, .. } => format!("ycsb-{}", workload.letter()),
        }
    }
}

/// The pattern a spec string names, with its default parameters.
fn pattern_named(name: &str) -> Option<Pattern> {
    let name = name.to_ascii_lowercase();
    match name.as_str() {
        "uniform" => Some(Pattern::Uniform),
        "zipf" => Some(Pattern::Zipf { theta: YCSB_THETA }),
        "hotspot" => Some(Pattern::Hotspot {
            hot_data: 0.2,
            hot_ops: 0.8,
        }),
        "ranges" => Some(Pattern::Ranges {
            ranges: 6,
            theta: YCSB_THETA,
        }),
        _ => {
            let letter = name.strip_prefix("ycsb-")?;
            let workload = YcsbWorkload::ALL
                .into_iter()
                .find(|w| letter.len() == 1 && letter.starts_with(w.letter()))?;
            Some(Pattern::Ycsb {
                workload,
                theta: YCSB_THETA,
                max_scan_length: YCSB_MAX_SCAN_LENGTH,
                scrambled: false,
            })
        }
    }
}

/// `1` or `0`, or `true` or `false`.
pub(crate) fn parse_flag(text: &str) -> Result<bool, String> {
    match text {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(format!("expected 1 or 0 (true or false), found \"{text}\"")),
    }
}

pub(crate) fn parse_count(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("expected a whole number, found \"{text}\""))
}

fn parse_length(text: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .map_err(|_| format!("expected a whole number of keys, found \"{text}\""))
}

impl FromStr for WorkloadSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<WorkloadSpec, SpecError> {
        WorkloadSpec::parse(text)
    }
}

/// The canonical spec string, every field spelled out, which [`WorkloadSpec::parse`] reads back
/// to an equal spec.
impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:keys={},requests={}",
            self.pattern_name(),
            self.keys,
            self.requests
        )?;
        match self.pattern {
            Pattern::Uniform => {}
            Pattern::Zipf { theta } => write!(f, ",theta={theta}")?,
            Pattern::Hotspot { hot_data, hot_ops } => {
                write!(f, ",hot_data={hot_data},hot_ops={hot_ops}")?
            }
            Pattern::Ranges { ranges, theta } => write!(f, ",ranges={ranges},theta={theta}")?,
            Pattern::Ycsb {
                workload,
                theta,
                max_scan_length,
                scrambled,
            } => {
                write!(f, ",theta={theta}")?;
                if scrambled {
                    write!(f, ",scrambled=true")?;
                }
                if workload == YcsbWorkload::E {
                    write!(f, ",scan_len={max_scan_length}")?;
                }
            }
        }
        if !matches!(self.pattern, Pattern::Ycsb { .. }) {
            write!(f, ",write={}", self.write_ratio)?;
            if self.write_keys != 1.0 {
                write!(f, ",write_keys={}", self.write_keys)?;
            }
            write!(
                f,
                ",scan={},scan_len={}",
                self.scan_probability, self.scan_length
            )?;
        }
        let kind = match self.kind {
            RequestKind::Block => "block",
            RequestKind::Kv => "kv",
        };
        write!(
            f,
            ",size={},kind={kind},rate={}",
            self.size, self.rate_per_s
        )?;
        if self.compressibility != 0.0 {
            write!(f, ",compress={}", self.compressibility)?;
        }
        write!(f, ",seed={}", self.seed)
    }
}
