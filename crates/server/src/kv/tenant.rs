//! A tenant: its store behind a lock, and the counters only the front end knows (commands and
//! connections). Each tenant has its own store, so one tenant can never read, overwrite or
//! evict another's keys.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use heterarchy_device::backend::{open_backend, with_faults, Throttles};
use heterarchy_engine::nyx::Regulator;
use heterarchy_kvstore::{Recovery, Store, StoreConfig};
use serde::Serialize;

use super::auth::AuthFile;
use super::config::{PmConfig, TenantConfig};
use super::counters::{FrontCounters, FrontCounts};
use super::latency::{Latencies, LatencyWindow};
use super::limits::BufferBudget;
use crate::error::{ConfigError, RunError};
use crate::peers::PeerCounts;
use crate::socket::Socket;
use crate::tls::ReloadableTls;

/// One tenant being served.
pub struct Tenant {
    pub config: TenantConfig,
    /// The store's geometry and limits, parsed from `config` once, at start.
    pub store_config: StoreConfig,
    store: Mutex<Store>,
    pub counters: FrontCounters,
    pub started: Instant,
    pub recovery: Recovery,
    /// Its gate on a shared `[[pm]]` (NyxCache's M1 and M2), if it is on one.
    gate: Option<Arc<Regulator>>,
    /// What its requests took, window by window.
    pub latencies: Latencies,
    /// Who may use it, if clients must authenticate.
    pub auth: Option<AuthFile>,
    /// Its connections by peer, for `max_connections_per_peer`.
    pub peers: Arc<PeerCounts>,
    /// What its connections' buffers hold beyond their baseline, for `client_buffers`.
    pub buffers: BufferBudget,
    /// The TLS its TCP port speaks, if it does (`tls_certificates`).
    pub tls: Option<ReloadableTls>,
}

/// Everything `stats` and the metrics endpoint report for a tenant.
#[derive(Clone, Debug, Serialize)]
pub struct TenantStats {
    pub name: String,
    pub store: String,
    pub uptime_secs: u64,
    #[serde(flatten)]
    pub front: FrontCounts,
    /// Its last completed latency window (500 ms).
    #[serde(flatten)]
    pub latency: LatencyWindow,
    /// Its use of a shared `[[pm]]`, if it is on one.
    #[serde(flatten)]
    pub nyx: Option<NyxStats>,
    #[serde(flatten)]
    pub store_stats: StoreStatsJson,
}

/// A tenant's use of its shared `[[pm]]` (NyxCache's M2 counters and its M1 throttle).
#[derive(Clone, Debug, Serialize)]
pub struct NyxStats {
    /// The `[[pm]]` it shares, so that a reader can group the tenants that share one.
    pub nyx_pm: String,
    /// Device time its accesses cost, by the device's MaxIOPS profile: its rate is the
    /// tenant's utilization of the device.
    pub nyx_cost_seconds: f64,
    pub nyx_accesses: u64,
    pub nyx_bytes: u64,
    /// Its throttle now: accesses a second it may make (0: unthrottled).
    pub nyx_rate_cap_per_second: f64,
    /// Its slowdown as the policy last estimated it (T_alone / T_shared; 0: not estimated).
    pub nyx_slowdown: f64,
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
    ) -> Result<Tenant, RunError> {
        // Read before the store opens, so a bad file stops the start at once.
        let auth = match &config.auth_file {
            Some(path) => Some(AuthFile::load(path).map_err(|e| RunError::failed("auth_file", e))?),
            None => None,
        };
        // Certificates too, before the port opens.
        let tls = match &config.tls_certificates {
            Some(dir) => Some(
                ReloadableTls::load(dir, config.tls_verify_peer)
                    .map_err(|e| ConfigError::within("tls_certificates: ", e))?,
            ),
            None => None,
        };
        let spec = config.value_store(pm)?;
        if let Some(pm) = pm {
            std::fs::create_dir_all(&pm.path).map_err(|e| {
                RunError::failed(format!("pm {}: {}", pm.name, pm.path.display()), e)
            })?;
        }
        let backend = open_backend(&spec).map_err(|e| RunError::failed(spec.to_string(), e))?;
        let backend = with_faults(backend, config.faults.clone());
        let store_config = config.store_config()?;
        let buffers = BufferBudget::new(config.client_buffers_bytes()?);
        let (mut store, recovery) =
            Store::open(backend, store_config.clone(), unix_now_secs()).map_err(RunError::Io)?;
        if let Some(name) = config.throttle.as_ref().or(config.pm.as_ref()) {
            let throttle = throttles
                .get(name)
                .map_err(|e| RunError::failed("throttle", e))?;
            store.set_throttle(throttle);
        }
        Ok(Tenant {
            config: config.clone(),
            store_config,
            store: Mutex::new(store),
            counters: FrontCounters::default(),
            started: Instant::now(),
            recovery,
            gate: pm.map(|_| Arc::new(Regulator::new())),
            latencies: Latencies::default(),
            auth,
            peers: PeerCounts::new(config.max_connections_per_peer),
            buffers,
            tls,
        })
    }

    /// The store, locked; a worker that panicked with it leaves it usable.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes a request answered at `answered` after `latency`: for its stats and for the
    /// sharing policy watching it.
    pub fn record_request(&self, answered: Instant, latency: std::time::Duration) {
        self.latencies.record(answered, latency);
        if let Some(gate) = &self.gate {
            gate.record_request(latency.as_nanos() as u64);
        }
    }

    /// Its gate on a shared `[[pm]]`, if it is on one.
    pub fn gate(&self) -> Option<&Arc<Regulator>> {
        self.gate.as_ref()
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Whether TLS carries the bytes of `socket`, one of its accepted connections: those of
    /// its TCP port when it has certificates (its Unix socket stays plain, as memcached's).
    pub fn speaks_tls(&self, socket: &Socket) -> bool {
        self.tls.is_some() && matches!(socket, Socket::Tcp(_))
    }

    /// Its stats now.
    pub fn stats(&self) -> TenantStats {
        let store = self.store();
        TenantStats {
            name: self.config.name.clone(),
            store: store.describe(),
            uptime_secs: self.started.elapsed().as_secs(),
            front: self.counters.snapshot(),
            latency: self.latencies.last(Instant::now()),
            nyx: self.gate.as_ref().map(|gate| {
                let usage = gate.usage();
                NyxStats {
                    nyx_pm: self.config.pm.clone().unwrap_or_default(),
                    nyx_cost_seconds: usage.cost_ps as f64 / 1e12,
                    nyx_accesses: usage.accesses,
                    nyx_bytes: usage.bytes,
                    nyx_rate_cap_per_second: gate.rate_cap().unwrap_or(0.0),
                    nyx_slowdown: gate.slowdown().unwrap_or(0.0),
                }
            }),
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
