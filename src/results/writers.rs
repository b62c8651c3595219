//! Machine-readable writers (JSON, CSV) and atomic file output.

use super::record::CSV_HEADER;
use super::{Environment, Record, Skipped};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

#[derive(Serialize)]
struct JsonDoc<'a> {
    environment: &'a Environment,
    records: &'a [Record],
    #[serde(skip_serializing_if = "<[Skipped]>::is_empty")]
    skipped: &'a [Skipped],
}

/// `{"environment", "records", "skipped"}`; `skipped` only when non-empty.
pub fn json(env: &Environment, records: &[Record], skipped: &[Skipped]) -> Result<String> {
    let mut s = serde_json::to_string_pretty(&JsonDoc {
        environment: env,
        records,
        skipped,
    })?;
    s.push('\n');
    Ok(s)
}

pub fn csv(records: &[Record]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER)?;
    for r in records {
        w.write_record(r.csv_row())?;
    }
    Ok(String::from_utf8(w.into_inner().context("flushing CSV")?)?)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment::here(2, "avx512".into(), None, "t")
    }

    #[test]
    fn json_lists_skipped_only_when_there_are_some() {
        let doc: serde_json::Value =
            serde_json::from_str(&json(&env(), &[], &[]).unwrap()).unwrap();
        assert!(doc.get("skipped").is_none());
        assert!(
            doc["environment"].get("gpu").is_none(),
            "no gpu key on the CPU"
        );
        let s = Skipped {
            problem: "p".into(),
            dir: "bwd-data".into(),
            device: "gpu".into(),
            dtype: "f32".into(),
            layout: "nchw".into(),
            algo: "algo#9".into(),
            status: "not supported".into(),
            workspace_bytes: None,
        };
        let doc: serde_json::Value =
            serde_json::from_str(&json(&env(), &[], &[s]).unwrap()).unwrap();
        assert_eq!(doc["skipped"][0]["algo"], "algo#9");
        assert_eq!(doc["skipped"][0]["status"], "not supported");
    }
}
