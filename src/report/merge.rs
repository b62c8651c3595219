//! Step one of a report: runs from the results store (and peers' CSV
//! files) merged into rows, each run labelled by what sets it apart from
//! the others.

use super::input::{read_input, InputFile};
use super::labels::labels;
use crate::bench::Stats;
use crate::results::store::{self, Document, RunFile, Unreadable};
use crate::results::{Check, Device, Dir, Environment, Record};
use anyhow::{Context, Result};
use cnnbench_layers::DType;
use std::path::{Path, PathBuf};

/// One source of rows: a cnnbench run, or a peer's CSV file.
pub struct Run {
    pub path: PathBuf,
    pub file: RunFile,
    /// `Some("pytorch-2.15.0")` for peer rows.
    pub peer: Option<String>,
    /// What tells this run apart, e.g. `threads=1` or `H100 cuDNN 9.10.2`.
    pub label: String,
}

/// `report`'s inputs, sorted: layer runs (`conv`, `gemm` and their peers)
/// and model runs, each with the text read, and every path that could not
/// be read.
#[derive(Debug, Default)]
pub struct Inputs {
    pub layers: Vec<InputFile>,
    pub models: Vec<InputFile>,
    pub unreadable: Vec<Unreadable>,
}

/// The results files and CSVs under `paths`, each read once (the text is
/// kept for loading: a pipe or a FIFO cannot be read twice) to tell layer
/// runs from model runs; a file that cannot be read goes to the
/// unreadable list instead of ending the report.
pub fn split(paths: &[PathBuf]) -> Result<Inputs> {
    let found = store::find_json(paths)?;
    let mut inputs = Inputs {
        unreadable: found.unreadable,
        ..Inputs::default()
    };
    for path in found.files {
        let is_csv = path.extension().is_some_and(|e| e == "csv");
        let text = match read_input(&path) {
            Ok(t) => t,
            // A stop signal ended a wait for a FIFO's writer: the report
            // ends there, saying so, instead of going on without it.
            Err(e) if crate::signals::stopped() => return Err(e),
            Err(e) => {
                inputs.unreadable.push(Unreadable::new(path, e));
                continue;
            }
        };
        let input = InputFile { path, text };
        match is_model_run(&input, is_csv) {
            Ok(Some(true)) => inputs.models.push(input),
            Ok(Some(false)) => inputs.layers.push(input),
            Ok(None) => {}
            Err(e) => inputs.unreadable.push(Unreadable::new(input.path, e)),
        }
    }
    Ok(inputs)
}

/// Loads layer results files and peer CSVs (from [`split`]), labelled; a
/// file that fails to load is added to `unreadable`.
pub fn load_files(files: Vec<InputFile>, unreadable: &mut Vec<Unreadable>) -> Vec<Run> {
    let mut runs = Vec::new();
    for InputFile { path, text } in files {
        let is_csv = path.extension().is_some_and(|e| e == "csv");
        let loaded = if is_csv {
            peer_csv_in(&path, &text).map(|(file, peer)| vec![(file, Some(peer))])
        } else {
            store::runs_in(&path, &text).map(|files| files.into_iter().map(|f| (f, None)).collect())
        };
        let loaded: Vec<(RunFile, Option<String>)> = match loaded {
            Ok(l) => l,
            Err(e) => {
                unreadable.push(Unreadable::new(path, e));
                continue;
            }
        };
        for (file, peer) in loaded.into_iter().filter(|(f, _)| !f.records.is_empty()) {
            runs.push(Run {
                path: path.clone(),
                file,
                peer,
                label: String::new(),
            });
        }
    }
    label_runs(&mut runs);
    runs
}

/// Whether a file holds `cnnbench model` results (or the model peer's
/// CSV); `None` for one of cnnbench's documents that holds no results,
/// and for the published tables (`results/published/`).
fn is_model_run(input: &InputFile, is_csv: bool) -> Result<Option<bool>> {
    let text = &input.text;
    if is_csv {
        // results/published/ lives in the store's folder; its tables are
        // shown with --published only, never read as results.
        if super::published::is_published_csv(text) {
            return Ok(None);
        }
        return Ok(Some(text.starts_with("model,")));
    }
    Ok(match store::document_in(&input.path, text)? {
        Document::Run { model } => Some(model),
        Document::Sweep => Some(false),
        Document::NotResults => None,
    })
}

/// A CSV in cnnbench's columns (what `scripts/peers/*` print) as a run;
/// the peer's name is the `algo` of its first row.
#[cfg(test)]
pub fn read_peer_csv(path: &Path) -> Result<(RunFile, String)> {
    peer_csv_in(path, &read_input(path)?)
}

/// [`read_peer_csv`] on the text already read from `path`.
pub fn peer_csv_in(path: &Path, text: &str) -> Result<(RunFile, String)> {
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    let head = rd.headers()?.clone();
    let col = |name: &str| head.iter().position(|h| h == name);
    let need = |name: &str| {
        col(name).with_context(|| format!("'{}' has no '{name}' column", path.display()))
    };
    let (problem, dir, median) = (need("problem")?, need("dir")?, need("ms_median")?);
    let mut records = Vec::new();
    for row in rd.records() {
        let row = row?;
        let get = |c: Option<usize>| c.and_then(|i| row.get(i)).unwrap_or("").to_string();
        let num = |name: &str| get(col(name)).parse::<f64>().ok();
        let bad = |e: anyhow::Error| anyhow::anyhow!("'{}': {e}", path.display());
        let ms_median: f64 = row.get(median).unwrap_or("").parse().with_context(|| {
            format!(
                "'{}': bad ms_median in row {:?}",
                path.display(),
                row.get(problem)
            )
        })?;
        records.push(Record {
            problem: row.get(problem).unwrap_or("").to_string(),
            dir: Dir::parse(row.get(dir).unwrap_or("")).map_err(bad)?,
            device: Device::parse(&get(col("device"))).map_err(bad)?,
            dtype: DType::parse(&get(col("dtype"))).map_err(bad)?,
            layout: get(col("layout")),
            algo: get(col("algo")),
            ms: Stats {
                min: num("ms_min").unwrap_or(ms_median),
                median: ms_median,
                max: num("ms_max").unwrap_or(ms_median),
                mean: num("ms_mean").unwrap_or(ms_median),
                stddev: num("ms_stddev").unwrap_or(0.0),
            },
            runs: num("runs").unwrap_or(0.0) as usize,
            gflops: num("gflops").unwrap_or(0.0),
            peak_fraction: num("peak_fraction"),
            check: num("check_rel_err").map(|rel_err| Check {
                rel_err,
                passed: get(col("check_passed")) == "true",
            }),
            kernel: get(col("kernel")),
            bias: get(col("bias")) == "true",
            workspace_bytes: num("workspace_bytes").unwrap_or(0.0) as usize,
            // Absent before the column was added, and empty off the GPU.
            cudnn_find_ms: num("cudnn_find_ms").filter(|ms| ms.is_finite() && *ms >= 0.0),
        });
    }
    let peer = records
        .first()
        .map_or("peer".to_string(), |r| r.algo.clone());
    let file = RunFile {
        subcommand: "peer".into(),
        environment: Environment::default(),
        records,
        complete: true,
        ..RunFile::default()
    };
    Ok((file, peer))
}

/// Labels each run by the facts that differ between runs; an explicit
/// label wins. Peers are labelled `peer:NAME`.
pub fn label_runs(runs: &mut [Run]) {
    let own: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].peer.is_none())
        .collect();
    let envs: Vec<&Environment> = own.iter().map(|&i| &runs[i].file.environment).collect();
    for (label, &i) in labels(&envs).into_iter().zip(&own) {
        runs[i].label = label;
    }
    for r in runs.iter_mut().filter(|r| r.peer.is_some()) {
        r.label = format!("peer:{}", r.peer.as_deref().unwrap_or("?"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(paths: &[PathBuf]) -> Result<Vec<Run>> {
        Ok(load_files(split(paths)?.layers, &mut Vec::new()))
    }

    fn run(threads: usize, host: &str) -> Run {
        let mut env = Environment::here(threads, "avx512".into(), None, "t");
        env.host = host.into();
        env.cpu = "Xeon".into();
        Run {
            path: PathBuf::new(),
            file: RunFile {
                environment: env,
                ..RunFile::default()
            },
            peer: None,
            label: String::new(),
        }
    }

    #[test]
    fn labels_name_only_what_differs() {
        let mut runs = vec![run(1, "a"), run(2, "a")];
        label_runs(&mut runs);
        assert_eq!(runs[0].label, "threads=1");
        assert_eq!(runs[1].label, "threads=2");
        let mut runs = vec![run(2, "a"), run(2, "b"), run(2, "b")];
        runs[2].file.environment.label = Some("tuned".into());
        label_runs(&mut runs);
        assert_eq!(runs[0].label, "host=a");
        assert_eq!(runs[1].label, "host=b");
        assert_eq!(runs[2].label, "tuned");
        let mut one = vec![run(2, "a")];
        label_runs(&mut one);
        assert_eq!(one[0].label, "Xeon");
    }

    #[test]
    fn unreadable_inputs_are_listed_and_the_rest_still_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("good.csv"),
            "problem,dir,device,dtype,ms_median\nmb1ic8ih9oc16oh7kh3,fwd,cpu,f32,1.5\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("torn.json"), "{\"records\": [").unwrap();
        std::fs::write(dir.path().join("empty.csv"), "").unwrap();
        std::fs::write(dir.path().join("future.json"), "{\"format_version\": 99}").unwrap();
        std::fs::write(dir.path().join("other.json"), "{\"a\": 1}").unwrap();
        let inputs = split(&[dir.path().to_path_buf()]).unwrap();
        let mut unreadable = inputs.unreadable;
        let runs = load_files(inputs.layers, &mut unreadable);
        assert_eq!(runs.len(), 1, "{unreadable:?}");
        let names: Vec<_> = unreadable
            .iter()
            .map(|u| u.path.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["future.json", "other.json", "torn.json", "empty.csv"],
            "{unreadable:?}"
        );
        assert_eq!(
            unreadable[0].why,
            "the file has format version 99; this cnnbench reads up to 1"
        );
    }

    #[test]
    fn peer_csv_rows_become_records() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("torch.csv");
        std::fs::write(
            &p,
            "problem,dir,device,dtype,layout,algo,ms_min,ms_median,ms_max,ms_mean,ms_stddev,runs,gflops,peak_fraction,check_rel_err,check_passed,kernel,bias,workspace_bytes\n\
             mb2ic8ih9oc16oh7kh3,fwd,cpu,f32,nhwc,pytorch-2.15.0,1,1.5,2,1.5,0.1,10,3.2,,,,aten:mkldnn,true,\n",
        )
        .unwrap();
        let mut runs = load(&[p]).unwrap();
        label_runs(&mut runs);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].label, "peer:pytorch-2.15.0");
        let r = &runs[0].file.records[0];
        assert_eq!((r.ms.median, r.runs, r.check), (1.5, 10, None));
        // Written before the CSV had `cudnn_find_ms`.
        assert_eq!(r.cudnn_find_ms, None);
    }

    #[test]
    fn csv_rows_keep_findex_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("auto.csv");
        let records = crate::output::writers::tests::gpu_and_cpu_records();
        std::fs::write(&p, crate::output::writers::csv(&records).unwrap()).unwrap();
        let (run, _) = read_peer_csv(&p).unwrap();
        let got: Vec<_> = run.records.iter().map(|r| r.cudnn_find_ms).collect();
        assert_eq!(got, [Some(0.25), None]);
        assert_eq!(run.records, records);
    }

    #[test]
    fn published_tables_in_a_results_folder_are_not_results() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("sheet.csv"),
            "source,date,date_kind,model\nhttps://example.org,2017-01-01,published,resnet50\n",
        )
        .unwrap();
        let inputs = split(&[dir.path().to_path_buf()]).unwrap();
        assert!(inputs.layers.is_empty() && inputs.models.is_empty());
        assert!(inputs.unreadable.is_empty(), "{:?}", inputs.unreadable);
    }
}
