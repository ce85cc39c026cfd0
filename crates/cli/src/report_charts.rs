//! Charts that several commands' `--report` pages draw from the same kind of result, built
//! once here: miss ratio over cache size per policy (`sim`, `demo`), and power-of-two
//! histograms (reuse distances, reuse times, object and I/O sizes: `mrc`, `trace stats`).

use heterarchy_report::{BarChart, Bars, LineChart, Series};
use heterarchy_sim::cache_sim::SimResult;

use crate::size::human_bytes;

/// Which of a result's miss ratios a chart shows.
#[derive(Clone, Copy)]
pub enum Ratio {
    /// The share of requests that missed.
    Requests,
    /// The share of requested bytes that missed.
    Bytes,
}

/// The policies of `results`, in the order they first appear (the order they were asked for).
pub fn policies(results: &[SimResult]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for result in results {
        if !seen.contains(&result.policy.as_str()) {
            seen.push(&result.policy);
        }
    }
    seen
}

/// One line per policy: its miss ratio over cache size, on a log axis (sizes span decades);
/// `objects` when cache sizes count objects. `sim --report` and `demo` draw it.
pub fn miss_ratio_chart(results: &[SimResult], ratio: Ratio, objects: bool) -> LineChart {
    let (title, y_label) = match ratio {
        Ratio::Requests => (
            "Request miss ratio by cache size",
            "request miss ratio (fraction)",
        ),
        Ratio::Bytes => (
            "Byte miss ratio by cache size",
            "byte miss ratio (fraction)",
        ),
    };
    let x_label = if objects {
        "cache size (objects, log scale)"
    } else {
        "cache size (bytes, log scale)"
    };
    let mut chart = LineChart::new(title, x_label, y_label);
    chart.x_log = true;
    chart.y_range = Some((0.0, 1.0));
    for policy in policies(results) {
        let mut points: Vec<(f64, f64)> = results
            .iter()
            .filter(|r| r.policy == policy)
            .map(|r| {
                let value = match ratio {
                    Ratio::Requests => r.miss_ratio,
                    Ratio::Bytes => r.byte_miss_ratio,
                };
                (r.cache_size as f64, value)
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.series.push(Series::new(policy, points));
    }
    chart
}

/// What a histogram's values count, for its bucket labels.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes: labels such as `4 KiB`.
    Bytes,
    /// Anything counted (requests, objects): plain numbers.
    Count,
}

/// A bar chart of power-of-two histograms: one set of bars per named histogram, each given as
/// (bucket's smallest value, count) pairs, over the union of their buckets in increasing order
/// (a bucket one histogram lacks is zero in it). Each bucket is labelled with its smallest
/// value, in `unit`.
pub fn power_of_two_histogram(
    title: &str,
    x_label: &str,
    y_label: &str,
    unit: Unit,
    histograms: &[(&str, Vec<(u64, f64)>)],
) -> BarChart {
    let mut mins: Vec<u64> = histograms
        .iter()
        .flat_map(|(_, buckets)| buckets.iter().map(|&(min, _)| min))
        .collect();
    mins.sort_unstable();
    mins.dedup();
    let label = |min: u64| match unit {
        Unit::Bytes => human_bytes(min),
        Unit::Count => min.to_string(),
    };
    let mut chart = BarChart::new(
        title,
        x_label,
        y_label,
        mins.iter().map(|&m| label(m)).collect(),
    );
    for (name, buckets) in histograms {
        let values = mins
            .iter()
            .map(|min| {
                buckets
                    .iter()
                    .find(|(bucket, _)| bucket == min)
                    .map_or(0.0, |&(_, count)| count)
            })
            .collect();
        chart.series.push(Bars::new(name, values));
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_report::Chart;

    fn result(policy: &str, cache_size: u64, miss_ratio: f64) -> SimResult {
        SimResult {
            policy: policy.into(),
            cache_size,
            requests: 100,
            misses: (miss_ratio * 100.0) as u64,
            miss_ratio,
            bytes: 1000,
            miss_bytes: 0,
            byte_miss_ratio: miss_ratio / 2.0,
        }
    }

    #[test]
    fn one_line_per_policy_in_size_order() {
        let results = [
            result("lru", 1000, 0.2),
            result("lru", 10, 0.9),
            result("fifo", 10, 0.95),
            result("fifo", 1000, 0.3),
        ];
        let chart = miss_ratio_chart(&results, Ratio::Bytes, false);
        assert_eq!(chart.series.len(), 2);
        assert_eq!(chart.series[0].name, "lru");
        assert_eq!(chart.series[0].points, vec![(10.0, 0.45), (1000.0, 0.1)]);
        assert!(chart.x_log && chart.to_svg().contains("byte miss ratio"));
    }

    #[test]
    fn histograms_share_the_union_of_their_buckets() {
        let chart = power_of_two_histogram(
            "sizes",
            "size",
            "I/Os",
            Unit::Bytes,
            &[
                ("reads", vec![(4096, 3.0), (65536, 1.0)]),
                ("writes", vec![(512, 2.0), (4096, 5.0)]),
            ],
        );
        assert_eq!(chart.categories, ["512 B", "4 KiB", "64 KiB"]);
        assert_eq!(chart.series[0].values, [0.0, 3.0, 1.0]);
        assert_eq!(chart.series[1].values, [2.0, 5.0, 0.0]);
    }
}
