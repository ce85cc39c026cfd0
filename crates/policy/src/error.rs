//! Why a policy or admission-filter spec cannot be used (docs/architecture.md, "Conventions":
//! typed errors naming what is at fault, on one line).

/// A policy or filter spec that cannot be used, naming the policy, parameter or text at fault;
/// displayed on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A name no policy (or filter) answers to.
    #[error("unknown {what} \"{name}\"; expected one of: {known}")]
    UnknownName {
        what: String,
        name: String,
        known: String,
    },
    /// Spec text with no name before its parameters.
    #[error("no {what} name in \"{text}\"")]
    NoName { what: String, text: String },
    /// A list of specs that starts with a parameter.
    #[error("\"{piece}\" is a parameter with no {what} before it")]
    ParameterFirst { what: String, piece: String },
    /// A piece of a spec that is not `name=value`.
    #[error("{policy}: \"{piece}\" is not a parameter: expected name=value")]
    NotAParameter { policy: String, piece: String },
    /// A parameter the policy does not take (`expected` lists those it does).
    #[error("{policy}: unknown parameter \"{param}\"; {expected}")]
    UnknownParam {
        policy: String,
        param: String,
        expected: String,
    },
    /// A parameter given twice.
    #[error("{policy}: parameter \"{param}\" given twice")]
    Repeated { policy: String, param: String },
    /// A parameter's value that cannot be read or is outside its range.
    #[error("{policy}: {param}={value} is out of range: expected {expected}")]
    OutOfRange {
        policy: String,
        param: String,
        value: String,
        expected: String,
    },
    /// Values the policy refuses when it is built: out of its range, or not fitting together.
    #[error("{policy}: {reason}")]
    Refused { policy: String, reason: String },
    /// An admission filter given to a policy that cannot take one.
    #[error("policy {policy} cannot take an admission filter (--admission {filter})")]
    NoAdmission { policy: String, filter: String },
    /// A list that names no policy.
    #[error("no policy in \"{list}\"")]
    NoPolicy { list: String },
}

impl PolicyError {
    /// Values `policy` refuses, and why.
    pub fn refused(policy: &str, reason: impl Into<String>) -> PolicyError {
        PolicyError::Refused {
            policy: policy.to_string(),
            reason: reason.into(),
        }
    }

    /// The same error of a policy built as another's variant (CLOCK2Q+ as S3-FIFO), named as
    /// the policy the user asked for.
    pub fn as_policy(mut self, name: &str) -> PolicyError {
        if let PolicyError::NotAParameter { policy, .. }
        | PolicyError::UnknownParam { policy, .. }
        | PolicyError::Repeated { policy, .. }
        | PolicyError::OutOfRange { policy, .. }
        | PolicyError::Refused { policy, .. } = &mut self
        {
            *policy = name.to_string();
        }
        self
    }
}
