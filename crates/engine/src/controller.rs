//! The small trait between the engine and its executors.

use heterarchy_trace::Request;

use crate::admission::TuningHistory;
use crate::plan::Plan;

/// What a controller decided for one request, besides its plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// The cache tier that held the request's line or object (a hit), or `None` (a miss: only
    /// the backing store had it).
    pub hit_tier: Option<u8>,
    /// The device a read's data comes from (`None` for writes and discards): where NHC's
    /// `load_admit` sent a hit, for instance.
    pub source: Option<u8>,
}

/// A client's request answered: the feedback admission tuners measure (seed 000 §4.3.3, "f is
/// a function that measures the target metric").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// When the answer went out.
    pub now_ns: u64,
    /// From the request's arrival to its answer.
    pub latency_ns: u64,
    /// The request's size.
    pub bytes: u32,
}

/// Counters a controller keeps over its life; executors difference them to measure intervals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerStats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Requests whose line was in some cache tier.
    pub hits: u64,
    /// Hits per cache tier (index 0 is the top tier).
    pub hits_per_tier: Vec<u64>,
    /// Lines installed into each cache tier (misses admitted, promotions, demotions).
    pub installs_per_tier: Vec<u64>,
    /// Lines evicted from each cache tier.
    pub evictions_per_tier: Vec<u64>,
    /// Dirty lines written back to the tier below (by eviction or by the cleaner).
    pub writebacks: u64,
    /// Dirty lines right now, over all cache tiers.
    pub dirty_lines: u64,
}

impl ControllerStats {
    /// Fraction of requests that hit (0 for none).
    pub fn hit_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.hits as f64 / self.requests as f64
        }
    }
}

/// Which measurements a controller wants from its executor, asked once before a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feedback {
    /// [`Controller::on_reply`] for every answered request.
    pub replies: bool,
    /// [`Controller::on_device_op`] for every device operation.
    pub device_ops: bool,
    /// [`Controller::background`] calls: false for a controller that never has background work
    /// (a cache that writes nothing back), which executors then never ask.
    pub background: bool,
}

/// A hierarchy's decision maker: caching with Open CAS modes and admission tuning (NHC and the
/// prior approaches), or static splitting.
///
/// Devices are numbered from the top: 0 .. `device_count() - 1`, the last being the backing
/// store. Controllers keep no clock of their own; the executor passes virtual or real time.
pub trait Controller: Send {
    /// Number of devices, cache tiers and backing store.
    fn device_count(&self) -> usize;

    /// Decides how to serve `request` arriving at `now_ns`, writing the device operations into
    /// `plan` (which the caller has cleared). Cache metadata changes at once, at decision time.
    fn plan(&mut self, request: &Request, now_ns: u64, plan: &mut Plan) -> Decision;

    /// Background work (cleaning dirty lines) due at `now_ns`, written into `plan`; returns when
    /// to call again (`None`: not until the next request). Executors call it at the time it
    /// asked for, or after requests when it asked for nothing; never when
    /// [`feedback`](Self::feedback) says it has no background work.
    fn background(&mut self, now_ns: u64, plan: &mut Plan) -> Option<u64>;

    /// Counters since creation.
    fn stats(&self) -> &ControllerStats;

    /// What to report to [`on_reply`](Self::on_reply) and
    /// [`on_device_op`](Self::on_device_op) (nothing, unless the controller tunes), and
    /// whether to call [`background`](Self::background) (not by default).
    fn feedback(&self) -> Feedback {
        Feedback::default()
    }

    /// Tells the controller a client's request was answered. Executors call it for every
    /// request, warm-up included, in the order the answers go out, when
    /// [`feedback`](Self::feedback) asks.
    #[inline]
    fn on_reply(&mut self, _reply: &Reply) {}

    /// A device operation of some plan, of `bytes`, took `latency_ns` from its submission to
    /// its completion, queueing included (the block layer's view of that device).
    #[inline]
    fn on_device_op(&mut self, _device: u8, _bytes: u32, _latency_ns: u64) {}

    /// The admission tuner's course so far, for controllers that tune.
    fn tuning_history(&self) -> Option<&TuningHistory> {
        None
    }

    /// A hint that `key` will be planned in about `distance` requests, so its metadata can start
    /// loading into the CPU cache (the policies' prefetch methods). Results never depend on it.
    #[inline]
    fn prefetch(&self, _key: u64, _distance: usize) {}
}
