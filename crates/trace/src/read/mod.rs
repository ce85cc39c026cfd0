//! Streaming trace readers: one file per format, transparent decompression, detection by name
//! and content (docs/architecture.md, "Requests and traces").
//!
//! Block formats (vscsi, msr, tencent, systor, meta-block) parse into [`BlockRecord`]s
//! ([`open_block_records`] hands them out as they are), which the one shared helper in
//! `block.rs` splits into cache-line requests; see there for the key layout and `--no-split`.
//!
//! What differs between formats — names, kind, detection, openers — is one table in
//! `registry.rs`; adding a format is a [`TraceFormat`] variant, its entry there and its module.

mod arc;
mod binary;
mod block;
mod csv;
mod detect;
mod lirs;
mod meta_block;
mod meta_kv;
mod msr;
mod native;
mod oracle_general;
mod registry;
mod source;
mod systor;
mod tencent;
mod text;
mod twitter;
mod txt;
mod vscsi;

pub use block::{BlockRecord, BlockRecordSource};
pub use csv::CsvSpec;
pub use detect::{detect_format, format_from_name};
pub use native::{
    encode_native_record, native_header, NativeReader, NATIVE_EXTENSION, NATIVE_HEADER_BYTES,
    NATIVE_MAGIC, NATIVE_RECORD_BYTES, NATIVE_VERSION,
};
pub use oracle_general::{OracleGeneralReader, RECORD_BYTES as ORACLE_GENERAL_RECORD_BYTES};
pub use source::{open_source, read_head, Compression, TraceInput};
pub use text::stable_key_hash;

use crate::{Request, TraceError};
use registry::{Kind, FORMATS};

/// A stream of requests from one trace file, read in constant memory.
pub trait TraceReader: Send {
    /// The next request, or `None` at the end of the trace.
    fn next_request(&mut self) -> Result<Option<Request>, TraceError>;

    /// Replaces the contents of `batch` with up to `max` next requests; an empty batch means the
    /// end of the trace. Readers of binary formats override it to decode a buffer at a time.
    fn read_batch(&mut self, batch: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        batch.clear();
        while batch.len() < max {
            match self.next_request()? {
                Some(request) => batch.push(request),
                None => break,
            }
        }
        Ok(())
    }
}

/// Requests per batch in the loops that stream a whole trace: large enough to amortise a
/// dynamic call per batch, small enough to stay in L1/L2.
pub const BATCH: usize = 4096;

/// Streams the whole trace through `each`, one batch of up to [`BATCH`] requests at a time.
pub fn for_each_batch<E: From<TraceError>>(
    reader: &mut dyn TraceReader,
    mut each: impl FnMut(&mut [Request]) -> Result<(), E>,
) -> Result<(), E> {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        reader.read_batch(&mut batch, BATCH)?;
        if batch.is_empty() {
            return Ok(());
        }
        each(&mut batch)?;
    }
}

/// The trace formats heterarchy reads. Each variant has one entry, at the same position, in the
/// format table (`registry.rs`) that every method here reads; the crate's tests do not compile
/// while a variant lacks one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// libCacheSim oracleGeneral: packed `{u32 time; u64 id; u32 size; i64 next}` records.
    OracleGeneral,
    /// heterarchy's own binary format, every request field in 32-byte records (`native.rs`).
    Native,
    /// CloudPhysics vscsi binary block traces, versions 1 and 2.
    Vscsi,
    /// Delimited text described by a libCacheSim-style column spec ([`CsvSpec`]).
    Csv,
    /// One key per line.
    Txt,
    /// MSR Cambridge block traces.
    Msr,
    /// Tencent Cloud Block Storage traces.
    Tencent,
    /// SNIA SYSTOR'17 block traces.
    Systor,
    /// Twitter cache traces.
    Twitter,
    /// Meta key-value cache traces (CacheLib kvcache replay).
    MetaKv,
    /// Meta Tectonic block/chunk traces (CacheLib block_chunk replay).
    MetaBlock,
    /// ARC paper `.lis` traces.
    Arc,
    /// LIRS paper traces, one block number per line.
    Lirs,
}

impl TraceFormat {
    /// Every format, in the order `--help` lists them (the table's order).
    pub const ALL: [TraceFormat; FORMATS.len()] = {
        let mut all = [TraceFormat::OracleGeneral; FORMATS.len()];
        let mut index = 0;
        while index < all.len() {
            all[index] = FORMATS[index].format;
            index += 1;
        }
        all
    };

    /// The name used by `--trace-format`.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// One line saying what the format is, for `--help`.
    pub fn description(self) -> &'static str {
        self.entry().description
    }

    /// Parses a `--trace-format` name, case-insensitively; libCacheSim's `oracleGeneralBin` is
    /// accepted for oracleGeneral and `_` for `-`.
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        let name = name.trim().replace('_', "-");
        if name.eq_ignore_ascii_case("oracleGeneralBin") {
            return Some(TraceFormat::OracleGeneral);
        }
        TraceFormat::ALL
            .into_iter()
            .find(|format| format.name().eq_ignore_ascii_case(&name))
    }

    /// The names of every format, comma-separated, for help texts and errors.
    pub fn names() -> String {
        TraceFormat::ALL.map(TraceFormat::name).join(", ")
    }

    /// True for block traces, whose requests are split into cache lines unless `--no-split`.
    pub fn is_block(self) -> bool {
        matches!(self.entry().kind, Kind::Blocks(_))
    }
}

/// How to read a trace: format override, CSV columns and block splitting.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// Forces a format instead of detecting it.
    pub format: Option<TraceFormat>,
    /// Columns of a CSV trace; giving it implies the csv format when `format` is `None`. Without
    /// it a CSV trace needs a header whose column names say which column is which.
    pub csv: Option<CsvSpec>,
    /// Cache-line size that block requests are split into, in bytes.
    pub block_size: u32,
    /// Split block requests into cache-line keys (true) or keep each request as one object,
    /// as libCacheSim does (false, `--no-split`).
    pub split_blocks: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            format: None,
            csv: None,
            block_size: 4096,
            split_blocks: true,
        }
    }
}

/// Opens `path` for reading, detecting compression and (unless forced) the format.
pub fn open(
    input: impl Into<TraceInput>,
    options: &ReaderOptions,
) -> Result<Box<dyn TraceReader>, TraceError> {
    let input = &input.into();
    let format = match (options.format, &options.csv) {
        (Some(format), _) => format,
        (None, Some(_)) => TraceFormat::Csv,
        (None, None) => detect_format(input)?,
    };
    open_as(input, format, options)
}

/// Opens `path` as `format`.
fn open_as(
    input: &TraceInput,
    format: TraceFormat,
    options: &ReaderOptions,
) -> Result<Box<dyn TraceReader>, TraceError> {
    let path = input.name();
    let (block_size, split) = (options.block_size, options.split_blocks);
    if block_size == 0 {
        return Err(TraceError::file(
            path,
            "block size 0: expected at least 1 byte",
        ));
    }
    Ok(match format.entry().kind {
        Kind::Requests { open, .. } => open(input, options)?,
        Kind::Blocks(records) => {
            Box::new(block::BlockReader::new(records(input)?, block_size, split))
        }
    })
}

/// Opens a block trace as its records, before they are split into cache lines (detecting the
/// format unless `options` force one); an error for a key-value or key-list trace.
pub fn open_block_records(
    input: impl Into<TraceInput>,
    options: &ReaderOptions,
) -> Result<Box<dyn BlockRecordSource>, TraceError> {
    let input = &input.into();
    let format = match options.format {
        Some(format) => format,
        None => detect_format(input)?,
    };
    block_records_as(input, format)
}

/// The records of `path` as the block format `format`.
fn block_records_as(
    input: &TraceInput,
    format: TraceFormat,
) -> Result<Box<dyn BlockRecordSource>, TraceError> {
    let path = input.name();
    match format.entry().kind {
        Kind::Blocks(records)
        | Kind::Requests {
            block_records: Some(records),
            ..
        } => records(input),
        Kind::Requests {
            block_records: None,
            ..
        } => Err(TraceError::file(
            path,
            format!(
                "a {} trace has no block records; expected a block trace ({})",
                format.name(),
                block_record_formats()
            ),
        )),
    }
}

/// The formats that have block records, for errors: block formats first, then the request
/// formats that can hold block I/Os, which only some of their files do.
fn block_record_formats() -> String {
    let blocks = FORMATS
        .iter()
        .filter(|entry| matches!(entry.kind, Kind::Blocks(_)))
        .map(|entry| entry.name.to_string());
    let requests = FORMATS
        .iter()
        .filter(|entry| {
            matches!(
                entry.kind,
                Kind::Requests {
                    block_records: Some(_),
                    ..
                }
            )
        })
        .map(|entry| format!("{} as written from block records", entry.name));
    let mut names: Vec<String> = blocks.chain(requests).collect();
    if let [_, .., last] = names.as_mut_slice() {
        *last = format!("or {last}");
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for format in TraceFormat::ALL {
            assert_eq!(TraceFormat::from_name(format.name()), Some(format));
            assert_eq!(
                TraceFormat::from_name(&format.name().to_uppercase()),
                Some(format)
            );
        }
        assert_eq!(
            TraceFormat::from_name("oracleGeneralBin"),
            Some(TraceFormat::OracleGeneral)
        );
        assert_eq!(TraceFormat::from_name("meta_kv"), Some(TraceFormat::MetaKv));
        assert_eq!(TraceFormat::from_name("parquet"), None);
    }

    #[test]
    fn kinds_and_block_record_formats_come_from_the_table() {
        let blocks: Vec<TraceFormat> = TraceFormat::ALL
            .into_iter()
            .filter(|format| format.is_block())
            .collect();
        assert_eq!(
            blocks,
            [
                TraceFormat::Vscsi,
                TraceFormat::Msr,
                TraceFormat::Tencent,
                TraceFormat::Systor,
                TraceFormat::MetaBlock
            ]
        );
        assert_eq!(
            block_record_formats(),
            "vscsi, msr, tencent, systor, meta-block, or native as written from block records"
        );
    }
}
