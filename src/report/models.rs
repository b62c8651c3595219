//! The report's model section: whole-network training steps from
//! `cnnbench model` runs and from model CSV files (cnnbench's
//! `--format csv`, or `scripts/peers/pytorch_model.py`), one row per run
//! and model.

use super::cost;
use super::input::InputFile;
use super::labels::labels;
use super::options::Options;
use crate::bench::Stats;
use crate::results::store::{self, Unreadable};
use crate::results::{Device, Environment, FolderInput, Input, InputSource, ModelRecord};
use anyhow::{Context, Result};
use cnnbench_layers::DType;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One file of model records.
pub struct ModelRun {
    pub path: PathBuf,
    /// `None` for CSV files, which carry no environment.
    pub environment: Option<Environment>,
    /// `Some("pytorch-2.15.0")` for a peer's CSV.
    pub peer: Option<String>,
    pub records: Vec<ModelRecord>,
    /// The results file's run label, the peer (`peer:NAME`), or `csv:FILE`.
    pub label: String,
    /// False for a run stopped early (its finished models are shown,
    /// marked).
    pub complete: bool,
}

/// Loads model results files and model CSVs (from [`super::merge::split`]), labelled.
pub fn load_files(files: Vec<InputFile>, unreadable: &mut Vec<Unreadable>) -> Vec<ModelRun> {
    let mut runs = Vec::new();
    for InputFile { path, text } in files {
        let is_csv = path.extension().is_some_and(|e| e == "csv");
        let loaded = if is_csv {
            read_model_csv(&path, &text)
        } else {
            store::run_in::<ModelRecord>(&path, &text).map(|file| ModelRun {
                path: path.clone(),
                environment: Some(file.environment),
                peer: None,
                records: file.records,
                label: String::new(),
                complete: file.complete,
            })
        };
        let run = match loaded {
            Ok(run) => run,
            Err(e) => {
                unreadable.push(Unreadable::new(path, e));
                continue;
            }
        };
        if !run.records.is_empty() {
            runs.push(run);
        }
    }
    let own: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].environment.is_some())
        .collect();
    let envs: Vec<&Environment> = own
        .iter()
        .filter_map(|&i| runs[i].environment.as_ref())
        .collect();
    for (label, &i) in labels(&envs).into_iter().zip(&own) {
        runs[i].label = label;
    }
    for r in runs.iter_mut().filter(|r| r.environment.is_none()) {
        let stem = r.path.file_stem().unwrap_or_default().to_string_lossy();
        r.label = match &r.peer {
            Some(p) => format!("peer:{p} ({stem})"),
            None => format!("csv:{stem}"),
        };
    }
    runs
}

/// A peer's device column: its tool, then `cpu` or the CUDA device's name
/// (`pytorch-2.15.0 cpu`, `pytorch-2.15.0 NVIDIA H100 80GB HBM3`); cnnbench's
/// own is `cpu` or `gpu`. Returns the tool, if any, and the device.
fn split_peer_device(col: &str) -> (Option<&str>, Result<Device>) {
    let Some((tool, name)) = col.split_once(' ') else {
        return (None, Device::parse(col));
    };
    // The peers run on the CPU or on CUDA, whose device they name.
    let name = name.trim();
    let device = if name.eq_ignore_ascii_case("cpu") {
        Ok(Device::Cpu)
    } else if name.is_empty() {
        Err(anyhow::anyhow!("'{col}' names no device after the tool"))
    } else {
        Ok(Device::Gpu)
    };
    (Some(tool), device)
}

/// A model CSV (the columns of [`ModelRecord::csv_row`]). A peer writes
/// its name before the device (see [`split_peer_device`]).
fn read_model_csv(path: &Path, text: &str) -> Result<ModelRun> {
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    let head = rd.headers()?.clone();
    let col = |name: &str| head.iter().position(|h| h == name);
    let mut records = Vec::new();
    let mut peer = None;
    for row in rd.records() {
        let row = row.with_context(|| format!("'{}': bad CSV row", path.display()))?;
        let get = |name: &str| col(name).and_then(|i| row.get(i)).unwrap_or("").trim();
        let num = |name: &str| get(name).parse::<f64>().ok();
        let stats = |pre: &str| {
            Some(Stats {
                min: num(&format!("{pre}_min"))?,
                median: num(&format!("{pre}_median"))?,
                max: num(&format!("{pre}_max"))?,
                mean: num(&format!("{pre}_mean"))?,
                stddev: num(&format!("{pre}_stddev"))?,
            })
        };
        let bad = |e: anyhow::Error| anyhow::anyhow!("'{}': {e}", path.display());
        let (tool, device) = split_peer_device(get("device"));
        if let Some(tool) = tool {
            peer = Some(tool.to_string());
        }
        let device = device.map_err(bad)?;
        let dtype = DType::parse(get("dtype")).map_err(bad)?;
        let total = num("total_ms_median");
        records.push(ModelRecord {
            model: get("model").to_string(),
            batch: num("batch").unwrap_or(0.0) as usize,
            device,
            dtype,
            layout: get("layout").to_string(),
            params: num("params").unwrap_or(0.0) as usize,
            macs: num("macs").unwrap_or(0.0) as u64,
            status: get("status").to_string(),
            forward_ms: stats("fwd_ms"),
            backward_ms: stats("bwd_ms"),
            update_ms: None,
            total_ms: total.map(|m| Stats {
                min: m,
                median: m,
                max: m,
                mean: m,
                stddev: 0.0,
            }),
            images_per_sec: num("images_per_sec"),
            gflops: None,
            runs: num("runs").unwrap_or(0.0) as usize,
            loss: None,
            memory: None,
            fused: None,
            gpu_paths: None,
            eager_total_ms: None,
            layers: Vec::new(),
            roofline: None,
            data_parallel: None,
            projection: None,
            input: Input {
                source: match get("input") {
                    "folder" => InputSource::Folder,
                    _ => InputSource::Synthetic,
                },
                folder: None,
            },
        });
    }
    Ok(ModelRun {
        path: path.to_path_buf(),
        environment: None,
        peer,
        records,
        label: String::new(),
        complete: true,
    })
}

/// The `## Models` section (and `## Model cost` for priced runs).
pub fn render(md: &mut String, runs: &[ModelRun], opts: &Options) -> Result<()> {
    table(md, runs)?;
    scaling(md, runs)?;
    costs(md, runs, opts)
}

/// `## Scaling`: each measured data-parallel record beside the projection
/// of the same model, batch, device, precision and layout on as many GPUs,
/// where a run made one (`--project-gpus`).
fn scaling(md: &mut String, runs: &[ModelRun]) -> Result<()> {
    let records = || {
        runs.iter()
            .flat_map(|r| r.records.iter().map(move |m| (r, m)))
    };
    let same = |a: &ModelRecord, b: &ModelRecord| {
        (&a.model, a.batch, a.device, a.dtype, &a.layout)
            == (&b.model, b.batch, b.device, b.dtype, &b.layout)
    };
    // The records with projections, by what must match: each measured
    // record looks up its own, not every record (quadratic in records).
    let key = |m: &ModelRecord| {
        format!(
            "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
            m.model, m.batch, m.device, m.dtype, m.layout
        )
    };
    let mut projections: std::collections::HashMap<String, Vec<(&ModelRun, &ModelRecord)>> =
        std::collections::HashMap::new();
    for (run, p) in records().filter(|(_, p)| p.projection.is_some()) {
        projections.entry(key(p)).or_default().push((run, p));
    }
    let mut rows = Vec::new();
    for (run, m) in records() {
        let Some(dp) = &m.data_parallel else { continue };
        let projected = projections.get(&key(m)).and_then(|of_m| {
            of_m.iter().find_map(|&(prun, p)| {
                let set = p.projection.as_ref().filter(|_| same(p, m))?;
                let row = set.rows.iter().find(|x| x.gpus == dp.gpus)?;
                Some((prun, set, row))
            })
        });
        let step = m.total_ms.map_or(f64::NAN, |s| s.median);
        let (pstep, peff, pfrom) = match projected {
            Some((prun, set, row)) => (
                format!("{:.1}", row.step_ms),
                format!("{:.1}%", 100.0 * row.efficiency),
                format!(
                    "{} ({}, {}, {} per node)",
                    prun.label,
                    set.interconnect.intra.name,
                    set.interconnect.inter.name,
                    set.gpus_per_node
                ),
            ),
            None => (String::new(), String::new(), "no projection".to_string()),
        };
        rows.push(format!(
            "| {} | {} | {} | {} | {} | {} x{} | {:.1} | {:.1} | {:.1}% | {pstep} | {peff} | {pfrom} |",
            m.model,
            m.batch,
            m.device,
            m.dtype,
            run.label,
            dp.launcher,
            dp.gpus,
            dp.single_gpu_step_ms,
            step,
            100.0 * dp.efficiency,
        ));
    }
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "## Scaling: measured data-parallel steps beside their projections\n"
    )?;
    writeln!(
        md,
        "Measured: the data-parallel step (the slowest replica's, median) and its efficiency against the single-GPU step timed in the same run. Projected: `--project-gpus` on a single-GPU run of the same model, batch, device, precision and layout (a model, not a measurement; see its assumptions in that run's output).\n"
    )?;
    writeln!(
        md,
        "| model | batch/GPU | device | dtype | run | replicas | 1-GPU step ms | step ms | efficiency | projected step ms | projected efficiency | projected from |"
    )?;
    writeln!(
        md,
        "|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---|"
    )?;
    for r in rows {
        writeln!(md, "{r}")?;
    }
    writeln!(md)?;
    Ok(())
}

/// Every model record, grouped by model, batch and precision, fastest
/// step first, each against the group's fastest.
fn table(md: &mut String, runs: &[ModelRun]) -> Result<()> {
    let mut rows: Vec<(&ModelRun, &ModelRecord)> = runs
        .iter()
        .flat_map(|r| r.records.iter().map(move |m| (r, m)))
        .collect();
    let step = |m: &ModelRecord| m.total_ms.map(|s| s.median);
    let group = |m: &ModelRecord| (m.model.clone(), m.batch, m.dtype.name());
    rows.sort_by(|a, b| {
        group(a.1).cmp(&group(b.1)).then(
            step(a.1)
                .unwrap_or(f64::INFINITY)
                .total_cmp(&step(b.1).unwrap_or(f64::INFINITY)),
        )
    });
    writeln!(md, "## Models\n")?;
    writeln!(
        md,
        "Training steps of whole networks (forward and backward, and the update where one was timed), medians over each run's timed steps; min-max in brackets. `x best` is the step time over the fastest row of the same model, batch and precision. `fused: relu`: the ReLUs after batch norms and residual adds ran inside them; `add+relu`: residual adds with their ReLUs ran inside the batch norms before them (both cnnbench's CPU default; CSV files do not say). Input is synthetic unless a note says `real input` (images read from a folder for every step; `input-bound`: the step waited for the loader).\n"
    )?;
    writeln!(
        md,
        "| model | batch | run | device | dtype | layout | forward ms | backward ms | step ms | img/s | x best | notes |"
    )?;
    writeln!(
        md,
        "|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---|"
    )?;
    let mut best: Option<((String, usize, &str), f64)> = None;
    for (run, m) in rows {
        let g = group(m);
        if best.as_ref().is_none_or(|(k, _)| *k != g) {
            best = step(m).map(|t| (g.clone(), t));
        }
        let ms = |s: &Option<Stats>| {
            s.map_or("".to_string(), |s| {
                format!("{:.1} ({:.1}-{:.1})", s.median, s.min, s.max)
            })
        };
        let ratio = match (&best, step(m)) {
            (Some((k, b)), Some(t)) if *k == g => format!("{:.2}", t / b),
            _ => String::new(),
        };
        let mut notes = Vec::new();
        if m.status != "ok" {
            notes.push(m.status.clone());
        }
        if !run.complete {
            notes.push("from a run stopped early".into());
        }
        if let Some(f) = &m.fused {
            notes.push(format!("fused: {f}"));
        }
        if let Some(dp) = &m.data_parallel {
            notes.push(format!(
                "data-parallel on {} GPUs ({}), img/s of all, efficiency {:.1}%",
                dp.gpus,
                dp.launcher,
                100.0 * dp.efficiency
            ));
        }
        if let Some(note) = input_note(&m.input) {
            notes.push(note);
        }
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.model,
            m.batch,
            run.label,
            m.device,
            m.dtype,
            m.layout,
            ms(&m.forward_ms),
            ms(&m.backward_ms),
            step(m).map_or(String::new(), |t| format!("{t:.1}")),
            m.images_per_sec
                .map_or(String::new(), |v| format!("{v:.1}")),
            ratio,
            notes.join(", ")
        )?;
    }
    writeln!(md)?;
    Ok(())
}

/// A model table note for real input: the folder's images, what its
/// loader could deliver, and whether the step waited for it; `None` for
/// synthetic input.
fn input_note(input: &Input) -> Option<String> {
    if input.source != InputSource::Folder {
        return None;
    }
    Some(match &input.folder {
        Some(f) => folder_note(f),
        // Model CSVs say only where the images came from.
        None => "real input".to_string(),
    })
}

fn folder_note(f: &FolderInput) -> String {
    format!(
        "real input ({} images), loader {:.1} img/s{}",
        f.images,
        f.loader_images_per_sec,
        if f.input_bound { ", input-bound" } else { "" }
    )
}

/// The device a record ran on, with its name where the run gives one:
/// `gpu (NVIDIA H100 80GB HBM3)`, `cpu (Xeon ...)`, or a peer's tool.
pub fn device_label(run: &ModelRun, m: &ModelRecord) -> String {
    let name = run.environment.as_ref().map(|e| match &e.gpu {
        Some(g) => g.name.clone(),
        None => e.cpu.clone(),
    });
    match (name.filter(|n| !n.is_empty()), &run.peer) {
        (Some(n), _) => format!("{} ({n})", m.device),
        (None, Some(p)) => format!("{} ({p})", m.device),
        (None, None) => m.device.to_string(),
    }
}

/// A record's GPU count as the report shows it: `-` on the CPU, else its
/// data-parallel replicas (1 without).
pub fn gpus_shown(m: &ModelRecord) -> String {
    match m.device {
        Device::Cpu => "-".to_string(),
        Device::Gpu => m.data_parallel.as_ref().map_or(1, |d| d.gpus).to_string(),
    }
}

/// What a whole training run would cost at each priced row's throughput:
/// the run's own price (`model --price-per-hour/--instance`), else the
/// report's. CSV rows are priced by the report's only.
fn costs(md: &mut String, runs: &[ModelRun], opts: &Options) -> Result<()> {
    let priced: Vec<(&ModelRun, &ModelRecord, f64, f64)> = runs
        .iter()
        .filter_map(|r| {
            let own = r.environment.as_ref().and_then(|e| e.price.clone());
            own.or(opts.price.clone()).map(|p| (r, p.usd_per_hour))
        })
        .flat_map(|(r, usd)| {
            r.records
                .iter()
                .filter_map(move |m| m.images_per_sec.map(|ips| (r, m, usd, ips)))
        })
        .collect();
    if priced.is_empty() {
        return Ok(());
    }
    writeln!(md, "## Model cost\n")?;
    writeln!(
        md,
        "At each row's images per second (the model's training steps, nothing else: no data loading, no evaluation): dollars per million images, and the hours and dollars of {} epochs of {} images.\n",
        opts.epochs, opts.dataset_images
    )?;
    writeln!(
        md,
        "| model | batch | run | device | dtype | img/s | $/h | $ per 1M images | hours | $ |"
    )?;
    writeln!(md, "|---|---:|---|---|---|---:|---:|---:|---:|---:|")?;
    for (r, m, usd, ips) in priced {
        let (hours, total) = cost::training(ips, usd, opts.epochs, opts.dataset_images);
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.1} | {:.2} |",
            m.model,
            m.batch,
            r.label,
            m.device,
            m.dtype,
            ips,
            usd,
            cost::usd_per_million_images(ips, usd),
            hours,
            total
        )?;
    }
    writeln!(md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::merge::split;

    fn load(paths: &[PathBuf]) -> Result<Vec<ModelRun>> {
        Ok(load_files(split(paths)?.models, &mut Vec::new()))
    }

    const HEAD: &str = "model,batch,device,dtype,layout,params,macs,fwd_ms_min,fwd_ms_median,fwd_ms_max,fwd_ms_mean,fwd_ms_stddev,bwd_ms_min,bwd_ms_median,bwd_ms_max,bwd_ms_mean,bwd_ms_stddev,total_ms_median,images_per_sec,runs,status\n";

    #[test]
    fn model_csvs_become_labelled_rows_against_the_fastest() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, device: &str, step: f64| {
            let row = format!(
                "resnet50,16,{device},f32,nhwc,25557032,4089184256,1,{f},2,1,0.1,1,{b},2,1,0.1,{step},6.0,10,ok\n",
                f = step / 3.0,
                b = step * 2.0 / 3.0
            );
            std::fs::write(dir.path().join(name), format!("{HEAD}{row}")).unwrap();
        };
        write("cn.csv", "cpu", 2000.0);
        write("pt.csv", "pytorch-2.15.0 cpu", 2500.0);
        write("ptgpu.csv", "pytorch-2.15.0 NVIDIA H100 80GB HBM3", 100.0);
        let runs = load(&[dir.path().to_path_buf()]).unwrap();
        let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "csv:cn",
                "peer:pytorch-2.15.0 (pt)",
                "peer:pytorch-2.15.0 (ptgpu)"
            ]
        );
        assert_eq!(runs[1].records[0].device, Device::Cpu);
        assert_eq!(runs[2].records[0].device, Device::Gpu);
        let runs = load(&[dir.path().join("cn.csv"), dir.path().join("pt.csv")]).unwrap();
        let mut md = String::new();
        let opts = Options {
            baseline: None,
            charts: None,
            price: Some(cost::Price {
                usd_per_hour: 3.6,
                instance: None,
                source: String::new(),
                date: String::new(),
            }),
            epochs: 1,
            dataset_images: 3600,
            published: false,
        };
        render(&mut md, &runs, &opts).unwrap();
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| resnet50")).collect();
        assert_eq!(rows.len(), 4, "two rows, two costs");
        assert!(rows[0].contains("csv:cn") && rows[0].contains("| 1.00 |"));
        assert!(rows[1].contains("peer:pytorch") && rows[1].contains("| 1.25 |"));
        // At 6 img/s and $3.60/h: $166.67 per million images; 3600 images
        // take 600 s, $0.60.
        assert!(md.contains("## Model cost"));
        let cost = rows[2];
        assert!(
            cost.contains("| 6.0 | 3.60 | 166.67 | 0.2 | 0.60 |"),
            "{cost}"
        );
    }

    #[test]
    fn a_measured_data_parallel_run_sits_beside_its_projection() {
        use crate::dist::{interconnect, project};
        let stats =
            |m: f64| serde_json::json!({"min": m, "median": m, "max": m, "mean": m, "stddev": 0.0});
        let record = |step: f64| {
            serde_json::json!({
                "model": "resnet50", "batch": 64, "device": "gpu", "dtype": "f16", "layout": "nhwc",
                "params": 25557032, "macs": 4089184256u64, "status": "ok",
                "forward_ms": stats(step / 3.0), "backward_ms": stats(step * 2.0 / 3.0),
                "total_ms": stats(step), "images_per_sec": 1.0, "gflops": 1.0, "runs": 10,
                "loss": 6.9, "memory": null
            })
        };
        let mut single: ModelRecord = serde_json::from_value(record(90.0)).unwrap();
        let links = interconnect::parse_pair("nvlink4").unwrap();
        let row = |gpus: usize, eff: f64| project::Projection {
            gpus,
            nodes: 1,
            algorithm: "ring".into(),
            buckets: 5,
            comm_ms: 2.0,
            exposed_ms: 0.5,
            step_ms: 90.5,
            images_per_sec: 1.0,
            speedup: gpus as f64 * eff,
            efficiency: eff,
        };
        single.projection = Some(crate::results::ProjectionSet {
            interconnect: links.clone(),
            gpus_per_node: 8,
            assumptions: vec![],
            rows: vec![row(2, 0.999), row(8, 0.994)],
        });
        let mut dp: ModelRecord = serde_json::from_value(record(95.0)).unwrap();
        dp.data_parallel = Some(crate::results::DataParallel {
            gpus: 8,
            launcher: "in-process".into(),
            nccl: "2.32.3".into(),
            buckets: 5,
            gradient_bytes: 102_228_128,
            exposed_comm_ms: Stats::of(&[1.0, 1.2]).unwrap(),
            rank_step_ms: vec![95.0; 8],
            images_per_sec_per_gpu: 673.7,
            single_gpu_step_ms: 90.0,
            speedup: 7.58,
            efficiency: 0.947,
        });
        let run = |label: &str, records| ModelRun {
            path: PathBuf::from(label),
            environment: None,
            peer: None,
            records,
            label: label.into(),
            complete: true,
        };
        let mut md = String::new();
        scaling(
            &mut md,
            &[run("a", vec![single.clone()]), run("b", vec![dp.clone()])],
        )
        .unwrap();
        assert!(md.contains("## Scaling"), "{md}");
        let line = md.lines().find(|l| l.starts_with("| resnet50")).unwrap();
        assert!(
            line.contains("| in-process x8 | 90.0 | 95.0 | 94.7% | 90.5 | 99.4% | a (nvlink4, nvlink4, 8 per node) |"),
            "{line}"
        );
        // Another precision is not the same configuration; no run at all
        // without a data-parallel record.
        dp.dtype = cnnbench_layers::DType::Bf16;
        let mut md = String::new();
        scaling(
            &mut md,
            &[run("a", vec![single.clone()]), run("b", vec![dp])],
        )
        .unwrap();
        assert!(md.contains("no projection"), "{md}");
        let mut md = String::new();
        scaling(&mut md, &[run("a", vec![single])]).unwrap();
        assert!(md.is_empty());
    }

    #[test]
    fn rows_of_real_input_say_so_with_the_loaders_rate() {
        let dir = tempfile::tempdir().unwrap();
        let row = "resnet50,16,gpu,f32,nhwc,1,1,1,1,1,1,0,1,2,2,2,0,3,5.0,10,ok,1,folder\n";
        std::fs::write(
            dir.path().join("real.csv"),
            format!("{},gpus,input\n{row}", HEAD.trim_end()),
        )
        .unwrap();
        let mut runs = load(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(runs[0].records[0].input.source, InputSource::Folder);
        let wait = Stats::of(&[0.5]).unwrap();
        let mut real = runs[0].records[0].clone();
        real.input.folder = Some(FolderInput {
            path: "/data/train".into(),
            images: 1300,
            classes: 10,
            skipped: 0,
            transform: "train".into(),
            decoder: "zune-jpeg".into(),
            loader_threads: 4,
            prefetch: 2,
            loader_images_per_sec: 812.5,
            wait_ms: wait,
            input_bound: true,
        });
        runs[0].records.push(real);
        let mut md = String::new();
        table(&mut md, &runs).unwrap();
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| resnet50")).collect();
        assert!(rows[0].ends_with("| real input |"), "{md}");
        assert!(
            rows[1].ends_with("| real input (1300 images), loader 812.5 img/s, input-bound |"),
            "{md}"
        );
        assert_eq!(input_note(&Input::default()), None);
    }
}
