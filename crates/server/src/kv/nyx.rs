//! NyxCache on the key-value server (seed 000 chapter 5; docs/kv-cache.md, "Sharing one PM
//! among tenants (NyxCache)"): for each `[[pm]]` its tenants share, the device's MaxIOPS
//! profile (kept in a file, measured again when missing or stale), a gate on every tenant's
//! storage accesses, and a controller thread that runs the server's sharing policy on the
//! device's clock.
//!
//! The profile is measured through a model of the device the `[[pm]]` is paced like, by timing
//! the profiler's own accesses (the only thing Nyx may learn the device by): on real PM it would
//! be measured on the memory itself, prefetching and media unit included, and take seconds
//! rather than milliseconds.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use heterarchy_device::backend::Throttles;
use heterarchy_device::model::DeviceModel;
use heterarchy_device::model::IoKind;
use heterarchy_device::presets::resolve_device;
use heterarchy_engine::nyx::policy::{self, PolicyParams};
use heterarchy_engine::nyx::{MaxIopsProfile, ProfileLoad};
use heterarchy_trace::read::stable_key_hash;

use super::config::PmConfig;
use super::tenant::Tenant;
use crate::config::ServeConfig;
use crate::error::{BoxError, ConfigError, RunError};

/// Gates the tenants of every `[[pm]]` and starts its controller.
pub fn start(
    config: &ServeConfig,
    tenants: &[Arc<Tenant>],
    throttles: &Throttles,
) -> Result<(), RunError> {
    let policy_name = config.policy()?;
    for pm in &config.pm {
        let on_pm: Vec<&Arc<Tenant>> = tenants
            .iter()
            .filter(|tenant| tenant.config.pm.as_deref() == Some(pm.name.as_str()))
            .collect();
        if on_pm.is_empty() {
            continue;
        }
        let profile = Arc::new(profile_of(pm)?);
        let throttle = throttles
            .get(&pm.name)
            .map_err(|e| RunError::failed(format!("pm {}", pm.name), e))?;
        let mut gates = Vec::new();
        let mut terms = Vec::new();
        for tenant in &on_pm {
            let gate = tenant
                .gate()
                .ok_or_else(|| RunError::failed(format!("tenant {}", tenant.name()), "no gate"))?;
            tenant
                .store()
                .set_gate(Arc::clone(gate), Arc::clone(&profile));
            gates.push(Arc::clone(gate));
            terms.push(tenant.config.terms(policy_name)?);
        }
        let params = PolicyParams {
            // What the bandwidth-proportional baseline shares: the device's 4 KiB reads.
            device_bytes_per_second: profile.max_iops(IoKind::Read, 4096) * 4096.0,
            ..config.policy_params()?
        };
        let Some(mut policy) = policy::build(policy_name, &terms, &params) else {
            continue;
        };
        eprintln!(
            "heterarchy: pm {}: {policy_name} among {} tenants",
            pm.name,
            gates.len()
        );
        std::thread::Builder::new()
            .name(format!("nyx-{}", pm.name))
            .spawn(move || {
                heterarchy_device::backend::precise_sleeps();
                loop {
                    let next_ns = policy.step(throttle.ns_at(Instant::now()), &gates);
                    let next = throttle.instant_at(next_ns);
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
            .map_err(|e| {
                RunError::failed(format!("pm {}: cannot start its controller", pm.name), e)
            })?;
    }
    Ok(())
}

/// The device's profile: the kept one if it is whole and of this device, else measured again
/// and kept.
fn profile_of(pm: &PmConfig) -> Result<MaxIopsProfile, RunError> {
    let failed = |error: BoxError| RunError::failed(format!("pm {}", pm.name), error);
    let spec = resolve_device(&pm.throttle, None).map_err(|e| failed(e.into()))?;
    let fingerprint = fingerprint(&pm.throttle, &format!("{spec:?}"));
    let path = pm.profile_path();
    match read_profile(&path, &fingerprint) {
        Ok(profile) => return Ok(profile),
        Err(why) => eprintln!("heterarchy: pm {}: profiling the device: {why}", pm.name),
    }
    let mut model = DeviceModel::new(&spec);
    let profile = MaxIopsProfile::measure(&mut model, &fingerprint, &ProfileLoad::default());
    let text = toml::to_string(&profile).map_err(|e| failed(e.into()))?;
    std::fs::write(
        &path,
        format!("# heterarchy's NyxCache MaxIOPS profile (seed 000 §5.2.3)\n{text}"),
    )
    .map_err(|e| RunError::failed(format!("pm {}: {}", pm.name, path.display()), e))?;
    Ok(profile)
}

fn read_profile(path: &Path, fingerprint: &str) -> Result<MaxIopsProfile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let profile: MaxIopsProfile = toml::from_str(&text).map_err(|e| ConfigError::Syntax {
        at: path.display().to_string(),
        message: e.message().replace('\n', " "),
    })?;
    profile
        .check(fingerprint)
        .map_err(|e| ConfigError::within(format!("{}: ", path.display()), e))?;
    Ok(profile)
}

/// Names a device by what it is like and a hash of its whole description, so that a profile
/// of a changed device is stale.
fn fingerprint(name: &str, description: &str) -> String {
    // Stable across runs and builds, which std's hasher is not.
    format!("{name} {:016x}", stable_key_hash(description.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_damaged_or_stale_profile_is_measured_again_and_a_good_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pm = PmConfig {
            name: "pm0".into(),
            path: dir.path().to_path_buf(),
            size: "1g".into(),
            throttle: "optane-pm".into(),
            profile: None,
        };
        let path = pm.profile_path();
        let measured = profile_of(&pm).unwrap();
        assert!(
            measured.device.starts_with("optane-pm "),
            "{}",
            measured.device
        );
        assert_eq!(read_profile(&path, &measured.device).unwrap(), measured);
        // Kept: read back, not measured (a changed number survives).
        let mut kept = measured.clone();
        kept.read_iops[0] = 1.0;
        std::fs::write(&path, toml::to_string(&kept).unwrap()).unwrap();
        assert_eq!(profile_of(&pm).unwrap(), kept);
        // Damaged, or of another device: measured again.
        std::fs::write(&path, "read_iops = \"lots\"\n").unwrap();
        assert_eq!(profile_of(&pm).unwrap(), measured);
        let mut stale = measured.clone();
        stale.device = "optane-pm 0000000000000000".into();
        std::fs::write(&path, toml::to_string(&stale).unwrap()).unwrap();
        assert_eq!(profile_of(&pm).unwrap(), measured);
        assert_eq!(read_profile(&path, &measured.device).unwrap(), measured);
    }
}
