//! The built-in devices, embedded from `presets/*.toml` (every number there cites its source),
//! and the lookup that lets configs name either a preset or a device file.

use std::path::Path;

use crate::spec::{DeviceError, DeviceSpec};

/// Preset names and their TOML, in the order `heterarchy device list` shows them: fastest first.
const PRESETS: &[(&str, &str)] = &[
    ("dram", include_str!("../presets/dram.toml")),
    (
        "fast-dram-seed002",
        include_str!("../presets/fast-dram-seed002.toml"),
    ),
    (
        "slow-dram-seed002",
        include_str!("../presets/slow-dram-seed002.toml"),
    ),
    ("cxl-memory", include_str!("../presets/cxl-memory.toml")),
    ("optane-pm", include_str!("../presets/optane-pm.toml")),
    ("optane-pm-x2", include_str!("../presets/optane-pm-x2.toml")),
    ("optane-pm-x6", include_str!("../presets/optane-pm-x6.toml")),
    ("optane-ssd", include_str!("../presets/optane-ssd.toml")),
    (
        "fast-ssd-seed002",
        include_str!("../presets/fast-ssd-seed002.toml"),
    ),
    (
        "medium-ssd-seed002",
        include_str!("../presets/medium-ssd-seed002.toml"),
    ),
    (
        "slow-ssd-seed002",
        include_str!("../presets/slow-ssd-seed002.toml"),
    ),
    ("nvme-flash", include_str!("../presets/nvme-flash.toml")),
    ("sata-flash", include_str!("../presets/sata-flash.toml")),
    ("hdd-10k", include_str!("../presets/hdd-10k.toml")),
    ("hdd", include_str!("../presets/hdd.toml")),
    (
        "fast-hdd-seed002",
        include_str!("../presets/fast-hdd-seed002.toml"),
    ),
    (
        "slow-hdd-seed002",
        include_str!("../presets/slow-hdd-seed002.toml"),
    ),
    ("flashsim-50", include_str!("../presets/flashsim-50.toml")),
    ("flashsim-25", include_str!("../presets/flashsim-25.toml")),
    ("flashsim-10", include_str!("../presets/flashsim-10.toml")),
];

/// Names of the built-in devices.
pub fn preset_names() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|(name, _)| *name)
}

/// The built-in device `name`, if there is one.
pub fn preset(name: &str) -> Option<DeviceSpec> {
    let (_, text) = PRESETS.iter().find(|(preset, _)| *preset == name)?;
    // The presets are tested to parse; a failure here is a build defect, not bad input.
    Some(DeviceSpec::from_toml(text, &format!("preset {name}")).expect("embedded preset parses"))
}

/// The TOML text of the built-in device `name`, to start a custom device from.
pub fn preset_toml(name: &str) -> Option<&'static str> {
    PRESETS
        .iter()
        .find(|(preset, _)| *preset == name)
        .map(|(_, text)| *text)
}

/// A device named in a config or on the command line: a preset name, or the path of a device
/// TOML file (relative paths resolve against `base_dir`, the directory of the config naming it).
pub fn resolve_device(
    name_or_path: &str,
    base_dir: Option<&Path>,
) -> Result<DeviceSpec, DeviceError> {
    if let Some(spec) = preset(name_or_path) {
        return Ok(spec);
    }
    let looks_like_path = name_or_path.ends_with(".toml") || name_or_path.contains('/');
    if !looks_like_path {
        return Err(DeviceError {
            source: name_or_path.to_string(),
            key: String::new(),
            message: format!(
                "unknown device; expected a preset ({}) or a .toml device file",
                preset_names().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let path = Path::new(name_or_path);
    let path = match base_dir {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    };
    DeviceSpec::from_file(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_under_its_own_name() {
        for name in preset_names() {
            let spec = preset(name).unwrap();
            assert_eq!(spec.name, name);
            assert!(!spec.description.is_empty(), "{name}");
        }
        assert!(preset("floppy").is_none());
    }

    #[test]
    fn unknown_device_lists_the_presets() {
        let error = resolve_device("floppy", None).unwrap_err().to_string();
        assert!(error.starts_with("floppy: unknown device"), "{error}");
        assert!(error.contains("optane-ssd"));
    }

    #[test]
    fn device_files_resolve_relative_to_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let text = preset_toml("optane-ssd")
            .unwrap()
            .replace("\"optane-ssd\"", "\"mine\"");
        std::fs::write(dir.path().join("mine.toml"), text).unwrap();
        let spec = resolve_device("mine.toml", Some(dir.path())).unwrap();
        assert_eq!(spec.name, "mine");
        let error = resolve_device("missing.toml", Some(dir.path())).unwrap_err();
        assert!(error.to_string().contains("cannot read"), "{error}");
    }
}
