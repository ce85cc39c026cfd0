//! The discrete-event executor: a virtual clock, device models, and a controller's plans.
//!
//! A stage's operations are submitted to their device models the moment the stage starts, and
//! each model answers at once when the operation will complete (its queues are FIFO), so the
//! only events are stage completions, request arrivals and the controller's background wake-ups.
//! Events are taken in (time, slot) order, which makes runs deterministic.

use hdrhistogram::Histogram;
use heterarchy_device::{DeviceModel, DeviceSpec, IoKind};
use heterarchy_engine::{
    time_stage, Controller, Feedback, Plan, Reply, SoftwareCost, TuningHistory,
};
use heterarchy_policy::eviction::{
    PREFETCH_NEIGHBOUR_DISTANCE, PREFETCH_NODE_DISTANCE, PREFETCH_SLOT_DISTANCE,
};
use heterarchy_trace::read::TraceReader;
use heterarchy_trace::request::BLOCK_NUMBER_BITS;
use heterarchy_trace::{Request, TraceError};
use serde::Serialize;

use super::events::EventQueue;
use super::series::{Series, TimeSeries};

/// Longest latency the histogram tells apart; longer ones count as this (an hour).
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// How requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Arrivals {
    /// `outstanding` clients, each issuing its next request when the last is answered.
    Closed { outstanding: u32 },
    /// A closed loop whose number of clients changes over time (a diurnal load, say): each
    /// step's count holds from its time until the next step's. Clients beyond the count
    /// leave when their request is answered; new ones start at once.
    Varying { steps: Vec<ClientStep> },
    /// Requests arrive at their trace timestamps divided by `speedup`, whatever is in flight.
    Open { speedup: f64 },
}

impl Arrivals {
    /// The clients of a closed loop, step by step (never empty: no step means one client);
    /// `None` for open-loop arrivals.
    fn client_steps(&self) -> Option<Vec<ClientStep>> {
        let one = |outstanding: u32| ClientStep {
            from_ns: 0,
            outstanding,
        };
        match self {
            Arrivals::Closed { outstanding } => Some(vec![one((*outstanding).max(1))]),
            Arrivals::Varying { steps } if steps.is_empty() => Some(vec![one(1)]),
            Arrivals::Varying { steps } => Some(steps.clone()),
            Arrivals::Open { .. } => None,
        }
    }
}

/// From `from_ns` on, `outstanding` clients.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClientStep {
    pub from_ns: u64,
    pub outstanding: u32,
}

/// What to run and what to measure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Load {
    pub arrivals: Arrivals,
    /// Requests taken from the source at most (the source may end sooner).
    pub max_requests: u64,
    /// Requests at the start that warm the caches but are not measured.
    pub warmup_requests: u64,
    /// Requests issued before this virtual time are not measured either, ns.
    pub warmup_ns: u64,
    /// After the warm-up requests, this much more virtual time goes unmeasured (a tuner
    /// settles), ns.
    pub settle_ns: u64,
    /// Measure this long, then issue no more requests, ns (`None`: until the source or
    /// another limit ends the run).
    pub measure_ns: Option<u64>,
    /// No request is issued at or after this virtual time, ns (`None`: no limit).
    pub max_time_ns: Option<u64>,
    /// CPU time each request costs besides its device operations, charged on the stage that
    /// answers it (see [`heterarchy_engine::timing`]).
    pub software: SoftwareCost,
}

impl Load {
    /// A closed loop of `outstanding` clients over `warmup_requests` + `requests` requests.
    pub fn closed(outstanding: u32, requests: u64, warmup_requests: u64) -> Load {
        Load {
            arrivals: Arrivals::Closed { outstanding },
            max_requests: warmup_requests.saturating_add(requests),
            warmup_requests,
            warmup_ns: 0,
            settle_ns: 0,
            measure_ns: None,
            max_time_ns: None,
            software: SoftwareCost::NONE,
        }
    }
}

/// One part of a workload: requests from `reader`, from virtual time `from_ns` on (the first
/// phase's time is ignored). A new phase drops what is left of the last.
pub struct Phase<'a> {
    pub from_ns: u64,
    pub reader: &'a mut dyn TraceReader,
}

/// One device's share of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceResult {
    pub name: String,
    /// `tier 0`, `tier 1`, … or `backing store`.
    pub role: String,
    pub read_ops: u64,
    pub write_ops: u64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
}

/// What a timed run measured, after warm-up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimedResult {
    /// Requests answered in the measured window.
    pub requests: u64,
    /// Virtual seconds from the first measured request's arrival to the last answer.
    pub duration_s: f64,
    pub throughput_ops: f64,
    pub throughput_bytes_per_s: f64,
    pub mean_latency_us: f64,
    pub p50_latency_us: f64,
    pub p99_latency_us: f64,
    pub p999_latency_us: f64,
    pub max_latency_us: f64,
    /// Fraction of measured requests whose data was in a cache tier.
    pub hit_ratio: f64,
    /// Fraction of measured requests whose data each cache tier held, from the top: the
    /// shares sum to `hit_ratio`.
    pub tier_hit_ratios: Vec<f64>,
    pub devices: Vec<DeviceResult>,
    pub series: TimeSeries,
    /// What the admission tuner did, over the whole run (warm-up included), if it tunes.
    pub tuning: Option<TuningHistory>,
}

/// A request in flight: its plan and how far it has got. A slot keeps its plan's memory from
/// request to request, so planning into it allocates nothing in steady state.
#[derive(Default)]
struct InFlight {
    plan: Plan,
    completed_stages: usize,
    /// The plan's stage count and reply stage, taken once when it starts.
    stage_count: usize,
    reply_after: usize,
    arrival_ns: u64,
    /// The closed-loop client waiting on it; `None` for open-loop and background work.
    client: Option<u32>,
    replied: bool,
    measured: bool,
    /// The cache tier that held the request's data (`None`: a miss).
    hit_tier: Option<u8>,
    bytes: u32,
    /// The request's software cost, ns (0 for background work).
    software_ns: u64,
}

/// Requests pulled from the phases' readers a batch at a time.
struct Feed<'a, 'r> {
    phases: &'a mut [Phase<'r>],
    phase: usize,
    /// Told how many requests have been taken, once per batch.
    progress: &'a mut dyn FnMut(u64),
    batch: Vec<Request>,
    next: usize,
    taken: u64,
    max: u64,
    max_time_ns: u64,
    /// The earlier of the next phase's start and `max_time_ns`: before it, nothing changes.
    next_change_ns: u64,
}

impl Feed<'_, '_> {
    /// The request `distance` ahead of the next one, when it is in the current batch.
    #[inline]
    fn peek(&self, distance: usize) -> Option<&Request> {
        self.batch.get(self.next + distance)
    }

    /// True when no request will be taken any more.
    fn done(&self) -> bool {
        self.taken >= self.max
    }

    /// Sets the time limit and when the feed must next look at the clock.
    fn limit_time(&mut self, max_time_ns: u64) {
        self.max_time_ns = max_time_ns;
        let next_phase_ns = self
            .phases
            .get(self.phase + 1)
            .map_or(u64::MAX, |next| next.from_ns);
        self.next_change_ns = next_phase_ns.min(max_time_ns);
    }

    /// Moves to the phase of `now_ns` or ends the feed at its time limit.
    #[cold]
    fn change(&mut self, now_ns: u64) {
        if now_ns >= self.max_time_ns {
            self.max = self.taken;
        }
        let phase = self.phase;
        while self
            .phases
            .get(self.phase + 1)
            .is_some_and(|next| next.from_ns <= now_ns)
        {
            self.phase += 1;
        }
        if self.phase != phase {
            self.batch.clear();
            self.next = 0;
        }
        self.limit_time(self.max_time_ns);
    }

    /// The request to issue at `now_ns`, if any is left.
    #[inline(always)]
    fn next(&mut self, now_ns: u64) -> Result<Option<Request>, TraceError> {
        if now_ns >= self.next_change_ns {
            self.change(now_ns);
        }
        if self.taken >= self.max {
            return Ok(None);
        }
        if self.next == self.batch.len() {
            (self.progress)(self.taken);
            self.phases[self.phase]
                .reader
                .read_batch(&mut self.batch, heterarchy_trace::read::BATCH)?;
            self.next = 0;
            if self.batch.is_empty() {
                self.max = self.taken;
                return Ok(None);
            }
        }
        self.next += 1;
        self.taken += 1;
        Ok(Some(self.batch[self.next - 1]))
    }
}

/// The executor's state for one run.
struct Executor<'a> {
    controller: &'a mut dyn Controller,
    devices: Vec<DeviceModel>,
    slots: Vec<InFlight>,
    free_slots: Vec<u32>,
    /// Stage completions: (time, slot).
    events: EventQueue,
    warmup_left: u64,
    warmup_until_ns: u64,
    /// `settle_ns` and `measure_ns` of the load, until the warm-up requests are done.
    pending_settle: Option<(u64, Option<u64>)>,
    measure_start_ns: Option<u64>,
    last_reply_ns: u64,
    unreplied: u64,
    latency_ns: Histogram<u64>,
    measured_requests: u64,
    /// Measured hits by the cache tier that held the data.
    measured_tier_hits: Vec<u64>,
    measured_bytes: u64,
    /// Operations submitted to each device while measuring, reads then writes (their bytes
    /// are the series').
    ops: Vec<[u64; 2]>,
    series: Series,
    background_due_ns: Option<u64>,
    /// Closed-loop clients whose request was answered, to issue their next one.
    ready_clients: Vec<u32>,
    /// What the controller wants reported.
    feedback: Feedback,
    software: SoftwareCost,
    /// The last request size and its software cost, ns: sizes repeat, the cost is arithmetic
    /// in floating point.
    last_software: (u32, u64),
}

/// Runs `controller` over `devices` (top tier first, backing store last) with requests from
/// `reader`. Deterministic: the same inputs give the same result bit for bit.
pub fn run_timed(
    controller: &mut dyn Controller,
    devices: &[DeviceSpec],
    reader: &mut dyn TraceReader,
    load: &Load,
) -> Result<TimedResult, TraceError> {
    run_timed_with_progress(controller, devices, reader, load, &mut |_| {})
}

/// [`run_timed`], telling `progress` the number of requests taken so far every few thousand.
pub fn run_timed_with_progress(
    controller: &mut dyn Controller,
    devices: &[DeviceSpec],
    reader: &mut dyn TraceReader,
    load: &Load,
    progress: &mut dyn FnMut(u64),
) -> Result<TimedResult, TraceError> {
    let mut phases = [Phase { from_ns: 0, reader }];
    run_timed_phases(controller, devices, &mut phases, load, progress)
}

/// [`run_timed_with_progress`] over a workload that changes at given times: the requests of
/// `phases[i]` are issued from its time until the next phase's.
pub fn run_timed_phases(
    controller: &mut dyn Controller,
    devices: &[DeviceSpec],
    phases: &mut [Phase<'_>],
    load: &Load,
    progress: &mut dyn FnMut(u64),
) -> Result<TimedResult, TraceError> {
    assert_eq!(
        controller.device_count(),
        devices.len(),
        "one model per device"
    );
    assert!(!phases.is_empty(), "a workload has a phase");
    let mut feed = Feed {
        phases,
        phase: 0,
        progress,
        batch: Vec::new(),
        next: 0,
        taken: 0,
        max: load.max_requests,
        max_time_ns: u64::MAX,
        next_change_ns: u64::MAX,
    };
    feed.limit_time(load.max_time_ns.unwrap_or(u64::MAX));
    let mut executor = Executor {
        controller,
        devices: devices.iter().map(DeviceModel::new).collect(),
        slots: Vec::new(),
        free_slots: Vec::new(),
        events: EventQueue::new(),
        warmup_left: load.warmup_requests,
        warmup_until_ns: load.warmup_ns,
        pending_settle: Some((load.settle_ns, load.measure_ns)),
        measure_start_ns: None,
        last_reply_ns: 0,
        unreplied: 0,
        latency_ns: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
            .expect("bounds and precision are valid"),
        measured_requests: 0,
        measured_tier_hits: vec![0; devices.len() - 1],
        measured_bytes: 0,
        ops: vec![[0; 2]; devices.len()],
        series: Series::new(0, devices.len()),
        background_due_ns: None,
        ready_clients: Vec::new(),
        feedback: Feedback::default(),
        software: load.software,
        last_software: (0, load.software.request_ns(0)),
    };
    executor.feedback = executor.controller.feedback();
    if executor.feedback.background {
        executor.run_background(0);
    }

    if let Some(steps) = load.arrivals.client_steps() {
        executor.closed_loop(&mut feed, &steps)?;
    } else if let Arrivals::Open { speedup } = load.arrivals {
        let speedup = if speedup > 0.0 { speedup } else { 1.0 };
        let mut pending = executor.take(&mut feed, 0)?;
        let epoch_ns = pending.map_or(0, |request| request.time_ns);
        let arrival = |request: &Request| {
            ((request.time_ns.saturating_sub(epoch_ns)) as f64 / speedup) as u64
        };
        loop {
            let next_arrival = pending.as_ref().map(arrival);
            match executor.step(next_arrival) {
                Some(_) => {}
                None => match pending {
                    Some(request) => {
                        let now_ns = arrival(&request);
                        executor.issue(&request, now_ns, None);
                        pending = executor.take(&mut feed, now_ns)?;
                    }
                    None => break,
                },
            }
            if pending.is_none() && executor.unreplied == 0 {
                break;
            }
        }
    }
    Ok(executor.finish(devices))
}

impl Executor<'_> {
    /// The next request, hinting the controller about the ones coming (as the hit-ratio
    /// simulator does) so their metadata is in the CPU cache when they are planned.
    #[inline(always)]
    fn take(&mut self, feed: &mut Feed, now_ns: u64) -> Result<Option<Request>, TraceError> {
        if self.warmup_left == 0 && self.pending_settle.is_some() {
            self.start_settling(feed, now_ns);
        }
        for distance in [
            PREFETCH_SLOT_DISTANCE,
            PREFETCH_NODE_DISTANCE,
            PREFETCH_NEIGHBOUR_DISTANCE,
        ] {
            if let Some(ahead) = feed.peek(distance) {
                self.controller.prefetch(ahead.key, distance);
            }
        }
        feed.next(now_ns)
    }

    /// The warm-up requests are done at `now_ns`: measuring starts after the settling time,
    /// for the measuring window.
    #[cold]
    fn start_settling(&mut self, feed: &mut Feed, now_ns: u64) {
        let Some((settle_ns, measure_ns)) = self.pending_settle.take() else {
            return;
        };
        self.warmup_until_ns = self.warmup_until_ns.max(now_ns + settle_ns);
        if let Some(measure_ns) = measure_ns {
            feed.limit_time(feed.max_time_ns.min(self.warmup_until_ns + measure_ns));
        }
    }

    /// Closed-loop clients, as many as the step in force says (`steps` is not empty): each
    /// issues a request, waits for its answer, and issues the next, until the feed runs dry.
    fn closed_loop(&mut self, feed: &mut Feed, steps: &[ClientStep]) -> Result<(), TraceError> {
        let mut step = 0;
        let mut clients = steps[0].outstanding;
        self.ready_clients = (0..clients).rev().collect();
        let mut next_id = clients;
        let mut now_ns = 0;
        loop {
            while let Some(client) = self.ready_clients.pop() {
                if clients > steps[step].outstanding {
                    clients -= 1;
                    continue;
                }
                match self.take(feed, now_ns)? {
                    Some(request) => self.issue(&request, now_ns, Some(client)),
                    None => clients -= 1,
                }
            }
            if feed.done() && self.unreplied == 0 {
                return Ok(());
            }
            let change_ns = steps.get(step + 1).map(|next| next.from_ns);
            match self.step(change_ns) {
                Some(time) => now_ns = time,
                None => match change_ns {
                    Some(change_ns) => {
                        now_ns = now_ns.max(change_ns);
                        step += 1;
                        while clients < steps[step].outstanding {
                            self.ready_clients.push(next_id);
                            next_id += 1;
                            clients += 1;
                        }
                    }
                    None => return Ok(()),
                },
            }
        }
    }

    /// Processes the next event due before `deadline_ns` (background wake-ups included);
    /// returns its time, or `None` when nothing is due before the deadline.
    fn step(&mut self, deadline_ns: Option<u64>) -> Option<u64> {
        let next_event = self.events.peek_time();
        let limit = deadline_ns.unwrap_or(u64::MAX);
        // Wake-ups are taken while requests are in flight or due; a run ends when neither is.
        let work_left = self.unreplied > 0 || deadline_ns.is_some();
        if let Some(due) = self.background_due_ns {
            if due <= next_event.unwrap_or(u64::MAX) && due < limit && work_left {
                self.run_background(due);
                return Some(due);
            }
        }
        match next_event {
            Some(time) if time < limit || deadline_ns.is_none() => {
                let (now_ns, slot) = self.events.pop().expect("peeked");
                self.advance(slot, now_ns, true);
                Some(now_ns)
            }
            _ => None,
        }
    }

    fn run_background(&mut self, now_ns: u64) {
        let slot = self.open_slot();
        let plan = &mut self.slots[slot as usize].plan;
        self.background_due_ns = self.controller.background(now_ns, plan);
        if plan.is_empty() {
            self.free_slots.push(slot);
        } else {
            self.start(slot, now_ns, None, false, true);
            self.advance(slot, now_ns, false);
        }
    }

    /// The software cost of a request of `bytes`, ns.
    #[inline]
    fn software_ns(&mut self, bytes: u32) -> u64 {
        if self.last_software.0 != bytes {
            self.last_software = (bytes, self.software.request_ns(bytes));
        }
        self.last_software.1
    }

    /// Plans `request` arriving at `now_ns` and starts its first stage.
    fn issue(&mut self, request: &Request, now_ns: u64, client: Option<u32>) {
        let measured = if self.warmup_left > 0 {
            self.warmup_left -= 1;
            false
        } else if now_ns < self.warmup_until_ns {
            false
        } else {
            if self.measure_start_ns.is_none() {
                self.measure_start_ns = Some(now_ns);
                self.series = Series::new(now_ns, self.devices.len());
            }
            self.measured_bytes += u64::from(request.size);
            true
        };
        let software_ns = self.software_ns(request.size);
        let slot = self.open_slot();
        let decision = self
            .controller
            .plan(request, now_ns, &mut self.slots[slot as usize].plan);
        self.start(slot, now_ns, client, measured, false);
        let in_flight = &mut self.slots[slot as usize];
        in_flight.hit_tier = decision.hit_tier;
        in_flight.bytes = request.size;
        in_flight.software_ns = software_ns;
        self.unreplied += 1;
        if self.feedback.background && self.background_due_ns.is_none() {
            self.run_background(now_ns);
        }
        self.advance(slot, now_ns, false);
    }

    /// A free slot, its plan empty, for a plan to be written into.
    #[inline]
    fn open_slot(&mut self) -> u32 {
        match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(InFlight::default());
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Readies the slot whose plan was just written; its first stage starts in
    /// [`advance`](Self::advance).
    #[inline]
    fn start(
        &mut self,
        slot: u32,
        now_ns: u64,
        client: Option<u32>,
        measured: bool,
        background: bool,
    ) {
        let in_flight = &mut self.slots[slot as usize];
        in_flight.completed_stages = 0;
        in_flight.stage_count = in_flight.plan.stage_count();
        in_flight.reply_after = in_flight.plan.reply_after();
        in_flight.arrival_ns = now_ns;
        in_flight.client = client;
        // Background work has nobody to answer.
        in_flight.replied = background;
        in_flight.measured = measured;
        in_flight.hit_tier = None;
        in_flight.bytes = 0;
        in_flight.software_ns = 0;
    }

    /// After a stage of `slot` completes at `now_ns` (`stage_done`), or when its plan starts:
    /// answers the client if the reply stage is done, then starts the next stage, and frees the
    /// slot when no stage is left to wait for.
    fn advance(&mut self, slot: u32, now_ns: u64, stage_done: bool) {
        // The executor's fields borrowed apart, so that the slot stays borrowed throughout.
        let Executor {
            controller,
            devices,
            slots,
            free_slots,
            events,
            unreplied,
            measure_start_ns,
            last_reply_ns,
            latency_ns: latencies,
            measured_requests,
            measured_tier_hits,
            ops,
            series,
            ready_clients,
            feedback,
            ..
        } = self;
        let in_flight = &mut slots[slot as usize];
        in_flight.completed_stages += usize::from(stage_done);
        if !in_flight.replied && in_flight.completed_stages >= in_flight.reply_after {
            in_flight.replied = true;
            let latency_ns = now_ns - in_flight.arrival_ns;
            if feedback.replies {
                controller.on_reply(&Reply {
                    now_ns,
                    latency_ns,
                    bytes: in_flight.bytes,
                });
            }
            *unreplied -= 1;
            if in_flight.measured {
                *measured_requests += 1;
                if let Some(tier) = in_flight.hit_tier {
                    measured_tier_hits[usize::from(tier)] += 1;
                }
                *last_reply_ns = now_ns;
                latencies.saturating_record(latency_ns.max(1));
                series.reply(now_ns, latency_ns, in_flight.hit_tier.is_some());
            }
            if let Some(client) = in_flight.client {
                ready_clients.push(client);
            }
        }
        let stage = in_flight.completed_stages;
        if stage < in_flight.stage_count {
            let measuring = measure_start_ns.is_some();
            let device_ops = feedback.device_ops;
            let done_ns = time_stage(
                &in_flight.plan,
                stage,
                now_ns,
                in_flight.software_ns,
                &mut |start_ns, op| {
                    // Block keys carry the volume in their high bits; the block number times
                    // the line size is the line's offset on the device.
                    let offset =
                        (op.key & ((1 << BLOCK_NUMBER_BITS) - 1)).wrapping_mul(u64::from(op.bytes));
                    devices[usize::from(op.device)].submit(start_ns, op.kind, offset, op.bytes)
                },
                &mut |op, latency_ns| {
                    if device_ops {
                        controller.on_device_op(op.device, op.bytes, latency_ns);
                    }
                    if measuring {
                        let device = usize::from(op.device);
                        let write = op.kind == IoKind::Write;
                        ops[device][usize::from(write)] += 1;
                        series.transfer(now_ns, device, write, u64::from(op.bytes));
                    }
                },
            );
            // A last stage after the answer changes nothing when it completes (its operations
            // are on the device models already): the slot is free now, without an event.
            if stage + 1 < in_flight.stage_count || !in_flight.replied {
                events.push(done_ns, slot);
                return;
            }
        }
        in_flight.plan.clear();
        free_slots.push(slot);
    }

    fn finish(self, devices: &[DeviceSpec]) -> TimedResult {
        let start_ns = self.measure_start_ns.unwrap_or(0);
        let duration_ns = self.last_reply_ns.saturating_sub(start_ns).max(1);
        let seconds = duration_ns as f64 / 1e9;
        let quantile_us = |q: f64| self.latency_ns.value_at_quantile(q) as f64 / 1e3;
        let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
        let last = devices.len() - 1;
        let share = |count: u64| {
            if self.measured_requests == 0 {
                0.0
            } else {
                count as f64 / self.measured_requests as f64
            }
        };
        TimedResult {
            requests: self.measured_requests,
            duration_s: seconds,
            throughput_ops: self.measured_requests as f64 / seconds,
            throughput_bytes_per_s: self.measured_bytes as f64 / seconds,
            mean_latency_us: self.latency_ns.mean() / 1e3,
            p50_latency_us: quantile_us(0.5),
            p99_latency_us: quantile_us(0.99),
            p999_latency_us: quantile_us(0.999),
            max_latency_us: self.latency_ns.max() as f64 / 1e3,
            hit_ratio: share(self.measured_tier_hits.iter().sum()),
            tier_hit_ratios: self
                .measured_tier_hits
                .iter()
                .map(|&hits| share(hits))
                .collect(),
            devices: devices
                .iter()
                .enumerate()
                .map(|(index, spec)| {
                    let [read_bytes, written_bytes] = self.series.device_bytes(index);
                    DeviceResult {
                        name: spec.name.clone(),
                        role: if index == last {
                            "backing store".to_string()
                        } else {
                            format!("tier {index}")
                        },
                        read_ops: self.ops[index][0],
                        write_ops: self.ops[index][1],
                        read_bytes_per_s: read_bytes as f64 / seconds,
                        write_bytes_per_s: written_bytes as f64 / seconds,
                    }
                })
                .collect(),
            series: self.series.finish(self.last_reply_ns + 1, &names),
            tuning: self.controller.tuning_history().cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use heterarchy_device::presets::preset;
    use heterarchy_engine::{ControllerStats, Decision, DeviceOp};
    use heterarchy_trace::generate::{generator, WorkloadSpec};

    use super::*;

    /// Sends every request to the one device, in `stages` sequential operations.
    struct Direct {
        stages: usize,
        stats: ControllerStats,
    }

    impl Direct {
        fn new(stages: usize) -> Direct {
            Direct {
                stages,
                stats: ControllerStats::default(),
            }
        }
    }

    impl Controller for Direct {
        fn device_count(&self) -> usize {
            1
        }
        fn plan(&mut self, request: &Request, _now_ns: u64, plan: &mut Plan) -> Decision {
            let kind = if request.op.is_write() {
                IoKind::Write
            } else {
                IoKind::Read
            };
            for _ in 0..self.stages {
                plan.push(DeviceOp {
                    device: 0,
                    kind,
                    key: request.key,
                    bytes: request.size,
                });
                plan.end_stage();
            }
            self.stats.requests += 1;
            Decision::default()
        }
        fn background(&mut self, _now_ns: u64, _plan: &mut Plan) -> Option<u64> {
            None
        }
        fn stats(&self) -> &ControllerStats {
            &self.stats
        }
    }

    fn uniform_reads(requests: u64, size: u32) -> Box<dyn TraceReader> {
        let spec = WorkloadSpec::parse(&format!(
            "uniform:keys=1000000,requests={requests},size={size},kind=block,seed=3"
        ))
        .unwrap();
        generator(&spec).unwrap()
    }

    fn closed(outstanding: u32, requests: u64) -> Load {
        Load::closed(outstanding, requests.saturating_sub(1_000), 1_000)
    }

    #[test]
    fn closed_loop_on_one_device_matches_its_probe() {
        let ssd = preset("optane-ssd").unwrap();
        for (outstanding, latency_us) in [(1u32, 10.0), (8, 8.0 / 0.575), (64, 64.0 / 0.575)] {
            let mut controller = Direct::new(1);
            let mut reader = uniform_reads(50_000, 4096);
            let result = run_timed(
                &mut controller,
                std::slice::from_ref(&ssd),
                &mut *reader,
                &closed(outstanding, 50_000),
            )
            .unwrap();
            assert_eq!(result.requests, 49_000);
            assert!(
                (result.mean_latency_us - latency_us).abs() / latency_us < 0.01,
                "{outstanding}: {result:?}"
            );
            let iops = (outstanding as f64 / (latency_us * 1e-6)).min(575_000.0);
            assert!(
                (result.throughput_ops - iops).abs() / iops < 0.01,
                "{outstanding}: {}",
                result.throughput_ops
            );
            assert_eq!(result.devices[0].read_ops, result.requests);
            assert_eq!(result.hit_ratio, 0.0);
        }
    }

    #[test]
    fn software_cost_is_added_to_every_answer() {
        let ssd = preset("optane-ssd").unwrap();
        let mut controller = Direct::new(2);
        let mut reader = uniform_reads(5_000, 4096);
        let load = Load {
            software: SoftwareCost {
                per_request_ns: 3_000.0,
                per_kib_ns: 500.0,
            },
            ..closed(1, 5_000)
        };
        let result = run_timed(&mut controller, &[ssd], &mut *reader, &load).unwrap();
        // Two stages of 10 us, then 3 us + 4 x 0.5 us of software on the answering stage.
        assert!(
            (result.mean_latency_us - 25.0).abs() < 0.01,
            "{}",
            result.mean_latency_us
        );
    }

    #[test]
    fn stages_run_one_after_another() {
        let ssd = preset("optane-ssd").unwrap();
        let mut controller = Direct::new(3);
        let mut reader = uniform_reads(5_000, 4096);
        let result = run_timed(&mut controller, &[ssd], &mut *reader, &closed(1, 5_000)).unwrap();
        assert!(
            (result.mean_latency_us - 30.0).abs() < 0.01,
            "{}",
            result.mean_latency_us
        );
        assert!((result.p99_latency_us - 30.0).abs() < 0.05);
    }

    #[test]
    fn open_loop_replays_timestamps_with_speedup() {
        // 1M requests/s of 4 KiB reads offered to a device that serves 575K/s: the queue grows;
        // at a 10x slow-down (speedup 0.1) it keeps up and latency stays the unloaded 10 us.
        let ssd = preset("optane-ssd").unwrap();
        let run = |speedup: f64| {
            let mut controller = Direct::new(1);
            let spec = WorkloadSpec::parse(
                "uniform:keys=100000,requests=20000,size=4096,kind=block,rate=1000000,seed=4",
            )
            .unwrap();
            let mut reader = generator(&spec).unwrap();
            let load = Load {
                arrivals: Arrivals::Open { speedup },
                ..Load::closed(1, u64::MAX, 0)
            };
            run_timed(
                &mut controller,
                std::slice::from_ref(&ssd),
                &mut *reader,
                &load,
            )
            .unwrap()
        };
        let slow = run(0.1);
        assert!(
            (slow.mean_latency_us - 10.0).abs() < 0.01,
            "{}",
            slow.mean_latency_us
        );
        assert!(
            (slow.throughput_ops - 100_000.0).abs() / 100_000.0 < 0.01,
            "{}",
            slow.throughput_ops
        );
        let fast = run(1.0);
        assert!(
            (fast.throughput_ops - 575_000.0).abs() / 575_000.0 < 0.01,
            "{}",
            fast.throughput_ops
        );
        assert!(fast.p99_latency_us > 10.0 * slow.p99_latency_us);
    }

    #[test]
    fn runs_are_deterministic_and_count_writes() {
        let flash = preset("nvme-flash").unwrap();
        let run = || {
            let mut controller = Direct::new(1);
            let spec = WorkloadSpec::parse(
                "zipf:theta=0.9,keys=10000,requests=20000,size=4096,kind=block,write=0.3,seed=5",
            )
            .unwrap();
            let mut reader = generator(&spec).unwrap();
            run_timed(
                &mut controller,
                std::slice::from_ref(&flash),
                &mut *reader,
                &closed(16, u64::MAX),
            )
            .unwrap()
        };
        let first = run();
        assert_eq!(first, run());
        let device = &first.devices[0];
        assert_eq!(device.read_ops + device.write_ops, first.requests);
        let write_share = device.write_ops as f64 / (device.read_ops + device.write_ops) as f64;
        assert!((write_share - 0.3).abs() < 0.02, "{write_share}");
        assert!(first.series.throughput_ops.len() > 10);
    }

    #[test]
    fn tier_hit_ratios_count_each_tiers_hits() {
        let hierarchy = crate::timed::Hierarchy::from_toml(
            "[cache]\nmode = \"wt\"\npolicy = \"lru\"\n\
             [[tier]]\ndevice = \"dram\"\nsize = \"4MiB\"\n\
             [[tier]]\ndevice = \"optane-pm\"\nsize = \"16MiB\"\n\
             [[tier]]\ndevice = \"optane-ssd\"\n",
            "test",
            None,
        )
        .unwrap();
        let spec = WorkloadSpec::parse(
            "zipf:theta=0.9,keys=10000,requests=30000,size=4096,kind=block,seed=3",
        )
        .unwrap();
        let mut controller = hierarchy.cache_controller().unwrap();
        let mut reader = generator(&spec).unwrap();
        // Nothing is warm-up, so every request the controller planned is measured.
        let result = run_timed(
            &mut controller,
            &hierarchy.devices,
            &mut *reader,
            &Load::closed(8, 30_000, 0),
        )
        .unwrap();
        let stats = controller.stats();
        assert_eq!(result.requests, 30_000);
        let hits: Vec<u64> = result
            .tier_hit_ratios
            .iter()
            .map(|share| (share * 30_000.0).round() as u64)
            .collect();
        assert_eq!(hits, stats.hits_per_tier);
        assert!(hits.iter().all(|&hits| hits > 0), "{hits:?}");
        let sum: f64 = result.tier_hit_ratios.iter().sum();
        assert!((sum - result.hit_ratio).abs() < 1e-12);
    }
}

#[cfg(test)]
mod load_tests {
    use heterarchy_device::presets::preset;
    use heterarchy_engine::{ControllerStats, Decision, DeviceOp};
    use heterarchy_trace::generate::{generator, WorkloadSpec};

    use super::*;

    /// Reads every request from the one device and remembers what it saw.
    #[derive(Default)]
    struct Recorder {
        stats: ControllerStats,
        /// (time, size) of each request planned.
        planned: Vec<(u64, u32)>,
        replies: u64,
    }

    impl Controller for Recorder {
        fn device_count(&self) -> usize {
            1
        }
        fn plan(&mut self, request: &Request, now_ns: u64, plan: &mut Plan) -> Decision {
            plan.push(DeviceOp {
                device: 0,
                kind: IoKind::Read,
                key: request.key,
                bytes: request.size,
            });
            self.planned.push((now_ns, request.size));
            Decision::default()
        }
        fn background(&mut self, _now_ns: u64, _plan: &mut Plan) -> Option<u64> {
            None
        }
        fn stats(&self) -> &ControllerStats {
            &self.stats
        }
        fn feedback(&self) -> Feedback {
            Feedback {
                replies: true,
                ..Feedback::default()
            }
        }
        fn on_reply(&mut self, _reply: &Reply) {
            self.replies += 1;
        }
    }

    fn reads(size: u32, seed: u64) -> Box<dyn TraceReader> {
        let spec = WorkloadSpec::parse(&format!(
            "uniform:keys=100000,requests=10000000,size={size},kind=block,seed={seed}"
        ))
        .unwrap();
        generator(&spec).unwrap()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn clients_follow_their_steps_and_every_answer_is_reported() {
        let ssd = preset("optane-ssd").unwrap();
        let mut recorder = Recorder::default();
        let mut reader = reads(4096, 1);
        let load = Load {
            arrivals: Arrivals::Varying {
                steps: vec![
                    ClientStep {
                        from_ns: 0,
                        outstanding: 1,
                    },
                    ClientStep {
                        from_ns: 20 * MS,
                        outstanding: 8,
                    },
                    ClientStep {
                        from_ns: 40 * MS,
                        outstanding: 2,
                    },
                ],
            },
            max_time_ns: Some(60 * MS),
            ..Load::closed(1, u64::MAX, 0)
        };
        let result = run_timed(&mut recorder, &[ssd], &mut *reader, &load).unwrap();
        assert_eq!(recorder.replies, recorder.planned.len() as u64);
        assert_eq!(result.requests, recorder.planned.len() as u64);
        let between = |from: u64, to: u64| {
            recorder
                .planned
                .iter()
                .filter(|(time, _)| (from * MS..to * MS).contains(time))
                .count() as f64
        };
        // 1 client: 10 us each; 8 clients: 8 / 13.9 us (575K IOPS); 2 clients: 100K x 2.
        assert!((between(5, 20) / 15e-3 - 100_000.0).abs() < 2_000.0);
        assert!((between(25, 40) / 15e-3 - 575_000.0).abs() < 10_000.0);
        assert!((between(45, 60) / 15e-3 - 200_000.0).abs() < 4_000.0);
        assert!(recorder.planned.iter().all(|(time, _)| *time < 60 * MS));
    }

    #[test]
    fn phases_replace_each_other_at_their_time() {
        let ssd = preset("optane-ssd").unwrap();
        let mut recorder = Recorder::default();
        let (mut first, mut second) = (reads(4096, 1), reads(8192, 2));
        let mut phases = [
            Phase {
                from_ns: 0,
                reader: &mut *first,
            },
            Phase {
                from_ns: 10 * MS,
                reader: &mut *second,
            },
        ];
        let load = Load {
            max_time_ns: Some(20 * MS),
            ..Load::closed(4, u64::MAX, 0)
        };
        run_timed_phases(&mut recorder, &[ssd], &mut phases, &load, &mut |_| {}).unwrap();
        for (time, size) in &recorder.planned {
            assert_eq!(*size, if *time < 10 * MS { 4096 } else { 8192 }, "{time}");
        }
        assert!(recorder.planned.iter().any(|(_, size)| *size == 8192));
    }

    #[test]
    fn measuring_starts_after_warm_up_and_settling_and_lasts_its_window() {
        let ssd = preset("optane-ssd").unwrap();
        let mut recorder = Recorder::default();
        let mut reader = reads(4096, 1);
        let load = Load {
            settle_ns: 5 * MS,
            measure_ns: Some(10 * MS),
            ..Load::closed(1, u64::MAX, 100)
        };
        let result = run_timed(&mut recorder, &[ssd], &mut *reader, &load).unwrap();
        // 100 warm-up requests of 10 us end at 1 ms; 5 ms to settle; 10 ms measured.
        assert!(
            (result.duration_s - 0.010).abs() < 1e-4,
            "{}",
            result.duration_s
        );
        assert!(
            (result.requests as i64 - 1000).abs() <= 1,
            "{}",
            result.requests
        );
        let last = recorder.planned.last().unwrap().0;
        assert!((15 * MS..=16 * MS).contains(&last), "{last}");
    }
}
