//! The results store: every run writes one self-describing JSON file
//! (environment, records, what was skipped, whether it finished) under
//! `results/` or `--results DIR`, rewritten atomically after every record,
//! so an interrupted or killed run keeps everything it finished.

use super::{Environment, Record, Skipped};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format written now. Version 0 is the `--format json` document of
/// cnnbench 0.1 before the store existed (no version field), which is read
/// the same way.
pub const FORMAT_VERSION: u32 = 1;

/// One run's file. `R` is the record type: [`Record`] for `conv` and
/// `gemm`, [`super::ModelRecord`] for `model`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFile<R = Record> {
    #[serde(default)]
    pub format_version: u32,
    /// `conv`, `gemm`, ... (empty in version-0 files).
    #[serde(default)]
    pub subcommand: String,
    #[serde(default)]
    pub environment: Environment,
    #[serde(default = "Vec::new")]
    pub records: Vec<R>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// False while the run is going, and after it was stopped early.
    #[serde(default = "finished_by_default")]
    pub complete: bool,
}

impl<R> Default for RunFile<R> {
    fn default() -> Self {
        RunFile {
            format_version: 0,
            subcommand: String::new(),
            environment: Environment::default(),
            records: Vec::new(),
            skipped: Vec::new(),
            complete: finished_by_default(),
        }
    }
}

/// A file without the field was a finished `--format json` document.
fn finished_by_default() -> bool {
    true
}

/// Where one run's file lives.
pub struct Store {
    pub path: PathBuf,
}

impl Store {
    /// A new file in `dir`, named by time, subcommand, host and process:
    /// `20261121T084512Z-conv-vm-1234.json`.
    pub fn create(dir: &Path, subcommand: &str, env: &Environment) -> Result<Store> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the results folder '{}'", dir.display()))?;
        let stamp: String = env
            .timestamp
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let host: String = env
            .host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!(
            "{stamp}-{subcommand}-{host}-{}.json",
            std::process::id()
        ));
        Ok(Store { path })
    }

    /// Rewrites the file with everything so far (temp file, then rename).
    pub fn save<R: Serialize>(&self, file: &RunFile<R>) -> Result<()> {
        let mut text = serde_json::to_string_pretty(file)?;
        text.push('\n');
        super::atomic::write_atomic(&self.path, &text)
    }
}

/// The subcommand that wrote a results file, read without its records.
pub fn subcommand_of(path: &Path) -> Result<String> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        subcommand: String,
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    let head: Head = serde_json::from_str(&text)
        .with_context(|| format!("'{}' is not a cnnbench results file", path.display()))?;
    Ok(head.subcommand)
}

/// Reads one run file, of this or an older format version.
pub fn load<R: serde::de::DeserializeOwned>(path: &Path) -> Result<RunFile<R>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    let file: RunFile<R> = serde_json::from_str(&text)
        .with_context(|| format!("'{}' is not a cnnbench results file", path.display()))?;
    if file.format_version > FORMAT_VERSION {
        bail!(
            "'{}' has format version {}; this cnnbench reads up to {FORMAT_VERSION}",
            path.display(),
            file.format_version
        );
    }
    Ok(file)
}

/// Every `*.json` results file under `paths` (files as given, folders
/// searched recursively), in a stable order.
pub fn find_json(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            bail!("no such file or folder '{}'", p.display());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read folder '{}'", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "json" || e == "csv") {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_atomically_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let env = Environment::here(2, "avx512".into(), Some(300.0), "t");
        let store = Store::create(&dir.path().join("r"), "conv", &env).unwrap();
        let mut file = RunFile {
            format_version: FORMAT_VERSION,
            subcommand: "conv".into(),
            environment: env,
            complete: false,
            ..RunFile::default()
        };
        store.save(&file).unwrap();
        file.complete = true;
        store.save(&file).unwrap();
        assert_eq!(load::<Record>(&store.path).unwrap(), file);
        // Only the file itself is left: the temporary was renamed over it.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("r")).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert!(store
            .path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .contains("-conv-"));
    }

    #[test]
    fn version_0_documents_still_load() {
        // What `cnnbench conv --format json` wrote before the store: no
        // version, no subcommand, no gpu, no complete flag.
        let v0 = r#"{"environment": {"host": "vm", "os": "linux x86_64", "cpu": "Xeon",
            "cores": 2, "threads": 2, "isa": "avx512", "isa_detected": "avx512",
            "peak_gflops": 344.3, "timer": "wall clock",
            "cnnbench": {"version": "0.1.0", "git": "b88e3c12c1cf", "profile": "release",
                         "target_features": ""},
            "command": "cnnbench conv", "timestamp": "2026-11-20T10:00:00Z"},
          "records": [{"problem": "mb1ic8ih14oc16oh7kh3sh2ph1", "dir": "fwd", "device": "cpu",
            "dtype": "f32", "layout": "nhwc", "algo": "direct",
            "ms": {"min": 0.01, "median": 0.02, "max": 0.03, "mean": 0.02, "stddev": 0.001},
            "runs": 20, "gflops": 4.1, "peak_fraction": 0.012, "check": null,
            "kernel": "k", "bias": true, "workspace_bytes": 0}]}"#;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.json");
        std::fs::write(&p, v0).unwrap();
        let f = load::<Record>(&p).unwrap();
        assert_eq!(f.format_version, 0);
        assert!(f.complete);
        assert_eq!(f.records.len(), 1);
        assert_eq!(f.environment.host, "vm");
        assert!(f.environment.gpu.is_none());
    }

    #[test]
    fn newer_versions_and_garbage_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.json");
        std::fs::write(&p, r#"{"format_version": 99, "records": []}"#).unwrap();
        assert!(load::<Record>(&p)
            .unwrap_err()
            .to_string()
            .contains("format version 99"));
        std::fs::write(&p, "[1, 2]").unwrap();
        assert!(load::<Record>(&p)
            .unwrap_err()
            .to_string()
            .contains("not a cnnbench results file"));
    }
}
