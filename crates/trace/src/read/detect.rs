//! Which format a trace file is in, when `--trace-format` does not say: first by name (after
//! stripping a compression suffix), then by content (magic bytes, binary record layouts, header
//! names, field counts and types of the first lines).
//!
//! Names: `.oracleGeneral` anywhere in the name (as libCacheSim matches it), `.vscsi`, `.htrace`
//! (native) and `.lis` (ARC) decide alone. `.csv`, `.txt` and `.trace` (LIRS) are hints: the
//! content decides when it clearly says something else (an MSR trace named `.csv` is read as
//! MSR), and the hint decides when the content fits several formats (one number per line is
//! `txt` or `lirs`) or none.

use std::path::Path;

use super::csv::{looks_like_header, spec_from_header_line};
use super::native::has_native_magic;
use super::oracle_general::RECORD_BYTES as ORACLE_GENERAL_RECORD_BYTES;
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
pub fn detect_format(path: &Path) -> Result<TraceFormat, TraceError> {
    let hint = format_from_name(path);
    if let Some(
        format @ (TraceFormat::OracleGeneral
        | TraceFormat::Native
        | TraceFormat::Vscsi
        | TraceFormat::Arc),
    ) = hint
    {
        return Ok(format);
    }
    let (head, compression) = read_head(path, PROBE_BYTES)?;
    if head.is_empty() {
        return Err(TraceError::file(
            path,
            "no data after decompression; expected trace records",
        ));
    }
    // Record sizes must divide the size of an uncompressed file; compressed sizes say nothing.
    let file_bytes = match compression {
        Compression::None => std::fs::metadata(path).ok().map(|m| m.len()),
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

/// The format the file name says, if any.
pub(crate) fn format_from_name(path: &Path) -> Option<TraceFormat> {
    let mut name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    while let Some(stripped) = [".gz", ".bz2", ".xz", ".zst", ".zstd"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
    {
        name = stripped.to_string();
    }
    if name.contains(".oraclegeneral") {
        Some(TraceFormat::OracleGeneral)
    } else if name.contains(".vscsi") {
        Some(TraceFormat::Vscsi)
    } else if name.ends_with(&format!(".{}", super::NATIVE_EXTENSION)) {
        Some(TraceFormat::Native)
    } else if name.ends_with(".lis") {
        Some(TraceFormat::Arc)
    } else if name.ends_with(".csv") {
        Some(TraceFormat::Csv)
    } else if name.ends_with(".txt") {
        Some(TraceFormat::Txt)
    } else if name.ends_with(".trace") {
        Some(TraceFormat::Lirs)
    } else {
        None
    }
}

/// The format the first bytes say, if they say one clearly.
pub(crate) fn format_from_content(
    head: &[u8],
    file_bytes: Option<u64>,
    hint: Option<TraceFormat>,
) -> Option<TraceFormat> {
    if has_native_magic(head) {
        return Some(TraceFormat::Native);
    }
    if is_binary(head) {
        return binary_format(head, file_bytes);
    }
    text_format(head, hint)
}

/// Text traces are printable; a NUL or other control byte in the head means binary.
fn is_binary(head: &[u8]) -> bool {
    head.iter()
        .take(4096)
        .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
}

fn binary_format(head: &[u8], file_bytes: Option<u64>) -> Option<TraceFormat> {
    let divides = |record_bytes: usize| match file_bytes {
        Some(bytes) => bytes % record_bytes as u64 == 0,
        None => true,
    };
    if let Some(version) = VscsiVersion::detect(head) {
        if divides(version.record_bytes()) {
            return Some(TraceFormat::Vscsi);
        }
    }
    if divides(ORACLE_GENERAL_RECORD_BYTES) && plausible_oracle_general(head) {
        return Some(TraceFormat::OracleGeneral);
    }
    None
}

/// oracleGeneral's next access is -1 or a 1-based virtual time after the record's own.
fn plausible_oracle_general(head: &[u8]) -> bool {
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
    if first.starts_with(meta_kv::HEADER_START) {
        return Some(TraceFormat::MetaKv);
    }
    if first.starts_with(meta_block::HEADER_START) {
        return Some(TraceFormat::MetaBlock);
    }
    if systor::is_header(first) && contains_ignore_case(first, b"response") {
        return Some(TraceFormat::Systor);
    }
    let rest: Vec<&[u8]> = lines.take(PROBE_LINES).collect();
    if looks_like_header(first) && spec_from_header_line(first, rest.first().copied()).is_some() {
        return Some(TraceFormat::Csv);
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

/// The kind of one data line, or `None` if no format has lines like it.
fn classify_line(line: &[u8]) -> Option<LineKind> {
    let fields: Vec<&[u8]> = line.split(|&b| b == b',').map(trim_ascii).collect();
    let kind = |format| Some(LineKind::Format(format));
    match fields.len() {
        1 => {}
        7 if is_number(fields[0])
            && matches!(parse_op_name(fields[3]), Some(Op::Read | Op::Write))
            && fields[2..]
                .iter()
                .enumerate()
                .all(|(i, f)| i == 1 || is_number(f)) =>
        {
            return kind(TraceFormat::Msr)
        }
        5 if fields.iter().all(|f| is_number(f)) && matches!(fields[3], b"0" | b"1") => {
            return kind(TraceFormat::Tencent)
        }
        6 if parse_seconds_ns(fields[0]).is_some()
            && matches!(parse_op_name(fields[2]), Some(Op::Read | Op::Write))
            && fields[3..].iter().all(|f| is_number(f)) =>
        {
            return kind(TraceFormat::Systor)
        }
        n if n >= 7
            && is_number(fields[0])
            && is_kv_op(fields[n - 2])
            && fields[n - 5..n - 2].iter().all(|f| is_number(f)) =>
        {
            return kind(TraceFormat::Twitter)
        }
        _ => return None,
    }
    let words: Vec<&[u8]> = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|word| !word.is_empty())
        .collect();
    match words.as_slice() {
        [b"*"] => Some(LineKind::Star),
        [word] if is_number(word) => Some(LineKind::Number),
        [_] => Some(LineKind::Word),
        [_, _, ..] if words.len() <= 4 && words.iter().all(|w| is_number(w)) => {
            Some(LineKind::Format(TraceFormat::Arc))
        }
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
    }

    #[test]
    fn text_lines_classify_by_fields() {
        let text = |head: &str, hint| format_from_content(head.as_bytes(), None, hint);
        assert_eq!(
            text("128166385295514663,hm,0,Write,9056014336,2048,2833\n", None),
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
}
