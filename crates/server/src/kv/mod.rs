//! The key-value cache server (docs/kv-cache.md): memcached's text and meta protocols for many
//! tenants, each on its own port with its own store, quota and statistics, served by a pool of
//! event-loop workers.

pub mod auth;
pub mod config;
mod connection;
pub mod counters;
mod execute;
pub mod latency;
mod limits;
pub mod nyx;
mod stats;
pub mod tenant;
mod worker;

use std::net::TcpListener;
use std::sync::Arc;

pub use config::{PmConfig, TenantConfig};
pub use tenant::{Tenant, TenantStats};

use crate::error::RunError;
use crate::listen::ListenAddr;
use worker::{accept_forever, start_workers, TenantListener};

/// Binds every tenant's sockets (a port taken fails here, naming the tenant) and serves them
/// on `threads` workers from now on.
pub fn start(tenants: &[Arc<Tenant>], threads: usize) -> Result<(), RunError> {
    let mut listeners = Vec::new();
    for tenant in tenants {
        let ListenAddr::Tcp(address) = &tenant.config.listen else {
            let what = format!("tenant {}: listen", tenant.name());
            return Err(RunError::failed(what, "expected HOST:PORT"));
        };
        let tcp = TcpListener::bind(address).map_err(|e| {
            RunError::failed(
                format!("tenant {}: cannot listen on {address}", tenant.name()),
                e,
            )
        })?;
        let shown = tcp
            .local_addr()
            .map_or_else(|_| address.clone(), |addr| addr.to_string());
        listeners.push((TenantListener::Tcp(tcp), Arc::clone(tenant), shown));
        if let Some(path) = &tenant.config.unix {
            let unix = crate::listen::bind_unix(path)
                .map_err(|e| RunError::failed(format!("tenant {}", tenant.name()), e))?;
            let shown = format!("unix:{}", path.display());
            listeners.push((TenantListener::Unix(unix), Arc::clone(tenant), shown));
        }
    }
    warn_of_descriptors(tenants, listeners.len());
    watch_certificates(tenants)?;
    let workers =
        start_workers(threads).map_err(|e| RunError::failed("cannot start kv workers", e))?;
    for (listener, tenant, shown) in listeners {
        eprintln!(
            "heterarchy: kv tenant {} listening on {shown} ({}{})",
            tenant.name(),
            tenant.store().describe(),
            match (&listener, &tenant.tls) {
                (TenantListener::Tcp(_), Some(_)) => "; tls",
                _ => "",
            }
        );
        let workers = workers.clone();
        std::thread::Builder::new()
            .name("kv-accept".to_string())
            .spawn(move || accept_forever(listener, tenant, workers))
            .map_err(|e| RunError::failed("cannot start an acceptor thread", e))?;
    }
    Ok(())
}

/// Says so when the tenants' `max_connections` add up to more descriptors than the process may
/// hold (its limit raised to the hard one at start, `crate::descriptors`): past it, accepting
/// fails for every tenant alike, not only the one whose clients took them.
fn warn_of_descriptors(tenants: &[Arc<Tenant>], listeners: usize) {
    let Some(limit) = crate::descriptors::raise_open_files_limit() else {
        return;
    };
    // Room for the listeners, the stores' files, the workers' polls and timers, and stdio.
    let wanted: u64 = tenants
        .iter()
        .map(|tenant| tenant.config.max_connections as u64)
        .sum::<u64>()
        + listeners as u64
        + 64;
    if wanted > limit {
        eprintln!(
            "heterarchy: kv: the tenants' max_connections add up to {} and the process may \
             open {limit} descriptors; raise the hard limit (ulimit -Hn) or lower max_connections",
            wanted - listeners as u64 - 64
        );
    }
}

/// Reads a TLS tenant's certificates again within a second of one of its files changing, as a
/// `refresh_certs` would (a pair that fails to load leaves the one in force, and is read
/// again when it changes again).
fn watch_certificates(tenants: &[Arc<Tenant>]) -> Result<(), RunError> {
    let watched: Vec<Arc<Tenant>> = tenants
        .iter()
        .filter(|tenant| tenant.tls.is_some())
        .cloned()
        .collect();
    if watched.is_empty() {
        return Ok(());
    }
    let watch = move || loop {
        std::thread::sleep(worker::SWEEP_EVERY);
        for tenant in &watched {
            let Some(tls) = &tenant.tls else {
                continue;
            };
            match tls.reload_if_changed() {
                None => {}
                Some(Ok(())) => eprintln!(
                    "heterarchy: kv tenant {}: certificates read again from {}",
                    tenant.name(),
                    tls.dir().display()
                ),
                Some(Err(error)) => eprintln!(
                    "heterarchy: kv tenant {}: certificates not read again, the old ones stay: {error}",
                    tenant.name()
                ),
            }
        }
    };
    std::thread::Builder::new()
        .name("kv-tls-watch".to_string())
        .spawn(watch)
        .map(drop)
        .map_err(|e| RunError::failed("cannot start the certificate watcher", e))
}
