//! The one table of trace formats. Everything that differs between formats — the
//! `--trace-format` name and help line, block or key-value, file-name hints, content tests and
//! the opener — is one entry here, so that adding a format is an enum variant, an entry at the
//! same position and the format's module. [`TraceFormat`]'s methods, detection (`detect.rs`) and
//! the openers in `mod.rs` read nothing else, and the compiler checks each entry's fields.

use super::source::TraceInput;

use super::block::BlockRecordSource;
use super::{
    arc, csv, detect, lirs, meta_block, meta_kv, msr, native, systor, tencent, twitter, txt, vscsi,
};
use super::{
    NativeReader, OracleGeneralReader, ReaderOptions, TraceFormat, TraceReader, NATIVE_EXTENSION,
};
use crate::TraceError;

/// Opens a trace as requests; the options carry what a format needs beyond the path (CSV
/// columns).
pub(crate) type RequestOpener =
    fn(&TraceInput, &ReaderOptions) -> Result<Box<dyn TraceReader>, TraceError>;

/// Opens a trace as block records, which the shared `BlockReader` splits into cache lines.
pub(crate) type BlockOpener = fn(&TraceInput) -> Result<Box<dyn BlockRecordSource>, TraceError>;

/// Tests the decompressed head of a binary file; `file_bytes` is the file's size when it is
/// uncompressed, since record sizes must divide it.
pub(crate) type BinaryTest = fn(head: &[u8], file_bytes: Option<u64>) -> bool;

/// Tests the first line of a text file that is not blank, with the second for tests that must
/// look at data under a header.
pub(crate) type HeaderTest = fn(first: &[u8], second: Option<&[u8]>) -> bool;

/// Tests one data line of a text file; the lines probed must all pass one format's test.
pub(crate) type LineTest = fn(line: &[u8]) -> bool;

/// What a format's requests are and how it is opened, in one value so the two cannot disagree.
pub(crate) enum Kind {
    /// Key or object requests, read as they are.
    Requests {
        /// The reader of requests.
        open: RequestOpener,
        /// For a request format that can also hold block I/Os (native files the block writers
        /// write, the key a byte offset), how to read them as block records.
        block_records: Option<BlockOpener>,
    },
    /// Block I/Os, split into cache lines unless `--no-split`.
    Blocks(BlockOpener),
}

/// A file-name pattern, compared case-insensitively after compression suffixes are stripped.
pub(crate) enum NamePattern {
    /// `.ext` ends the name.
    Extension(&'static str),
    /// `.ext` as the last extension, or anywhere in a name whose last extension no format
    /// claims, as libCacheSim matches names like `w.oracleGeneral.bin`.
    Anywhere(&'static str),
}

impl NamePattern {
    /// True if `name` (already lowercased) matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let (NamePattern::Extension(ext) | NamePattern::Anywhere(ext)) = self;
        let dotted = format!(".{}", ext.to_ascii_lowercase());
        match self {
            NamePattern::Extension(_) => name.ends_with(&dotted),
            NamePattern::Anywhere(_) => name.contains(&dotted),
        }
    }
}

/// What a file name says about a format.
pub(crate) struct FileNames {
    /// The names that point at the format.
    pub(crate) patterns: &'static [NamePattern],
    /// The name alone decides (binary formats whose content tests are weak, names nothing else
    /// uses), or else it is a hint: the content overrides it when it clearly says another format
    /// (an MSR trace named `.csv`), and it decides when the content fits several formats (one
    /// number per line is `txt` or `lirs`) or none.
    pub(crate) decides: bool,
}

/// A content test and how much its passing says. Within a stage (binary head, header line),
/// every format's signature test runs before any plausibility test, in table order, because
/// content with one format's signature can look plausible to another (a native trace can pass
/// for oracleGeneral records; SYSTOR and Meta headers are valid CSV headers).
pub(crate) enum Sniff<T> {
    /// A mark the format's files carry: magic bytes, a version field, a fixed header.
    Signature(T),
    /// The content fits the format, with nothing that proves it.
    Plausible(T),
}

impl<T: Copy> Sniff<T> {
    /// The test, if it belongs to the tier asked for.
    pub(crate) fn test_if(&self, signature: bool) -> Option<T> {
        match (self, signature) {
            (Sniff::Signature(test), true) | (Sniff::Plausible(test), false) => Some(*test),
            _ => None,
        }
    }
}

/// The content tests of a format, by the stage of detection that runs them.
pub(crate) struct Sniffers {
    /// Runs when the head has control bytes; if no binary test passes, detection gives up.
    pub(crate) binary: Option<Sniff<BinaryTest>>,
    /// Runs on the first line of a text file.
    pub(crate) header: Option<Sniff<HeaderTest>>,
    /// Runs on each probed data line, in table order; the single-column formats (txt, lirs)
    /// have none since a lone number fits both, and `detect.rs` decides between them.
    pub(crate) data_line: Option<LineTest>,
}

/// Formats without content tests of a stage spell only the ones they have.
const NO_SNIFF: Sniffers = Sniffers {
    binary: None,
    header: None,
    data_line: None,
};

/// Everything about one format.
pub(crate) struct FormatEntry {
    /// The variant this entry is for; the table is in variant order.
    pub(crate) format: TraceFormat,
    /// The `--trace-format` name.
    pub(crate) name: &'static str,
    /// One line for `--help`, which adds the kind itself.
    pub(crate) description: &'static str,
    /// Block or key-value, and the opener.
    pub(crate) kind: Kind,
    /// What file names say.
    pub(crate) file_names: FileNames,
    /// What content says.
    pub(crate) sniff: Sniffers,
}

/// A file name that says nothing about the format.
const NO_NAMES: FileNames = FileNames {
    patterns: &[],
    decides: false,
};

/// Every format, in [`TraceFormat`] declaration order, which is also the order of
/// [`TraceFormat::ALL`] and `--help`.
pub(crate) static FORMATS: [FormatEntry; 13] = [
    FormatEntry {
        format: TraceFormat::OracleGeneral,
        name: "oracleGeneral",
        description: "libCacheSim's binary records of time, id, size and next access",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(OracleGeneralReader::open(input)?)),
            block_records: None,
        },
        file_names: FileNames {
            patterns: &[NamePattern::Anywhere("oracleGeneral")],
            decides: true,
        },
        sniff: Sniffers {
            binary: Some(Sniff::Plausible(detect::oracle_general_records)),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Native,
        name: "native",
        description: "heterarchy's own binary records, every request field",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(NativeReader::open(input)?)),
            block_records: Some(|input| Ok(Box::new(native::records(input)?))),
        },
        file_names: FileNames {
            patterns: &[NamePattern::Extension(NATIVE_EXTENSION)],
            decides: true,
        },
        sniff: Sniffers {
            binary: Some(Sniff::Signature(detect::native_magic)),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Vscsi,
        name: "vscsi",
        description: "CloudPhysics vscsi binary traces, versions 1 and 2",
        kind: Kind::Blocks(|input| Ok(Box::new(vscsi::records(input)?))),
        file_names: FileNames {
            patterns: &[NamePattern::Anywhere("vscsi")],
            decides: true,
        },
        sniff: Sniffers {
            binary: Some(Sniff::Signature(detect::vscsi_records)),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Csv,
        name: "csv",
        description: "delimited text, columns from its header or --trace-type-params",
        kind: Kind::Requests {
            open: open_csv,
            block_records: None,
        },
        file_names: FileNames {
            patterns: &[NamePattern::Extension("csv")],
            decides: false,
        },
        sniff: Sniffers {
            header: Some(Sniff::Plausible(detect::csv_header)),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Txt,
        name: "txt",
        description: "one key per line",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(txt::TxtReader::open(input)?)),
            block_records: None,
        },
        file_names: FileNames {
            patterns: &[NamePattern::Extension("txt")],
            decides: false,
        },
        sniff: NO_SNIFF,
    },
    FormatEntry {
        format: TraceFormat::Msr,
        name: "msr",
        description: "MSR Cambridge traces",
        kind: Kind::Blocks(|input| Ok(Box::new(msr::records(input)?))),
        file_names: NO_NAMES,
        sniff: Sniffers {
            data_line: Some(detect::msr_line),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Tencent,
        name: "tencent",
        description: "Tencent Cloud Block Storage traces",
        kind: Kind::Blocks(|input| Ok(Box::new(tencent::records(input)?))),
        file_names: NO_NAMES,
        sniff: Sniffers {
            data_line: Some(detect::tencent_line),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Systor,
        name: "systor",
        description: "SNIA SYSTOR'17 traces",
        kind: Kind::Blocks(|input| Ok(Box::new(systor::records(input)?))),
        file_names: NO_NAMES,
        sniff: Sniffers {
            header: Some(Sniff::Signature(detect::systor_header)),
            data_line: Some(detect::systor_line),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Twitter,
        name: "twitter",
        description: "Twitter cache traces",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(twitter::TwitterReader::open(input)?)),
            block_records: None,
        },
        file_names: NO_NAMES,
        sniff: Sniffers {
            data_line: Some(detect::twitter_line),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::MetaKv,
        name: "meta-kv",
        description: "Meta key-value cache traces (CacheLib kvcache replay)",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(meta_kv::MetaKvReader::open(input)?)),
            block_records: None,
        },
        file_names: NO_NAMES,
        sniff: Sniffers {
            header: Some(Sniff::Signature(detect::meta_kv_header)),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::MetaBlock,
        name: "meta-block",
        description: "Meta Tectonic block/chunk traces (CacheLib block_chunk replay)",
        kind: Kind::Blocks(|input| Ok(Box::new(meta_block::records(input)?))),
        file_names: NO_NAMES,
        sniff: Sniffers {
            header: Some(Sniff::Signature(detect::meta_block_header)),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Arc,
        name: "arc",
        description: "ARC paper .lis traces of 512-byte pages",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(arc::ArcReader::open(input)?)),
            block_records: None,
        },
        file_names: FileNames {
            patterns: &[NamePattern::Extension("lis")],
            decides: true,
        },
        sniff: Sniffers {
            data_line: Some(detect::arc_line),
            ..NO_SNIFF
        },
    },
    FormatEntry {
        format: TraceFormat::Lirs,
        name: "lirs",
        description: "LIRS paper traces, one block number per line",
        kind: Kind::Requests {
            open: |input, _| Ok(Box::new(lirs::LirsReader::open(input)?)),
            block_records: None,
        },
        file_names: FileNames {
            patterns: &[NamePattern::Extension("trace")],
            decides: false,
        },
        sniff: NO_SNIFF,
    },
];

/// A CSV trace's columns come from the options or, without them, from its header.
fn open_csv(
    input: &TraceInput,
    options: &ReaderOptions,
) -> Result<Box<dyn TraceReader>, TraceError> {
    let spec = match &options.csv {
        Some(spec) => spec.clone(),
        None => csv::spec_from_header(input)?,
    };
    Ok(Box::new(csv::CsvReader::open(input, spec)?))
}

impl TraceFormat {
    /// This format's table entry; indexing by variant is right because the tests hold the table
    /// to declaration order.
    pub(crate) fn entry(self) -> &'static FormatEntry {
        &FORMATS[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry a variant must have. Exhaustive on purpose: a new variant does not compile
    /// until it is given an arm here, and an arm indexing past the table does not compile
    /// either (`unconditional_panic`), so a variant cannot be added without its entry.
    fn expected_entry(format: TraceFormat) -> &'static FormatEntry {
        match format {
            TraceFormat::OracleGeneral => &FORMATS[0],
            TraceFormat::Native => &FORMATS[1],
            TraceFormat::Vscsi => &FORMATS[2],
            TraceFormat::Csv => &FORMATS[3],
            TraceFormat::Txt => &FORMATS[4],
            TraceFormat::Msr => &FORMATS[5],
            TraceFormat::Tencent => &FORMATS[6],
            TraceFormat::Systor => &FORMATS[7],
            TraceFormat::Twitter => &FORMATS[8],
            TraceFormat::MetaKv => &FORMATS[9],
            TraceFormat::MetaBlock => &FORMATS[10],
            TraceFormat::Arc => &FORMATS[11],
            TraceFormat::Lirs => &FORMATS[12],
        }
    }

    #[test]
    fn one_entry_per_variant_in_all_order_with_unique_names() {
        assert_eq!(TraceFormat::ALL.len(), FORMATS.len());
        for (index, entry) in FORMATS.iter().enumerate() {
            assert_eq!(TraceFormat::ALL[index], entry.format, "{}", entry.name);
            assert_eq!(entry.format as usize, index, "{}", entry.name);
            assert!(std::ptr::eq(expected_entry(entry.format), entry));
            assert!(std::ptr::eq(entry.format.entry(), entry));
        }
        // from_name ignores case and reads `_` as `-`, so names must differ under both.
        let folded = |name: &str| name.to_ascii_lowercase().replace('_', "-");
        for (index, entry) in FORMATS.iter().enumerate() {
            for other in &FORMATS[index + 1..] {
                assert_ne!(folded(entry.name), folded(other.name));
            }
        }
    }

    #[test]
    fn name_patterns_match_dotted_and_case_insensitively() {
        let anywhere = NamePattern::Anywhere("oracleGeneral");
        assert!(anywhere.matches("w.oraclegeneral.bin"));
        assert!(!anywhere.matches("oraclegeneral"));
        let extension = NamePattern::Extension("trace");
        assert!(extension.matches("multi2.trace"));
        assert!(!extension.matches("t.htrace"));
        assert!(!extension.matches("t.trace.bin"));
    }
}
