//! The thesis' analytic model of a two-tier cache (seed 002 §3.2.1–§3.2.3): what a 1 MiB unit
//! of each tier costs, each outcome's latency under write-back or write-through, a
//! configuration's mean latency from the hits [`super::ReuseByOp`] predicts, and the Hit-Miss
//! and Overhead-Gain Ratios that say when a second tier can pay.

use serde::Serialize;

use super::reuse::{PageOp, TierHits, UNIT_PAGES};

/// Metadata a cached page keeps in tier 1's DRAM (seed 002 §3.2.1: "31B of metadata per page
/// as in modern caching systems like CacheLib": key, size and creation time).
pub const METADATA_BYTES_PER_PAGE: f64 = 31.0;

/// A device as the model sees it (seed 002 Table 3.1): benchmarked latencies and a price.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizingDevice {
    pub name: String,
    pub read_us: f64,
    pub write_us: f64,
    pub dollars_per_gb: f64,
}

/// When writes reach the backing store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// On eviction only (the thesis' "WB").
    WriteBack,
    /// On every write ("WT"): its latency no cache can avoid.
    WriteThrough,
}

/// A two-tier cache over a backing store (seed 002 Table 3.2's triples).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierConfig {
    pub t1: SizingDevice,
    pub t2: SizingDevice,
    pub backing: SizingDevice,
}

/// Where a request is served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    T1Hit,
    T2Hit,
    Miss,
}

impl TierConfig {
    /// The configuration's name, `T1/T2/BACKING`.
    pub fn name(&self) -> String {
        format!("{}/{}/{}", self.t1.name, self.t2.name, self.backing.name)
    }

    /// Dollars of metadata one unit of either tier keeps in tier 1 (seed 002 §3.2.1: 256 pages
    /// × 31 B = 7,936 B a unit at tier 1's price, $0.00005952 on FastDRAM).
    pub fn metadata_dollars_per_unit(&self) -> f64 {
        UNIT_PAGES as f64 * METADATA_BYTES_PER_PAGE * self.t1.dollars_per_gb / 1e9
    }

    /// Dollars a unit of tier 1 (`tier` 1) or tier 2 (`tier` 2) costs, data and metadata. The
    /// thesis prices a 1 MiB unit as 1 MB of the device's capacity (its worked example, §3.2.1,
    /// which prints $0.0023 for FastSSD's data where $1,120 / 375,000 is $0.0029867).
    pub fn unit_dollars(&self, tier: u8) -> f64 {
        let device = if tier == 1 { &self.t1 } else { &self.t2 };
        device.dollars_per_gb / 1e3 + self.metadata_dollars_per_unit()
    }

    /// The most units of `tier` that `dollars` buy.
    pub fn affordable_units(&self, tier: u8, dollars: f64) -> u64 {
        (dollars.max(0.0) / self.unit_dollars(tier) + 1e-9).floor() as u64
    }

    /// What `t1_units` of tier 1 leave of `budget`, spent on tier 2: its units.
    pub fn tier2_for(&self, t1_units: u64, budget: f64) -> u64 {
        self.affordable_units(2, budget - t1_units as f64 * self.unit_dollars(1))
    }

    /// The latency of `op` served as `outcome`, µs (seed 002 §3.2.3's latencies, which are
    /// write-through's; under write-back a write does not wait for the backing store). A single
    /// tier has no promotion or demotion; with a second tier every access missing tier 1 reads
    /// tier 1's victim and writes it to tier 2.
    fn latency_us(
        &self,
        outcome: Outcome,
        op: PageOp,
        policy: WritePolicy,
        two_tiers: bool,
    ) -> f64 {
        let (r1, w1) = (self.t1.read_us, self.t1.write_us);
        let (r2, w2) = (self.t2.read_us, self.t2.write_us);
        let (rs, ws) = (self.backing.read_us, self.backing.write_us);
        let through = if policy == WritePolicy::WriteThrough {
            ws
        } else {
            0.0
        };
        let demote = if two_tiers { r1 + w2 } else { 0.0 };
        match (outcome, op) {
            (Outcome::T1Hit, PageOp::Read) => r1,
            (Outcome::T1Hit, PageOp::Write) => w1 + through,
            (Outcome::T2Hit, PageOp::Read) => r1 + w1 + r2 + w2,
            (Outcome::T2Hit, PageOp::Write) => r1 + w1 + w2 + through,
            (Outcome::Miss, PageOp::Read) => rs + w1 + demote,
            (Outcome::Miss, PageOp::Write) => w1 + demote + through,
        }
    }

    /// Mean latency of the requests `hits` counts, µs; a single tier when `two_tiers` is false
    /// (then `hits.t2` must be zero).
    pub fn mean_latency_us(&self, hits: &TierHits, policy: WritePolicy, two_tiers: bool) -> f64 {
        let mut total_us = 0.0;
        let mut requests = 0u64;
        for op in [PageOp::Read, PageOp::Write] {
            let index = op as usize;
            for (outcome, count) in [
                (Outcome::T1Hit, hits.t1[index]),
                (Outcome::T2Hit, hits.t2[index]),
                (Outcome::Miss, hits.misses[index]),
            ] {
                total_us += count as f64 * self.latency_us(outcome, op, policy, two_tiers);
                requests += count;
            }
        }
        total_us / requests.max(1) as f64
    }

    /// The overhead a second tier adds to a request it does not speed up, `r1 + w2` (read
    /// tier 1's victim, write it to tier 2), over the gain of a tier-2 read hit,
    /// `rs - r1 - r2 - w2` (seed 002 §3.2.3). The same under both write policies.
    pub fn overhead_gain_ratio(&self) -> f64 {
        let overhead = self.t1.read_us + self.t2.write_us;
        let gain = self.backing.read_us - self.t1.read_us - self.t2.read_us - self.t2.write_us;
        if gain <= 0.0 {
            f64::INFINITY
        } else {
            overhead / gain
        }
    }
}

/// The Hit-Miss Ratio of `hits` (seed 002 §3.2.3): the requests a second tier speeds up, its
/// read hits, over those it slows down — its write hits, the writes missing tier 1 that miss
/// it too, and the read misses. A second tier helps only where HMR exceeds the OGR.
pub fn hit_miss_ratio(hits: &TierHits) -> f64 {
    let read = PageOp::Read as usize;
    let write = PageOp::Write as usize;
    let helped = hits.t2[read] as f64;
    let hurt = (hits.t2[write] + hits.misses[write] + hits.misses[read]) as f64;
    if hurt == 0.0 {
        f64::INFINITY
    } else {
        helped / hurt
    }
}

/// Seed 002 Table 3.1's labels and the device presets that carry its numbers (prices from
/// amazon.com and latencies from storagereview.com and userbenchmark.com, January 2022; each
/// preset file cites them).
pub const TABLE_3_1: [(&str, &str); 7] = [
    ("FastDRAM", "fast-dram-seed002"),
    ("SlowDRAM", "slow-dram-seed002"),
    ("FastSSD", "fast-ssd-seed002"),
    ("MediumSSD", "medium-ssd-seed002"),
    ("SlowSSD", "slow-ssd-seed002"),
    ("FastHDD", "fast-hdd-seed002"),
    ("SlowHDD", "slow-hdd-seed002"),
];

/// Seed 002 Table 3.2: each tier-1 and tier-2 pair with its backing stores (17 in all; the
/// thesis' chapter 4 says 16, an erratum).
const TABLE_3_2: [(&str, &str, &[&str]); 7] = [
    ("FastDRAM", "SlowDRAM", &["FastHDD", "SlowHDD", "SlowSSD"]),
    ("FastDRAM", "FastSSD", &["FastHDD", "SlowHDD", "SlowSSD"]),
    ("FastDRAM", "MediumSSD", &["FastHDD", "SlowHDD"]),
    ("FastDRAM", "SlowSSD", &["FastHDD", "SlowHDD"]),
    ("SlowDRAM", "FastSSD", &["FastHDD", "SlowHDD", "SlowSSD"]),
    ("SlowDRAM", "MediumSSD", &["FastHDD", "SlowHDD"]),
    ("SlowDRAM", "SlowSSD", &["FastHDD", "SlowHDD"]),
];

/// The Table 3.1 device labelled `name` (FastDRAM, ...).
pub fn seed002_device(name: &str) -> Option<SizingDevice> {
    let (label, preset) = TABLE_3_1.iter().find(|(label, _)| *label == name)?;
    let mut device = sizing_device(preset)?;
    device.name = label.to_string();
    Some(device)
}

/// A device by Table 3.1 label or by preset name (`heterarchy device list`): its 4 KiB read
/// and write latencies at queue depth 1 and its price; `None` for an unknown name or a preset
/// without a price.
pub fn sizing_device(name: &str) -> Option<SizingDevice> {
    if let Some((label, _)) = TABLE_3_1.iter().find(|(label, _)| *label == name) {
        return seed002_device(label);
    }
    let spec = heterarchy_device::presets::preset(name)?;
    Some(SizingDevice {
        name: name.to_string(),
        read_us: spec.read.latency_ns / 1e3,
        write_us: spec.write.latency_ns / 1e3,
        dollars_per_gb: spec.cost_per_gb?,
    })
}

/// Table 3.2's seventeen configurations, in its order.
pub fn seed002_configs() -> Vec<TierConfig> {
    let device = |name| seed002_device(name).expect("Table 3.2 names Table 3.1's devices");
    TABLE_3_2
        .iter()
        .flat_map(|&(t1, t2, backings)| {
            backings.iter().map(move |&backing| TierConfig {
                t1: device(t1),
                t2: device(t2),
                backing: device(backing),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(t1: &str, t2: &str, backing: &str) -> TierConfig {
        let device = |name| seed002_device(name).expect("a Table 3.1 device");
        TierConfig {
            t1: device(t1),
            t2: device(t2),
            backing: device(backing),
        }
    }

    #[test]
    fn table_3_2_lists_seventeen_configurations() {
        let configs = seed002_configs();
        assert_eq!(configs.len(), 17);
        assert_eq!(configs[0].name(), "FastDRAM/SlowDRAM/FastHDD");
        assert_eq!(configs[16].name(), "SlowDRAM/SlowSSD/SlowHDD");
    }

    #[test]
    fn overhead_gain_ratios_match_the_notes_fixtures() {
        // Notes §2.4's table, rows 1, 4, 9, 13 and 17.
        for (t1, t2, backing, ogr) in [
            ("FastDRAM", "SlowDRAM", "FastHDD", 0.001155),
            ("FastDRAM", "FastSSD", "FastHDD", 0.017635),
            ("FastDRAM", "SlowSSD", "FastHDD", 0.482346),
            ("SlowDRAM", "FastSSD", "SlowSSD", 0.145450),
            ("SlowDRAM", "SlowSSD", "SlowHDD", 0.020756),
        ] {
            let got = config(t1, t2, backing).overhead_gain_ratio();
            assert!((got / ogr - 1.0).abs() < 1e-3, "{t1}/{t2}/{backing}: {got}");
        }
    }

    #[test]
    fn a_unit_costs_its_data_and_its_metadata_in_tier_1() {
        let fast = config("FastDRAM", "FastSSD", "SlowHDD");
        // Seed 002 §3.2.1: $0.00005952 of metadata; FastSSD's data $0.0029867 (the thesis
        // prints $0.0023, an erratum), $0.0030462 in all.
        assert!((fast.metadata_dollars_per_unit() - 0.00005952).abs() < 1e-9);
        assert!((fast.unit_dollars(2) - 0.0030462).abs() < 1e-6);
        assert!((fast.unit_dollars(1) - 0.00755952).abs() < 1e-8);
        assert_eq!(fast.affordable_units(1, 1.0), 132);
        assert_eq!(fast.tier2_for(132, 1.0), 0);
        assert_eq!(fast.tier2_for(100, 1.0), 80);
    }

    #[test]
    fn table_3_1_devices_come_from_presets_with_the_thesis_numbers() {
        // Label, read and write µs, price and GB (seed 002 Table 3.1).
        let table = [
            ("FastDRAM", 0.0619, 0.0619, 120.0, 16.0),
            ("SlowDRAM", 0.0774, 0.0774, 68.0, 16.0),
            ("FastSSD", 1.82, 2.0, 1120.0, 375.0),
            ("MediumSSD", 13.33, 27.77, 454.0, 800.0),
            ("SlowSSD", 18.18, 33.33, 132.0, 480.0),
            ("FastHDD", 120.8, 974.6, 644.0, 20_000.0),
            ("SlowHDD", 1661.1, 1037.3, 289.0, 8000.0),
        ];
        for (label, read_us, write_us, dollars, gb) in table {
            let device = seed002_device(label).unwrap();
            assert_eq!(device.name, label);
            assert!((device.read_us - read_us).abs() < 1e-9, "{label}");
            assert!((device.write_us - write_us).abs() < 1e-9, "{label}");
            let price = dollars / gb;
            assert!(
                (device.dollars_per_gb - price).abs() < 1e-9 * price,
                "{label}"
            );
        }
        // Any priced preset serves too, by its own name.
        let hdd = sizing_device("hdd").unwrap();
        assert_eq!(hdd.name, "hdd");
        assert!(hdd.read_us > 1000.0);
        assert!(sizing_device("Floppy").is_none());
    }

    #[test]
    fn latencies_follow_the_notes_table() {
        let c = config("FastDRAM", "FastSSD", "SlowHDD");
        let (r1, w1, r2, w2, rs, ws) = (0.0619, 0.0619, 1.82, 2.0, 1661.1, 1037.3);
        let one = |t1, t2, misses| TierHits { t1, t2, misses };
        let cases = [
            (
                one([1, 0], [0, 0], [0, 0]),
                WritePolicy::WriteBack,
                true,
                r1,
            ),
            (
                one([0, 1], [0, 0], [0, 0]),
                WritePolicy::WriteThrough,
                true,
                w1 + ws,
            ),
            (
                one([0, 0], [1, 0], [0, 0]),
                WritePolicy::WriteBack,
                true,
                r1 + w1 + r2 + w2,
            ),
            (
                one([0, 0], [0, 1], [0, 0]),
                WritePolicy::WriteBack,
                true,
                r1 + w1 + w2,
            ),
            (
                one([0, 0], [0, 0], [1, 0]),
                WritePolicy::WriteBack,
                true,
                r1 + w1 + rs + w2,
            ),
            (
                one([0, 0], [0, 0], [0, 1]),
                WritePolicy::WriteThrough,
                true,
                r1 + w1 + w2 + ws,
            ),
            (
                one([0, 0], [0, 0], [1, 0]),
                WritePolicy::WriteBack,
                false,
                rs + w1,
            ),
            (
                one([0, 0], [0, 0], [0, 1]),
                WritePolicy::WriteBack,
                false,
                w1,
            ),
        ];
        for (hits, policy, two_tiers, expected) in cases {
            let got = c.mean_latency_us(&hits, policy, two_tiers);
            assert!(
                (got - expected).abs() < 1e-9,
                "{hits:?} {policy:?}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn hmr_counts_tier_2_read_hits_against_what_the_tier_slows() {
        let hits = TierHits {
            t1: [50, 50],
            t2: [30, 10],
            misses: [5, 5],
        };
        assert_eq!(hit_miss_ratio(&hits), 30.0 / 20.0);
    }
}
