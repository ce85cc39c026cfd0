//! A tenant (issue 6, item 3): its store behind a lock, and the counters only the front end
//! knows (commands and connections). Each tenant has its own store, so one tenant can never
//! read, overwrite or evict another's keys.

use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use heterarchy_device::backend::{open_backend, Throttles};
use heterarchy_kvstore::{Recovery, Store, StoreConfig};
use serde::Serialize;

use super::config::{PmConfig, TenantConfig};
use super::counters::{FrontCounters, FrontCounts};

/// One tenant being served.
pub struct Tenant {
    pub config: TenantConfig,
    /// The store's geometry and limits, parsed from `config` once, at start.
    pub store_config: StoreConfig,
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
    #[serde(flatten)]
    pub front: FrontCounts,
    #[serde(flatten)]
    pub store_stats: StoreStatsJson,
}

/// The store's counters, by memcached's names.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct StoreStatsJson(pub std::collections::BTreeMap<&'static str, u64>);

impl Tenant {
    /// Opens the tenant's store (finding a previous run's items on persistent memory), on `pm`
    /// if it names one; a throttle named after one of `throttles`' devices (a `[[pm]]` is one)
    /// is that device's, shared.
    pub fn open(
        config: &TenantConfig,
        pm: Option<&PmConfig>,
        throttles: &Throttles,
    ) -> Result<Tenant, String> {
        let spec = config.value_store(pm)?;
        if let Some(pm) = pm {
            std::fs::create_dir_all(&pm.path)
                .map_err(|e| format!("pm {}: {}: {e}", pm.name, pm.path.display()))?;
        }
        let backend = open_backend(&spec).map_err(|e| format!("{spec}: {e}"))?;
        let store_config = config.store_config()?;
        let (mut store, recovery) = Store::open(backend, store_config.clone(), unix_now_secs())
            .map_err(|e| e.to_string())?;
        if let Some(name) = config.throttle.as_ref().or(config.pm.as_ref()) {
            let throttle = throttles.get(name).map_err(|e| format!("throttle: {e}"))?;
            store.set_throttle(throttle);
        }
        Ok(Tenant {
            config: config.clone(),
            store_config,
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

    /// Its stats now.
    pub fn stats(&self) -> TenantStats {
        let store = self.store();
        TenantStats {
            name: self.config.name.clone(),
            store: store.describe(),
            uptime_secs: self.started.elapsed().as_secs(),
            front: self.counters.snapshot(),
            store_stats: StoreStatsJson(store.stats().named().into_iter().collect()),
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
