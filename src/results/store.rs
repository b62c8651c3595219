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
    /// Required: a JSON document without it is not a results file.
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
        super::atomic::check_folder(dir)?;
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

/// What a JSON file among results is.
#[derive(Debug, PartialEq, Eq)]
pub enum Document {
    /// One run; `model` for `cnnbench model` (said by its `subcommand`, or,
    /// in a `model --format json` document that does not say, by its
    /// records).
    Run { model: bool },
    /// A sweep's `--format json` output: one run per configuration.
    Sweep,
    /// Another of cnnbench's own documents, not results: a dump's
    /// `problem.json`, or `info`, `check` or `compare` output.
    NotResults,
}

/// The text of the JSON file at `path` and its parsed value, refused when
/// it is not JSON or is of a newer format version (named as newer, not as
/// broken). Read once, for telling what it is and for loading it.
#[cfg(test)] // report reads each input once, then the `_in` forms
fn read_document(path: &Path) -> Result<(String, serde_json::Value)> {
    let text = crate::bounded_read::read_text(
        path,
        crate::bounded_read::RESULTS_FILE_BYTES,
        "a results file",
    )
    .with_context(|| format!("cannot read '{}'", path.display()))?;
    let doc = parse_document(path, &text)?;
    Ok((text, doc))
}

/// The parsed value of `text`, read from `path`, refused as
/// [`read_document`] refuses it.
fn parse_document(path: &Path, text: &str) -> Result<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(text)
        .with_context(|| format!("'{}' is not a cnnbench results file", path.display()))?;
    let version = doc["format_version"].as_u64().unwrap_or(0);
    if version > u64::from(FORMAT_VERSION) {
        bail!(
            "'{}' has format version {version}; this cnnbench reads up to {FORMAT_VERSION}",
            path.display()
        );
    }
    Ok(doc)
}

/// [`document_of`] on the text already read from `path` (`report` reads
/// each input once: a pipe or a FIFO cannot be read twice).
pub fn document_in(path: &Path, text: &str) -> Result<Document> {
    classify(path, &parse_document(path, text)?)
}

/// [`load`] on the text already read from `path`.
pub fn run_in<R: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<RunFile<R>> {
    parse_document(path, text)?;
    run_from(path, text)
}

/// Tells what the JSON file at `path` is; an error for anything that is not
/// one of cnnbench's documents.
#[cfg(test)] // report reads each input once, then the `_in` forms
pub fn document_of(path: &Path) -> Result<Document> {
    let (_, doc) = read_document(path)?;
    classify(path, &doc)
}

/// What the parsed document `doc` (read from `path`) is.
fn classify(path: &Path, doc: &serde_json::Value) -> Result<Document> {
    use serde_json::Value;
    let has = |v: &Value, key: &str| v.get(key).is_some();
    let first_row_has = |key: &str| {
        doc.as_array()
            .and_then(|rows| rows.first())
            .is_some_and(|r| has(r, key))
    };
    Ok(match doc {
        // All-reduce records are of another kind: no report table yet.
        Value::Object(_) if doc["subcommand"] == "allreduce" || doc["subcommand"] == "data" => {
            Document::NotResults
        }
        Value::Object(_) if has(doc, "records") => Document::Run {
            model: match doc["subcommand"].as_str() {
                Some(s) if !s.is_empty() => s == "model",
                _ => doc["records"]
                    .as_array()
                    .and_then(|r| r.first())
                    .is_some_and(|r| has(r, "model")),
            },
        },
        Value::Object(_) if doc["sweep"].is_array() => Document::Sweep,
        Value::Object(_) if has(doc, "file_order") || has(doc, "isa_detected") => {
            Document::NotResults
        }
        Value::Array(_) if first_row_has("tensor") || first_row_has("dtype layout") => {
            Document::NotResults
        }
        _ => bail!(
            "'{}' is not a cnnbench results file (no records)",
            path.display()
        ),
    })
}

/// The runs of a results file: one, or a sweep's configurations (each
/// labelled by its configuration where its environment has no label).
#[cfg(test)] // report reads each input once, then the `_in` forms
pub fn load_runs<R: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<RunFile<R>>> {
    let (text, doc) = read_document(path)?;
    runs_of(path, &text, &doc)
}

/// [`load_runs`] on the text already read from `path`.
pub fn runs_in<R: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<Vec<RunFile<R>>> {
    let doc = parse_document(path, text)?;
    runs_of(path, text, &doc)
}

fn runs_of<R: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    doc: &serde_json::Value,
) -> Result<Vec<RunFile<R>>> {
    if classify(path, doc)? != Document::Sweep {
        return Ok(vec![run_from(path, text)?]);
    }
    #[derive(Deserialize)]
    struct Config<R> {
        config: String,
        environment: Environment,
        records: Vec<R>,
        #[serde(default)]
        skipped: Vec<Skipped>,
    }
    #[derive(Deserialize)]
    struct Sweep<R> {
        sweep: Vec<Config<R>>,
        #[serde(default = "finished_by_default")]
        complete: bool,
    }
    let sweep: Sweep<R> = serde_json::from_str(text)
        .with_context(|| format!("'{}' is not a cnnbench sweep", path.display()))?;
    let n = sweep.sweep.len();
    Ok(sweep
        .sweep
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut environment = c.environment;
            environment.label.get_or_insert(c.config);
            RunFile {
                format_version: FORMAT_VERSION,
                subcommand: String::new(),
                environment,
                records: c.records,
                skipped: c.skipped,
                // Only the last configuration of a stopped sweep is cut.
                complete: sweep.complete || i + 1 < n,
            }
        })
        .collect())
}

/// Reads one run file, of this or an older format version.
#[cfg(test)] // report reads each input once, then the `_in` forms
pub fn load<R: serde::de::DeserializeOwned>(path: &Path) -> Result<RunFile<R>> {
    let (text, _) = read_document(path)?;
    run_from(path, &text)
}

/// One run from the text of the file at `path` (parsed from the text, so
/// that errors say where in it they are).
fn run_from<R: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<RunFile<R>> {
    serde_json::from_str(text)
        .with_context(|| format!("'{}' is not a cnnbench results file", path.display()))
}

/// A path `report` could not read, and why: listed, never fatal while
/// other files can be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    pub path: PathBuf,
    pub why: String,
}

impl Unreadable {
    /// `why` is the error's whole chain, with the path (which the list
    /// names already) said as "the file".
    pub fn new(path: PathBuf, e: anyhow::Error) -> Unreadable {
        let quoted = format!("'{}'", path.display());
        let why = format!("{e:#}");
        let why = why.strip_prefix(&format!("{quoted}: ")).unwrap_or(&why);
        Unreadable {
            why: why.replace(&quoted, "the file"),
            path,
        }
    }
}

/// What a walk over `report`'s inputs found.
#[derive(Debug, Default)]
pub struct Found {
    /// Every results file (`*.json`) and peer CSV (`*.csv`), each once
    /// however many paths or links lead to it, in a stable order.
    pub files: Vec<PathBuf>,
    /// Folders and entries that could not be read.
    pub unreadable: Vec<Unreadable>,
}

/// Every `*.json` and `*.csv` file under `paths`: files as given (any
/// name), folders searched recursively. Symlinks are followed, but each
/// folder is entered once and each file counted once (by device and
/// inode), so a link cycle ends and a file reached twice counts once. A
/// path given that does not exist is an error (a typo); anything
/// unreadable below is listed in [`Found::unreadable`].
pub fn find_json(paths: &[PathBuf]) -> Result<Found> {
    let mut walk = Walk::default();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow::anyhow!("no such file or folder '{}'", p.display())
            }
            _ => anyhow::anyhow!("cannot read '{}': {e}", p.display()),
        })?;
        if meta.is_dir() {
            walk.dir(p, &meta);
        } else {
            walk.file(p, &meta);
        }
    }
    Ok(walk.found)
}

#[derive(Default)]
struct Walk {
    found: Found,
    seen: std::collections::HashSet<(u64, u64)>,
}

impl Walk {
    /// Whether `meta` names a file or folder not met before.
    fn first_visit(&mut self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.seen.insert((meta.dev(), meta.ino()))
    }

    fn file(&mut self, p: &Path, meta: &std::fs::Metadata) {
        if self.first_visit(meta) {
            self.found.files.push(p.to_path_buf());
        }
    }

    fn unreadable(&mut self, p: &Path, e: impl std::fmt::Display) {
        self.found.unreadable.push(Unreadable {
            path: p.to_path_buf(),
            why: e.to_string(),
        });
    }

    fn dir(&mut self, dir: &Path, meta: &std::fs::Metadata) {
        if !self.first_visit(meta) {
            return;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => return self.unreadable(dir, e),
        };
        let mut paths = Vec::new();
        for entry in entries {
            match entry {
                Ok(e) => paths.push(e.path()),
                Err(e) => self.unreadable(dir, e),
            }
        }
        paths.sort();
        for p in paths {
            let wanted = p.extension().is_some_and(|e| e == "json" || e == "csv");
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => self.dir(&p, &m),
                // A FIFO or a device would block or never end: only
                // regular files are read from folders.
                Ok(m) if wanted && !m.is_file() => self.unreadable(&p, "not a regular file"),
                Ok(m) if wanted => self.file(&p, &m),
                Ok(_) => {}
                // A dangling link or a folder entry that cannot be looked
                // at is listed only where it could have been a results file.
                Err(e) if wanted || std::fs::symlink_metadata(&p).is_err() => {
                    self.unreadable(&p, e)
                }
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_ends_on_link_cycles_and_counts_each_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("r");
        std::fs::create_dir_all(r.join("sub")).unwrap();
        std::fs::write(r.join("a.json"), "{}").unwrap();
        std::fs::write(r.join("sub/b.csv"), "x").unwrap();
        std::fs::write(r.join("notes.txt"), "x").unwrap();
        // A cycle (sub/up -> r), a second name for a.json, a dangling link.
        std::os::unix::fs::symlink(&r, r.join("sub/up")).unwrap();
        std::os::unix::fs::symlink(r.join("a.json"), r.join("sub/again.json")).unwrap();
        std::os::unix::fs::symlink(r.join("gone.json"), r.join("dangling.json")).unwrap();
        // A FIFO would block a reader forever.
        let fifo = std::ffi::CString::new(r.join("stuck.json").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        // The same folder given twice, and the file given by name as well.
        let found = find_json(&[r.clone(), r.join("sub"), r.join("a.json")]).unwrap();
        assert_eq!(found.files, vec![r.join("a.json"), r.join("sub/b.csv")]);
        let unreadable: Vec<_> = found.unreadable.iter().map(|u| &u.path).collect();
        assert_eq!(
            unreadable,
            [&r.join("dangling.json"), &r.join("stuck.json")]
        );
        let missing = find_json(&[dir.path().join("nope")]).unwrap_err();
        assert!(format!("{missing}").contains("no such file or folder"));
    }

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
    fn non_finite_numbers_are_written_as_null_and_read_back() {
        // A check of an output left unwritten (NaN) and a rate over a zero
        // time (infinity): JSON has neither, serde_json writes null, and
        // the file must still load.
        let mut file = RunFile::<Record>::default();
        let mut r: Record = serde_json::from_value(serde_json::json!({
            "problem": "mb1ic1ih1oc1oh1kh1", "dir": "fwd", "device": "cpu", "dtype": "f32",
            "layout": "nhwc", "algo": "direct",
            "ms": {"min": 0.1, "median": 0.1, "max": 0.1, "mean": 0.1, "stddev": 0.0},
            "runs": 1, "gflops": 1.0, "peak_fraction": null,
            "check": {"rel_err": 0.0, "passed": true}, "kernel": "k", "bias": false,
            "workspace_bytes": 0
        }))
        .unwrap();
        r.gflops = f64::INFINITY;
        r.ms.stddev = f64::NAN;
        r.check.as_mut().unwrap().rel_err = f64::NAN;
        file.records.push(r);
        let text = serde_json::to_string(&file).unwrap();
        let back: RunFile<Record> = serde_json::from_str(&text).unwrap();
        let r = &back.records[0];
        assert!(r.gflops.is_nan() && r.ms.stddev.is_nan());
        assert!(r.check.unwrap().rel_err.is_nan());
        // Finite values come back bit for bit (serde_json's float_roundtrip).
        let x = 18.150000000000002_f64;
        assert_eq!(
            serde_json::from_str::<f64>(&serde_json::to_string(&x).unwrap()).unwrap(),
            x
        );
    }

    #[test]
    fn sweeps_load_as_runs_and_other_documents_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let put = |name: &str, doc: serde_json::Value| {
            let p = dir.path().join(name);
            std::fs::write(&p, doc.to_string()).unwrap();
            p
        };
        let record = serde_json::json!({
            "problem": "mb1ic1ih1oc1oh1kh1", "dir": "fwd", "device": "cpu", "dtype": "f32",
            "layout": "nhwc", "algo": "direct",
            "ms": {"min": 0.1, "median": 0.1, "max": 0.1, "mean": 0.1, "stddev": 0.0},
            "runs": 1, "gflops": 1.0, "peak_fraction": null, "check": null,
            "kernel": "k", "bias": false, "workspace_bytes": 0
        });
        let env = serde_json::to_value(Environment::default()).unwrap();
        let sweep = put(
            "sweep.json",
            serde_json::json!({"complete": false, "sweep": [
                {"config": "threads=1", "environment": env, "records": [record]},
                {"config": "threads=2", "environment": env, "records": [record]}]}),
        );
        assert_eq!(document_of(&sweep).unwrap(), Document::Sweep);
        let runs = load_runs::<Record>(&sweep).unwrap();
        let labels: Vec<_> = runs.iter().map(|r| r.environment.label.clone()).collect();
        assert_eq!(labels, [Some("threads=1".into()), Some("threads=2".into())]);
        assert_eq!((runs[0].complete, runs[1].complete), (true, false));
        // `model --format json` says no subcommand; its records do.
        let model = put(
            "model.json",
            serde_json::json!({"environment": env, "records": [{"model": "resnet50"}]}),
        );
        assert_eq!(document_of(&model).unwrap(), Document::Run { model: true });
        // A dump's problem.json and `check`'s output are not results.
        let problem = put(
            "problem.json",
            serde_json::json!({"problem": "x", "file_order": "y"}),
        );
        assert_eq!(document_of(&problem).unwrap(), Document::NotResults);
        let check = put(
            "check.json",
            serde_json::json!([{"model": "m", "tensor": "t"}]),
        );
        assert_eq!(document_of(&check).unwrap(), Document::NotResults);
        assert!(document_of(&put("other.json", serde_json::json!([]))).is_err());
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
