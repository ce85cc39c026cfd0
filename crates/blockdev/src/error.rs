//! Why a staged or PolyEMT export's config cannot be used: one line that starts with the key at
//! fault (docs/architecture.md, "Conventions"), so that the server can prefix the export.

use heterarchy_device::SpecError;
use heterarchy_engine::ParamError;

/// A setting of an export that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// A key with a value the export cannot take.
    #[error("{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    /// A knob or search parameter out of its range.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// A codec no compressed tier has.
    #[error("codec: {0}")]
    Codec(SpecError),
    /// An error inside a table of the export, `prefix` naming it (`caching.poly.`).
    #[error("{prefix}{error}")]
    Within {
        prefix: &'static str,
        error: Box<ExportError>,
    },
}

impl ExportError {
    /// Key `key` cannot take its value, for `reason`.
    pub(crate) fn invalid(key: &'static str, reason: impl Into<String>) -> ExportError {
        ExportError::Invalid {
            key,
            reason: reason.into(),
        }
    }
}
