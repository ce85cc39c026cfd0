//! One module per subcommand.

pub mod demo;
pub mod mrc;
pub mod sim;
pub mod trace;
