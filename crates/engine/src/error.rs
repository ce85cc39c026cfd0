//! Why a parameter, a name or a kept profile cannot be used by the engine: one line naming the
//! parameter or name at fault and what was expected (docs/architecture.md, "Conventions"), and
//! the cache controller's settings that cannot be used ([`ConfigError`]).

use std::fmt;

/// A parameter out of its range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name} {value}: expected {expected}")]
pub struct ParamError {
    /// The parameter (`step`, `read_share`).
    pub name: &'static str,
    /// Its value as given.
    pub value: String,
    /// What it may be.
    pub expected: &'static str,
}

impl ParamError {
    /// Parameter `name` given `value`, which is not `expected`.
    pub(crate) fn new(name: &'static str, value: impl ToString, expected: &'static str) -> Self {
        ParamError {
            name,
            value: value.to_string(),
            expected,
        }
    }
}

/// A name of no policy, class or scheme there is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} \"{text}\": expected {expected}")]
pub struct NameError {
    /// What was named (`sharing policy`, `class`, `staging`).
    pub what: &'static str,
    /// The name as given.
    pub text: String,
    /// The names there are.
    pub expected: String,
}

/// A MaxIOPS profile that cannot be used: of another device, or damaged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// Measured on another device, or on this one before it changed.
    #[error("profiled on \"{profiled}\", not on this device (\"{device}\")")]
    OtherDevice { profiled: String, device: String },
    /// A table of the profile that is not whole; `key` names the table or entry.
    #[error("{key}: {reason}")]
    Damaged { key: String, reason: String },
}

/// A cache setting that cannot be used: the key (under `cache.`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key, e.g. `nhit.threshold` or `tier[1]`.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(key: &str, message: String) -> ConfigError {
        ConfigError {
            key: key.to_string(),
            message,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cache.{}: {}", self.key, self.message)
    }
}

impl std::error::Error for ConfigError {}
