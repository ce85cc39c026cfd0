//! What several of this crate's test files share.

use std::path::{Path, PathBuf};

/// The trace `name` of `../shared/traces`, or `None` with a line saying the test is skipped
/// (CI always has the folder).
pub fn shared_trace(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name);
    if path.is_file() {
        Some(path)
    } else {
        println!(
            "skipped: {} is missing (CI has ../shared/traces)",
            path.display()
        );
        None
    }
}
