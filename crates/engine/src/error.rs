//! Why a parameter, a name or a kept profile cannot be used by the engine: one line naming the
//! parameter or name at fault and what was expected (docs/architecture.md, "Conventions"). The
//! cache controller's own settings have [`crate::ConfigError`].

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
