//! Plan-stage timing: when the operations of a [`Plan`] complete on device models, and when the
//! client is answered. Written once for both executors: the timed simulator times one stage at
//! a time as its events come due ([`time_stage`]); an executor on the real clock, such as the
//! live volume pacing its devices like presets, times a whole plan at once ([`time_plan`]).
//!
//! Every operation of a stage is submitted when the stage starts; the stage ends when its last
//! operation completes (seed 000 §4.2.1's model puts a miss's fetch and install one after the
//! other, Eq 4.1). The stage that answers the client also carries the request's software cost
//! ([`SoftwareCost`]): the CPU time of copying the data and of the cache's bookkeeping, which
//! holds no device but delays the answer, so a memory cache needs several outstanding requests
//! to keep its device busy.
//!
//! Devices are reached through a closure, not a slice of models: the live volume shares each
//! device's model between threads behind a lock, and it maps cache lines to slots itself, so
//! the caller computes each operation's device offset.

use serde::{Deserialize, Serialize};

use crate::plan::{DeviceOp, Plan};

/// CPU time a request costs besides its device operations: the cache's per-request work (the
/// lookup, metadata updates, submitting and completing I/O) and the copy of its data. Charged
/// once per request, on the stage that answers it, holding no device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SoftwareCost {
    /// Fixed cost of every request, ns.
    pub per_request_ns: f64,
    /// Cost per KiB of the request's data (the copy), ns.
    pub per_kib_ns: f64,
}

impl SoftwareCost {
    /// No software cost: requests cost only their device time.
    pub const NONE: SoftwareCost = SoftwareCost {
        per_request_ns: 0.0,
        per_kib_ns: 0.0,
    };

    /// The cost of a request of `bytes`, whole ns (rounded to nearest).
    #[inline]
    pub fn request_ns(&self, bytes: u32) -> u64 {
        let cost = self.per_request_ns + self.per_kib_ns * f64::from(bytes) / 1024.0;
        (cost + 0.5) as u64
    }
}

/// Times stage `stage` of `plan`, started at `start_ns`: submits each operation through
/// `submit(start_ns, op)`, which returns when it completes, and tells `completed(op, latency)`
/// each operation's latency from submission to completion (what controllers with feedback
/// take in `on_device_op`). Returns when the stage ends: its last completion, plus
/// `software_ns` when it is the stage that answers the client (`software_ns` is 0 for work
/// that answers nobody, such as cleaning).
#[inline(always)]
pub fn time_stage<S, C>(
    plan: &Plan,
    stage: usize,
    start_ns: u64,
    software_ns: u64,
    submit: &mut S,
    completed: &mut C,
) -> u64
where
    S: FnMut(u64, &DeviceOp) -> u64,
    C: FnMut(&DeviceOp, u64),
{
    let mut end_ns = start_ns;
    for op in plan.stage(stage) {
        let done_ns = submit(start_ns, op);
        completed(op, done_ns.saturating_sub(start_ns));
        end_ns = end_ns.max(done_ns);
    }
    if stage + 1 == plan.reply_after() {
        end_ns += software_ns;
    }
    end_ns
}

/// When a whole plan's client is answered and when its last stage ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanTimes {
    /// The answer goes out (the start, for a plan without operations).
    pub reply_ns: u64,
    /// The last stage, background work included, ends.
    pub end_ns: u64,
}

/// Times every stage of `plan` one after the other from `start_ns`, as [`time_stage`] does
/// stage by stage. A plan without operations is answered at once, without software cost, as
/// the simulator answers it.
pub fn time_plan<S, C>(
    plan: &Plan,
    start_ns: u64,
    software_ns: u64,
    submit: &mut S,
    completed: &mut C,
) -> PlanTimes
where
    S: FnMut(u64, &DeviceOp) -> u64,
    C: FnMut(&DeviceOp, u64),
{
    let reply_after = plan.reply_after();
    let mut times = PlanTimes {
        reply_ns: start_ns,
        end_ns: start_ns,
    };
    for stage in 0..plan.stage_count() {
        times.end_ns = time_stage(plan, stage, times.end_ns, software_ns, submit, completed);
        if stage < reply_after {
            times.reply_ns = times.end_ns;
        }
    }
    times
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{test_op as op, IoKind};

    /// Device 0 takes 10 ns per operation, device 1 takes 100, each a FIFO server.
    fn devices() -> impl FnMut(u64, &DeviceOp) -> u64 {
        let mut busy_until = [0u64; 2];
        move |now, op| {
            let cost = if op.device == 0 { 10 } else { 100 };
            let busy = &mut busy_until[usize::from(op.device)];
            *busy = (*busy).max(now) + cost;
            *busy
        }
    }

    #[test]
    fn a_stage_ends_with_its_slowest_operation_and_reports_each() {
        let mut plan = Plan::new();
        plan.push(op(0, IoKind::Read));
        plan.push(op(1, IoKind::Read));
        plan.push(op(0, IoKind::Write));
        let mut seen = Vec::new();
        let end = time_stage(&plan, 0, 1000, 0, &mut devices(), &mut |op, latency| {
            seen.push((op.device, latency))
        });
        assert_eq!(end, 1100);
        assert_eq!(seen, [(0, 10), (1, 100), (0, 20)]);
    }

    /// When `plan`, started at `start_ns` with `software_ns` of software cost, is answered and
    /// when it ends, as `(reply, end)`.
    fn times(plan: &Plan, start_ns: u64, software_ns: u64) -> (u64, u64) {
        let times = time_plan(plan, start_ns, software_ns, &mut devices(), &mut |_, _| {});
        (times.reply_ns, times.end_ns)
    }

    #[test]
    fn software_cost_delays_the_answer_and_what_follows_it() {
        let mut plan = Plan::new();
        plan.push(op(1, IoKind::Read));
        plan.reply_here();
        plan.push(op(0, IoKind::Write));
        assert_eq!(times(&plan, 0, 7), (107, 117));
        assert_eq!(times(&plan, 0, 0), (100, 110));
    }

    #[test]
    fn without_reply_here_the_answer_waits_for_every_stage() {
        let mut plan = Plan::new();
        plan.push(op(1, IoKind::Read));
        plan.end_stage();
        plan.push(op(0, IoKind::Write));
        assert_eq!(times(&plan, 0, 5), (115, 115));
        assert_eq!(times(&Plan::new(), 40, 5), (40, 40));
    }

    #[test]
    fn software_cost_counts_per_request_and_per_kib() {
        let cost = SoftwareCost {
            per_request_ns: 2000.0,
            per_kib_ns: 100.0,
        };
        assert_eq!(cost.request_ns(4096), 2400);
        assert_eq!(cost.request_ns(65536), 8400);
        assert_eq!(SoftwareCost::NONE.request_ns(65536), 0);
    }
}
