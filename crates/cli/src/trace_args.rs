//! The trace arguments every trace-reading subcommand shares.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use heterarchy_sim::cache_sim::TraceFile;
use heterarchy_trace::read::{CsvSpec, TraceInput};
use heterarchy_trace::{ReaderOptions, TraceFormat};

use crate::size::parse_bytes;

/// A trace file and how to read it.
#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// Trace file (gz, bz2, xz and zst are decompressed transparently); `-` reads standard
    /// input (into memory, since the trace is read more than once).
    pub path: PathBuf,
    /// Trace format; the help lists the formats from the trace crate's table, so that a new
    /// format needs no edit here.
    #[arg(
        long = "trace-format",
        help = trace_format_help(),
        long_help = trace_format_long_help()
    )]
    pub trace_format: Option<String>,
    /// Cache-line size that block requests are split into.
    #[arg(long, default_value = "4k")]
    pub block_size: String,
    /// Keep each block request as one object, as libCacheSim does.
    #[arg(long)]
    pub no_split: bool,
    /// CSV columns as libCacheSim writes them (1-based), e.g.
    /// `time-col=2,obj-id-col=5,obj-size-col=4,has-header=true,delimiter=,`; implies
    /// `--trace-format csv`.
    #[arg(long = "trace-type-params", alias = "csv-spec")]
    pub csv_spec: Option<String>,
}

/// The trace at `path`, or standard input's bytes for `-` (read once: call it once per trace).
pub fn trace_input(path: &Path) -> Result<TraceInput> {
    if path == Path::new("-") {
        return Ok(TraceInput::from_reader("<stdin>", std::io::stdin().lock())?);
    }
    Ok(TraceInput::file(path))
}

/// `-h` help for `--trace-format`: the names only, to keep the summary short.
fn trace_format_help() -> String {
    format!(
        "Trace format ({}); detected from the name and content when not given",
        TraceFormat::names()
    )
}

/// `--help` help for `--trace-format`: each format with what it is.
fn trace_format_long_help() -> String {
    let width = TraceFormat::ALL
        .iter()
        .map(|format| format.name().len())
        .max()
        .unwrap_or(0);
    let mut help =
        String::from("Trace format; detected from the file name and content when not given:\n");
    for format in TraceFormat::ALL {
        let kind = if format.is_block() {
            "; block I/Os"
        } else {
            ""
        };
        help.push_str(&format!(
            "\n  {:width$}  {}{kind}",
            format.name(),
            format.description()
        ));
    }
    help
}

impl TraceArgs {
    /// The trace file with its reader options.
    pub fn source(&self) -> Result<TraceFile> {
        Ok(TraceFile {
            input: trace_input(&self.path)?,
            options: self.reader_options()?,
        })
    }

    /// The reader options these arguments describe.
    pub fn reader_options(&self) -> Result<ReaderOptions> {
        let format = match &self.trace_format {
            None => None,
            Some(name) => Some(TraceFormat::from_name(name).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown --trace-format \"{name}\"; expected one of {}",
                    TraceFormat::names()
                )
            })?),
        };
        let block_size = parse_bytes(&self.block_size)?;
        let block_size = u32::try_from(block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "bad --block-size {}: expected 1 byte to 4 GiB",
                    self.block_size
                )
            })?;
        let csv = match &self.csv_spec {
            None => None,
            Some(spec) => Some(
                spec.parse::<CsvSpec>()
                    .map_err(|e| anyhow::anyhow!("bad --trace-type-params: {e}"))?,
            ),
        };
        Ok(ReaderOptions {
            format,
            csv,
            block_size,
            split_blocks: !self.no_split,
        })
    }
}
