//! The CPU's path to byte-addressable memory (docs/architecture.md, "The device layer"; seed 000
//! §5.1.2.1, Table 5.2): which 64 B lines a load or store moves between the CPU and the device,
//! in what batches, and how long its thread waits. The device model below it sees only the lines.
//!
//! - A **load** fetches its demand lines and what the prefetcher adds: the other line of each
//!   128 B pair, and, once an access runs past `streamer_trigger_lines` lines, the streamer's
//!   `streamer_ahead_lines` beyond its end, never past its page. Software counting the bytes it
//!   asked for sees only part of the traffic (seed 000 §5.1.2.3: 60% for 1 KiB random loads).
//! - Without the prefetcher a load fetches `fill_buffer_lines` lines at a time, each batch as
//!   the last starts to arrive: a 4 KiB load waits six rounds. A non-temporal load does the
//!   same after a setup.
//! - A **non-temporal store** posts its lines to the memory controller's write queue and goes
//!   on; it waits only while the queue is backed up (its write has not started).
//! - A cached **store** reads its lines for ownership, and its dirty lines later leave the cache
//!   one at a time at eviction, each a separate write of a whole media unit: random stores
//!   write the media several times over, which is why seed 000 §5.2.5 uses NT stores. The
//!   store buffer lets the thread go on unless those queues are backed up.
//! - **Store + clwb** flushes the lines right after the read for ownership, together (one
//!   write), and waits for the flush.
//!
//! A later batch or a flush is booked at its own, later, issue time: the model takes it as it
//! takes accesses of threads that raced to it, queued behind whatever its channel holds.

use crate::model::{DeviceModel, IoKind, Timed};
use crate::spec::MemoryPathSpec;

/// One load or store instruction family (seed 000 §5.1.2.1: "loads and stores with CPU caching
/// and prefetching; loads and stores with prefetching disabled; non-temporal (NT) operations
/// that bypass the CPU cache entirely").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryOp {
    Load,
    LoadNoPrefetch,
    NtLoad,
    Store,
    StoreClwb,
    NtStore,
}

impl MemoryOp {
    /// Table 5.2's column name.
    pub fn name(self) -> &'static str {
        match self {
            MemoryOp::Load => "load",
            MemoryOp::LoadNoPrefetch => "no-prefetch load",
            MemoryOp::NtLoad => "NT load",
            MemoryOp::Store => "store",
            MemoryOp::StoreClwb => "store+clwb",
            MemoryOp::NtStore => "NT store",
        }
    }

    /// How a PM cache moves its values (seed 000 §5.2.5): regular loads, which the prefetcher
    /// helps, and non-temporal stores, which skip the read for ownership and the write-backs.
    pub fn for_values(kind: IoKind) -> MemoryOp {
        match kind {
            IoKind::Read => MemoryOp::Load,
            IoKind::Write => MemoryOp::NtStore,
        }
    }

    /// The direction of the data: loads read, stores write.
    pub fn kind(self) -> IoKind {
        match self {
            MemoryOp::Load | MemoryOp::LoadNoPrefetch | MemoryOp::NtLoad => IoKind::Read,
            MemoryOp::Store | MemoryOp::StoreClwb | MemoryOp::NtStore => IoKind::Write,
        }
    }
}

/// What one load or store did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryAccess {
    /// When its thread may go on, ns.
    pub done_ns: u64,
    /// 64 B lines moved between the CPU and the device, both ways: what a memory controller's
    /// counters see, prefetches and write-backs included.
    pub lines_moved: u64,
}

impl MemoryPathSpec {
    /// Lines `[first, last]` of a load, widened by the prefetcher.
    fn prefetched(&self, first: u64, last: u64) -> (u64, u64) {
        let (mut first, mut last) = (first, last);
        if self.adjacent_line_prefetch {
            first &= !1;
            last |= 1;
        }
        let demand = last - first + 1;
        if demand >= u64::from(self.streamer_trigger_lines) {
            let lines_per_page = u64::from(self.page_bytes / self.line_bytes).max(1);
            let page_last = (last / lines_per_page + 1) * lines_per_page - 1;
            last = (last + u64::from(self.streamer_ahead_lines)).min(page_last);
        }
        (first, last)
    }

    /// Accesses of `bytes` one thread keeps in flight: as many as its line fill buffers hold,
    /// at least one (seed 000 Table 5.2's single-thread 256 B loads move 3× what one at a time
    /// would); one at a time for a non-temporal load (one streaming buffer) and for a store
    /// with clwb (the fence after the flush waits for it).
    pub fn thread_in_flight(&self, op: MemoryOp, bytes: u32) -> u32 {
        if matches!(op, MemoryOp::NtLoad | MemoryOp::StoreClwb) {
            return 1;
        }
        let lines = bytes.max(1).div_ceil(self.line_bytes);
        (self.fill_buffer_lines / lines).max(1)
    }
}

impl DeviceModel {
    /// Submits `bytes` at `offset` as the memory controller does, one piece per interleave unit
    /// on that unit's channel (a 64 KiB store streams to every DIMM of the set, not to one):
    /// when the first piece started, the first data arrived and the last piece completed.
    fn submit_interleaved(&mut self, now_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> Timed {
        let unit = u64::from(self.spec().interleave_bytes.unwrap_or(u32::MAX));
        let end = offset + u64::from(bytes.max(1));
        let mut at = offset;
        let mut whole: Option<Timed> = None;
        while at < end {
            let piece_end = ((at / unit + 1) * unit).min(end);
            let piece = self.submit_timed(now_ns, kind, at, (piece_end - at) as u32);
            whole = Some(match whole {
                None => piece,
                Some(whole) => Timed {
                    start_ns: whole.start_ns.min(piece.start_ns),
                    first_ns: whole.first_ns.min(piece.first_ns),
                    done_ns: whole.done_ns.max(piece.done_ns),
                },
            });
            at = piece_end;
        }
        whole.expect("at least one byte")
    }

    /// Issues a load or store of `bytes` at `offset` at `now_ns` through the CPU's memory path
    /// (the spec's `[memory]`; without one, a plain access of the data's direction).
    pub fn access(&mut self, now_ns: u64, op: MemoryOp, offset: u64, bytes: u32) -> MemoryAccess {
        let Some(path) = self.spec().memory else {
            let done_ns = self.submit(now_ns, op.kind(), offset, bytes);
            return MemoryAccess {
                done_ns,
                lines_moved: u64::from(bytes.max(1).div_ceil(64)),
            };
        };
        let line = u64::from(path.line_bytes);
        let first = offset / line;
        let last = (offset + u64::from(bytes.max(1)) - 1) / line;
        let demand = last - first + 1;
        let cpu_ns = path.cpu_ns as u64;
        let posted_ns = now_ns + (demand as f64 * path.post_ns_per_line) as u64;
        let span = |first: u64, last: u64| (first * line, ((last - first + 1) * line) as u32);
        match op {
            MemoryOp::Load => {
                let (first, last) = path.prefetched(first, last);
                let (at, length) = span(first, last);
                MemoryAccess {
                    done_ns: self
                        .submit_interleaved(now_ns, IoKind::Read, at, length)
                        .done_ns
                        + cpu_ns,
                    lines_moved: last - first + 1,
                }
            }
            MemoryOp::LoadNoPrefetch | MemoryOp::NtLoad => {
                let mut at_ns = now_ns;
                if op == MemoryOp::NtLoad {
                    at_ns += path.nt_load_setup_ns as u64;
                }
                // Each batch goes out as the one before starts to arrive (its first line frees
                // a fill buffer); the access is done when the last batch is.
                let batch = u64::from(path.fill_buffer_lines.max(1));
                let mut next = first;
                let mut done_ns = at_ns;
                while next <= last {
                    let batch_last = (next + batch - 1).min(last);
                    let (at, length) = span(next, batch_last);
                    let read = self.submit_interleaved(at_ns, IoKind::Read, at, length);
                    (at_ns, done_ns) = (read.first_ns, read.done_ns);
                    next = batch_last + 1;
                }
                MemoryAccess {
                    done_ns: done_ns + cpu_ns,
                    lines_moved: demand,
                }
            }
            MemoryOp::NtStore => {
                let write = self.submit_interleaved(now_ns, IoKind::Write, offset, bytes);
                MemoryAccess {
                    done_ns: posted_ns.max(write.start_ns),
                    lines_moved: demand,
                }
            }
            MemoryOp::Store => {
                let (read_first, read_last) = path.prefetched(first, last);
                let (at, length) = span(read_first, read_last);
                // The store retires into the store buffer: the read for ownership takes the
                // device's time, not the thread's, and the write-backs (at eviction, later)
                // hold it only while the write queue is backed up (the first has not started).
                self.submit_interleaved(now_ns, IoKind::Read, at, length);
                let mut write_backs_start_ns = u64::MAX;
                for line_index in first..=last {
                    let write =
                        self.submit_timed(now_ns, IoKind::Write, line_index * line, line as u32);
                    write_backs_start_ns = write_backs_start_ns.min(write.start_ns);
                }
                MemoryAccess {
                    done_ns: posted_ns.max(write_backs_start_ns),
                    lines_moved: read_last - read_first + 1 + demand,
                }
            }
            MemoryOp::StoreClwb => {
                let (read_first, read_last) = path.prefetched(first, last);
                let (at, length) = span(read_first, read_last);
                // The lines are flushed as they come in for ownership, and the fence waits
                // until the last is posted to the write queue.
                let owned_ns = self
                    .submit_interleaved(now_ns, IoKind::Read, at, length)
                    .done_ns;
                let write = self.submit_interleaved(owned_ns, IoKind::Write, offset, bytes);
                let flushed_ns = owned_ns + (demand as f64 * path.post_ns_per_line) as u64;
                MemoryAccess {
                    done_ns: flushed_ns.max(write.start_ns),
                    lines_moved: read_last - read_first + 1 + demand,
                }
            }
        }
    }
}
