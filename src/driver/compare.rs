//! `compare`'s comparison of finished runs: each kind of run (records,
//! models, libraries) laid side by side, and what is suspicious about the
//! cuDNN each run loaded. The runs themselves are child processes the
//! command line starts.

use crate::output::compare::SideBySide;
use crate::results::environment::Environment;
use crate::results::store::RunFile;
use cnnbench_layers::cuda::loader::LibraryInfo;
use cnnbench_layers::cuda::DeviceInfo;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What `compare` reads of a `model` run's JSON.
#[derive(Default, Deserialize)]
#[serde(default)]
pub struct ModelFile {
    pub environment: Environment,
    records: Vec<ModelRow>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub struct ModelRow {
    model: String,
    batch: usize,
    dtype: String,
    layout: String,
    status: String,
    forward_ms: Option<Median>,
    backward_ms: Option<Median>,
    total_ms: Option<Median>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub struct Median {
    median: f64,
}

/// What `compare` reads of `info --format json`.
#[derive(Default, Deserialize)]
#[serde(default)]
pub struct InfoFile {
    pub gpu: InfoGpu,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub struct InfoGpu {
    device: Option<DeviceInfo>,
    libraries: Vec<LibraryInfo>,
}

impl InfoGpu {
    /// The device where there is one; else a stand-in carrying only the
    /// libraries (and cuDNN's version), for the warnings.
    pub fn as_device_info(&self) -> DeviceInfo {
        let mut d = self.device.clone().unwrap_or_default();
        d.libraries = self.libraries.clone();
        if d.cudnn.is_empty() {
            d.cudnn = cudnn_of(&d)
                .and_then(|l| l.version.clone())
                .unwrap_or_default();
        }
        d
    }
}

fn cudnn_of(g: &DeviceInfo) -> Option<&LibraryInfo> {
    g.libraries.iter().find(|l| l.name == "cuDNN")
}

/// Seed 004's table: one row per run and model, GPU | cuDNN | forward |
/// backward | total (median ms), and each total over the first run's for
/// the same model.
pub fn models_side_by_side(runs: &[(String, ModelFile)]) -> SideBySide {
    let head: Vec<String> = [
        "run",
        "GPU",
        "cuDNN",
        "model",
        "batch",
        "dtype layout",
        "forward ms",
        "backward ms",
        "total ms",
        "total / first run",
    ]
    .map(String::from)
    .to_vec();
    let key = |r: &ModelRow| (r.model.clone(), r.batch, r.dtype.clone(), r.layout.clone());
    let mut table = SideBySide::new(head, 6);
    for (name, f) in runs {
        let (gpu, cudnn) = f
            .environment
            .gpu
            .as_ref()
            .map_or((f.environment.cpu.clone(), "-".to_string()), |g| {
                (g.name.clone(), g.cudnn_label())
            });
        for r in f.records.iter().filter(|r| r.status == "ok") {
            let first = runs[0]
                .1
                .records
                .iter()
                .find(|a| key(a) == key(r) && a.status == "ok")
                .and_then(|a| a.total_ms.as_ref().map(|m| m.median));
            let total = r.total_ms.as_ref().map(|m| m.median);
            let values = vec![
                r.forward_ms.as_ref().map(|m| m.median),
                r.backward_ms.as_ref().map(|m| m.median),
                total,
                first.zip(total).map(|(a, b)| b / a),
            ];
            let labels = vec![
                name.clone(),
                gpu.clone(),
                cudnn.clone(),
                r.model.clone(),
                r.batch.to_string(),
                format!("{} {}", r.dtype, r.layout),
            ];
            table.push(labels, values);
        }
    }
    table
}

/// One row per run and library: its soname, version and file (or why it
/// did not load), as each child's `info` told.
pub fn libraries_side_by_side(runs: &[(String, InfoFile)]) -> SideBySide {
    let head: Vec<String> = ["run", "library", "soname", "version", "file"]
        .map(String::from)
        .to_vec();
    let mut table = SideBySide::new(head, 5);
    for (name, f) in runs {
        for l in &f.gpu.libraries {
            let labels = vec![
                name.clone(),
                l.name.clone(),
                l.soname.clone(),
                l.version.clone().unwrap_or_else(|| "-".into()),
                l.file
                    .clone()
                    .or_else(|| l.error.clone())
                    .unwrap_or_default(),
            ];
            table.push(labels, vec![]);
        }
    }
    table
}

/// Which cuDNN each run loaded, and what is suspicious about that: a run
/// without a cuDNN, two runs with the same one, a run whose cuDNN is not
/// from its `--cudnn` folder (`folders`: run name and folder).
pub fn library_warnings(
    runs: &[(String, Option<DeviceInfo>)],
    cudnn: bool,
    folders: &[(String, PathBuf)],
) -> Vec<String> {
    if !cudnn {
        return vec![];
    }
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for (name, g) in runs {
        let Some(g) = g.as_ref().filter(|g| !g.cudnn.is_empty()) else {
            out.push(format!("run '{name}' loaded no cuDNN"));
            continue;
        };
        let file = cudnn_of(g).and_then(|l| l.file.clone());
        let id = file.clone().unwrap_or_else(|| g.cudnn.clone());
        if let Some(first) = seen.insert(id, name) {
            out.push(format!(
                "runs '{first}' and '{name}' both loaded cuDNN {}: the folders did not change which library loaded",
                g.cudnn_label()
            ));
        }
        let want = folders.iter().find(|(n, _)| n == name).map(|(_, d)| d);
        if let (Some(want), Some(file)) = (want, &file) {
            let dir = std::path::Path::new(file).parent();
            let same = dir.is_some_and(|d| {
                d == want.as_path()
                    || matches!((d.canonicalize(), want.canonicalize()), (Ok(a), Ok(b)) if a == b)
            });
            if !same {
                out.push(format!(
                    "run '{name}' loaded cuDNN from {file}, not from its folder {}",
                    want.display()
                ));
            }
        }
    }
    out
}

pub fn side_by_side(runs: &[(String, RunFile)]) -> SideBySide {
    let mut keys: Vec<(String, String, String)> = Vec::new();
    let mut ms: BTreeMap<(usize, (String, String, String)), f64> = BTreeMap::new();
    for (i, (_, f)) in runs.iter().enumerate() {
        for r in &f.records {
            let k = (
                r.problem.clone(),
                r.dir.to_string(),
                format!("{} {}", r.dtype, r.layout),
            );
            if !keys.contains(&k) {
                keys.push(k.clone());
            }
            let slot = ms.entry((i, k)).or_insert(f64::INFINITY);
            *slot = slot.min(r.ms.median);
        }
    }
    let mut head = vec!["problem".to_string(), "dir".into(), "dtype layout".into()];
    for (name, f) in runs {
        let lib = f
            .environment
            .gpu
            .as_ref()
            .map_or(String::new(), |g| format!(" (cuDNN {})", g.cudnn));
        head.push(format!("{name}{lib} ms"));
    }
    for (name, _) in runs.iter().skip(1) {
        head.push(format!("{name} / {}", runs[0].0));
    }
    let mut table = SideBySide::new(head, 3);
    for k in &keys {
        let get = |i: usize| ms.get(&(i, k.clone())).copied();
        let mut values: Vec<Option<f64>> = (0..runs.len()).map(get).collect();
        for i in 1..runs.len() {
            values.push(get(0).zip(get(i)).map(|(a, b)| b / a));
        }
        table.push(vec![k.0.clone(), k.1.clone(), k.2.clone()], values);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_cudnn_twice_or_from_another_folder_is_flagged() {
        let gpu = |v: &str, file: &str| {
            Some(DeviceInfo {
                name: "H100".into(),
                cudnn: v.into(),
                libraries: vec![LibraryInfo {
                    name: "cuDNN".into(),
                    soname: "libcudnn.so.9".into(),
                    file: Some(file.into()),
                    version: Some(v.into()),
                    error: None,
                }],
                ..DeviceInfo::default()
            })
        };
        let runs = vec![
            ("/a".to_string(), gpu("9.10.2", "/a/libcudnn.so.9")),
            ("/b".into(), gpu("9.10.2", "/a/libcudnn.so.9")),
            ("c".into(), None),
        ];
        let folders = [
            ("/a".to_string(), PathBuf::from("/a")),
            ("/b".into(), PathBuf::from("/b")),
        ];
        let w = library_warnings(&runs, true, &folders);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("both loaded cuDNN 9.10.2 (/a/libcudnn.so.9)"));
        assert!(
            w[1].contains("run '/b' loaded cuDNN from /a/libcudnn.so.9, not from its folder /b")
        );
        assert!(w[2].contains("run 'c' loaded no cuDNN"));
        assert!(library_warnings(&runs, false, &folders).is_empty());
    }
}
