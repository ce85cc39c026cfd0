//! The one place where block requests become cache requests (docs/architecture.md, "Requests and
//! traces"): every block format (vscsi, msr, tencent, systor, meta-block) parses its records into
//! [`BlockRecord`]s and [`BlockReader`] turns them into requests.
//!
//! Split (the default): a record at byte offset `O` of length `L` on volume `V` becomes one
//! request per `block_size` cache line it touches, lines `O / block_size` to
//! `(O + L - 1) / block_size`, each keyed [`Request::block_key`]`(V, line)`, of size
//! `block_size`, with the record's time and op and tenant `V`. A write that covers its first
//! or last line only in part first reads that line (seed 002 §4.2.2: "Misaligned read and write
//! requests require additional reads to ensure that data are loaded into the cache at a fixed
//! size"): one read when it touches a single line, else a read of each partial edge, then the
//! writes of every line.
//!
//! Unsplit (`--no-split`, libCacheSim's view): one request per record, of size `L`, keyed
//! [`Request::block_key`]`(V, id)` where `id` is the offset in the unit the trace writes it
//! (sectors for vscsi and Tencent, as libCacheSim's vscsi reader uses the lbn; bytes for MSR,
//! SYSTOR and Meta block traces, as libCacheSim's CSV reader would read the offset column). The
//! volume stays in the high bits in both modes so that volumes never collide; with volume 0 the
//! key is the plain id, so a single-volume trace keys exactly as libCacheSim does.
//!
//! Records of length 0 carry no data (SCSI commands such as TEST UNIT READY) and give no request,
//! as libCacheSim skips size-zero requests; nor does a flush, whatever its length (the staged
//! simulator reads flushes from the records themselves, `sim::staging`). A record with a repeat
//! count gives its requests that many times.

use std::path::Path;

use super::text::{Line, LineSource};
use super::TraceReader;
use crate::request::{BLOCK_NUMBER_BITS, NEXT_ACCESS_UNKNOWN};
use crate::{Location, Op, Request, TraceError};

/// Volume ids must fit the key bits above the block number.
const VOLUME_BITS: u32 = u64::BITS - BLOCK_NUMBER_BITS;

/// One I/O of a block trace, before splitting (what block-trace analyses such as BlkSample,
/// seed 002 ch. 5, read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRecord {
    pub time_ns: u64,
    /// Volume (disk, LUN, chunk) the I/O addresses; it becomes the tenant and the key's high bits.
    pub volume: u32,
    pub offset_bytes: u64,
    pub length_bytes: u64,
    /// The offset in the trace's own unit, the object id when not splitting.
    pub unsplit_id: u64,
    pub op: Op,
    /// How many times the I/O happened (Meta's `op_count`; 1 elsewhere).
    pub repeat: u32,
}

impl BlockRecord {
    /// An I/O of a trace that writes offsets in bytes (its unsplit id), happening once.
    pub fn in_bytes(
        time_ns: u64,
        volume: u32,
        offset_bytes: u64,
        length_bytes: u64,
        op: Op,
    ) -> BlockRecord {
        BlockRecord {
            time_ns,
            volume,
            offset_bytes,
            length_bytes,
            unsplit_id: offset_bytes,
            op,
            repeat: 1,
        }
    }

    /// The lines of `block_size` bytes the record touches, and the edges a write that covers
    /// them only in part reads first (see the module docs); `None` when the record holds no
    /// data or its end overflows 64 bits.
    pub(crate) fn line_span(&self, block_size: u64) -> Option<LineSpan> {
        let end = self
            .offset_bytes
            .checked_add(self.length_bytes.checked_sub(1)?)?;
        let (first, last) = (self.offset_bytes / block_size, end / block_size);
        let write = self.op == Op::Write;
        let front = write && !self.offset_bytes.is_multiple_of(block_size);
        let rear = write && !(end + 1).is_multiple_of(block_size);
        Some(LineSpan {
            first,
            last,
            read_first: front || (first == last && rear),
            read_last: first != last && rear,
        })
    }

    /// The requests the record becomes when split into `block_size`-byte lines: every line,
    /// with a misaligned write's edge reads, on each of its passes.
    pub fn line_requests(&self, block_size: u32) -> u64 {
        self.line_span(u64::from(block_size.max(1)))
            .map_or(0, |span| {
                span.last - span.first + 1 + u64::from(span.read_first) + u64::from(span.read_last)
            })
            * u64::from(self.repeat)
    }
}

/// What [`BlockRecord::line_span`] finds: lines `first..=last`, and whether a write reads the
/// first or the last before it writes them.
pub(crate) struct LineSpan {
    first: u64,
    last: u64,
    read_first: bool,
    read_last: bool,
}

/// The parser half of a block format: yields records in trace order.
pub trait BlockRecordSource: Send {
    /// The next record, or `None` at the end of the trace.
    fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError>;
    /// The trace's path, for errors.
    fn path(&self) -> &Path;
    /// Where the record last returned was found, for errors about it.
    fn location(&self) -> Location;
}

/// Any source behind a box (the opener picks one per format).
impl BlockRecordSource for Box<dyn BlockRecordSource> {
    fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
        (**self).next_record()
    }

    fn path(&self) -> &Path {
        (**self).path()
    }

    fn location(&self) -> Location {
        (**self).location()
    }
}

/// The record source of a line-per-record text format: `parse` turns one line into a record.
pub(crate) struct TextBlockSource<P> {
    lines: LineSource,
    parse: P,
}

impl<P> TextBlockSource<P>
where
    P: FnMut(&Line<'_>) -> Result<BlockRecord, TraceError> + Send,
{
    /// Reads the lines of `lines` with `parse`.
    pub(crate) fn new(lines: LineSource, parse: P) -> TextBlockSource<P> {
        TextBlockSource { lines, parse }
    }
}

impl<P> BlockRecordSource for TextBlockSource<P>
where
    P: FnMut(&Line<'_>) -> Result<BlockRecord, TraceError> + Send,
{
    fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
        match self.lines.next_line()? {
            Some(line) => (self.parse)(&line).map(Some),
            None => Ok(None),
        }
    }

    fn path(&self) -> &Path {
        self.lines.path()
    }

    fn location(&self) -> Location {
        self.lines.location()
    }
}

/// Turns the records of a [`BlockRecordSource`] into requests, split or not.
pub(crate) struct BlockReader<S> {
    source: S,
    block_size: u64,
    split: bool,
    /// The request being repeated (its key advances line by line when splitting).
    template: Request,
    /// The first and the last key of the record in progress, inclusive, and the next to give.
    first_key: u64,
    last_key: u64,
    next_key: u64,
    /// Passes over the record's keys still to give, the one in progress included; 0 when idle.
    passes_left: u32,
    /// Lines a misaligned write reads before its pass (at most its two edges), and how many of
    /// them the pass in progress has given.
    edge_reads: [u64; 2],
    edge_count: usize,
    edge_given: usize,
}

impl<S: BlockRecordSource> BlockReader<S> {
    /// Reads `source`, splitting into `block_size`-byte lines when `split`.
    pub(crate) fn new(source: S, block_size: u32, split: bool) -> BlockReader<S> {
        BlockReader {
            source,
            block_size: u64::from(block_size.max(1)),
            split,
            template: Request::default(),
            first_key: 0,
            last_key: 0,
            next_key: 0,
            passes_left: 0,
            edge_reads: [0; 2],
            edge_count: 0,
            edge_given: 0,
        }
    }

    /// Loads the next record with data; false at the end of the trace.
    fn load_next_record(&mut self) -> Result<bool, TraceError> {
        loop {
            let Some(record) = self.source.next_record()? else {
                return Ok(false);
            };
            // A flush moves no data: the cache simulators have nothing to look up.
            if record.length_bytes == 0 || record.repeat == 0 || record.op == Op::Flush {
                continue;
            }
            if record.volume >> VOLUME_BITS != 0 {
                return Err(self.error(format!(
                    "volume id {} does not fit the {VOLUME_BITS} bits block keys hold",
                    record.volume
                )));
            }
            let mut edges = (false, false);
            let (first, last, size) = if self.split {
                let span = record.line_span(self.block_size).ok_or_else(|| {
                    self.error("offset + length overflows 64 bits; expected a byte range")
                })?;
                edges = (span.read_first, span.read_last);
                let size = u32::try_from(self.block_size).unwrap_or(u32::MAX);
                (span.first, span.last, size)
            } else {
                let size = u32::try_from(record.length_bytes).map_err(|_| {
                    self.error(format!(
                        "request of {} bytes does not fit a 32-bit object size; split it into \
                         cache lines instead of --no-split",
                        record.length_bytes
                    ))
                })?;
                (record.unsplit_id, record.unsplit_id, size)
            };
            if last >> BLOCK_NUMBER_BITS != 0 {
                return Err(self.error(format!(
                    "block number {last} does not fit the {BLOCK_NUMBER_BITS} bits block keys hold"
                )));
            }
            self.template = Request {
                time_ns: record.time_ns,
                key: 0,
                size,
                tenant: record.volume,
                op: record.op,
                next_access: NEXT_ACCESS_UNKNOWN,
            };
            let volume_bits = Request::block_key(record.volume, 0);
            self.first_key = volume_bits | first;
            self.last_key = volume_bits | last;
            self.next_key = self.first_key;
            self.passes_left = record.repeat;
            self.edge_count = 0;
            self.edge_given = 0;
            for (read, key) in [(edges.0, self.first_key), (edges.1, self.last_key)] {
                if read {
                    self.edge_reads[self.edge_count] = key;
                    self.edge_count += 1;
                }
            }
            return Ok(true);
        }
    }

    fn error(&self, message: impl Into<String>) -> TraceError {
        TraceError::new(self.source.path(), self.source.location(), message)
    }

    /// The next request of the record in progress — a misaligned write's edge reads, then its
    /// lines — advancing to the next pass or record as needed.
    #[inline]
    fn take(&mut self) -> Option<Request> {
        if self.passes_left == 0 {
            return None;
        }
        if self.edge_given < self.edge_count {
            let key = self.edge_reads[self.edge_given];
            self.edge_given += 1;
            return Some(Request {
                key,
                op: Op::Read,
                ..self.template
            });
        }
        let key = self.next_key;
        if key == self.last_key {
            self.passes_left -= 1;
            self.next_key = self.first_key;
            self.edge_given = 0;
        } else {
            self.next_key += 1;
        }
        Some(Request {
            key,
            ..self.template
        })
    }
}

impl<S: BlockRecordSource> TraceReader for BlockReader<S> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        if self.passes_left == 0 && !self.load_next_record()? {
            return Ok(None);
        }
        Ok(self.take())
    }

    fn read_batch(&mut self, batch: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        batch.clear();
        while batch.len() < max {
            if self.passes_left == 0 && !self.load_next_record()? {
                break;
            }
            while batch.len() < max {
                match self.take() {
                    Some(request) => batch.push(request),
                    None => break,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Records {
        path: PathBuf,
        records: std::vec::IntoIter<BlockRecord>,
    }

    impl BlockRecordSource for Records {
        fn next_record(&mut self) -> Result<Option<BlockRecord>, TraceError> {
            Ok(self.records.next())
        }
        fn path(&self) -> &Path {
            &self.path
        }
        fn location(&self) -> Location {
            Location::Line(1)
        }
    }

    fn record(volume: u32, offset_bytes: u64, length_bytes: u64, repeat: u32) -> BlockRecord {
        BlockRecord {
            time_ns: 7,
            volume,
            offset_bytes,
            length_bytes,
            unsplit_id: offset_bytes / 512,
            op: Op::Write,
            repeat,
        }
    }

    fn read_all(records: Vec<BlockRecord>, split: bool) -> Result<Vec<Request>, TraceError> {
        let source = Records {
            path: PathBuf::from("t"),
            records: records.into_iter(),
        };
        let mut reader = BlockReader::new(source, 4096, split);
        let mut all = Vec::new();
        let mut batch = Vec::new();
        loop {
            // A batch size that does not divide the line counts exercises resumption.
            reader.read_batch(&mut batch, 3)?;
            if batch.is_empty() {
                return Ok(all);
            }
            all.extend_from_slice(&batch);
        }
    }

    #[test]
    fn splits_into_touched_lines_with_volume_in_high_bits() {
        // Bytes 4096..12288 are lines 1 and 2 of volume 5, whole.
        let requests = read_all(vec![record(5, 4096, 8192, 1)], true).unwrap();
        let keys: Vec<u64> = requests.iter().map(|r| r.key).collect();
        let expected: Vec<u64> = (1..3).map(|line| Request::block_key(5, line)).collect();
        assert_eq!(keys, expected);
        assert!(requests
            .iter()
            .all(|r| r.size == 4096 && r.tenant == 5 && r.op == Op::Write && r.time_ns == 7));
    }

    #[test]
    fn flushes_give_no_request_split_or_not() {
        let flush = |length_bytes| BlockRecord {
            op: Op::Flush,
            ..record(0, 0, length_bytes, 1)
        };
        let records = vec![flush(0), record(0, 0, 4096, 1), flush(4096)];
        for split in [true, false] {
            let requests = read_all(records.clone(), split).unwrap();
            assert_eq!(requests.len(), 1, "split {split}");
            assert_eq!(requests[0].op, Op::Write);
        }
    }

    #[test]
    fn line_requests_counts_what_the_reader_gives() {
        for (offset, length, write, repeat) in [
            (4096, 8192, true, 1),
            (4000, 8192, true, 1),
            (4000, 4192, true, 2),
            (100, 200, true, 1),
            (4000, 8192, false, 3),
            (0, 1, true, 1),
        ] {
            let mut one = record(5, offset, length, repeat);
            one.op = if write { Op::Write } else { Op::Read };
            let given = read_all(vec![one], true).unwrap().len() as u64;
            assert_eq!(one.line_requests(4096), given, "{one:?}");
        }
        assert_eq!(record(5, 0, 0, 1).line_requests(4096), 0);
    }

    #[test]
    fn a_misaligned_write_first_reads_its_partial_edges() {
        let key = |line| Request::block_key(5, line);
        let ops = |requests: Vec<Request>| -> Vec<(u64, Op)> {
            requests.iter().map(|r| (r.key, r.op)).collect()
        };
        // Bytes 4000..12192: lines 0 and 2 partial, 1 whole.
        let both = read_all(vec![record(5, 4000, 8192, 1)], true).unwrap();
        assert_eq!(
            ops(both),
            vec![
                (key(0), Op::Read),
                (key(2), Op::Read),
                (key(0), Op::Write),
                (key(1), Op::Write),
                (key(2), Op::Write),
            ]
        );
        // Only the front partial: 4000..8192.
        let front = read_all(vec![record(5, 4000, 4192, 1)], true).unwrap();
        assert_eq!(
            ops(front),
            vec![(key(0), Op::Read), (key(0), Op::Write), (key(1), Op::Write)]
        );
        // Inside one line: one read, then the write.
        let inside = read_all(vec![record(5, 100, 200, 1)], true).unwrap();
        assert_eq!(ops(inside), vec![(key(0), Op::Read), (key(0), Op::Write)]);
        // Reads need nothing extra, and unsplit records are left alone.
        let mut read = record(5, 4000, 8192, 1);
        read.op = Op::Read;
        assert_eq!(read_all(vec![read], true).unwrap().len(), 3);
        assert_eq!(
            read_all(vec![record(5, 4000, 8192, 1)], false)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn unsplit_keeps_one_request_keyed_by_trace_offset() {
        let requests = read_all(vec![record(2, 8192, 1000, 1)], false).unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].key, Request::block_key(2, 16));
        assert_eq!(requests[0].size, 1000);
    }

    #[test]
    fn repeats_and_skips_empty_records() {
        let requests = read_all(
            vec![
                record(0, 0, 0, 1),
                record(0, 4096, 8192, 2),
                record(0, 0, 1, 1),
            ],
            true,
        )
        .unwrap();
        let keys: Vec<u64> = requests.iter().map(|r| r.key).collect();
        // The last record, one byte, reads its line before writing it.
        assert_eq!(keys, vec![1, 2, 1, 2, 0, 0]);
    }

    #[test]
    fn oversized_volume_and_block_are_errors() {
        let err = read_all(vec![record(1 << 20, 0, 1, 1)], true).unwrap_err();
        assert!(err.to_string().contains("volume id"), "{err}");
        let err = read_all(vec![record(0, 1 << 60, 1, 1)], true).unwrap_err();
        assert!(err.to_string().contains("block number"), "{err}");
        let err = read_all(vec![record(0, 0, 1 << 33, 1)], false).unwrap_err();
        assert!(err.to_string().contains("32-bit object size"), "{err}");
    }
}
