//! When a plan's answer is due on throttled devices (docs/architecture.md, "The device
//! layer": a throttle paces live storage like a preset): the data has already moved at memory speed; each stage's
//! operations are submitted to their devices' shared models when the stage starts, and the
//! answer is due when the reply stage completes.

use heterarchy_engine::IoKind;

use crate::execute::Job;
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
    /// devices not throttled); each operation's time goes to `times` when it is given.
    pub fn time_job(&self, job: &Job, mut times: Option<&mut Vec<DeviceTime>>) -> u64 {
        let now = job.now_ns;
        if !self.is_throttled() {
            return now;
        }
        let plan = &job.plan;
        let mut stage_start = now;
        let mut reply_done = now;
        for stage in 0..plan.stage_count() {
            let mut stage_end = stage_start;
            for op in plan.stage(stage) {
                let (start, bytes) = match job.request {
                    Some(part) if part.key == op.key => (part.start, part.len),
                    _ => (0, self.line_bytes),
                };
                let device = usize::from(op.device);
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
                let done = match &self.devices[device].throttle {
                    Some(throttle) => throttle.complete_ns(stage_start, op.kind, offset, bytes),
                    None => stage_start,
                };
                if let Some(times) = times.as_deref_mut() {
                    times.push(DeviceTime {
                        device: op.device,
                        bytes,
                        latency_ns: done - stage_start,
                    });
                }
                stage_end = stage_end.max(done);
            }
            stage_start = stage_end;
            if stage < plan.reply_after() {
                reply_done = stage_end;
            }
        }
        reply_done
    }
}
