//! The plain data a planned request is carried out with (docs/architecture.md, "A request
//! through a live volume"): a line's slots before and after ([`LineJob`], [`Copies`]), the
//! client's part ([`RequestPart`]), the job as a whole ([`Job`]), the client's buffer
//! ([`Client`]) and whether carrying it out may wait ([`Mode`]). It imports nothing of the
//! volume but the order of turns, so that every layer above can use it.

use heterarchy_engine::{Plan, MAX_CACHE_TIERS};

use crate::order::Turns;

/// A line's slot in each cache tier (`None`: the tier does not hold it).
pub type Copies = [Option<u32>; MAX_CACHE_TIERS];

/// Whether carrying a job out may wait for devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Wait,
    /// On a thread that must not wait: reads take only what is at hand, else the job is
    /// refused before anything changes.
    AtOnce,
}

/// One line a plan touches, with its slot in every tier before and after the plan.
#[derive(Clone, Copy, Debug, Default)]
pub struct LineJob {
    pub key: u64,
    pub before: Copies,
    pub after: Copies,
}

impl LineJob {
    /// Tiers the line leaves, as bits.
    pub(crate) fn departs(&self) -> u8 {
        tier_bits(|tier| self.before[tier].is_some() && self.after[tier].is_none())
    }

    /// Tiers the line enters, as bits.
    pub(crate) fn enters(&self) -> u8 {
        tier_bits(|tier| self.before[tier].is_none() && self.after[tier].is_some())
    }

    /// Tiers holding the line before, as bits.
    pub(crate) fn held(&self) -> u8 {
        tier_bits(|tier| self.before[tier].is_some())
    }
}

fn tier_bits(test: impl Fn(usize) -> bool) -> u8 {
    (0..MAX_CACHE_TIERS)
        .filter(|&tier| test(tier))
        .fold(0, |bits, tier| bits | 1 << tier)
}

/// What a client's request does to its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// The whole line is discarded: dirty data is dropped, not written back.
    Trim,
}

/// The client's part of a plan: one request's piece of one line.
#[derive(Clone, Copy, Debug)]
pub struct RequestPart {
    pub access: Access,
    pub key: u64,
    /// Byte offset within the line, and length.
    pub start: u32,
    pub len: u32,
    /// Tiers whose copy the controller holds dirty once the plan is done, as bits.
    pub dirty_after: u8,
    /// A read's partial hit leaves the cache as it is (wo and pt).
    pub reads_change_nothing: bool,
}

/// A plan, resolved to slots and ordered against other plans on the same lines.
pub struct Job {
    pub plan: Plan,
    /// Every line the plan touches.
    pub lines: Vec<LineJob>,
    /// `None` for cleaning.
    pub request: Option<RequestPart>,
    /// Its turn on every line it holds.
    pub turns: Turns,
    /// When the request was planned, ns since the volume opened.
    pub now_ns: u64,
}

/// The client's buffer.
pub enum Client<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
    None,
}

impl Client<'_> {
    /// The same buffer lent again, so that a failed job's piece can still be carried out
    /// around the cache (`crate::failure`).
    pub fn reborrow(&mut self) -> Client<'_> {
        match self {
            Client::Read(out) => Client::Read(out),
            Client::Write(data) => Client::Write(data),
            Client::None => Client::None,
        }
    }
}
