//! The demo's one workload: a seeded block trace (`trace generate block-io:...`), written once
//! as MSR CSV into the demo's scratch folder so that every view reads the same file through the
//! same readers as the commands it stands for (`sim`, `mrc`, `simulate`, `sizing`, `replay`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use heterarchy_sim::cache_sim::TraceFile;
use heterarchy_trace::generate::{BlockGenerator, BlockWorkloadSpec};
use heterarchy_trace::read::{open_block_records, BlockRecordSource, TraceInput};
use heterarchy_trace::write::create_block_writer;
use heterarchy_trace::{ReaderOptions, TraceFormat};

/// Cache lines and sizing pages are 4 KiB throughout the demo.
pub const LINE_BYTES: u64 = 4096;

/// Of the I/Os after the fill, the share that warms the caches before anything is measured.
const WARM_SHARE: f64 = 0.25;

/// The generated trace and what the views need to know of it.
pub struct Workload {
    /// The spec as the user wrote it (or the built-in one).
    pub spec_text: String,
    /// The trace, MSR CSV.
    pub path: PathBuf,
    /// The fill's I/Os (writes of the whole volume in order), then the mix's.
    pub fill_ios: u64,
    pub mix_ios: u64,
    /// I/Os of the mix that only warm the caches: the fill and these are replayed, or
    /// simulated, before measuring.
    pub warm_ios: u64,
    /// Cache-line requests the fill and the warming I/Os split into: the timed simulator's
    /// warm-up, which counts lines.
    pub warm_lines: u64,
    /// Cache-line requests of the measured I/Os.
    pub measured_lines: u64,
    /// Bytes the workload addresses.
    pub volume_bytes: u64,
}

impl Workload {
    /// Generates the trace of `spec_text` into `folder`.
    pub fn generate(spec_text: &str, folder: &Path) -> Result<Workload> {
        let spec = BlockWorkloadSpec::parse(spec_text)?;
        let volume_bytes = spec.volume_pages() * LINE_BYTES;
        let fill_ios = spec.fill_ios();
        let warm_ios = (spec.requests as f64 * WARM_SHARE) as u64;
        let path = folder.join("demo.csv");
        let mut writer = create_block_writer(&path, TraceFormat::Msr)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut generator = BlockGenerator::new(&spec);
        let (mut written, mut warm_lines, mut measured_lines) = (0u64, 0u64, 0u64);
        while let Some(record) = generator.next_record()? {
            writer.write(&record)?;
            let lines = record.line_requests(LINE_BYTES as u32);
            if written < fill_ios + warm_ios {
                warm_lines += lines;
            } else {
                measured_lines += lines;
            }
            written += 1;
        }
        let ios = written - fill_ios;
        writer.finish()?;
        if ios <= warm_ios {
            bail!(
                "workload \"{spec_text}\": {ios} I/Os after the fill leave none to measure after \
                 the {warm_ios} that warm the caches; expected requests of 4 or more"
            );
        }
        Ok(Workload {
            spec_text: spec_text.to_string(),
            path,
            fill_ios,
            mix_ios: ios,
            warm_ios,
            warm_lines,
            measured_lines,
            volume_bytes,
        })
    }

    /// The trace as requests split into 4 KiB cache lines, as `sim`, `mrc` and `simulate`
    /// read it.
    pub fn lines(&self) -> TraceFile {
        TraceFile {
            input: TraceInput::file(&self.path),
            options: self.reader_options(),
        }
    }

    /// The trace as block I/Os, as `replay` reads it.
    pub fn records(&self) -> Result<Box<dyn BlockRecordSource>> {
        Ok(open_block_records(
            TraceInput::file(&self.path),
            &self.reader_options(),
        )?)
    }

    fn reader_options(&self) -> ReaderOptions {
        ReaderOptions {
            format: Some(TraceFormat::Msr),
            csv: None,
            block_size: LINE_BYTES as u32,
            split_blocks: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_fill_the_warm_up_and_the_measured_lines() {
        let folder = tempfile::tempdir().unwrap();
        let workload = Workload::generate(
            "block-io:requests=400,pages=128,size=8k,misaligned=0,fill=1,seed=3",
            folder.path(),
        )
        .unwrap();
        assert_eq!((workload.fill_ios, workload.mix_ios), (64, 400));
        assert_eq!(workload.warm_ios, 100);
        assert_eq!(workload.warm_lines, 128 + 100 * 2);
        assert_eq!(workload.measured_lines, 300 * 2);
        assert_eq!(workload.volume_bytes, 128 * 4096);
        let mut records = workload.records().unwrap();
        let mut count = 0;
        while records.next_record().unwrap().is_some() {
            count += 1;
        }
        assert_eq!(count, 464);
    }
}
