//! One module per subcommand.

pub mod demo;
pub mod device;
pub mod experiment;
pub mod loadgen;
pub mod model;
pub mod mrc;
pub mod policies;
pub mod replay;
pub mod serve;
pub mod sim;
pub mod simulate;
pub mod sizing;
pub mod trace;
pub mod volume;
