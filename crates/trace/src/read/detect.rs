//! Which format a trace file is in, when `--trace-format` does not say: first by name (after
//! stripping a compression suffix), then by content (magic bytes, binary record layouts, header
//! names, field counts and types of the first lines). What each format's name and content look
//! like is its entry in the format table (`registry.rs`); this file runs the entries' tests in
//! the order the table gives, and holds the tests themselves.
//!
//! Names: the last extension speaks first; a format's marker elsewhere in the name
//! (`.oracleGeneral`, as libCacheSim matches it, or `.vscsi`) counts only when that extension is
//! no format's. `.oracleGeneral`, `.vscsi`, `.htrace` (native) and `.lis` (ARC) decide alone. `.csv`, `.txt` and `.trace` (LIRS) are hints: the
//! content decides when it clearly says something else (an MSR trace named `.csv` is read as
//! MSR), and the hint decides when the content fits several formats (one number per line is
//! `txt` or `lirs`) or none.

use super::source::TraceInput;

use std::path::Path;

use super::csv::{looks_like_header, spec_from_header_line};
use super::native::has_native_magic;
use super::oracle_general::RECORD_BYTES as ORACLE_GENERAL_RECORD_BYTES;
use super::registry::{NamePattern, Sniff, Sniffers, FORMATS};
use super::source::{read_head, Compression};
use super::text::{parse_decimal, parse_op_name, parse_seconds_ns, strip_bom, trim_ascii};
use super::vscsi::VscsiVersion;
use super::{meta_block, meta_kv, systor, TraceFormat};
use crate::{Op, TraceError};

/// Bytes of the decompressed head that content detection looks at.
const PROBE_BYTES: usize = 64 * 1024;
/// Data lines of a text trace that must all agree on one format.
const PROBE_LINES: usize = 20;
/// oracleGeneral records whose next-access field is checked for plausibility.
const PROBE_RECORDS: usize = 64;

/// The format of `path`, by name and then content; a one-line error listing the formats when
/// neither tells.
pub fn detect_format(input: impl Into<TraceInput>) -> Result<TraceFormat, TraceError> {
    let input = &input.into();
    let path = input.name();
    let hint = format_from_name(path);
    if let Some(format) = hint.filter(|format| format.entry().file_names.decides) {
        return Ok(format);
    }
    let (head, compression) = read_head(input, PROBE_BYTES)?;
    if head.is_empty() {
        return Err(TraceError::file(
            path,
            "no data after decompression; expected trace records",
        ));
    }
    // Record sizes must divide the size of an uncompressed file; compressed sizes say nothing.
    let file_bytes = match compression {
        Compression::None => input.stored_bytes(),
        _ => None,
    };
    if let Some(format) = format_from_content(&head, file_bytes, hint) {
        return Ok(format);
    }
    hint.ok_or_else(|| {
        TraceError::file(
            path,
            format!(
                "cannot tell the trace format from the file name or content; expected one of {} \
                 (name it with --trace-format)",
                TraceFormat::names()
            ),
        )
    })
}

/// The format the file name says, if any, after stripping a compression suffix: the last
/// extension, when it is one a format claims (so a sample the user named
/// `cloudPhysicsIO.vscsi.blksample.csv` is CSV), else a marker anywhere in the name (libCacheSim's
/// `w.oracleGeneral.bin`). `.csv`, `.txt` and `.trace` only hint; see the module docs.
pub fn format_from_name(path: &Path) -> Option<TraceFormat> {
    let mut name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    while let Some(stripped) = [".gz", ".bz2", ".xz", ".zst", ".zstd"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
    {
        name = stripped.to_string();
    }
    let last_extension = name.rfind('.').map(|dot| &name[dot..]);
    let by_extension = last_extension.and_then(|extension| {
        FORMATS.iter().find(|entry| {
            entry
                .file_names
                .patterns
                .iter()
                .any(|pattern| pattern.matches(extension))
        })
    });
    let by_marker = || {
        FORMATS.iter().find(|entry| {
            entry.file_names.patterns.iter().any(|pattern| {
                matches!(pattern, NamePattern::Anywhere(_)) && pattern.matches(&name)
            })
        })
    };
    by_extension.or_else(by_marker).map(|entry| entry.format)
}

/// The format the first bytes say, if they say one clearly.
pub(crate) fn format_from_content(
    head: &[u8],
    file_bytes: Option<u64>,
    hint: Option<TraceFormat>,
) -> Option<TraceFormat> {
    if is_binary(head) {
        return first_passing(|sniff| sniff.binary.as_ref(), |test| test(head, file_bytes));
    }
    text_format(head, hint)
}

/// The first format whose test of one stage passes: every signature test in table order, then
/// every plausibility test.
fn first_passing<T: Copy>(
    stage: impl Fn(&Sniffers) -> Option<&Sniff<T>>,
    passes: impl Fn(T) -> bool,
) -> Option<TraceFormat> {
    [true, false].into_iter().find_map(|signature| {
        FORMATS
            .iter()
            .find(|entry| {
                stage(&entry.sniff)
                    .and_then(|sniff| sniff.test_if(signature))
                    .is_some_and(&passes)
            })
            .map(|entry| entry.format)
    })
}

/// Text traces are printable; a NUL or other control byte in the head means binary (the native
/// magic has one, so native files are found among the binary formats).
fn is_binary(head: &[u8]) -> bool {
    head.iter()
        .take(4096)
        .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
}

/// True unless the size of the uncompressed file is known and not a multiple of `record_bytes`.
fn divides(file_bytes: Option<u64>, record_bytes: usize) -> bool {
    match file_bytes {
        Some(bytes) => bytes % record_bytes as u64 == 0,
        None => true,
    }
}

/// The native format's signature: its magic bytes.
pub(crate) fn native_magic(head: &[u8], _file_bytes: Option<u64>) -> bool {
    has_native_magic(head)
}

/// vscsi's signature: the version field of the first records, in a file of whole records.
pub(crate) fn vscsi_records(head: &[u8], file_bytes: Option<u64>) -> bool {
    VscsiVersion::detect(head).is_some_and(|version| divides(file_bytes, version.record_bytes()))
}

/// oracleGeneral has no signature, but its next access is -1 or a 1-based virtual time after
/// the record's own, in a file of whole records.
pub(crate) fn oracle_general_records(head: &[u8], file_bytes: Option<u64>) -> bool {
    if !divides(file_bytes, ORACLE_GENERAL_RECORD_BYTES) {
        return false;
    }
    let records: Vec<&[u8]> = head
        .chunks_exact(ORACLE_GENERAL_RECORD_BYTES)
        .take(PROBE_RECORDS)
        .collect();
    !records.is_empty()
        && records.iter().enumerate().all(|(index, record)| {
            let mut next = [0; 8];
            next.copy_from_slice(&record[16..24]);
            let next = i64::from_le_bytes(next);
            next == -1 || next > index as i64 + 1
        })
}

/// The Meta key-value header, which its readers skip.
pub(crate) fn meta_kv_header(first: &[u8], _second: Option<&[u8]>) -> bool {
    first.starts_with(meta_kv::HEADER_START)
}

/// The Meta block header, which its readers skip.
pub(crate) fn meta_block_header(first: &[u8], _second: Option<&[u8]>) -> bool {
    first.starts_with(meta_block::HEADER_START)
}

/// The SYSTOR header; its `Response` column sets it apart from other headers that start with
/// a timestamp.
pub(crate) fn systor_header(first: &[u8], _second: Option<&[u8]>) -> bool {
    systor::is_header(first) && contains_ignore_case(first, b"response")
}

/// Any header naming an id column makes a CSV trace, so every signature goes first.
pub(crate) fn csv_header(first: &[u8], second: Option<&[u8]>) -> bool {
    looks_like_header(first) && spec_from_header_line(first, second).is_some()
}

/// What one data line of a text trace looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineKind {
    Format(TraceFormat),
    /// A lone number: a key list or a LIRS trace.
    Number,
    /// A lone `*`: only LIRS traces have them.
    Star,
    /// A lone non-numeric word: a key list.
    Word,
}

fn text_format(head: &[u8], hint: Option<TraceFormat>) -> Option<TraceFormat> {
    let mut lines: Vec<&[u8]> = strip_bom(head).split(|&b| b == b'\n').collect();
    if head.len() == PROBE_BYTES && !head.ends_with(b"\n") {
        // The probe cut the last line short.
        lines.pop();
    }
    let mut lines = lines
        .into_iter()
        .map(trim_ascii)
        .filter(|line| !line.is_empty());
    let first = lines.next()?;
    let rest: Vec<&[u8]> = lines.take(PROBE_LINES).collect();
    let second = rest.first().copied();
    if let Some(format) = first_passing(|sniff| sniff.header.as_ref(), |test| test(first, second)) {
        return Some(format);
    }
    let kinds: Vec<LineKind> = std::iter::once(first)
        .chain(rest.iter().copied())
        .take(PROBE_LINES)
        .map(classify_line)
        .collect::<Option<_>>()?;
    let all = |kind: LineKind| kinds.iter().all(|&k| k == kind);
    if let LineKind::Format(format) = kinds[0] {
        return all(kinds[0]).then_some(format);
    }
    // One column fits both txt and lirs, so they have no line tests and are told apart here.
    let single_column = kinds
        .iter()
        .all(|k| matches!(k, LineKind::Number | LineKind::Star | LineKind::Word));
    if !single_column {
        return None;
    }
    if kinds.contains(&LineKind::Star) {
        return kinds
            .iter()
            .all(|k| matches!(k, LineKind::Number | LineKind::Star))
            .then_some(TraceFormat::Lirs);
    }
    match hint {
        Some(TraceFormat::Lirs) if all(LineKind::Number) => Some(TraceFormat::Lirs),
        _ => Some(TraceFormat::Txt),
    }
}

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle))
}

fn is_number(field: &[u8]) -> bool {
    parse_decimal(field).is_some()
}

/// Key-value ops, as Twitter traces spell them.
fn is_kv_op(field: &[u8]) -> bool {
    std::str::from_utf8(field)
        .ok()
        .and_then(Op::from_name)
        .is_some_and(|op| {
            matches!(
                op,
                Op::Get
                    | Op::Gets
                    | Op::Set
                    | Op::Add
                    | Op::Replace
                    | Op::Cas
                    | Op::Append
                    | Op::Prepend
                    | Op::Delete
                    | Op::Incr
                    | Op::Decr
            )
        })
}

fn comma_fields(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| b == b',').map(trim_ascii).collect()
}

fn whitespace_words(line: &[u8]) -> Vec<&[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|word| !word.is_empty())
        .collect()
}

/// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, the host name any text, the
/// type `Flush` too as heterarchy writes it.
pub(crate) fn msr_line(line: &[u8]) -> bool {
    let fields = comma_fields(line);
    fields.len() == 7
        && is_number(fields[0])
        && matches!(
            parse_op_name(fields[3]),
            Some(Op::Read | Op::Write | Op::Flush)
        )
        && fields[2..]
            .iter()
            .enumerate()
            .all(|(i, f)| i == 1 || is_number(f))
}

/// `Timestamp,Offset,Size,IOType,VolumeID`, all numbers, the type 0 or 1.
pub(crate) fn tencent_line(line: &[u8]) -> bool {
    let fields = comma_fields(line);
    fields.len() == 5 && fields.iter().all(|f| is_number(f)) && matches!(fields[3], b"0" | b"1")
}

/// `Timestamp,Response,IOType,LUN,Offset,Size`, the response time possibly empty.
pub(crate) fn systor_line(line: &[u8]) -> bool {
    let fields = comma_fields(line);
    fields.len() == 6
        && parse_seconds_ns(fields[0]).is_some()
        && matches!(parse_op_name(fields[2]), Some(Op::Read | Op::Write))
        && fields[3..].iter().all(|f| is_number(f))
}

/// `timestamp,key,key_size,value_size,client_id,operation,TTL`, read from both ends since keys
/// may hold commas.
pub(crate) fn twitter_line(line: &[u8]) -> bool {
    let fields = comma_fields(line);
    let n = fields.len();
    n >= 7
        && is_number(fields[0])
        && is_kv_op(fields[n - 2])
        && fields[n - 5..n - 2].iter().all(|f| is_number(f))
}

/// Two to four whitespace-separated numbers (ARC lines may omit the last two fields).
pub(crate) fn arc_line(line: &[u8]) -> bool {
    if line.contains(&b',') {
        return false;
    }
    let words = whitespace_words(line);
    (2..=4).contains(&words.len()) && words.iter().all(|w| is_number(w))
}

/// The kind of one data line, or `None` if no format has lines like it: the first format whose
/// line test passes, in table order, else one of the single-column kinds.
fn classify_line(line: &[u8]) -> Option<LineKind> {
    if let Some(entry) = FORMATS
        .iter()
        .find(|entry| entry.sniff.data_line.is_some_and(|test| test(line)))
    {
        return Some(LineKind::Format(entry.format));
    }
    if line.contains(&b',') {
        return None;
    }
    match whitespace_words(line).as_slice() {
        [b"*"] => Some(LineKind::Star),
        [word] if is_number(word) => Some(LineKind::Number),
        [_] => Some(LineKind::Word),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_decide_after_compression_suffix() {
        let name = |n: &str| format_from_name(Path::new(n));
        assert_eq!(
            name("a.oracleGeneral.bin.zst"),
            Some(TraceFormat::OracleGeneral)
        );
        assert_eq!(name("w.oracleGeneral"), Some(TraceFormat::OracleGeneral));
        assert_eq!(name("x.vscsi.gz"), Some(TraceFormat::Vscsi));
        assert_eq!(name("OLTP.lis.zst"), Some(TraceFormat::Arc));
        assert_eq!(name("t.htrace.xz"), Some(TraceFormat::Native));
        assert_eq!(name("m.csv.bz2"), Some(TraceFormat::Csv));
        assert_eq!(name("multi2.trace.gz"), Some(TraceFormat::Lirs));
        assert_eq!(name("k.txt"), Some(TraceFormat::Txt));
        assert_eq!(name("mystery.dat"), None);
        // The last extension wins over a marker earlier in the name.
        assert_eq!(
            name("cloudPhysicsIO.vscsi.blksample.csv"),
            Some(TraceFormat::Csv)
        );
        assert_eq!(name("x.vscsi.htrace"), Some(TraceFormat::Native));
        assert_eq!(name("a.oracleGeneral.csv.gz"), Some(TraceFormat::Csv));
        assert_eq!(name("s.vscsi.sample"), Some(TraceFormat::Vscsi));
        assert_eq!(name("vscsi"), None);
    }

    #[test]
    fn text_lines_classify_by_fields() {
        let text = |head: &str, hint| format_from_content(head.as_bytes(), None, hint);
        assert_eq!(
            text("128166385295514663,hm,0,Write,9056014336,2048,2833\n", None),
            Some(TraceFormat::Msr)
        );
        assert_eq!(
            text("128166385295514663,heterarchy,0,Flush,0,0,0\n", None),
            Some(TraceFormat::Msr)
        );
        assert_eq!(
            text(
                "1538323200,4247200,128,1,1058\n1538323199,13896880,128,0,1063\n",
                None
            ),
            Some(TraceFormat::Tencent)
        );
        assert_eq!(
            text(
                "0,q:q:1:8WTwl7huJeQ,17,249,1,get,0\n0,a,b,16,0,2,set,0\n",
                None
            ),
            Some(TraceFormat::Twitter)
        );
        assert_eq!(
            text(
                "Timestamp,Response,IOType,LUN,Offset,Size\n1.5,0.001,R,1,0,4096\n",
                None
            ),
            Some(TraceFormat::Systor)
        );
        assert_eq!(
            text("1.5,0.001,W,1,0,4096\n", None),
            Some(TraceFormat::Systor)
        );
        assert_eq!(text("1 1 0 0\n2 8 0 1\n", None), Some(TraceFormat::Arc));
        assert_eq!(text("3\n*\n4\n", None), Some(TraceFormat::Lirs));
        assert_eq!(text("3\n4\n", None), Some(TraceFormat::Txt));
        assert_eq!(
            text("3\n4\n", Some(TraceFormat::Lirs)),
            Some(TraceFormat::Lirs)
        );
        assert_eq!(text("apple\n4\n", None), Some(TraceFormat::Txt));
        assert_eq!(
            text("version,time,op,size,lbn\n1,5,2a,512,42\n", None),
            Some(TraceFormat::Csv)
        );
        // Lines of different formats do not make one format.
        assert_eq!(text("1 1 0 0\n3\n", None), None);
        assert_eq!(text("a,b,c\n", None), None);
    }

    #[test]
    fn binary_heads_need_matching_layouts() {
        let mut vscsi = vec![7u8; 64];
        vscsi[15] = 1;
        vscsi[47] = 1;
        assert_eq!(
            format_from_content(&vscsi, Some(64), None),
            Some(TraceFormat::Vscsi)
        );
        assert_eq!(format_from_content(&vscsi, Some(65), None), None);
        let mut oracle = Vec::new();
        for (index, next) in [(0i64, 3i64), (1, -1), (2, -1)] {
            oracle.extend_from_slice(&(index as u32).to_le_bytes());
            oracle.extend_from_slice(&7u64.to_le_bytes());
            oracle.extend_from_slice(&0u32.to_le_bytes());
            oracle.extend_from_slice(&next.to_le_bytes());
        }
        assert_eq!(
            format_from_content(&oracle, Some(72), None),
            Some(TraceFormat::OracleGeneral)
        );
        oracle[16] = 1; // record 0 now claims its next access is itself
        oracle[17..24].fill(0);
        assert_eq!(format_from_content(&oracle, Some(72), None), None);
    }

    #[test]
    fn signatures_outrank_plausible_content() {
        // A native header and one record whose bytes also read as two plausible oracleGeneral
        // records (next access -1).
        let mut native = crate::read::native_header().to_vec();
        native.extend_from_slice(&[0xff; 8]);
        native.extend_from_slice(&[0; 16]);
        native.extend_from_slice(&[0xff; 8]);
        assert!(oracle_general_records(&native, Some(48)));
        assert_eq!(
            format_from_content(&native, Some(48), None),
            Some(TraceFormat::Native)
        );
        // A Meta key-value header names a key column, so it is a CSV header too.
        let meta = "op_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase\n\
                    1,k,3,GET,1,10,0,0,1,1\n";
        let first = meta.as_bytes().split(|&b| b == b'\n').next().unwrap();
        assert!(csv_header(first, None));
        assert_eq!(
            format_from_content(meta.as_bytes(), None, None),
            Some(TraceFormat::MetaKv)
        );
    }
}
