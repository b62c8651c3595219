//! `cnnbench compare`: the same benchmark once per cuDNN installation (or
//! per environment variant), each in a child process, side by side.

use super::children::{self, ChildRun};
use crate::note::note;
use crate::output::table::{aligned, Align};
use crate::output::{self, Format, COMPARE_FORMATS};
use crate::results::environment::Environment;
use crate::results::store::RunFile;
use anyhow::{bail, Result};
use clap::Args;
use cnnbench_layers::cuda::loader::LibraryInfo;
use cnnbench_layers::cuda::DeviceInfo;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench compare --cudnn /opt/cudnn-9.1/lib --cudnn /opt/cudnn-9.10/lib -- conv --from builtin:resnet50 --dtype f16\n  \
    cnnbench compare --cudnn /opt/cudnn-9.1/lib --cudnn /usr/lib/x86_64-linux-gnu -- model resnet50 --device gpu --dtype f16\n  \
    cnnbench compare --cudnn /opt/cudnn-9.1/lib --cudnn /usr/lib/x86_64-linux-gnu -- info\n  \
    cnnbench compare --variant 1t:CNNBENCH_THREADS=1 --variant 2t:CNNBENCH_THREADS=2 -- conv mb16ic64ih56oc64oh56kh3ph1")]
pub struct CompareArgs {
    /// A folder holding a cuDNN (libcudnn.so.9); it goes first on LD_LIBRARY_PATH for one run
    #[arg(long, value_name = "DIR")]
    cudnn: Vec<PathBuf>,
    /// NAME:ENV=VALUE[,ENV=VALUE...]: one run with these environment variables (CNNBENCH_THREADS,
    /// CNNBENCH_ISA, or anything else)
    #[arg(long, value_name = "NAME:ENV=VALUE")]
    variant: Vec<String>,
    #[arg(long, short)]
    quiet: bool,
    #[arg(long, default_value = "table", value_parser = output::parser(COMPARE_FORMATS))]
    format: Format,
    /// The subcommand each run is: conv, gemm, model (its arguments after it), or info
    #[arg(last = true, required = true, value_name = "ARGS")]
    benchmark: Vec<String>,
}

/// One run of the comparison: its name and environment.
#[derive(Debug, PartialEq)]
pub struct Variant {
    pub name: String,
    pub env: Vec<(String, String)>,
}

pub fn parse_variant(s: &str) -> Result<Variant> {
    let Some((name, rest)) = s.split_once(':') else {
        bail!("bad --variant '{s}' (expected NAME:ENV=VALUE, e.g. 1t:CNNBENCH_THREADS=1)");
    };
    let mut env = Vec::new();
    for kv in rest.split(',') {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => env.push((k.to_string(), v.to_string())),
            _ => bail!("bad --variant '{s}': '{kv}' is not ENV=VALUE"),
        }
    }
    if name.is_empty() {
        bail!("bad --variant '{s}': the name is empty");
    }
    Ok(Variant {
        name: name.to_string(),
        env,
    })
}

/// A `--cudnn` folder must exist and hold a cuDNN library: refused in one
/// line before any run otherwise (a wrong folder would silently time the
/// cuDNN already on the library path).
fn check_cudnn_folder(dir: &std::path::Path) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("--cudnn '{}': {e}", dir.display()))?;
    let has = entries
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("libcudnn.so"));
    if !has {
        bail!(
            "--cudnn '{}' holds no cuDNN (no libcudnn.so*)",
            dir.display()
        );
    }
    Ok(())
}

/// A variant that puts `dir` first on the library path.
pub fn cudnn_variant(dir: &std::path::Path, old_path: Option<&str>) -> Variant {
    let path = match old_path.filter(|p| !p.is_empty()) {
        Some(old) => format!("{}:{old}", dir.display()),
        None => dir.display().to_string(),
    };
    Variant {
        name: dir.display().to_string(),
        env: vec![("LD_LIBRARY_PATH".into(), path)],
    }
}

/// What the runs are, by subcommand: each is read and laid out its own way.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `conv`, `gemm`: one row per problem and direction.
    Records,
    /// `model`: one row per run and model (seed 004's form: GPU | cuDNN |
    /// forward | backward | total).
    Models,
    /// `info`: one row per run and library (file and version).
    Info,
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    let kind = match args.benchmark.first().map(String::as_str) {
        Some("conv" | "gemm") => Kind::Records,
        Some("model") => Kind::Models,
        Some("info") => Kind::Info,
        _ => bail!(
            "compare runs conv, gemm, model or info: put `-- conv ...`, `-- gemm ...`, `-- model ...` or `-- info` last"
        ),
    };
    crate::signals::install()?;
    for d in &args.cudnn {
        check_cudnn_folder(d)?;
    }
    let old = std::env::var("LD_LIBRARY_PATH").ok();
    let mut variants: Vec<Variant> = args
        .cudnn
        .iter()
        .map(|d| cudnn_variant(d, old.as_deref()))
        .collect();
    for v in &args.variant {
        variants.push(parse_variant(v)?);
    }
    let mut names = std::collections::HashSet::new();
    if let Some(v) = variants.iter().find(|v| !names.insert(v.name.as_str())) {
        bail!(
            "two runs are named '{}': each --cudnn folder and --variant needs its own name",
            v.name
        );
    }
    if variants.len() < 2 {
        bail!("compare needs at least two runs (--cudnn DIR or --variant NAME:ENV=VALUE, twice or more)");
    }
    let (table, libraries, stopped): (SideBySide, Vec<(String, Option<DeviceInfo>)>, bool) =
        match kind {
            Kind::Records => {
                let (runs, stopped) = run_all::<RunFile>(&args, &variants, children::Output::File)?;
                let libs = runs
                    .iter()
                    .map(|(n, f)| (n.clone(), f.environment.gpu.clone()))
                    .collect();
                (side_by_side(&runs), libs, stopped)
            }
            Kind::Models => {
                let (runs, stopped) =
                    run_all::<ModelFile>(&args, &variants, children::Output::File)?;
                let libs = runs
                    .iter()
                    .map(|(n, f)| (n.clone(), f.environment.gpu.clone()))
                    .collect();
                (models_side_by_side(&runs), libs, stopped)
            }
            Kind::Info => {
                let (runs, stopped) =
                    run_all::<InfoFile>(&args, &variants, children::Output::Stdout)?;
                let libs = runs
                    .iter()
                    .map(|(n, f)| (n.clone(), Some(f.gpu.as_device_info())))
                    .collect();
                (libraries_side_by_side(&runs), libs, stopped)
            }
        };
    let folders: Vec<(String, PathBuf)> = args
        .cudnn
        .iter()
        .map(|d| (d.display().to_string(), d.clone()))
        .collect();
    for w in library_warnings(&libraries, !args.cudnn.is_empty(), &folders) {
        note!("cnnbench: warning: {w}");
    }
    crate::output::print(&table.render(args.format)?)?;
    Ok(if stopped {
        crate::signals::exit_code()
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs every variant in turn (each a child process); stops at the first
/// signal, keeping what finished.
fn run_all<T: serde::de::DeserializeOwned + Default>(
    args: &CompareArgs,
    variants: &[Variant],
    output: children::Output,
) -> Result<(Vec<(String, T)>, bool)> {
    let bar = super::progress::bar(variants.len() as u64, args.quiet);
    let mut runs = Vec::new();
    let mut stopped = false;
    for v in variants {
        if crate::signals::stopped() {
            stopped = true;
            break;
        }
        bar.set_message(v.name.clone());
        let mut env = v.env.clone();
        env.push(("CNNBENCH_LABEL".into(), v.name.clone()));
        match children::run_as::<T>(&args.benchmark, &env, output)? {
            ChildRun::Done { file, .. } => runs.push((v.name.clone(), file)),
            ChildRun::Interrupted(file) => {
                runs.push((v.name.clone(), file));
                stopped = true;
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((runs, stopped))
}

/// What `compare` reads of a `model` run's JSON.
#[derive(Default, Deserialize)]
#[serde(default)]
struct ModelFile {
    environment: Environment,
    records: Vec<ModelRow>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ModelRow {
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
struct Median {
    median: f64,
}

/// What `compare` reads of `info --format json`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct InfoFile {
    gpu: InfoGpu,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct InfoGpu {
    device: Option<DeviceInfo>,
    libraries: Vec<LibraryInfo>,
}

impl InfoGpu {
    /// The device where there is one; else a stand-in carrying only the
    /// libraries (and cuDNN's version), for the warnings.
    fn as_device_info(&self) -> DeviceInfo {
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
fn models_side_by_side(runs: &[(String, ModelFile)]) -> SideBySide {
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
fn libraries_side_by_side(runs: &[(String, InfoFile)]) -> SideBySide {
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

/// The comparison as a table: problem | dir | dtype layout | median ms per
/// run | each run's time over the first's. A run without the row shows
/// `-`.
pub struct SideBySide {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// The times and ratios of each row unrounded (the cells after the key
    /// columns), for JSON.
    pub numbers: Vec<Vec<Option<f64>>>,
    /// How many leading columns are labels (the rest are numbers).
    pub keys: usize,
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

impl SideBySide {
    /// An empty table under `head`, whose first `keys` columns are labels.
    fn new(head: Vec<String>, keys: usize) -> SideBySide {
        SideBySide {
            head,
            rows: Vec::new(),
            numbers: Vec::new(),
            keys,
        }
    }

    /// One row: its labels, then its numbers (3 decimals, `-` where
    /// missing), kept unrounded for JSON.
    fn push(&mut self, mut labels: Vec<String>, values: Vec<Option<f64>>) {
        labels.extend(
            values
                .iter()
                .map(|v| v.map_or("-".into(), |v| format!("{v:.3}"))),
        );
        self.rows.push(labels);
        self.numbers.push(values);
    }

    pub fn render(&self, format: Format) -> Result<String> {
        let align: Vec<Align> = (0..self.head.len())
            .map(|c| {
                if c < self.keys {
                    Align::Left
                } else {
                    Align::Right
                }
            })
            .collect();
        Ok(match format {
            Format::Csv => {
                let mut w = csv::Writer::from_writer(Vec::new());
                w.write_record(&self.head)?;
                for row in &self.rows {
                    w.write_record(row)?;
                }
                String::from_utf8(w.into_inner()?)?
            }
            Format::Json => {
                // One object per row, keyed by the column heads; times and
                // ratios as numbers, a missing one as null.
                let rows: Vec<serde_json::Map<String, serde_json::Value>> = self
                    .rows
                    .iter()
                    .zip(&self.numbers)
                    .map(|(row, values)| {
                        let keys = row[..self.keys].iter().map(|c| c.as_str().into());
                        let values = values.iter().map(|v| {
                            v.filter(|v| v.is_finite())
                                .map_or(serde_json::Value::Null, Into::into)
                        });
                        self.head.iter().cloned().zip(keys.chain(values)).collect()
                    })
                    .collect();
                serde_json::to_string_pretty(&rows)? + "\n"
            }
            Format::Md => aligned(&self.head, &align, &self.rows, true),
            _ => aligned(&self.head, &align, &self.rows, false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse() {
        let v = parse_variant("1t:CNNBENCH_THREADS=1,CNNBENCH_ISA=avx2").unwrap();
        assert_eq!(v.name, "1t");
        assert_eq!(v.env[1], ("CNNBENCH_ISA".into(), "avx2".into()));
        assert!(parse_variant("nocolon").is_err());
        assert!(parse_variant("x:NOVALUE").is_err());
        let c = cudnn_variant(std::path::Path::new("/opt/cudnn"), Some("/usr/lib"));
        assert_eq!(c.env[0].1, "/opt/cudnn:/usr/lib");
    }

    #[test]
    fn the_side_by_side_table_renders_in_every_format() {
        let t = SideBySide {
            head: vec![
                "problem".into(),
                "dir".into(),
                "dtype layout".into(),
                "a ms".into(),
                "b ms".into(),
                "b / a".into(),
            ],
            rows: vec![vec![
                "mb1ic8ih9oc16oh7kh3".into(),
                "fwd".into(),
                "f32 nhwc".into(),
                "0.000".into(),
                "-".into(),
                "-".into(),
            ]],
            numbers: vec![vec![Some(0.0004), None, None]],
            keys: 3,
        };
        let json: serde_json::Value =
            serde_json::from_str(&t.render(Format::Json).unwrap()).unwrap();
        assert_eq!(json[0]["a ms"], 0.0004, "unrounded");
        assert_eq!(json[0]["b ms"], serde_json::Value::Null);
        assert_eq!(json[0]["dir"], "fwd");
        let csv = t.render(Format::Csv).unwrap();
        assert_eq!(
            csv.lines().nth(1),
            Some("mb1ic8ih9oc16oh7kh3,fwd,f32 nhwc,0.000,-,-")
        );
        assert!(t.render(Format::Md).unwrap().starts_with("| problem |"));
        assert!(t.render(Format::Table).unwrap().starts_with("problem "));
    }

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
