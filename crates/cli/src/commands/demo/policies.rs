//! The demo's first view: which eviction policy keeps the most of the workload, at cache sizes
//! from 0.1% to 80% of its working set (what `heterarchy sim` and `heterarchy mrc` print), and
//! LRU's whole curve exactly and from a SHARDS sample.

use anyhow::Result;
use heterarchy_policy::PolicySpec;
use heterarchy_report::{LineChart, Report, Series};
use heterarchy_sim::cache_sim::{run_jobs, working_set, SimJob, SimResult, SimSettings};
use serde::Serialize;

use super::workload::Workload;
use crate::commands::mrc::{compute, Method};
use crate::output::Table;
use crate::progress::requests_bar;
use crate::report_charts::{miss_ratio_chart, Ratio};
use crate::size::{human_bytes, resolve, SizeSpec, AUTO_FRACTIONS};

/// The classic policies and those most papers run as baselines; Belady is the offline bound.
const POLICIES: &str = "lru,fifo,clock,sieve,s3fifo,lfu,arc,twoq,lirs,belady";

/// SHARDS' sampling rate for LRU's approximate curve.
const SHARDS_RATE: f64 = 0.01;

/// Each policy's miss ratios, and LRU's curves.
#[derive(Serialize)]
pub struct Policies {
    /// Cache-line requests and distinct lines.
    pub requests: u64,
    pub working_set_bytes: u64,
    pub results: Vec<SimResult>,
    /// LRU's miss ratio at every cache size, exact and sampled: (bytes, miss ratio).
    pub lru_exact: Vec<(u64, f64)>,
    pub lru_shards: Vec<(u64, f64)>,
}

/// Simulates every policy at each size over one decode of the trace, and LRU's curves.
pub fn run(workload: &Workload) -> Result<Policies> {
    let source = workload.lines();
    let bar = requests_bar(None, "measuring the working set");
    let base = working_set(&source, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let policies = PolicySpec::parse_list(POLICIES, None)?;
    let sizes: Vec<u64> = AUTO_FRACTIONS
        .iter()
        .map(|&fraction| resolve(SizeSpec::Fraction(fraction), base.bytes))
        .collect();
    let jobs = SimJob::grid(&policies, &sizes);
    let bar = requests_bar(
        Some(base.requests * jobs.len() as u64),
        "simulating policies",
    );
    let threads = crate::commands::threads_or_cores(None);
    let results = run_jobs(&source, &SimSettings::default(), &jobs, threads, &|n| {
        bar.inc(n)
    })?;
    bar.finish_and_clear();
    let curve = |method, rate| -> Result<Vec<(u64, f64)>> {
        let result = compute(&source, method, rate, None, false)?;
        Ok(result
            .curve(200, &[])
            .points
            .iter()
            .map(|point| (point.cache_size, point.miss_ratio))
            .collect())
    };
    Ok(Policies {
        requests: base.requests,
        working_set_bytes: base.bytes,
        results,
        lru_exact: curve(Method::Exact, None)?,
        lru_shards: curve(Method::Shards, Some(SHARDS_RATE))?,
    })
}

impl Policies {
    /// A row per policy, a column per share of the working set.
    pub fn table(&self) -> Table {
        let mut headers = vec!["policy".to_string()];
        headers.extend(AUTO_FRACTIONS.iter().map(|f| format!("{}%", f * 100.0)));
        let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut table = Table::new(&header_refs);
        for policy in crate::report_charts::policies(&self.results) {
            let mut cells = vec![policy.to_string()];
            cells.extend(
                self.results
                    .iter()
                    .filter(|r| r.policy == policy)
                    .map(|r| format!("{:.4}", r.miss_ratio)),
            );
            table.row(cells);
        }
        table
    }

    /// The terminal's line: the best online policy at 10% of the working set, against LRU and
    /// Belady's bound.
    pub fn summary(&self) -> String {
        let at = resolve(SizeSpec::Fraction(0.1), self.working_set_bytes);
        let at_size: Vec<&SimResult> = self.results.iter().filter(|r| r.cache_size == at).collect();
        let miss = |name: &str| {
            at_size
                .iter()
                .find(|r| r.policy == name)
                .map_or(f64::NAN, |r| r.miss_ratio)
        };
        let best = at_size
            .iter()
            .filter(|r| r.policy != "belady")
            .min_by(|a, b| a.miss_ratio.total_cmp(&b.miss_ratio));
        format!(
            "policies   miss ratio with {} of cache (10% of the working set): LRU {:.3}, best \
             online {} {:.3}, Belady's bound {:.3}",
            human_bytes(at),
            miss("lru"),
            best.map_or("-", |r| r.policy.as_str()),
            best.map_or(f64::NAN, |r| r.miss_ratio),
            miss("belady"),
        )
    }

    /// The report's section.
    pub fn add_to(&self, report: &mut Report) {
        report
            .heading("1. Eviction policies")
            .paragraph(&format!(
                "The workload split into 4 KiB cache lines ({} line requests, working set {}), \
                 simulated under each policy at sizes from 0.1% to 80% of its working set \
                 (heterarchy sim). Belady's policy knows the future: no online policy can do \
                 better. The write-once fill is a scan, which the scan-resistant policies (ARC, \
                 2Q, LIRS, S3-FIFO) keep out of their main queues.",
                self.requests,
                human_bytes(self.working_set_bytes)
            ))
            .chart(&miss_ratio_chart(&self.results, Ratio::Requests, false));
        let table = self.table();
        report.table(&table.headers(), table.rows());
        let mut curves = LineChart::new(
            &format!("LRU miss-ratio curve: exact and SHARDS (rate {SHARDS_RATE})"),
            "cache size (bytes, log scale)",
            "request miss ratio (fraction)",
        );
        curves.x_log = true;
        curves.y_range = Some((0.0, 1.0));
        for (name, points) in [("exact", &self.lru_exact), ("SHARDS 1%", &self.lru_shards)] {
            curves.series.push(Series::new(
                name,
                points
                    .iter()
                    .map(|&(size, miss)| (size as f64, miss))
                    .collect(),
            ));
        }
        report
            .paragraph(
                "LRU's miss ratio at every cache size in one pass (heterarchy mrc): the exact \
                 curve from every request's stack distance, and SHARDS' from 1% of the lines. \
                 Below about a hundred lines' worth of cache the sample has no resolution.",
            )
            .chart(&curves);
    }
}
