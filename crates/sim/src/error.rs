//! Why a PolyEMT run or a timed hierarchy's controller cannot be made: one line naming the
//! setting at fault (docs/architecture.md, "Conventions"). The simulators' older error types
//! live beside their code ([`crate::cache_sim::SimError`], [`crate::mrc::MrcError`]).

use heterarchy_engine::{ConfigError, ParamError};
use heterarchy_trace::generate::SpecError;
use heterarchy_trace::TraceError;

/// A PolyEMT run that cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum PolyError {
    /// A size or count of the machine or the run that cannot work.
    #[error("{key}: {reason}")]
    Invalid {
        key: &'static str,
        reason: &'static str,
    },
    /// Knobs or search settings out of range.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// The workload's spec cannot be generated.
    #[error(transparent)]
    Workload(#[from] SpecError),
    /// The workload failed while it was read.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// A controller a timed hierarchy cannot have.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The cache settings do not fit the tiers.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A split search has no one controller.
    #[error("a split search runs many controllers")]
    SplitSearch,
}
