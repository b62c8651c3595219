//! Files written whole: through a temporary file and a rename.

use anyhow::{Context, Result};
use std::path::Path;

/// Writes `contents` to `path` through a temporary file and a rename, so a
/// reader (or a run killed half-way) never sees a half-written file.
pub fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .context("output path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, contents).with_context(|| format!("cannot write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write '{}'", path.display()))
}
