//! Replays a trace through policies and prints one JSON line per (policy, size): a quick way
//! to check a policy against libcachesim without building the whole command line.
//!
//! `cargo run --release -p heterarchy-policy --example replay -- TRACE POLICY SIZES
//! [--admission FILTER] [--ignore-obj-size]`, with POLICY as `--policy` takes it
//! (`s3fifo:small-size-ratio=0.2`) and SIZES comma-separated byte (or object) counts.

use std::path::Path;
use std::process::ExitCode;

use heterarchy_policy::{PolicySpec, SimCounters};
use heterarchy_trace::read::for_each_batch;
use heterarchy_trace::{open, ReaderOptions, TraceError};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("replay: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, policy, sizes, rest @ ..] = args.as_slice() else {
        return Err(
            "usage: replay TRACE POLICY SIZES [--admission FILTER] [--ignore-obj-size]".into(),
        );
    };
    let mut admission = None;
    let mut ignore_obj_size = false;
    let mut rest = rest.iter();
    while let Some(flag) = rest.next() {
        match flag.as_str() {
            "--admission" => admission = rest.next().cloned(),
            "--ignore-obj-size" => ignore_obj_size = true,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    for spec in PolicySpec::parse_list(policy, admission.as_deref())? {
        for size in sizes.split(',') {
            let size: u64 = size.trim().parse()?;
            let mut cache = spec.build(size)?;
            let mut reader = open(Path::new(trace), &ReaderOptions::default())?;
            let mut counters = SimCounters::default();
            let mut warmup_left = 0;
            for_each_batch(reader.as_mut(), |batch| {
                if ignore_obj_size {
                    batch.iter_mut().for_each(|request| request.size = 1);
                }
                cache.simulate(batch, &mut warmup_left, &mut counters);
                Ok::<(), TraceError>(())
            })?;
            println!(
                "{{\"policy\": \"{}\", \"cache_size\": {size}, \"requests\": {}, \"miss_ratio\": {}, \"byte_miss_ratio\": {}}}",
                spec.label(),
                counters.requests,
                counters.miss_ratio(),
                counters.byte_miss_ratio()
            );
        }
    }
    Ok(())
}
