//! Planning a request (docs/architecture.md, "A request through a live volume"): cut at
//! cache-line boundaries, each piece decided by the controller, given its slots
//! ([`crate::placement`]) and its turn on every line it touches ([`crate::order`]), all under
//! the volume's planning lock, so that turns follow one global order.

use heterarchy_engine::{Controller, DeviceOp, IoKind, Plan, WriteMode};
use heterarchy_trace::{Op, Request};

use crate::job::{Access, Copies, Job, LineJob, RequestPart};
use crate::volume::{Control, Volume};

/// One request's part within one cache line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub key: u64,
    /// Byte offset within the line.
    pub start: u32,
    pub len: u32,
    /// Byte offset within the request.
    pub at: usize,
}

pub(crate) fn pieces(offset: u64, len: u64, line_bytes: u32) -> impl Iterator<Item = Piece> {
    let line = u64::from(line_bytes);
    let end = offset + len;
    let mut position = offset;
    std::iter::from_fn(move || {
        if position >= end {
            return None;
        }
        let key = position / line;
        let start = position % line;
        let piece_len = (line - start).min(end - position);
        let piece = Piece {
            key,
            start: start as u32,
            len: piece_len as u32,
            at: (position - offset) as usize,
        };
        position += piece_len;
        Some(piece)
    })
}

impl Volume {
    /// Plans one piece: the controller's plan, or for a bypassed or partly trimmed line a
    /// plan of the volume's own.
    pub(crate) fn plan_piece(
        &self,
        control: &mut Control,
        access: Access,
        piece: Piece,
        now: u64,
        bypass: bool,
    ) -> Job {
        let key = piece.key;
        let mut plan = control.spare_plans.pop().unwrap_or_default();
        plan.clear();
        let held = (0..self.tiers()).any(|tier| control.controller.holds(tier, key));
        let whole_line = piece.start == 0 && piece.len == self.line_bytes;
        match access {
            Access::Trim if !whole_line => {}
            Access::Read | Access::Write if bypass && !held => {
                let kind = if access == Access::Read {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                plan.push(DeviceOp {
                    device: self.tiers() as u8,
                    kind,
                    key,
                    bytes: self.line_bytes,
                });
                plan.end_stage();
            }
            _ => {
                let op = match access {
                    Access::Read => Op::Read,
                    Access::Write => Op::Write,
                    Access::Trim => Op::Trim,
                };
                let request = Request {
                    op,
                    time_ns: now,
                    ..Request::new(key, self.line_bytes)
                };
                control.controller.plan(&request, now, &mut plan);
            }
        }
        let part = RequestPart {
            access,
            key,
            start: piece.start,
            len: piece.len,
            dirty_after: 0,
            reads_change_nothing: matches!(self.mode, WriteMode::Wo | WriteMode::Pt),
        };
        self.resolve(control, plan, Some(part), now)
    }

    /// Gives a plan its slots and tickets: every line it touches takes a ticket, and so does
    /// the last line of every slot it fills (whose emptying must come first).
    pub(crate) fn resolve(
        &self,
        control: &mut Control,
        plan: Plan,
        request: Option<RequestPart>,
        now: u64,
    ) -> Job {
        self.resolve_with(control, plan, request, now, false)
    }

    /// [`resolve`](Self::resolve); with `after_all`, the job also waits for every job planned
    /// before it, on whatever lines.
    fn resolve_with(
        &self,
        control: &mut Control,
        plan: Plan,
        mut request: Option<RequestPart>,
        now: u64,
        after_all: bool,
    ) -> Job {
        let tiers = self.tiers();
        let mut keys: Vec<u64> = request.iter().map(|part| part.key).collect();
        let touched = plan
            .ops()
            .iter()
            .map(|op| op.key)
            .chain(plan.departures().iter().map(|&(_, key)| key));
        for key in touched {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let mut lines: Vec<LineJob> = keys
            .iter()
            .map(|&key| LineJob {
                key,
                before: control.copies(key),
                after: Copies::default(),
            })
            .collect();
        // Slots follow the controller: first every slot a line leaves, so a victim's slot can
        // go to the line that displaced it, then every slot a line enters.
        let control = &mut *control;
        for line in &lines {
            for tier in 0..tiers {
                if !control.controller.holds(tier, line.key) {
                    control.placement[tier].release(line.key);
                }
            }
        }
        let mut predecessors = Vec::new();
        for line in &mut lines {
            for tier in 0..tiers {
                if control.controller.holds(tier, line.key) {
                    // Every slot is taken only while some are withheld for stranded lines
                    // (`crate::failure`): the line then has no slot, and a move into the tier
                    // fails with an error rather than overwrite them.
                    if let Some((slot, previous)) = control.placement[tier].assign(line.key) {
                        line.after[tier] = Some(slot);
                        predecessors.extend(previous);
                    }
                }
            }
        }
        if let Some(part) = &mut request {
            part.dirty_after = (0..tiers)
                .filter(|&tier| control.controller.is_dirty(tier, part.key))
                .fold(0, |bits, tier| bits | 1 << tier);
        }
        for key in predecessors {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let turns = if after_all {
            self.order.take_turns_after_all(&keys)
        } else {
            self.order.take_turns(&keys)
        };
        Job {
            plan,
            lines,
            request,
            turns,
            now_ns: now,
        }
    }

    /// A plan writing every dirty line back, with its turns, and how many lines it cleans. It
    /// waits for every job planned before it: the controller counts a line clean, or held by
    /// a persistent tier, from when a job to write it back or move it down is planned, while
    /// its data may be in a volatile tier until that job is done; a FLUSH answered before then
    /// would promise what a crash could still take.
    pub(crate) fn plan_cleaning(&self, control: &mut Control, now: u64) -> (Job, u64) {
        let mut plan = control.spare_plans.pop().unwrap_or_default();
        plan.clear();
        let lines = control.controller.flush(&mut plan) as u64;
        (self.resolve_with(control, plan, None, now, true), lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_cut_at_line_boundaries() {
        let cut: Vec<(u64, u32, u32, usize)> = pieces(60 * 1024, 72 * 1024, 65_536)
            .map(|p| (p.key, p.start, p.len, p.at))
            .collect();
        assert_eq!(
            cut,
            [
                (0, 61_440, 4096, 0),
                (1, 0, 65_536, 4096),
                (2, 0, 4096, 69_632)
            ]
        );
        assert_eq!(pieces(0, 0, 4096).count(), 0);
    }
}
