//! Starting a server and stopping it gracefully: volumes and key-value tenants opened (a bad
//! config fails here, with the export or tenant and key), listeners bound, a cleaner thread per
//! volume, and on SIGTERM or SIGINT every dirty line written back and every tenant's store
//! marked cleanly shut down before the process exits.

use std::sync::Arc;
use std::time::Duration;

use heterarchy_blockdev::poly::PolyExport;
use heterarchy_blockdev::StagedExport;
use heterarchy_device::BlockDevice;
use heterarchy_volume::Volume;

use crate::admin::Served;
use crate::config::{ExportConfig, ServeConfig};
use crate::error::{BoxError, ConfigError, RunError};
use crate::kv::{self, Tenant};
use crate::listen::{ListenAddr, Listener};
use crate::nbd::{self, Export, Exports};
use crate::stopping::Stopping;

/// How long a stopping server waits for the requests under way before it writes back.
const STOP_PATIENCE: Duration = Duration::from_secs(30);
/// The longest a cleaner sleeps, so cleaning that a request made due starts soon after.
const CLEANER_TICK: Duration = Duration::from_secs(1);

/// Serves `config` until SIGTERM or SIGINT, then shuts every volume down cleanly.
pub fn run(config: &ServeConfig) -> Result<(), RunError> {
    let signals = block_stop_signals();
    let stopping = Stopping::new();
    crate::descriptors::raise_open_files_limit();
    let throttles = config.throttles()?;
    let mut volumes = Vec::new();
    let mut staged = Vec::new();
    let mut polys = Vec::new();
    let mut exports = Vec::new();
    for export in &config.export {
        let failed = |e: BoxError| RunError::failed(format!("export {}", export.name()), e);
        match export {
            ExportConfig::Cached(volume) => {
                let volume =
                    Arc::new(Volume::open_with(volume, &throttles).map_err(|e| failed(e.into()))?);
                exports.push(Export::Cached(Arc::clone(&volume)));
                volumes.push(volume);
            }
            ExportConfig::Staged(device) => {
                let device =
                    Arc::new(StagedExport::open(device, &throttles).map_err(|e| failed(e.into()))?);
                eprintln!(
                    "heterarchy: export {}: {}",
                    device.name(),
                    device.device().describe()
                );
                exports.push(Export::Device(Arc::clone(&device) as Arc<dyn BlockDevice>));
                staged.push(device);
            }
            ExportConfig::Poly(poly) => {
                let device = PolyExport::open(poly, &throttles).map_err(|e| failed(e.into()))?;
                let stats = device.stats();
                eprintln!(
                    "heterarchy: export {}: PolyEMT tier over {}, {} pages recovered",
                    device.name(),
                    poly.backing,
                    stats.recovered_pages
                );
                let device = Arc::new(device);
                exports.push(Export::Device(Arc::clone(&device) as Arc<dyn BlockDevice>));
                polys.push(device);
            }
        }
    }
    let mut tenants = Vec::new();
    for tenant in &config.tenant {
        let opened = Tenant::open(tenant, config.pm_of(tenant), &throttles)
            .map_err(|e| RunError::failed(format!("tenant {}", tenant.name), e))?;
        eprintln!(
            "heterarchy: kv tenant {}: {:?}",
            tenant.name, opened.recovery
        );
        tenants.push(Arc::new(opened));
    }
    if !exports.is_empty() {
        // Certificates are read before the port opens, so a bad one stops the start.
        let tls = config.server.tls_settings()?;
        let tls_server = tls
            .server()
            .map_err(|e| ConfigError::within("server.", e))?;
        let listener = Listener::bind(&config.server.listen).map_err(RunError::Io)?;
        let names: Vec<&str> = exports.iter().map(|e| e.device().name()).collect();
        eprintln!(
            "heterarchy: nbd listening on {} (exports: {}; tls {})",
            listener.local_addr(),
            names.join(", "),
            tls.mode.name()
        );
        for volume in &volumes {
            let volume = Arc::clone(volume);
            spawn("cleaner", move || clean_forever(&volume))?;
        }
        let exports = Arc::new(Exports::new(exports));
        let settings = nbd::Settings {
            threads: nbd::Threads {
                loops: config.server.threads,
                io_workers: config.server.io_workers,
            },
            max_connections: config.server.max_connections,
            tls: tls.mode,
            tls_server,
            limits: config.server.client_limits()?,
            stopping: Arc::clone(&stopping),
        };
        spawn("nbd-accept", move || {
            if let Err(error) = nbd::serve(listener, exports, settings) {
                eprintln!("heterarchy: nbd: cannot serve: {error}");
                std::process::exit(1);
            }
        })?;
    }
    if !tenants.is_empty() {
        kv::nyx::start(config, &tenants, &throttles)?;
        kv::start(&tenants, config.server.threads)?;
    }
    if let Some(address) = &config.server.metrics {
        let token = config
            .server
            .admin_token_file
            .as_deref()
            .map(crate::admin::read_token)
            .transpose()
            .map_err(|e| ConfigError::invalid("server.admin_token_file", e))?;
        let access =
            crate::admin::Access::new(token.as_deref(), &config.server.admin_allowed_hosts);
        let served = Served {
            volumes: volumes.clone(),
            tenants: tenants.clone(),
        };
        let server = crate::admin::bind(address, served, access).map_err(|e| {
            RunError::failed(format!("server.metrics: cannot listen on {address}"), e)
        })?;
        let shown = server
            .local_addr()
            .map_or_else(|_| address.clone(), |addr| addr.to_string());
        eprintln!(
            "heterarchy: metrics listening on http://{shown}/metrics, dashboard on http://{shown}/ \
             (POST {})",
            if token.is_some() {
                "with the token of server.admin_token_file"
            } else {
                "refused: no server.admin_token_file"
            }
        );
        spawn("admin", move || server.run())?;
    }
    let signal = wait_for(&signals);
    eprintln!("heterarchy: signal {signal}: finishing the requests under way");
    // Nothing is answered after the last write-back: requests stop first.
    if !stopping.stop(STOP_PATIENCE) {
        eprintln!(
            "heterarchy: requests still under way after {} s; writing back regardless",
            STOP_PATIENCE.as_secs()
        );
    }
    eprintln!("heterarchy: writing dirty lines back, shutting stores down");
    for tenant in &tenants {
        tenant
            .shut_down()
            .map_err(|e| RunError::failed(format!("tenant {}: shutting down", tenant.name()), e))?;
    }
    for device in &staged {
        device
            .flush()
            .map_err(|e| RunError::failed(format!("export {}: writing back", device.name()), e))?;
    }
    for device in &polys {
        // Its write cache stays in persistent memory; what went through is made durable.
        device
            .flush()
            .map_err(|e| RunError::failed(format!("export {}: flushing", device.name()), e))?;
    }
    for volume in &volumes {
        let lines = volume
            .shut_down()
            .map_err(|e| RunError::failed(format!("export {}: shutting down", volume.name()), e))?;
        eprintln!(
            "heterarchy: export {}: {lines} dirty lines written back",
            volume.name()
        );
    }
    if let ListenAddr::Unix(path) = &config.server.listen {
        let _ = std::fs::remove_file(path);
    }
    for path in config
        .tenant
        .iter()
        .filter_map(|tenant| tenant.unix.as_ref())
    {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> Result<(), RunError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(work)
        .map(|_| ())
        .map_err(|e| RunError::failed(format!("cannot start the {name} thread"), e))
}

fn clean_forever(volume: &Volume) {
    loop {
        let wait = match volume.background() {
            Ok(next) => next.unwrap_or(CLEANER_TICK).min(CLEANER_TICK),
            Err(error) => {
                eprintln!("heterarchy: export {}: cleaning: {error}", volume.name());
                CLEANER_TICK
            }
        };
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// Blocks SIGTERM and SIGINT in this thread and every thread it starts, so that only
/// [`wait_for`] receives them.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask only changes
    // this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for(set: &libc::sigset_t) -> i32 {
    let mut signal = 0;
    // SAFETY: `set` is an initialised signal set and `signal` a valid out-pointer.
    unsafe { libc::sigwait(set, &mut signal) };
    signal
}
