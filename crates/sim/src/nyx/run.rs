//! The event loop of a shared-PM run: threads' requests, their accesses through the gates to
//! one device model, the policy's controller, and the series' samples, in time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use heterarchy_device::memory::MemoryOp;
use heterarchy_device::model::{DeviceModel, IoKind};
use heterarchy_engine::nyx::policy::{self, Windows};
use heterarchy_engine::nyx::Regulator;

use super::{SharedPmConfig, SharedPmResult, TenantInterval, TenantSeries};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The policy's controller steps.
    Controller,
    /// The series closes an interval.
    Sample,
    /// A thread starts its next request (or finds its tenant idle).
    Request { tenant: usize, thread: usize },
    /// A thread's request reaches the device, past its CPU work.
    Access { tenant: usize, thread: usize },
    /// A thread's access completes.
    Done { tenant: usize, thread: usize },
}

#[derive(Clone, Copy, Debug, Default)]
struct Thread {
    request_start_ns: u64,
    /// How the request moves its value.
    op: Option<MemoryOp>,
    /// Where the item's slot starts: its key where keys live on the PM, then its value.
    offset: u64,
    value_offset: u64,
    bytes: u32,
    /// Keys still to read from the PM before the value.
    key_reads_left: u32,
}

/// Runs `config` to its end: each tenant's series.
pub fn run_shared_pm(config: &SharedPmConfig) -> SharedPmResult {
    let tenants = &config.tenants;
    let gates: Vec<Arc<Regulator>> = tenants.iter().map(|_| Arc::new(Regulator::new())).collect();
    let terms: Vec<_> = tenants.iter().map(|t| t.terms.clone()).collect();
    let mut policy = policy::build(config.policy, &terms, &config.params);
    let mut model = DeviceModel::new(&config.device);
    let mut threads: Vec<Vec<Thread>> = tenants
        .iter()
        .map(|tenant| {
            let most = tenant
                .phases
                .iter()
                .map(|(_, l)| l.threads)
                .max()
                .unwrap_or(0);
            vec![Thread::default(); most as usize]
        })
        .collect();
    let mut rngs: Vec<u64> = (0..tenants.len() as u64)
        .map(|t| (config.seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1)
        .collect();
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut sequence = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, at_ns: u64, event: Event| {
        sequence += 1;
        events.push(Reverse((at_ns, sequence, event)));
    };
    for (tenant, tenant_threads) in threads.iter().enumerate() {
        // Threads with a period start spread over it, not in step.
        let period_ns = tenants[tenant].load_at(0).0.period_ns;
        for thread in 0..tenant_threads.len() {
            let start_ns = next_random(&mut rngs[tenant]) % period_ns.max(1);
            push(&mut events, start_ns, Event::Request { tenant, thread });
        }
    }
    if policy.is_some() {
        push(&mut events, 0, Event::Controller);
    }
    let interval_ns = config.interval_ns.max(1);
    push(&mut events, interval_ns, Event::Sample);
    let mut windows = Windows::new(true);
    windows.start(0, &gates);
    let mut series: Vec<TenantSeries> = tenants
        .iter()
        .map(|t| TenantSeries {
            name: t.name.clone(),
            intervals: Vec::new(),
        })
        .collect();
    let span = config.span_bytes.max(1 << 20);
    while let Some(Reverse((now_ns, _, event))) = events.pop() {
        if now_ns > config.duration_ns {
            break;
        }
        match event {
            Event::Controller => {
                let policy = policy.as_mut().expect("a policy");
                let next_ns = policy.step(now_ns, &gates).max(now_ns + 1);
                push(&mut events, next_ns, Event::Controller);
            }
            Event::Sample => {
                let closed = windows.close(now_ns, &gates);
                for ((series, window), gate) in series.iter_mut().zip(&closed).zip(&gates) {
                    series.intervals.push(TenantInterval {
                        start_s: (now_ns - interval_ns) as f64 / 1e9,
                        requests_per_second: window.requests_per_second(),
                        accesses_per_second: window.accesses_per_second(),
                        bytes_per_second: window.bytes_per_second(),
                        utilization: window.utilization(),
                        p99_latency_us: window.p99_ns().unwrap_or(0.0) / 1000.0,
                        rate_cap_per_second: gate.rate_cap().unwrap_or(0.0),
                        estimated_slowdown: gate.slowdown().unwrap_or(0.0),
                    });
                }
                push(&mut events, now_ns + interval_ns, Event::Sample);
            }
            Event::Request { tenant, thread } => {
                let (load, next_phase_ns) = tenants[tenant].load_at(now_ns);
                if thread >= load.threads as usize {
                    if next_phase_ns != u64::MAX {
                        push(
                            &mut events,
                            next_phase_ns,
                            Event::Request { tenant, thread },
                        );
                    }
                    continue;
                }
                let rng = &mut rngs[tenant];
                let get = unit_random(rng);
                if get < load.get_fraction && unit_random(rng) >= load.hit_ratio {
                    // A miss: the index says so, the PM is not touched.
                    threads[tenant][thread].request_start_ns = now_ns;
                    push(
                        &mut events,
                        now_ns + config.cpu_ns,
                        Event::Done { tenant, thread },
                    );
                    continue;
                }
                let is_get = get < load.get_fraction;
                // An item's slot holds its key first when keys live on the PM.
                let key_bytes = if load.key_reads > 0 { KEY_BYTES } else { 0 };
                let slot_bytes =
                    (key_bytes + u64::from(load.value_bytes.max(1))).next_multiple_of(64);
                let slots = (span / slot_bytes).max(1);
                let offset = tenant as u64 * span + next_random(rng) % slots * slot_bytes;
                let state = &mut threads[tenant][thread];
                *state = Thread {
                    request_start_ns: now_ns,
                    op: Some(if is_get {
                        MemoryOp::Load
                    } else {
                        load.value_store
                    }),
                    offset,
                    value_offset: offset + key_bytes,
                    bytes: load.value_bytes.max(1),
                    key_reads_left: if is_get { load.key_reads } else { 0 },
                };
                push(
                    &mut events,
                    now_ns + config.cpu_ns,
                    Event::Access { tenant, thread },
                );
            }
            Event::Access { tenant, thread } => {
                let gate = &gates[tenant];
                let ready_ns = gate.ready_ns(now_ns);
                if ready_ns > now_ns {
                    push(&mut events, ready_ns, Event::Access { tenant, thread });
                    continue;
                }
                gate.admit_ns(now_ns);
                let state = &mut threads[tenant][thread];
                if state.key_reads_left > 0 {
                    // Compare a key on the PM, then go on to the next (or the value).
                    state.key_reads_left -= 1;
                    gate.charge(&config.profile, IoKind::Read, KEY_BYTES as u32);
                    let read = model.access(now_ns, MemoryOp::Load, state.offset, KEY_BYTES as u32);
                    push(&mut events, read.done_ns, Event::Access { tenant, thread });
                    continue;
                }
                let op = state.op.expect("a request");
                gate.charge(&config.profile, op.kind(), state.bytes);
                let done_ns = model
                    .access(now_ns, op, state.value_offset, state.bytes)
                    .done_ns;
                push(&mut events, done_ns, Event::Done { tenant, thread });
            }
            Event::Done { tenant, thread } => {
                let state = threads[tenant][thread];
                gates[tenant].record_request(now_ns - state.request_start_ns);
                let load = tenants[tenant].load_at(now_ns).0;
                let next_ns = (now_ns + load.think_ns).max(state.request_start_ns + load.period_ns);
                push(&mut events, next_ns, Event::Request { tenant, thread });
            }
        }
    }
    SharedPmResult {
        policy: config.policy.name().to_string(),
        tenants: series,
    }
}

/// An item's header and key where keys live on the PM: one line.
const KEY_BYTES: u64 = 64;

/// A uniform number in [0, 1).
fn unit_random(state: &mut u64) -> f64 {
    (next_random(state) >> 11) as f64 / (1u64 << 53) as f64
}

fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
