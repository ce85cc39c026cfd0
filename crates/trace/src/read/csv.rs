//! Generic delimited-text traces described by a libCacheSim-style column spec
//! (`traceReader/generalReader/csv.c` and `bin/cli_reader_utils.c`, `--trace-type-params`), e.g.
//! `time-col=2,obj-id-col=5,obj-size-col=4,op-col=3,has-header=true,delimiter=,`.
//!
//! Columns are 1-based. Keys: `time-col` (seconds, decimals allowed), `obj-id-col` (required),
//! `obj-size-col` (alias `size-col`; bytes, default 1 as in libCacheSim), `op-col`, `tenant-col`,
//! `cnt-col` (the row stands for that many requests), `has-header` (alias `header`), `delimiter`
//! (`,` `\t` `|` `:` `;` or a space; `delimiter=,` works at the end of the spec or before the next
//! comma) and `obj-id-is-num` (default true; false hashes the id string with
//! [`stable_key_hash`](super::stable_key_hash)). Underscores may stand for dashes.
//!
//! When the spec leaves them out, the delimiter and the header are detected from the first line
//! the way libCacheSim does: the most frequent of tab, comma, pipe and colon, weighted 4:3:2:1;
//! a header unless digits outnumber letters. A CSV trace is an object trace: rows are never split
//! into cache lines, even when the id is a block number.

use super::source::TraceInput;
use std::str::FromStr;

use super::source::read_head;
use super::text::{
    fold_to_u32, parse_integer, parse_op_name, quote, stable_key_hash, strip_bom, trim_ascii, Line,
    LineSource,
};
use super::TraceReader;
use crate::{Op, Request, TraceError};

/// Bytes of the head read to detect the delimiter and the header.
const PROBE_BYTES: usize = 64 * 1024;

/// Which column holds what, and how the file is laid out (libCacheSim's reader parameters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvSpec {
    /// 1-based column of the time in seconds.
    pub time_col: Option<usize>,
    /// 1-based column of the object id.
    pub obj_id_col: usize,
    /// 1-based column of the object size in bytes; sizes are 1 without it.
    pub obj_size_col: Option<usize>,
    /// 1-based column of the op.
    pub op_col: Option<usize>,
    /// 1-based column of the tenant (numeric, or a string that is hashed).
    pub tenant_col: Option<usize>,
    /// 1-based column of a repeat count.
    pub cnt_col: Option<usize>,
    /// Whether the first line is a header; detected when `None`.
    pub has_header: Option<bool>,
    /// The field delimiter; detected when `None`.
    pub delimiter: Option<u8>,
    /// Ids are numbers (decimal or `0x` hex); false hashes them as strings.
    pub obj_id_is_num: bool,
}

impl CsvSpec {
    /// A spec with only the id column set, everything else absent or detected.
    pub fn with_id_column(obj_id_col: usize) -> CsvSpec {
        CsvSpec {
            time_col: None,
            obj_id_col,
            obj_size_col: None,
            op_col: None,
            tenant_col: None,
            cnt_col: None,
            has_header: None,
            delimiter: None,
            obj_id_is_num: true,
        }
    }

    fn columns(&self) -> impl Iterator<Item = usize> {
        [
            Some(self.obj_id_col),
            self.time_col,
            self.obj_size_col,
            self.op_col,
            self.tenant_col,
            self.cnt_col,
        ]
        .into_iter()
        .flatten()
    }
}

/// The keys [`CsvSpec::from_str`] accepts, for its error message.
const SPEC_KEYS: &str = "time-col, obj-id-col, obj-size-col, op-col, tenant-col, cnt-col, \
                         has-header, delimiter, obj-id-is-num";

impl FromStr for CsvSpec {
    type Err = CsvSpecError;

    /// Parses a libCacheSim-style spec; the error is one line naming the bad part.
    fn from_str(spec: &str) -> Result<CsvSpec, CsvSpecError> {
        let bad = |reason: String| CsvSpecError {
            spec: spec.to_string(),
            reason,
        };
        let mut parsed = CsvSpec::with_id_column(0);
        let mut rest = spec.trim();
        while !rest.is_empty() {
            let equals = rest
                .find('=')
                .ok_or_else(|| bad(format!("expected key=value at \"{rest}\"")))?;
            let key = rest[..equals].trim().replace('_', "-").to_ascii_lowercase();
            rest = &rest[equals + 1..];
            let value;
            if key == "delimiter" {
                // The delimiter may be the comma that also separates the spec's entries.
                (value, rest) = split_delimiter_value(rest);
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                value = rest[..end].trim();
                rest = &rest[end..];
            }
            rest = rest.trim_start_matches([',', ' ']);
            let column = || -> Result<Option<usize>, CsvSpecError> {
                match value.parse::<usize>() {
                    Ok(column) if column >= 1 => Ok(Some(column)),
                    _ => Err(bad(format!(
                        "{key}={value}: expected a column number from 1"
                    ))),
                }
            };
            let flag = || -> Result<bool, CsvSpecError> {
                match value.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "y" => Ok(true),
                    "false" | "0" | "no" | "n" => Ok(false),
                    _ => Err(bad(format!("{key}={value}: expected true or false"))),
                }
            };
            match key.as_str() {
                "time-col" => parsed.time_col = column()?,
                "obj-id-col" => parsed.obj_id_col = column()?.unwrap_or(0),
                "obj-size-col" | "size-col" => parsed.obj_size_col = column()?,
                "op-col" => parsed.op_col = column()?,
                "tenant-col" => parsed.tenant_col = column()?,
                "cnt-col" => parsed.cnt_col = column()?,
                "has-header" | "header" => parsed.has_header = Some(flag()?),
                "obj-id-is-num" => parsed.obj_id_is_num = flag()?,
                "delimiter" => {
                    parsed.delimiter = Some(parse_delimiter(value).ok_or_else(|| {
                        bad(format!(
                            "delimiter={value}: expected one character, \
                             \\t or tab"
                        ))
                    })?)
                }
                _ => {
                    return Err(bad(format!(
                        "unknown key \"{key}\"; expected one of {SPEC_KEYS}"
                    )))
                }
            }
        }
        if parsed.obj_id_col == 0 {
            return Err(bad("obj-id-col is required".to_string()));
        }
        Ok(parsed)
    }
}

/// A CSV spec that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad CSV spec \"{spec}\": {reason}")]
pub struct CsvSpecError {
    /// The spec as given.
    pub spec: String,
    /// The part at fault and what was expected.
    pub reason: String,
}

/// Splits the value of `delimiter=` off the rest of the spec: `\t`, `tab`, or one character,
/// which may be a comma; an empty value means a comma, as in libCacheSim.
fn split_delimiter_value(rest: &str) -> (&str, &str) {
    for word in ["\\t", "tab"] {
        if rest.starts_with(word) {
            return rest.split_at(word.len());
        }
    }
    match rest.chars().next() {
        Some(first) => rest.split_at(first.len_utf8()),
        None => (",", rest),
    }
}

fn parse_delimiter(value: &str) -> Option<u8> {
    match value {
        "\\t" | "tab" => Some(b'\t'),
        _ if value.len() == 1 && value.is_ascii() => Some(value.as_bytes()[0]),
        _ => None,
    }
}

/// libCacheSim's delimiter guess: the most frequent of tab, comma, pipe and colon in the first
/// line, weighted 4, 3, 2, 1 for how common they are; comma when none occurs.
pub(crate) fn detect_delimiter(first_line: &[u8]) -> u8 {
    let candidates = [(b'\t', 4), (b',', 3), (b'|', 2), (b':', 1)];
    let mut best = (b',', 0);
    for (delimiter, weight) in candidates {
        let score = first_line.iter().filter(|&&b| b == delimiter).count() * weight;
        if score > best.1 {
            best = (delimiter, score);
        }
    }
    best.0
}

/// libCacheSim's header guess: a header unless the first line has more digits than letters.
pub(crate) fn looks_like_header(first_line: &[u8]) -> bool {
    let digits = first_line.iter().filter(|b| b.is_ascii_digit()).count();
    let letters = first_line
        .iter()
        .filter(|b| b.is_ascii_alphabetic())
        .count();
    digits <= letters
}

/// Splits `line` at `delimiter` outside double quotes into `fields` (byte ranges, trimmed of
/// whitespace and surrounding quotes).
pub(crate) fn split_fields(line: &[u8], delimiter: u8, fields: &mut Vec<(usize, usize)>) {
    fields.clear();
    let mut start = 0;
    let mut quoted = false;
    for (i, &byte) in line.iter().enumerate() {
        if byte == b'"' {
            quoted = !quoted;
        } else if byte == delimiter && !quoted {
            fields.push(trimmed_range(line, start, i));
            start = i + 1;
        }
    }
    fields.push(trimmed_range(line, start, line.len()));
}

fn trimmed_range(line: &[u8], start: usize, end: usize) -> (usize, usize) {
    let field = trim_ascii(&line[start..end]);
    let mut field_start = field.as_ptr() as usize - line.as_ptr() as usize;
    let mut field_end = field_start + field.len();
    if field.len() >= 2 && field[0] == b'"' && field[field.len() - 1] == b'"' {
        field_start += 1;
        field_end -= 1;
    }
    (field_start, field_end)
}

/// The first line of `path` that is not blank, for the delimiter and header guesses.
fn first_line(input: &TraceInput) -> Result<Vec<u8>, TraceError> {
    let (head, _) = read_head(input, PROBE_BYTES)?;
    Ok(strip_bom(&head)
        .split(|&b| b == b'\n')
        .map(trim_ascii)
        .find(|line| !line.is_empty())
        .unwrap_or_default()
        .to_vec())
}

/// Column names a header may use for each role, compared lowercase without punctuation; the
/// first column matching a role takes it.
const TIME_NAMES: &[&str] = &["time", "timestamp", "ts", "clocktime", "realtime", "optime"];
const ID_NAMES: &[&str] = &[
    "objid",
    "id",
    "key",
    "lbn",
    "lba",
    "block",
    "blockid",
    "blocknumber",
    "object",
    "objectid",
    "address",
    "addr",
];
const SIZE_NAMES: &[&str] = &[
    "objsize",
    "size",
    "objectsize",
    "length",
    "len",
    "bytes",
    "iosize",
];
const OP_NAMES: &[&str] = &["op", "operation", "type", "iotype", "cmd", "opname", "rw"];
const TENANT_NAMES: &[&str] = &[
    "tenant", "tenantid", "client", "clientid", "volume", "volumeid", "lun", "usecase",
];
const COUNT_NAMES: &[&str] = &["cnt", "count", "opcount"];

/// The spec a header line describes, or `None` if no column is recognisably the id.
/// `first_data_line` decides whether ids are numbers (`obj-id-is-num`).
pub(crate) fn spec_from_header_line(
    header: &[u8],
    first_data_line: Option<&[u8]>,
) -> Option<CsvSpec> {
    let delimiter = detect_delimiter(header);
    let mut ranges = Vec::new();
    split_fields(header, delimiter, &mut ranges);
    let names: Vec<String> = ranges
        .iter()
        .map(|&(start, end)| {
            header[start..end]
                .iter()
                .filter(|b| b.is_ascii_alphanumeric())
                .map(|b| b.to_ascii_lowercase() as char)
                .collect()
        })
        .collect();
    let column_of = |candidates: &[&str]| {
        names
            .iter()
            .position(|name| candidates.contains(&name.as_str()))
            .map(|index| index + 1)
    };
    let mut spec = CsvSpec::with_id_column(column_of(ID_NAMES)?);
    spec.time_col = column_of(TIME_NAMES);
    spec.obj_size_col = column_of(SIZE_NAMES);
    spec.op_col = column_of(OP_NAMES);
    spec.tenant_col = column_of(TENANT_NAMES);
    spec.cnt_col = column_of(COUNT_NAMES);
    spec.has_header = Some(true);
    spec.delimiter = Some(delimiter);
    if let Some(data) = first_data_line {
        split_fields(data, delimiter, &mut ranges);
        if let Some(&(start, end)) = ranges.get(spec.obj_id_col - 1) {
            spec.obj_id_is_num = parse_integer(&data[start..end]).is_some();
        }
    }
    Some(spec)
}

/// The spec the header of `path` describes, for CSV traces opened without one.
pub(crate) fn spec_from_header(input: &TraceInput) -> Result<CsvSpec, TraceError> {
    let path = input.name();
    let (head, _) = read_head(input, PROBE_BYTES)?;
    let mut lines = strip_bom(&head)
        .split(|&b| b == b'\n')
        .map(trim_ascii)
        .filter(|line| !line.is_empty());
    let header = lines.next().unwrap_or_default();
    let spec = if looks_like_header(header) {
        spec_from_header_line(header, lines.next())
    } else {
        None
    };
    spec.ok_or_else(|| {
        TraceError::new(
            path,
            crate::Location::Line(1),
            format!(
                "CSV trace without a header naming an id column (found \"{}\"); give the columns \
                 with a CSV spec such as obj-id-col=2,time-col=1,obj-size-col=3",
                quote(header)
            ),
        )
    })
}

/// Streams a CSV trace.
pub(crate) struct CsvReader {
    lines: LineSource,
    spec: CsvSpec,
    delimiter: u8,
    /// The highest column the spec reads: rows with fewer fields are errors.
    max_column: usize,
    fields: Vec<(usize, usize)>,
    /// A row with a repeat count still owed, and how many times.
    repeat: Option<(Request, u32)>,
}

impl CsvReader {
    /// Opens `path` as described by `spec`, detecting what it leaves out.
    pub(crate) fn open(input: &TraceInput, spec: CsvSpec) -> Result<CsvReader, TraceError> {
        let (delimiter, has_header) = match (spec.delimiter, spec.has_header) {
            (Some(delimiter), Some(has_header)) => (delimiter, has_header),
            (delimiter, has_header) => {
                let first = first_line(input)?;
                (
                    delimiter.unwrap_or_else(|| detect_delimiter(&first)),
                    has_header.unwrap_or_else(|| looks_like_header(&first)),
                )
            }
        };
        let mut lines = LineSource::open(input)?;
        if has_header {
            lines.next_line()?;
        }
        let max_column = spec.columns().max().unwrap_or(1);
        Ok(CsvReader {
            lines,
            spec,
            delimiter,
            max_column,
            fields: Vec::with_capacity(max_column),
            repeat: None,
        })
    }
}

/// Parses one data row into a request and its repeat count.
fn parse_row(
    line: &Line<'_>,
    spec: &CsvSpec,
    delimiter: u8,
    max_column: usize,
    fields: &mut Vec<(usize, usize)>,
) -> Result<(Request, u32), TraceError> {
    split_fields(line.text, delimiter, fields);
    if fields.len() < max_column {
        return Err(line.error(format!(
            "too few fields: expected at least {max_column} '{}'-separated fields (the CSV spec \
             reads column {max_column}), found {}",
            delimiter as char,
            fields.len()
        )));
    }
    let field = |column: usize| {
        let (start, end) = fields[column - 1];
        &line.text[start..end]
    };
    let id = field(spec.obj_id_col);
    let key = if spec.obj_id_is_num {
        parse_integer(id).ok_or_else(|| {
            line.expected(
                id,
                spec.obj_id_col,
                "object id",
                "a numeric id (set obj-id-is-num=false to hash string ids)",
            )
        })?
    } else {
        stable_key_hash(id)
    };
    let mut request = Request::new(key, 1);
    if let Some(column) = spec.time_col {
        request.time_ns = line.parse_seconds_ns(field(column), column, "time")?;
    }
    if let Some(column) = spec.obj_size_col {
        request.size = line.parse_u32(field(column), column, "object size")?;
    }
    if let Some(column) = spec.op_col {
        let name = field(column);
        request.op = parse_op_name(name).ok_or_else(|| unknown_op(line, name, column))?;
    }
    if let Some(column) = spec.tenant_col {
        let tenant = field(column);
        request.tenant =
            fold_to_u32(parse_integer(tenant).unwrap_or_else(|| stable_key_hash(tenant)));
    }
    let count = match spec.cnt_col {
        Some(column) => line.parse_u32(field(column), column, "count")?,
        None => 1,
    };
    Ok((request, count))
}

/// The error for an op name no table knows.
pub(crate) fn unknown_op(line: &Line<'_>, name: &[u8], column: usize) -> TraceError {
    let known: Vec<&str> = Op::ALL[1..].iter().map(|op| op.name()).collect();
    line.error(format!(
        "column {column} (op): unknown op \"{}\"; expected one of {}, R, W or a SCSI opcode in hex",
        quote(name),
        known.join(", ")
    ))
}

impl TraceReader for CsvReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            if let Some((request, left)) = &mut self.repeat {
                let request = *request;
                *left -= 1;
                if *left == 0 {
                    self.repeat = None;
                }
                return Ok(Some(request));
            }
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            let (request, count) = parse_row(
                &line,
                &self.spec,
                self.delimiter,
                self.max_column,
                &mut self.fields,
            )?;
            if count > 0 {
                self.repeat = Some((request, count));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_libcachesim_example_spec() {
        let spec: CsvSpec =
            "time-col=2,obj-id-col=5,obj-size-col=4,op-col=3,has-header=true,delimiter=,"
                .parse()
                .unwrap();
        assert_eq!(spec.time_col, Some(2));
        assert_eq!(spec.obj_id_col, 5);
        assert_eq!(spec.obj_size_col, Some(4));
        assert_eq!(spec.op_col, Some(3));
        assert_eq!(spec.has_header, Some(true));
        assert_eq!(spec.delimiter, Some(b','));
        assert!(spec.obj_id_is_num);
    }

    #[test]
    fn delimiter_comma_may_sit_mid_spec_and_tab_is_spelled() {
        let spec: CsvSpec = "delimiter=,, obj_id_col=1, obj-id-is-num=false"
            .parse()
            .unwrap();
        assert_eq!(spec.delimiter, Some(b','));
        assert_eq!(spec.obj_id_col, 1);
        assert!(!spec.obj_id_is_num);
        let spec: CsvSpec = "obj-id-col=2,delimiter=\\t".parse().unwrap();
        assert_eq!(spec.delimiter, Some(b'\t'));
    }

    #[test]
    fn bad_specs_are_one_line_errors() {
        for (spec, needle) in [
            ("time-col=2", "obj-id-col is required"),
            ("obj-id-col=0", "column number"),
            ("obj-id-col=x", "column number"),
            ("obj-id-col=1,colour=red", "unknown key"),
            ("obj-id-col=1,has-header=maybe", "true or false"),
            ("obj-id-col", "key=value"),
        ] {
            let err = spec.parse::<CsvSpec>().unwrap_err().to_string();
            assert!(err.contains(needle), "{spec}: {err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn detection_follows_libcachesim() {
        assert_eq!(detect_delimiter(b"version,time,op,size,lbn"), b',');
        assert_eq!(detect_delimiter(b"1\t2\t3"), b'\t');
        assert_eq!(detect_delimiter(b"a:b|c|d"), b'|');
        assert!(looks_like_header(b"version,time,op,size,lbn"));
        assert!(!looks_like_header(b"1,5633898,2a,512,42932745"));
    }

    #[test]
    fn quoted_fields_keep_delimiters() {
        let line = b"1,\"a,b\", c ";
        let mut fields = Vec::new();
        split_fields(line, b',', &mut fields);
        let texts: Vec<&[u8]> = fields.iter().map(|&(s, e)| &line[s..e]).collect();
        assert_eq!(texts, vec![&b"1"[..], b"a,b", b"c"]);
    }
}
