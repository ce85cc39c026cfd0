//! What one tenant's clients may take of the server (docs/reliability.md, "Limits on what a
//! client can make a server hold"): one budget for the bytes its connections' buffers hold
//! beyond their first [`BASELINE_BYTES`] each (places by peer are `crate::peers`').

use std::sync::atomic::{AtomicUsize, Ordering};

/// What each connection's input and output buffers may hold without drawing on the budget:
/// the 64 KiB each starts with.
pub const BASELINE_BYTES: usize = 64 << 10;

/// The bytes a tenant's connections hold in their buffers beyond [`BASELINE_BYTES`] each, and
/// what they may: half of `client_buffers` for requests arriving, half for answers waiting, so
/// that clients that never read their answers cannot keep others from sending a large value,
/// nor clients that never finish a value keep others from being answered.
#[derive(Debug)]
pub struct BufferBudget {
    input: AtomicUsize,
    output: AtomicUsize,
    /// What each side may hold.
    half: usize,
}

/// One connection's share of a [`BufferBudget`]: what its input and output buffers hold
/// beyond their baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Share {
    pub input: usize,
    pub output: usize,
}

impl Share {
    /// The share of buffers of these capacities.
    pub fn of(input_bytes: usize, output_bytes: usize) -> Share {
        Share {
            input: input_bytes.saturating_sub(BASELINE_BYTES),
            output: output_bytes.saturating_sub(BASELINE_BYTES),
        }
    }
}

impl BufferBudget {
    pub fn new(limit: usize) -> BufferBudget {
        BufferBudget {
            input: AtomicUsize::new(0),
            output: AtomicUsize::new(0),
            half: limit / 2,
        }
    }

    /// Whether requests arriving hold all they may, or more.
    pub fn input_spent(&self) -> bool {
        self.input.load(Ordering::Relaxed) >= self.half
    }

    /// Whether answers waiting hold all they may, or more.
    pub fn output_spent(&self) -> bool {
        self.output.load(Ordering::Relaxed) >= self.half
    }

    /// What all the connections hold now.
    pub fn held(&self) -> usize {
        self.input.load(Ordering::Relaxed) + self.output.load(Ordering::Relaxed)
    }

    /// Notes that one connection's share went from `before` to `after`.
    pub fn change(&self, before: Share, after: Share) {
        for (counter, before, after) in [
            (&self.input, before.input, after.input),
            (&self.output, before.output, after.output),
        ] {
            if after > before {
                counter.fetch_add(after - before, Ordering::Relaxed);
            } else if before > after {
                counter.fetch_sub(before - after, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_what_is_beyond_the_baseline_by_side() {
        let budget = BufferBudget::new(2 << 20);
        assert_eq!(Share::of(BASELINE_BYTES, 100), Share::default());
        let big = Share::of(BASELINE_BYTES, BASELINE_BYTES + (1 << 20));
        assert_eq!(
            big,
            Share {
                input: 0,
                output: 1 << 20
            }
        );
        budget.change(Share::default(), big);
        assert!(budget.output_spent() && !budget.input_spent());
        let smaller = Share {
            input: 5,
            output: 10,
        };
        budget.change(big, smaller);
        assert!(!budget.output_spent());
        assert_eq!(budget.held(), 15);
    }
}
