//! The timing model: when does an operation issued now complete?
//!
//! Each channel of each queue (one queue shared by reads and writes, or one per direction) is a
//! FIFO server. An access occupies its channel for its *service time* — the slower of the IOPS
//! and bandwidth limits for the granules it covers — and then spends the rest of the device's
//! unloaded latency in flight without holding the channel. So a device holds about
//! latency ÷ service accesses in flight before requests queue, and beyond that latency grows
//! linearly with the number outstanding: exactly Rule 1 of seed 000 §3.1.1 (Optane SSD 4 KiB
//! reads at QD 64 take 8× QD 8 and 11× QD 1 with a 10 µs latency and a 575K IOPS cap).

use std::collections::VecDeque;

use crate::spec::{DeviceSpec, DirectionSpec, GcSpec};

/// Direction of one device operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    Read,
    Write,
}

/// Sequential streams the stream table is sized for (fio-style runs use up to 32 jobs or QD
/// 32); with twice as many slots, colliding streams, which take each other's slot, are rare.
const WRITE_STREAMS: usize = 32;

/// Recent accesses remembered to find crowded ones (Rule 3): streams told apart at once.
const RECENT_ACCESSES: usize = 16;

/// Per-direction constants derived from the spec once.
#[derive(Clone, Copy, Debug)]
struct DirectionTiming {
    /// Channel time per granule moved, ns (the bandwidth limit).
    per_granule_ns: f64,
    /// Least channel time of any access, ns (the IOPS limit).
    per_access_ns: f64,
    /// Latency not spent holding the channel, ns.
    in_flight_ns: f64,
}

impl DirectionTiming {
    fn new(spec: &DeviceSpec, direction: &DirectionSpec) -> DirectionTiming {
        let (per_granule_ns, per_access_ns) = spec.channel_costs_ns(direction);
        DirectionTiming {
            per_granule_ns,
            per_access_ns,
            in_flight_ns: (direction.latency_ns - spec.channel_service_ns(direction, 1)).max(0.0),
        }
    }
}

/// When an access's channel took it up, when its first granule arrived and when it completed,
/// ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timed {
    pub start_ns: u64,
    pub first_ns: u64,
    pub done_ns: u64,
}

/// A device's state under load: when each channel frees up, and how much has been written (for
/// garbage collection). Operations must be submitted in non-decreasing time order.
#[derive(Clone, Debug)]
pub struct DeviceModel {
    spec: DeviceSpec,
    read: DirectionTiming,
    write: DirectionTiming,
    /// Channel time a written granule takes from readers, ns (0 without interference).
    interference_ns_per_granule: f64,
    /// The same for writes of at least `bulk_write_bytes` (the same as above when the spec
    /// draws no line between small and bulk writes).
    bulk_interference_ns_per_granule: f64,
    bulk_write_bytes: u64,
    /// Granules a write drain takes at once (0: writes interfere as they come).
    drain_granules: u64,
    /// Per channel: granules written since its last drain, and the read time they will take.
    undrained: Vec<(u64, f64)>,
    /// When each channel of each queue is next free, ns: the read (or shared) queue's channels
    /// first, then the write queue's.
    busy_until_ns: Vec<f64>,
    written_bytes: f64,
    /// Offsets just past recent writes, to tell sequential writes from random ones when several
    /// writers interleave (a flash controller keeps one open block per stream).
    write_stream_ends: Streams,
    /// Byte offsets split into granules, by shifts when the granularity is a power of two
    /// (every preset's is): this runs once per simulated operation.
    granules: GranuleMath,
    /// Byte offsets split into interleave units, the same way.
    interleave: GranuleMath,
    /// The same streams for reads, kept only when sequential reads are faster (Rule 2).
    read_stream_ends: Option<Box<Streams>>,
    /// Recent accesses' last granule, direction and end offset, kept only when crowded
    /// accesses cost more (Rule 3).
    recent: Option<Box<[(u64, IoKind, u64); RECENT_ACCESSES]>>,
    recent_next: usize,
    /// A spinning disk's head: where the last access ended and when queued accesses finish.
    disk: Option<Box<Disk>>,
}

/// Ends of recent sequential streams in a small direct-mapped table: one probe per access
/// (this runs once per simulated operation), a stream's slot taken over when another end
/// hashes to it.
#[derive(Clone, Debug)]
struct Streams {
    ends: [u64; STREAM_SLOTS],
}

/// Slots of a stream table: twice [`WRITE_STREAMS`].
const STREAM_SLOTS: usize = 2 * WRITE_STREAMS;

impl Streams {
    fn new() -> Streams {
        Streams {
            ends: [u64::MAX; STREAM_SLOTS],
        }
    }

    #[inline]
    fn slot(offset: u64) -> usize {
        (offset.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - STREAM_SLOTS.trailing_zeros()))
            as usize
    }

    /// True when an access at `offset` continues a stream; records it as ending at `end`.
    #[inline]
    fn continues(&mut self, offset: u64, end: u64) -> bool {
        let slot = Self::slot(offset);
        let continues = self.ends[slot] == offset;
        if continues {
            self.ends[slot] = u64::MAX;
        }
        self.ends[Self::slot(end)] = end;
        continues
    }
}

/// The mechanics of a spinning disk in ns (see [`crate::spec::MechanicalSpec`]).
#[derive(Clone, Debug)]
struct Disk {
    revolution_ns: f64,
    seek_ns: [f64; 2],
    /// Transfer time of one granule, reads then writes.
    per_granule_ns: [f64; 2],
    last_end: u64,
    /// Completion times of the accesses queued or in service, oldest first.
    queued: VecDeque<f64>,
}

/// Division by the granularity, by shift and mask when it is a power of two.
#[derive(Clone, Copy, Debug)]
enum GranuleMath {
    Shift(u32),
    Divide(u64),
}

impl GranuleMath {
    fn new(granularity: u32) -> GranuleMath {
        if granularity.is_power_of_two() {
            GranuleMath::Shift(granularity.trailing_zeros())
        } else {
            GranuleMath::Divide(u64::from(granularity))
        }
    }

    #[inline]
    fn index(self, offset: u64) -> u64 {
        match self {
            GranuleMath::Shift(shift) => offset >> shift,
            GranuleMath::Divide(granularity) => offset / granularity,
        }
    }

    #[inline]
    fn remainder(self, offset: u64) -> u64 {
        match self {
            GranuleMath::Shift(shift) => offset & ((1 << shift) - 1),
            GranuleMath::Divide(granularity) => offset % granularity,
        }
    }

    /// Granules needed to hold `bytes` (at least one).
    #[inline]
    fn count(self, bytes: u64) -> u64 {
        self.index(bytes + self.size() - 1).max(1)
    }

    #[inline]
    fn size(self) -> u64 {
        match self {
            GranuleMath::Shift(shift) => 1 << shift,
            GranuleMath::Divide(granularity) => granularity,
        }
    }
}

impl DeviceModel {
    /// An idle device, nothing written yet.
    pub fn new(spec: &DeviceSpec) -> DeviceModel {
        let queues = if spec.shared_queue { 1 } else { 2 };
        let per_granule = |interference: f64| {
            if spec.shared_queue {
                0.0
            } else {
                interference * f64::from(spec.granularity_bytes) / spec.read.bandwidth_gb_s
                    * f64::from(spec.channels)
            }
        };
        DeviceModel {
            read: DirectionTiming::new(spec, &spec.read),
            write: DirectionTiming::new(spec, &spec.write),
            interference_ns_per_granule: per_granule(spec.write_interference),
            bulk_interference_ns_per_granule: per_granule(
                spec.bulk_write_interference
                    .unwrap_or(spec.write_interference),
            ),
            bulk_write_bytes: spec.bulk_write_bytes.map_or(u64::MAX, u64::from),
            drain_granules: spec.write_drain_granules.map_or(0, u64::from),

            undrained: vec![(0, 0.0); spec.channels as usize],
            read_stream_ends: spec
                .sequential_read_speedup
                .map(|_| Box::new(Streams::new())),
            recent: spec
                .crowded_factors
                .map(|_| Box::new([(u64::MAX, IoKind::Read, u64::MAX); RECENT_ACCESSES])),
            recent_next: 0,
            disk: spec.mechanical.as_ref().map(|mechanical| {
                let per_granule = |direction: &DirectionSpec| {
                    f64::from(spec.granularity_bytes) / direction.bandwidth_gb_s
                };
                Box::new(Disk {
                    revolution_ns: mechanical.revolution_ns(),
                    seek_ns: [
                        mechanical.average_seek_read_ns,
                        mechanical.average_seek_write_ns,
                    ],
                    per_granule_ns: [per_granule(&spec.read), per_granule(&spec.write)],
                    last_end: u64::MAX,
                    queued: VecDeque::new(),
                })
            }),
            busy_until_ns: vec![0.0; queues * spec.channels as usize],
            written_bytes: 0.0,
            write_stream_ends: Streams::new(),
            granules: GranuleMath::new(spec.granularity_bytes),
            interleave: GranuleMath::new(spec.interleave_bytes.unwrap_or(spec.granularity_bytes)),
            spec: spec.clone(),
        }
    }

    /// The spec this model runs.
    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    /// Pretends `bytes` have already been written, as a long-running device would have (for
    /// garbage collection).
    pub fn precondition(&mut self, bytes: u64) {
        self.written_bytes = bytes as f64;
    }

    /// Issues an access of `bytes` at byte `offset` at time `now_ns`; returns when it completes,
    /// in ns. Calls must come in non-decreasing `now_ns` order.
    pub fn submit(&mut self, now_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> u64 {
        self.submit_timed(now_ns, kind, offset, bytes).done_ns
    }

    /// [`submit`](DeviceModel::submit), telling also when the access's channel takes it up: a
    /// posted write leaves its writer then (the memory path, [`crate::memory`]).
    pub(crate) fn submit_timed(
        &mut self,
        now_ns: u64,
        kind: IoKind,
        offset: u64,
        bytes: u32,
    ) -> Timed {
        if self.disk.is_some() {
            let done_ns = self.submit_to_disk(now_ns, kind, offset, bytes);
            return Timed {
                start_ns: done_ns,
                first_ns: done_ns,
                done_ns,
            };
        }
        let math = self.granules;
        let bytes = u64::from(bytes.max(1));
        let granules = math.count(bytes);
        let first_granule = math.index(offset);
        let end = offset + bytes;
        let touched = math.index(end - 1) - first_granule + 1;
        // Seed 000 §3.1.6: a request crossing a boundary it need not cross costs more, linearly
        // in the part it issues past the boundary.
        let misalign_factor = if touched > granules {
            let past_boundary = match math.remainder(end) {
                0 => math.size(),
                part => part,
            };
            1.0 + self.spec.misalign_penalty * float(past_boundary) / float(math.size())
        } else {
            1.0
        };
        let timing = match kind {
            IoKind::Read => self.read,
            IoKind::Write => self.write,
        };
        let mut service_ns = later(
            float(granules) * timing.per_granule_ns,
            timing.per_access_ns,
        ) * misalign_factor;
        let channels = self.spec.channels as usize;
        let channel = if channels == 1 {
            0
        } else {
            (self.interleave.index(offset) % channels as u64) as usize
        };
        let now = float(now_ns);
        // When the access may start at the earliest (a write may have to wait for readers).
        let mut earliest = now;
        if kind == IoKind::Write {
            if let Some(gc) = &self.spec.gc {
                let sequential = self.write_stream_ends.continues(offset, end);
                service_ns /= gc_efficiency(gc, self.written_bytes, sequential);
            }
            self.written_bytes += float(bytes);
            let interference_ns = if bytes >= self.bulk_write_bytes {
                self.bulk_interference_ns_per_granule
            } else {
                self.interference_ns_per_granule
            };
            if interference_ns > 0.0 {
                // The memory controller's write queue holds two drains: while readers are
                // further behind than that, it is full and the writer waits. So writes can
                // never book readers' time without end, whatever their rate.
                let allowance_ns = 2.0 * float(self.drain_granules.max(granules)) * interference_ns;
                earliest = later(now, self.busy_until_ns[channel] - allowance_ns);
                let start = later(self.busy_until_ns[channels + channel], earliest);
                let (undrained, read_ns) = &mut self.undrained[channel];
                *undrained += granules;
                *read_ns += float(granules) * interference_ns;
                if *undrained >= self.drain_granules {
                    let read_queue = &mut self.busy_until_ns[channel];
                    *read_queue = later(*read_queue, start) + *read_ns;
                    (*undrained, *read_ns) = (0, 0.0);
                }
            }
        }
        let mut in_flight_ns = timing.in_flight_ns * misalign_factor;
        if kind == IoKind::Read {
            if let (Some(streams), Some(speedup)) = (
                &mut self.read_stream_ends,
                self.spec.sequential_read_speedup,
            ) {
                if streams.continues(offset, end) {
                    // The whole unloaded latency shrinks; the channel time stays.
                    in_flight_ns = ((service_ns + in_flight_ns) / speedup - service_ns).max(0.0);
                }
            }
        }
        let queue = match kind {
            IoKind::Write if !self.spec.shared_queue => channels + channel,
            _ => channel,
        };
        let busy_until = &mut self.busy_until_ns[queue];
        let start = later(*busy_until, earliest);
        *busy_until = start + service_ns;
        if let (Some(recent), Some(factors)) = (&self.recent, self.spec.crowded_factors) {
            // Seed 000 §3.1.3: "sequential 1KB accesses must introduce contention": an access
            // that continues a recent one inside the same chunk crowds it.
            let crowded = recent.iter().any(|&(last_granule, other, other_end)| {
                other_end == offset && last_granule == first_granule && other == kind
            });
            if crowded {
                let factor = factors[usize::from(kind == IoKind::Write)];
                in_flight_ns = (service_ns + in_flight_ns) * factor - service_ns;
            }
        }
        let done = start + service_ns + in_flight_ns;
        if let Some(recent) = &mut self.recent {
            recent[self.recent_next] = (math.index(end - 1), kind, end);
            self.recent_next = (self.recent_next + 1) % RECENT_ACCESSES;
        }
        Timed {
            start_ns: ceil_ns(start),
            first_ns: ceil_ns(start + service_ns / float(touched) + in_flight_ns),
            done_ns: ceil_ns(done),
        }
    }

    /// A spinning disk's access: a seek and the rotational wait unless it continues where the
    /// last access ended, then the transfer, one access at a time (see
    /// [`crate::spec::MechanicalSpec`]).
    fn submit_to_disk(&mut self, now_ns: u64, kind: IoKind, offset: u64, bytes: u32) -> u64 {
        let granules = self.granules.count(u64::from(bytes.max(1)));
        let end = offset + u64::from(bytes.max(1));
        let now = float(now_ns);
        let disk = self.disk.as_mut().expect("a disk");
        while disk.queued.front().is_some_and(|&done| done <= now) {
            disk.queued.pop_front();
        }
        let direction = usize::from(kind == IoKind::Write);
        let positioning_ns = if offset == disk.last_end {
            0.0
        } else {
            let candidates = disk.queued.len() as f64 + 1.0;
            disk.seek_ns[direction] + disk.revolution_ns / (candidates + 1.0)
        };
        disk.last_end = end;
        let service_ns = positioning_ns + float(granules) * disk.per_granule_ns[direction];
        let busy_until = &mut self.busy_until_ns[0];
        let done = later(*busy_until, now) + service_ns;
        *busy_until = done;
        disk.queued.push_back(done);
        ceil_ns(done)
    }
}

/// The larger of two times or durations, none of them NaN: `f64::max` without the NaN
/// handling, which costs a handful of instructions on every simulated operation.
#[inline]
fn later(a: f64, b: f64) -> f64 {
    if a >= b {
        a
    } else {
        b
    }
}

/// Rounds a completion time up to whole nanoseconds (`f64::ceil` is a library call on baseline
/// x86-64, and this runs once per operation).
#[inline]
fn ceil_ns(time_ns: f64) -> u64 {
    let whole = time_ns as i64;
    let whole = if (whole as f64) < time_ns {
        whole + 1
    } else {
        whole
    };
    whole as u64
}

/// `value as f64` by way of `i64`: one instruction on baseline x86-64, where converting an
/// unsigned integer takes several, and exact alike for the times, sizes and counts of a model,
/// all far below 2^63. This runs a few times per simulated operation.
#[inline]
fn float(value: u64) -> f64 {
    value as i64 as f64
}

/// Fraction of peak write throughput left after `written_bytes` (seed 000 §3.1.7: after the
/// device fills, sustained writes decline to 7% of the peak for random writes).
fn gc_efficiency(gc: &GcSpec, written_bytes: f64, sequential: bool) -> f64 {
    let floor = if sequential {
        gc.sequential_floor
    } else {
        gc.random_floor
    };
    let progress = ((written_bytes / 1e9 - gc.start_after_gb) / gc.decline_over_gb).clamp(0.0, 1.0);
    1.0 - (1.0 - floor) * progress
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssd() -> DeviceSpec {
        DeviceSpec::from_toml(
            r#"
name = "ssd"
granularity_bytes = 4096
shared_queue = true
misalign_penalty = 0.24
[read]
latency_ns = 10000
bandwidth_gb_s = 2.5
max_iops = 575000
[write]
latency_ns = 10000
bandwidth_gb_s = 2.3
max_iops = 575000
"#,
            "ssd",
        )
        .unwrap()
    }

    #[test]
    fn unloaded_access_takes_the_latency() {
        let mut model = DeviceModel::new(&ssd());
        assert_eq!(model.submit(0, IoKind::Read, 0, 4096), 10_000);
        // Idle again long after: same latency.
        assert_eq!(model.submit(1_000_000, IoKind::Read, 8192, 4096), 1_010_000);
    }

    #[test]
    fn back_to_back_accesses_queue_for_service() {
        let mut model = DeviceModel::new(&ssd());
        let service: f64 = 1e9 / 575_000.0;
        let first = model.submit(0, IoKind::Read, 0, 4096);
        let second = model.submit(0, IoKind::Read, 4096, 4096);
        assert_eq!(first, 10_000);
        assert_eq!(second, (10_000.0 + service).ceil() as u64);
    }

    #[test]
    fn small_access_costs_a_whole_granule() {
        let mut small = DeviceModel::new(&ssd());
        let mut whole = DeviceModel::new(&ssd());
        for i in 0..100 {
            assert_eq!(
                small.submit(0, IoKind::Read, i * 4096, 512),
                whole.submit(0, IoKind::Read, i * 4096, 4096)
            );
        }
    }

    #[test]
    fn misaligned_access_pays_for_its_overhang() {
        let mut model = DeviceModel::new(&ssd());
        let aligned = model.submit(0, IoKind::Read, 0, 4096) as f64;
        let half = model.submit(1_000_000, IoKind::Read, 2048, 4096) as f64 - 1_000_000.0;
        assert!((half / aligned - 1.12).abs() < 1e-3, "{half} vs {aligned}");
        // A one-sector read never crosses a boundary.
        let sector = model.submit(2_000_000, IoKind::Read, 3584, 512) as f64 - 2_000_000.0;
        assert_eq!(sector, aligned);
    }

    #[test]
    fn separate_queues_do_not_delay_each_other_without_interference() {
        let mut spec = ssd();
        spec.shared_queue = false;
        let mut model = DeviceModel::new(&spec);
        for i in 0..10 {
            model.submit(0, IoKind::Write, i * 4096, 4096);
        }
        assert_eq!(model.submit(0, IoKind::Read, 0, 4096), 10_000);
        spec.write_interference = 8.0;
        let mut model = DeviceModel::new(&spec);
        model.submit(0, IoKind::Write, 0, 4096);
        let charge: f64 = 8.0 * 4096.0 / 2.5;
        assert_eq!(
            model.submit(0, IoKind::Read, 0, 4096),
            (charge + 10_000.0).ceil() as u64
        );
    }

    #[test]
    fn bulk_writes_interfere_at_their_own_rate() {
        let mut spec = ssd();
        spec.shared_queue = false;
        spec.write_interference = 8.0;
        spec.bulk_write_interference = Some(1.5);
        spec.bulk_write_bytes = Some(8192);
        let read_after_write = |bytes: u32| {
            let mut model = DeviceModel::new(&spec);
            model.submit(0, IoKind::Write, 0, bytes);
            model.submit(0, IoKind::Read, 1 << 20, 4096) as f64 - 10_000.0
        };
        // A 4 KiB write is small: 8 bytes of reading per byte; an 8 KiB one is bulk.
        assert!((read_after_write(4096) - 8.0 * 4096.0 / 2.5).abs() <= 1.0);
        assert!((read_after_write(8192) - 1.5 * 8192.0 / 2.5).abs() <= 1.0);
    }

    #[test]
    fn gc_slows_writes_after_the_device_fills() {
        let gc = GcSpec {
            start_after_gb: 1.0,
            decline_over_gb: 2.0,
            random_floor: 0.1,
            sequential_floor: 0.5,
        };
        assert_eq!(gc_efficiency(&gc, 0.5e9, false), 1.0);
        assert!((gc_efficiency(&gc, 2e9, false) - 0.55).abs() < 1e-12);
        assert!((gc_efficiency(&gc, 9e9, false) - 0.1).abs() < 1e-12);
        assert!((gc_efficiency(&gc, 9e9, true) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn interleaved_sequential_writers_are_each_sequential() {
        let mut spec = ssd();
        spec.gc = Some(GcSpec {
            start_after_gb: 0.0,
            decline_over_gb: 1e-9,
            random_floor: 0.1,
            sequential_floor: 0.5,
        });
        let mut model = DeviceModel::new(&spec);
        // Four writers at distant regions, each walking forward; after each one's first write,
        // every write continues a stream and pays the sequential floor.
        let mut now = 0;
        let mut latencies = Vec::new();
        for step in 0..10u64 {
            for writer in 0..4u64 {
                now += 1_000_000;
                let offset = (writer << 30) | (step * 4096);
                latencies.push(model.submit(now, IoKind::Write, offset, 4096) - now);
            }
        }
        let random = latencies[1];
        assert!(
            latencies[4..].iter().all(|&latency| latency < random),
            "{latencies:?}"
        );
    }
}
