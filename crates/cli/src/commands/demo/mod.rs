//! `heterarchy demo`: the whole system on one built-in block workload, with no input and no
//! network. One seeded trace (a volume written once, then Zipf-popular 4 KiB reads and writes)
//! goes through four views, each what one command does and a section of the report:
//!
//! 1. `policies.rs`: eviction policies' miss ratios and LRU's curve (`sim`, `mrc`);
//! 2. `hierarchy.rs`: DRAM → Optane PM → Optane SSD over a disk on the timed simulator's device
//!    models, classic caching against NHC (`simulate`);
//! 3. `sizing.rs`: what two tiers a budget buys (`sizing`: Cydonia against exhaustive search);
//! 4. `live.rs`: the trace replayed through the live volume code on paced storage, beside the
//!    simulator's prediction (`replay --volume`).
//!
//! The trace and the live volumes' files go to a scratch folder (on tmpfs where there is one,
//! so that the PM file's persists cost what they would on DAX memory) that is removed at the end.

mod hierarchy;
mod live;
mod policies;
mod sizing;
mod workload;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use heterarchy_report::Report;
use serde::Serialize;

use crate::output::{write_report, Format, Sink};
use crate::size::human_bytes;
use workload::Workload;

/// The built-in workload: a 256 MiB volume written once in order, then 200,000 4 KiB I/Os,
/// 30% writes, over 64-page extents of Zipf(0.9) popularity.
pub const DEMO_WORKLOAD: &str = "block-io:requests=200000,pages=65536,theta=0.9,write=0.3,\
                                 misaligned=0,size=4k,fill=1,rate=20000,seed=42";

/// Arguments of `heterarchy demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the HTML report.
    #[arg(long, default_value = "report.html")]
    pub report: PathBuf,
    /// The block workload to run instead of the built-in one (`block-io:...`, see `trace
    /// generate`).
    #[arg(long, default_value = DEMO_WORKLOAD)]
    pub workload: String,
    /// A summary for people (`table`) or every view's results as one JSON document (`json`).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Every view's results.
#[derive(Serialize)]
struct Demo {
    workload: String,
    fill_ios: u64,
    mix_ios: u64,
    volume_bytes: u64,
    policies: policies::Policies,
    hierarchy: hierarchy::Timed,
    sizing: sizing::Sizing,
    live: live::Live,
    seconds: f64,
}

/// Runs the demo.
pub fn run(args: &DemoArgs, sink: &mut Sink) -> Result<()> {
    if args.format == Format::Csv {
        bail!("--format csv: the demo prints a summary (table) or its results as JSON (json)");
    }
    let started = Instant::now();
    let scratch = scratch_folder()?;
    let workload = Workload::generate(&args.workload, scratch.path())?;
    let policies = policies::run(&workload)?;
    let hierarchy = hierarchy::run(&workload)?;
    let sizing = sizing::run(&workload)?;
    let live = live::run(&workload, scratch.path())?;
    let demo = Demo {
        workload: workload.spec_text.clone(),
        fill_ios: workload.fill_ios,
        mix_ios: workload.mix_ios,
        volume_bytes: workload.volume_bytes,
        policies,
        hierarchy,
        sizing,
        live,
        seconds: started.elapsed().as_secs_f64(),
    };
    drop(scratch);
    write_report(Some(&args.report), || report(&demo))?;
    match args.format {
        Format::Json => sink.json(&demo)?,
        _ => {
            sink.line(&workload_line(&demo));
            for line in [
                demo.policies.summary(),
                demo.hierarchy.summary(),
                demo.sizing.summary(),
                demo.live.summary(),
            ] {
                sink.line(&line);
            }
            sink.line(&format!(
                "report     {} (four sections, each with its charts) in {:.1} s",
                args.report.display(),
                demo.seconds
            ));
        }
    }
    Ok(())
}

/// A folder for the trace and the live volumes' files, removed when dropped.
fn scratch_folder() -> Result<tempfile::TempDir> {
    let tmpfs = Path::new("/dev/shm");
    let base = if tmpfs.is_dir() {
        tmpfs.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    tempfile::Builder::new()
        .prefix("heterarchy-demo-")
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a scratch folder in {}", base.display()))
}

fn workload_line(demo: &Demo) -> String {
    format!(
        "workload   {} ({} I/Os filling {}, then {} I/Os)",
        demo.workload,
        demo.fill_ios,
        human_bytes(demo.volume_bytes),
        demo.mix_ios
    )
}

fn report(demo: &Demo) -> Report {
    let mut report = Report::new("heterarchy demo");
    report.paragraph(&format!(
        "One seeded block workload through four views of heterarchy, each what one command \
         does. The workload, {}: a {} volume written once from start to end ({} I/Os, as a \
         database loads its tables), then {} I/Os of 4 KiB over 64-page extents of Zipf \
         popularity. Ran in {:.1} s. To repeat a view by hand: heterarchy trace generate '{}' \
         -o demo.csv, then the command its section names on demo.csv.",
        demo.workload,
        human_bytes(demo.volume_bytes),
        demo.fill_ios,
        demo.mix_ios,
        demo.seconds,
        demo.workload,
    ));
    demo.policies.add_to(&mut report);
    demo.hierarchy.add_to(&mut report);
    demo.sizing.add_to(&mut report);
    demo.live.add_to(&mut report);
    report
}
