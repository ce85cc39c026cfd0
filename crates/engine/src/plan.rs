//! Device-operation plans: what a cache decision asks the devices to do, in order.

pub use heterarchy_device::IoKind;

/// One operation on one device of the hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceOp {
    /// Index of the device: 0 is the top (fastest) cache tier, the last is the backing store.
    pub device: u8,
    pub kind: IoKind,
    /// The cache line (block trace) or object (key-value trace) moved.
    pub key: u64,
    pub bytes: u32,
}

/// Device operations grouped into stages: every operation of a stage is issued at once, and a
/// stage starts when the previous one has completed. The client's request completes when the
/// reply stage completes; later stages (write-backs, say) go on in the background.
///
/// A plan is reused from request to request, so planning allocates nothing in steady state.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    ops: Vec<DeviceOp>,
    /// `ops[stage_ends[k - 1]..stage_ends[k]]` is stage k.
    stage_ends: Vec<u32>,
    /// Stage after which the client is answered; `None` means after the last one.
    reply_stage: Option<usize>,
    /// Lines that left a cache tier without any I/O (clean victims, invalidations), as
    /// `(tier, key)`: a live executor frees their slots; the simulator has nothing to do.
    departures: Vec<(u8, u64)>,
}

impl Plan {
    /// An empty plan.
    pub fn new() -> Plan {
        Plan::default()
    }

    /// Empties the plan, keeping its memory.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.stage_ends.clear();
        self.reply_stage = None;
        self.departures.clear();
    }

    /// Notes that cache tier `tier` no longer holds `key`'s line. A line written back or moved
    /// also departs: its operations read it first, so the executor frees its slot after the
    /// plan's reads and before its writes (every read of a plan precedes every write).
    pub fn depart(&mut self, tier: u8, key: u64) {
        self.departures.push((tier, key));
    }

    /// The lines that left cache tiers, in the order they left.
    pub fn departures(&self) -> &[(u8, u64)] {
        &self.departures
    }

    /// Adds `op` to the stage being built.
    pub fn push(&mut self, op: DeviceOp) {
        self.ops.push(op);
    }

    /// Closes the stage being built; the next [`push`](Self::push) starts a new one. Closing an
    /// empty stage does nothing, so callers may close unconditionally.
    pub fn end_stage(&mut self) {
        let start = self.stage_ends.last().copied().unwrap_or(0) as usize;
        if self.ops.len() > start {
            self.stage_ends.push(self.ops.len() as u32);
        }
    }

    /// Answers the client once the stages closed so far have completed; stages added later run
    /// in the background. Closes the stage being built.
    pub fn reply_here(&mut self) {
        self.end_stage();
        self.reply_stage = Some(self.stage_ends.len());
    }

    /// Number of stages, counting the one being built if it holds operations.
    pub fn stage_count(&self) -> usize {
        let closed = self.stage_ends.len();
        let start = self.stage_ends.last().copied().unwrap_or(0) as usize;
        closed + usize::from(self.ops.len() > start)
    }

    /// The operations of stage `index`.
    pub fn stage(&self, index: usize) -> &[DeviceOp] {
        let start = if index == 0 {
            0
        } else {
            self.stage_ends[index - 1] as usize
        };
        let end = self
            .stage_ends
            .get(index)
            .map_or(self.ops.len(), |&end| end as usize);
        &self.ops[start..end]
    }

    /// How many stages must complete before the client is answered (all of them unless
    /// [`reply_here`](Self::reply_here) was called). Zero for an empty plan: the request is
    /// answered at once.
    pub fn reply_after(&self) -> usize {
        self.reply_stage.unwrap_or_else(|| self.stage_count())
    }

    /// Every operation, in stage order.
    pub fn ops(&self) -> &[DeviceOp] {
        &self.ops
    }

    /// True when the plan asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A 4 KiB operation of `kind` on `device`, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_op(device: u8, kind: IoKind) -> DeviceOp {
    DeviceOp {
        device,
        kind,
        key: 7,
        bytes: 4096,
    }
}

#[cfg(test)]
mod tests {
    use super::test_op as op;
    use super::*;

    #[test]
    fn stages_split_where_closed() {
        let mut plan = Plan::new();
        plan.push(op(1, IoKind::Read));
        plan.end_stage();
        plan.end_stage();
        plan.push(op(0, IoKind::Write));
        plan.push(op(1, IoKind::Write));
        assert_eq!(plan.stage_count(), 2);
        assert_eq!(plan.stage(0), &[op(1, IoKind::Read)]);
        assert_eq!(plan.stage(1), &[op(0, IoKind::Write), op(1, IoKind::Write)]);
        assert_eq!(plan.reply_after(), 2);
    }

    #[test]
    fn reply_stage_leaves_later_stages_in_background() {
        let mut plan = Plan::new();
        plan.push(op(0, IoKind::Write));
        plan.reply_here();
        plan.push(op(0, IoKind::Read));
        plan.end_stage();
        plan.push(op(1, IoKind::Write));
        assert_eq!(plan.reply_after(), 1);
        assert_eq!(plan.stage_count(), 3);
        plan.depart(0, 9);
        assert_eq!(plan.departures(), &[(0, 9)]);
        plan.clear();
        assert!(plan.is_empty());
        assert!(plan.departures().is_empty());
        assert_eq!(plan.reply_after(), 0);
    }
}
