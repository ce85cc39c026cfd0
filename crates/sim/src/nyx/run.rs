//! The event loop of a shared-PM run: threads' requests, their accesses through the gates to
//! one device model, the policy's controller, and the series' samples, in time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

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
    kind: Option<IoKind>,
    offset: u64,
    bytes: u32,
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
        for thread in 0..tenant_threads.len() {
            push(&mut events, 0, Event::Request { tenant, thread });
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
                let slot_bytes = u64::from(load.value_bytes.max(1)).next_multiple_of(64);
                let slots = (span / slot_bytes).max(1);
                let state = &mut threads[tenant][thread];
                *state = Thread {
                    request_start_ns: now_ns,
                    kind: Some(if get < load.get_fraction {
                        IoKind::Read
                    } else {
                        IoKind::Write
                    }),
                    offset: tenant as u64 * span + next_random(rng) % slots * slot_bytes,
                    bytes: load.value_bytes.max(1),
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
                let state = threads[tenant][thread];
                let kind = state.kind.expect("a request");
                gate.charge(&config.profile, kind, state.bytes);
                let done_ns = model.submit(now_ns, kind, state.offset, state.bytes);
                push(&mut events, done_ns, Event::Done { tenant, thread });
            }
            Event::Done { tenant, thread } => {
                let state = threads[tenant][thread];
                gates[tenant].record_request(now_ns - state.request_start_ns);
                let think_ns = tenants[tenant].load_at(now_ns).0.think_ns;
                push(
                    &mut events,
                    now_ns + think_ns,
                    Event::Request { tenant, thread },
                );
            }
        }
    }
    SharedPmResult {
        policy: config.policy.name().to_string(),
        tenants: series,
    }
}

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
