//! `heterarchy-floor`: the floor server of `scripts/bench-floor` (see the crate's doc).

use anyhow::Result;
use clap::{Parser, Subcommand};
use heterarchy_floor::{Floor, Protocol};

/// A request-response server with no storage, one read and one write per request: the floor
/// that heterarchy's servers are measured against.
#[derive(Parser, Debug)]
#[command(name = "heterarchy-floor", version)]
struct Args {
    #[command(subcommand)]
    protocol: ProtocolArgs,
}

#[derive(Subcommand, Debug)]
enum ProtocolArgs {
    /// NBD: one read-only export of zeros (the empty name and "floor" reach it).
    Nbd {
        /// HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:10809")]
        listen: String,
        /// The export's size.
        #[arg(long)]
        size_bytes: u64,
    },
    /// memcached's text protocol: every get hits a value of --value-bytes; sets are dropped.
    Memcached {
        /// HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:11211")]
        listen: String,
        /// The length of the value every get returns.
        #[arg(long, default_value_t = 100)]
        value_bytes: usize,
    },
}

fn main() {
    if let Err(error) = run(Args::parse()) {
        eprintln!("heterarchy-floor: {error:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    let (listen, protocol, name) = match args.protocol {
        ProtocolArgs::Nbd { listen, size_bytes } => (listen, Protocol::Nbd { size_bytes }, "nbd"),
        ProtocolArgs::Memcached {
            listen,
            value_bytes,
        } => (listen, Protocol::Memcached { value_bytes }, "memcached"),
    };
    let floor = Floor::start(&listen, protocol)?;
    eprintln!("heterarchy-floor: serving {name} on {}", floor.address());
    floor.wait()?;
    Ok(())
}
