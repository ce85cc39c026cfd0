//! The `stats` command (memcached doc/protocol.txt, "Statistics"): the tenant's own counters,
//! under memcached's names, so existing tools read them; other tenants are never shown.

use heterarchy_kvstore::Storage;
use heterarchy_memcache::compose;

use super::execute::VERSION;
use super::tenant::{unix_now_secs, Tenant};

/// Writes the answer to `stats [group]` for `tenant`.
pub fn write_stats(tenant: &Tenant, store: &dyn Storage, group: Option<&[u8]>, out: &mut Vec<u8>) {
    match group {
        None => general(tenant, store, out),
        Some(b"settings") => settings(tenant, out),
        // Groups of memcached's slab allocator, which a segment store does not have: empty.
        Some(b"items" | b"slabs" | b"sizes" | b"conns") => {}
        Some(_) => {
            compose::line(out, "ERROR");
            return;
        }
    }
    compose::end(out);
}

fn general(tenant: &Tenant, store: &dyn Storage, out: &mut Vec<u8>) {
    compose::stat(out, "pid", std::process::id());
    compose::stat(out, "uptime", tenant.started.elapsed().as_secs());
    compose::stat(out, "time", unix_now_secs());
    compose::stat(out, "version", VERSION);
    compose::stat(out, "tenant", tenant.name());
    for (name, _, _, value) in tenant.counters.snapshot().named() {
        compose::stat(out, name, value);
    }
    for (name, value) in store.stats().named() {
        compose::stat(out, name, value);
    }
}

fn settings(tenant: &Tenant, out: &mut Vec<u8>) {
    let config = &tenant.config;
    compose::stat(out, "maxconns", config.max_connections);
    compose::stat(out, "tcpport", &config.listen);
    compose::stat(out, "item_size_max", &config.item_max);
    compose::stat(out, "segment_size", &config.segment);
    compose::stat(out, "evictions", "on");
    // memcached's names where it has the setting, then the tenant's own limits.
    compose::stat(out, "idle_timeout", config.idle_timeout);
    let tls = match tenant.tls {
        Some(_) => "yes",
        None => "no",
    };
    compose::stat(out, "ssl_enabled", tls);
    compose::stat(out, "maxconns_per_peer", config.max_connections_per_peer);
    compose::stat(out, "auth_timeout", config.auth_timeout);
    compose::stat(out, "request_timeout", config.request_timeout);
    compose::stat(out, "client_buffers", &config.client_buffers);
}
