//! Why a storage, fault or codec spec cannot be used, or a device's throttle found: one line
//! naming the text or device at fault and what was expected (docs/architecture.md,
//! "Conventions"). A device file's own errors are [`crate::DeviceError`].

use heterarchy_trace::units::SizeError;

use crate::spec::DeviceError;

/// What a storage spec may be.
const EXPECTED_STORAGE: &str = "expected ram:SIZE, file:PATH[:SIZE][:direct], \
                                blockdev:PATH[:direct], pmem:PATH:SIZE or btt:PATH:SIZE[:512|:4k]";

/// What a fault spec may be.
const EXPECTED_FAULTS: &str = "expected none or comma-separated read-error=RATE, \
                               write-error=RATE, flush-error=RATE, short-write=RATE, \
                               delay=RATE@DURATION, read-error-at=OFFSET+LEN, \
                               write-error-at=OFFSET+LEN, gone-after=OPS, gone-file=PATH, \
                               file=PATH, seed=N";

/// A spec written in a config or on the command line that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A storage spec of no kind there is, or with parts in the wrong places.
    #[error("bad storage \"{text}\": {EXPECTED_STORAGE}")]
    StorageSyntax { text: String },
    /// A storage spec of a known kind with a value it cannot take.
    #[error("bad storage \"{text}\": {reason}")]
    Storage { text: String, reason: String },
    /// A storage spec whose size is not a size.
    #[error("\"{text}\": {error}")]
    StorageSize { text: String, error: SizeError },
    /// A fault that is not `KEY=VALUE`.
    #[error("fault \"{part}\" in \"{text}\": {EXPECTED_FAULTS}")]
    FaultSyntax { part: String, text: String },
    /// A fault no injector knows.
    #[error("unknown fault \"{key}\" in \"{text}\": {EXPECTED_FAULTS}")]
    UnknownFault { key: String, text: String },
    /// A known fault with a value it cannot take.
    #[error("fault {key}={value}: {reason}")]
    Fault {
        key: String,
        value: String,
        reason: String,
    },
    /// A codec no compressed tier has.
    #[error("unknown codec \"{name}\"; expected lz4 or zstd")]
    UnknownCodec { name: String },
}

/// A device declared for throttles that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ThrottleError {
    /// Its preset or device file cannot be read.
    #[error("device {name}: {error}")]
    Device { name: String, error: DeviceError },
    /// Two devices of one name.
    #[error("device {name}: declared twice")]
    DeclaredTwice { name: String },
}

/// Compressed bytes that do not decompress into a page: the media or the table is damaged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{codec}: {reason}")]
pub struct DecompressError {
    /// The codec's name (`lz4`, `zstd`).
    pub codec: &'static str,
    /// What the codec said.
    pub reason: String,
}
