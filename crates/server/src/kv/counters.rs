//! The counters only the front end knows (commands, bytes, connections), defined once: the
//! live atomics, a snapshot, and each one's memcached name, Prometheus kind and meaning, which
//! `stats`, the JSON stats and the metrics endpoint all read from here.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// How the metrics endpoint exposes a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Only grows: exported with `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
}

macro_rules! front_counters {
    ($($name:ident: $kind:ident, $help:literal;)*) => {
        /// The live counters of one tenant, bumped by its connections and workers.
        #[derive(Debug, Default)]
        pub struct FrontCounters {
            $(#[doc = $help] pub $name: AtomicU64,)*
        }

        /// What the counters held at one moment.
        #[derive(Clone, Copy, Debug, Default, Serialize)]
        pub struct FrontCounts {
            $(#[doc = $help] pub $name: u64,)*
        }

        impl FrontCounters {
            /// Their values now.
            pub fn snapshot(&self) -> FrontCounts {
                FrontCounts {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }

        impl FrontCounts {
            /// Each as (memcached name, metric kind, what it counts, value), in memcached's
            /// order.
            pub fn named(&self) -> Vec<(&'static str, MetricKind, &'static str, u64)> {
                vec![$((stringify!($name), MetricKind::$kind, $help, self.$name),)*]
            }
        }
    };
}

front_counters! {
    curr_connections: Gauge, "open connections";
    total_connections: Counter, "connections accepted";
    rejected_connections: Counter, "connections refused over the tenant's maxconns or per-peer cap";
    rejected_peer_connections: Counter, "connections refused over the per-peer cap";
    idle_kicks: Counter, "connections closed for sending nothing for idle_timeout";
    auth_timeouts: Counter, "connections closed for not authenticating within auth_timeout";
    request_timeouts: Counter, "connections closed for a request not whole within request_timeout";
    request_panics: Counter, "requests whose execution panicked (answered SERVER_ERROR, closed)";
    cmd_get: Counter, "get keys requested";
    cmd_set: Counter, "storage commands";
    cmd_flush: Counter, "flush_all commands";
    cmd_touch: Counter, "touches";
    cmd_meta: Counter, "meta commands";
    bytes_read: Counter, "bytes received";
    bytes_written: Counter, "bytes sent";
    protocol_errors: Counter, "requests answered with a protocol error";
    auth_cmds: Counter, "authentication attempts (a set before authenticating)";
    auth_errors: Counter, "authentication attempts refused";
    auth_closes: Counter, "connections closed after max_auth_failures wrong passwords";
    ssl_handshake_errors: Counter, "TLS handshakes that failed (a plaintext client on a TLS port among them)";
}

/// Adds `by` to `counter`.
pub fn add(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}
