//! `heterarchy model`: the analytic caching-vs-splitting model of seed 000 §4.2.1 (Eqs 4.1–4.9)
//! over hit or split rate, at low and high concurrency, for one or more device ratios; charts
//! like the thesis's Figure 4.3.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use heterarchy_report::{LineChart, Report, Series};
use heterarchy_sim::analytic::{ModelPoint, Ratio};
use serde::Serialize;

use crate::output::{table_text, write_report, Format, Sink, Table};

/// The four device ratios of seed 000 Figure 4.3 (the fast device at 100 ops/s).
const FIGURE_4_3_RATIOS: &str = "100:1,100:10,100:50,100:100";

/// Arguments of `heterarchy model`.
#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Device rates R_hi:R_lo in ops/s, comma-separated (default: the four of Figure 4.3).
    #[arg(long, default_value = FIGURE_4_3_RATIOS)]
    pub ratio: String,
    /// Points per curve, at x = 0, 1/(points-1), ..., 1.
    #[arg(long, default_value_t = 101)]
    pub points: usize,
    /// How to print the results: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report with one chart per ratio.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// One ratio's curves and optima, as `--format json` prints them.
#[derive(Serialize)]
struct RatioModel {
    r_hi: f64,
    r_lo: f64,
    best_split: f64,
    best_split_ops: f64,
    cache_ceiling_ops: f64,
    cache_ceiling_hit: f64,
    points: Vec<ModelPoint>,
}

/// Evaluates the model for every ratio, prints it and writes the report if asked.
pub fn run(args: &ModelArgs, sink: &mut Sink) -> Result<()> {
    let ratios = parse_ratios(&args.ratio)?;
    let models = ratios
        .iter()
        .map(|ratio| {
            Ok(RatioModel {
                r_hi: ratio.r_hi,
                r_lo: ratio.r_lo,
                best_split: ratio.best_split(),
                best_split_ops: ratio.best_split_ops(),
                cache_ceiling_ops: ratio.cache_ceiling_ops(),
                cache_ceiling_hit: ratio.cache_ceiling_hit(),
                points: ratio.curve(args.points).context("--points")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;

    // People read four decimals; programs get every digit so that the values stay exact.
    let number = |value: f64| match args.format {
        Format::Table => format!("{value:.4}"),
        Format::Csv | Format::Json => value.to_string(),
    };
    let mut table = Table::new(&[
        "ratio",
        "x",
        "cache_low",
        "cache_high",
        "split_low",
        "split_high",
    ]);
    for (ratio, model) in ratios.iter().zip(&models) {
        for point in &model.points {
            table.row(vec![
                ratio.to_string(),
                number(point.x),
                number(point.cache_low),
                number(point.cache_high),
                number(point.split_low),
                number(point.split_high),
            ]);
        }
    }
    sink.emit(args.format, &models, || {
        let mut text = table_text(args.format, &table);
        if args.format == Format::Table {
            text.push('\n');
            let mut summary = Table::new(&SUMMARY_HEADERS);
            for row in summary_rows(&ratios, &models, number) {
                summary.row(row);
            }
            text.push_str(&summary.to_text());
        }
        text
    })?;

    write_report(args.report.as_deref(), || report(&ratios, &models))
}

/// Parses a comma-separated list of `R_hi:R_lo` ratios.
fn parse_ratios(list: &str) -> Result<Vec<Ratio>> {
    list.split(',')
        .map(|text| text.parse::<Ratio>().context("--ratio"))
        .collect()
}

/// The columns of the per-ratio summary.
const SUMMARY_HEADERS: [&str; 5] = [
    "ratio",
    "best_split",
    "best_split_ops",
    "cache_ceiling_ops",
    "cache_ceiling_hit",
];

/// Per ratio: the best split and what it delivers, and caching's ceiling and where it starts.
fn summary_rows(
    ratios: &[Ratio],
    models: &[RatioModel],
    number: impl Fn(f64) -> String,
) -> Vec<Vec<String>> {
    ratios
        .iter()
        .zip(models)
        .map(|(ratio, model)| {
            vec![
                ratio.to_string(),
                number(model.best_split),
                number(model.best_split_ops),
                number(model.cache_ceiling_ops),
                number(model.cache_ceiling_hit),
            ]
        })
        .collect()
}

/// The HTML report: one Figure 4.3-style chart per ratio and the summary table.
fn report(ratios: &[Ratio], models: &[RatioModel]) -> Report {
    let mut report = Report::new("Modelled caching and splitting throughput (seed 000 §4.2.1)");
    report.paragraph(
        "Two devices at fixed rates R_hi and R_lo ops/s, read-only requests, one at a time \
         (\"1\") or many at a time (\"many\"). Caching serves hits from the fast device and \
         installs every miss in it (Eqs 4.2, 4.7); splitting sends a fraction S of requests to \
         the fast device and the rest to the slow one (Eqs 4.8, 4.9).",
    );
    for (ratio, model) in ratios.iter().zip(models) {
        let title = format!("Device Ratio {} : {}", ratio.r_hi, ratio.r_lo);
        let mut chart = LineChart::new(&title, "hit rate H or split rate S", "throughput (ops/s)");
        chart.y_range = Some((0.0, model.best_split_ops));
        let along = |value: fn(&ModelPoint) -> f64| -> Vec<(f64, f64)> {
            model.points.iter().map(|p| (p.x, value(p))).collect()
        };
        // The optima fall between grid points in general; adding them draws the peak of
        // split-many and the knee of cache-many where they really are.
        let with_optimum = |mut points: Vec<(f64, f64)>, optimum: (f64, f64)| {
            points.push(optimum);
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            points
        };
        let curves = [
            ("cache-1", along(|p| p.cache_low)),
            (
                "cache-many",
                with_optimum(
                    along(|p| p.cache_high),
                    (model.cache_ceiling_hit, model.cache_ceiling_ops),
                ),
            ),
            ("split-1", along(|p| p.split_low)),
            (
                "split-many",
                with_optimum(
                    along(|p| p.split_high),
                    (model.best_split, model.best_split_ops),
                ),
            ),
        ];
        for (name, points) in curves {
            chart.series.push(Series {
                name: name.to_string(),
                points,
            });
        }
        report.heading(&title).chart(&chart).paragraph(&format!(
            "Best split S* = {:.4} gives {:.2} ops/s (both devices busy); caching peaks at {:.2} \
             ops/s from hit rate {:.4} on.",
            model.best_split,
            model.best_split_ops,
            model.cache_ceiling_ops,
            model.cache_ceiling_hit
        ));
    }
    report.heading("Optima").table(
        &SUMMARY_HEADERS,
        &summary_rows(ratios, models, |value| format!("{value:.4}")),
    );
    report
}
