//! A tenant (issue 6, item 3): its store behind a lock, and the counters only the front end
//! knows (commands and connections). Each tenant has its own store, so one tenant can never
//! read, overwrite or evict another's keys.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use heterarchy_device::backend::{open_backend, Throttles};
use heterarchy_kvstore::{Recovery, Store, StoreStats};
use serde::Serialize;

use super::config::TenantConfig;

/// Command and connection counters, as memcached names them.
#[derive(Debug, Default)]
pub struct FrontCounters {
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_touch: AtomicU64,
    pub cmd_flush: AtomicU64,
    pub cmd_meta: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub curr_connections: AtomicUsize,
}

/// One tenant being served.
pub struct Tenant {
    pub config: TenantConfig,
    store: Mutex<Store>,
    pub counters: FrontCounters,
    pub started: Instant,
    pub recovery: Recovery,
}

/// Everything `stats` and the metrics endpoint report for a tenant.
#[derive(Clone, Debug, Serialize)]
pub struct TenantStats {
    pub name: String,
    pub store: String,
    pub uptime_secs: u64,
    pub curr_connections: u64,
    pub total_connections: u64,
    pub rejected_connections: u64,
    pub cmd_get: u64,
    pub cmd_set: u64,
    pub cmd_touch: u64,
    pub cmd_flush: u64,
    pub cmd_meta: u64,
    pub protocol_errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    #[serde(flatten)]
    pub store_stats: StoreStatsJson,
}

/// The store's counters, by memcached's names.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct StoreStatsJson(pub std::collections::BTreeMap<&'static str, u64>);

impl Tenant {
    /// Opens the tenant's store (finding a previous run's items on persistent memory); a
    /// throttle named after one of `throttles`' devices is that device's, shared.
    pub fn open(config: &TenantConfig, throttles: &Throttles) -> Result<Tenant, String> {
        let spec = config.value_store()?;
        let backend = open_backend(&spec).map_err(|e| format!("{spec}: {e}"))?;
        let store_config = config.store_config()?;
        let (mut store, recovery) =
            Store::open(backend, store_config, unix_now_secs()).map_err(|e| e.to_string())?;
        if let Some(name) = &config.throttle {
            let throttle = throttles.get(name).map_err(|e| format!("throttle: {e}"))?;
            store.set_throttle(throttle);
        }
        Ok(Tenant {
            config: config.clone(),
            store: Mutex::new(store),
            counters: FrontCounters::default(),
            started: Instant::now(),
            recovery,
        })
    }

    /// The store, locked; a worker that panicked with it leaves it usable.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Counts a command.
    pub fn count(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }

    /// Its stats now.
    pub fn stats(&self) -> TenantStats {
        let store = self.store();
        let store_stats: StoreStats = store.stats();
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.counters;
        TenantStats {
            name: self.config.name.clone(),
            store: store.describe(),
            uptime_secs: self.started.elapsed().as_secs(),
            curr_connections: counters.curr_connections.load(Ordering::Relaxed) as u64,
            total_connections: read(&counters.total_connections),
            rejected_connections: read(&counters.rejected_connections),
            cmd_get: read(&counters.cmd_get),
            cmd_set: read(&counters.cmd_set),
            cmd_touch: read(&counters.cmd_touch),
            cmd_flush: read(&counters.cmd_flush),
            cmd_meta: read(&counters.cmd_meta),
            protocol_errors: read(&counters.protocol_errors),
            bytes_read: read(&counters.bytes_read),
            bytes_written: read(&counters.bytes_written),
            store_stats: StoreStatsJson(store_stats.named().into_iter().collect()),
        }
    }

    /// Writes everything back and marks the store cleanly shut down.
    pub fn shut_down(&self) -> std::io::Result<()> {
        self.store().shut_down()
    }
}

/// The current Unix time in seconds.
pub fn unix_now_secs() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as u32)
}
