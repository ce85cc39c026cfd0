//! When a plan's answer is due on throttled devices (docs/architecture.md, "The device
//! layer": a throttle paces live storage like a preset): the data has already moved at memory
//! speed; each stage's operations are submitted to their devices' shared models when the stage
//! starts, and the answer is due when the reply stage completes — the engine's stage timing,
//! which the timed simulator walks stage by stage (`time_stage`) and the volume over a whole
//! plan ([`time_plan`]).

use std::time::Duration;

use heterarchy_engine::{time_plan, DeviceOp, IoKind};

use crate::job::Job;
use crate::sectors::Storage;

/// One operation's time on its device, for a tuner that measures devices.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTime {
    pub device: u8,
    pub bytes: u32,
    pub latency_ns: u64,
}

impl Storage {
    /// True when some device is paced like a preset.
    pub fn is_throttled(&self) -> bool {
        self.devices.iter().any(|device| device.throttle.is_some())
    }

    /// When `job`'s reply stage completes on the devices' models, from `now_ns` (at once for
    /// devices not throttled), by the engine's plan timing, as the timed simulator times it;
    /// each operation's time goes to `times` when it is given. No software cost is added: the
    /// live volume's software takes its own, real, time.
    pub fn time_job(&self, job: &Job, mut times: Option<&mut Vec<DeviceTime>>) -> u64 {
        let now = job.now_ns;
        if !self.is_throttled() {
            return now;
        }
        let extent = |op: &DeviceOp| match job.request {
            Some(part) if part.key == op.key => (part.start, part.len),
            _ => (0, self.line_bytes),
        };
        let mut submit = |start_ns: u64, op: &DeviceOp| {
            let device = usize::from(op.device);
            let Some(throttle) = &self.devices[device].throttle else {
                return start_ns;
            };
            let (start, bytes) = extent(op);
            let offset = if device < self.tiers() {
                let line = job.lines.iter().find(|line| line.key == op.key);
                let slot = line
                    .and_then(|line| match op.kind {
                        IoKind::Read => line.before[device].or(line.after[device]),
                        IoKind::Write => line.after[device].or(line.before[device]),
                    })
                    .unwrap_or(0);
                self.slot_offset(device, slot, start)
            } else {
                self.backing_offset(op.key, start)
            };
            let start = self.epoch + Duration::from_nanos(start_ns);
            let done = throttle.complete_at(start, op.kind, offset, bytes);
            done.saturating_duration_since(self.epoch).as_nanos() as u64
        };
        let mut completed = |op: &DeviceOp, latency_ns: u64| {
            if let Some(times) = times.as_deref_mut() {
                times.push(DeviceTime {
                    device: op.device,
                    bytes: extent(op).1,
                    latency_ns,
                });
            }
        };
        time_plan(&job.plan, now, 0, &mut submit, &mut completed).reply_ns
    }
}
