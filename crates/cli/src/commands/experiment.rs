//! `heterarchy experiment`: the seed papers' figures and tables reproduced on the device models
//! — a table (with the thesis' numbers beside ours), CSV or JSON rows, and an HTML report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use heterarchy_experiment::{find, Options, Output, EXPERIMENTS};
use heterarchy_report::Report;
use indicatif::{ProgressBar, ProgressStyle};

use crate::output::{table_text, write_report, Format, Sink, Table};

/// Arguments of `heterarchy experiment`.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// The experiment to run, or `list` for all of them.
    pub name: String,
    /// How to print the rows: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report with the charts.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Multiplies the measured run lengths (smaller is faster and noisier).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Worker threads for independent runs (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// What compression costs in the PolyEMT experiments: lz4 timed on this machine first, or
    /// the paper's figures (11 µs and 4 µs a page; reproducible anywhere).
    #[arg(long, value_enum, default_value = "measured")]
    pub codec_costs: CodecCosts,
}

/// Where the PolyEMT experiments take compression costs from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CodecCosts {
    Measured,
    Paper,
}

/// Lists the experiments or runs one.
pub fn run(args: &ExperimentArgs, sink: &mut Sink) -> Result<()> {
    if args.name == "list" {
        return list(args.format, sink);
    }
    let experiment = find(&args.name).ok_or_else(|| {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        anyhow!(
            "no experiment called \"{}\"; expected list or one of {}",
            args.name,
            names.join(", ")
        )
    })?;
    if !(args.scale.is_finite() && args.scale > 0.0) {
        return Err(anyhow!("--scale {} must be > 0", args.scale));
    }
    let mut options = Options::scaled(args.scale);
    if let Some(threads) = args.threads {
        options.threads = threads.max(1);
    }
    if experiment.name.starts_with("poly-") && args.codec_costs == CodecCosts::Measured {
        options.codec_cost = Some(heterarchy_experiment::poly::measure_codec(
            heterarchy_device::codec::Codec::Lz4,
        ));
    }
    let output = with_progress(&options, experiment.name, || (experiment.run)(&options))?;
    sink.emit(args.format, &output.rows, || {
        render_output(args.format, &output)
    })?;
    write_report(args.report.as_deref(), || {
        report(&output, experiment.reproduces)
    })
}

fn list(format: Format, sink: &mut Sink) -> Result<()> {
    let mut table = Table::new(&["name", "reproduces", "description"]);
    for experiment in EXPERIMENTS {
        table.row(vec![
            experiment.name.to_string(),
            experiment.reproduces.to_string(),
            experiment.description.to_string(),
        ]);
    }
    let json: Vec<serde_json::Value> = EXPERIMENTS
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "reproduces": e.reproduces,
                "description": e.description,
            })
        })
        .collect();
    sink.render(format, &table, &json)
}

/// Runs `work` with a bar of simulation runs done, on a terminal.
fn with_progress<T>(options: &Options, name: &str, work: impl FnOnce() -> T) -> T {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} runs ({elapsed})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(name.to_string());
    let finished = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !finished.load(Ordering::Relaxed) {
                let (done, total) = options.progress.get();
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let result = work();
        finished.store(true, Ordering::Relaxed);
        result
    });
    bar.finish_and_clear();
    result
}

fn rows_table(output: &Output, rounded: bool) -> Table {
    let columns = output.columns();
    let headers: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut table = Table::new(&headers);
    for row in output.cells(rounded) {
        table.row(row);
    }
    table
}

fn comparison_table(output: &Output) -> Table {
    let mut table = Table::new(&["compared", "thesis", "ours"]);
    for comparison in &output.comparisons {
        table.row(vec![
            comparison.what.clone(),
            comparison.thesis.clone(),
            comparison.ours.clone(),
        ]);
    }
    table
}

fn render_output(format: Format, output: &Output) -> String {
    match format {
        Format::Table => {
            let mut text = format!("{}\n\n{}", output.title, rows_table(output, true).to_text());
            if !output.comparisons.is_empty() {
                text.push('\n');
                text.push_str(&comparison_table(output).to_text());
            }
            for note in &output.notes {
                text.push_str(&format!("\nnote: {note}"));
            }
            if !output.notes.is_empty() {
                text.push('\n');
            }
            text
        }
        _ => table_text(format, &rows_table(output, false)),
    }
}

fn report(output: &Output, reproduces: &str) -> Report {
    let mut report = Report::new(&format!("heterarchy experiment: {reproduces}"));
    report.heading(&output.title);
    for chart in &output.charts {
        report.chart(chart);
    }
    if !output.comparisons.is_empty() {
        report.heading("The thesis and ours");
        let table = comparison_table(output);
        report.table(&table.headers(), table.rows());
    }
    for note in &output.notes {
        report.paragraph(note);
    }
    report.heading("Rows");
    let table = rows_table(output, true);
    report.table(&table.headers(), table.rows());
    report
}
