//! `## Comparisons`: the tf_cnn_benchmarks sheet's questions asked of this
//! report's model records. Runs of the same model that differ in exactly
//! one of input (real over synthetic), batch (larger over smaller) or GPU
//! count (more over one) are paired, and their images/s divided; the
//! medians per comparison follow, and with `--published` the sheet's own.

use super::models::{device_label, gpus_shown, ModelRun};
use super::published::{Published, Table, ThroughputRow};
use crate::bench::Stats;
use crate::results::{Device, InputSource, ModelRecord};
use anyhow::Result;
use cnnbench_layers::DType;
use std::collections::HashMap;
use std::fmt::Write;

/// What one comparison varies; everything else must be equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Input,
    Batch,
    Gpus,
}

impl Axis {
    const ALL: [Axis; 3] = [Axis::Input, Axis::Batch, Axis::Gpus];

    fn title(self) -> &'static str {
        match self {
            Axis::Input => "Real over synthetic input",
            Axis::Batch => "Larger batch over smaller",
            Axis::Gpus => "More GPUs over one",
        }
    }
}

/// The facts a pairing compares: the three axes, and all else that must
/// match for a ratio to mean one thing.
#[derive(Clone, Debug, PartialEq)]
struct Facts<'a> {
    model: &'a str,
    device: Device,
    /// The GPU's or CPU's name, where the run says (CSV files do not).
    device_name: Option<String>,
    /// A peer's tool (`pytorch-2.15.0`); `None` for cnnbench.
    tool: Option<&'a str>,
    /// CPU runs: worker threads, where the run says.
    threads: Option<usize>,
    dtype: DType,
    layout: &'a str,
    update: bool,
    input: InputSource,
    batch: usize,
    gpus: usize,
}

impl<'a> Facts<'a> {
    fn of(run: &'a ModelRun, m: &'a ModelRecord) -> Facts<'a> {
        let env = run.environment.as_ref();
        Facts {
            model: &m.model,
            device: m.device,
            device_name: env.map(|e| match &e.gpu {
                Some(g) => g.name.clone(),
                None => e.cpu.clone(),
            }),
            tool: run.peer.as_deref(),
            threads: env.filter(|e| e.gpu.is_none()).map(|e| e.threads),
            dtype: m.dtype,
            layout: &m.layout,
            update: m.update_ms.is_some(),
            input: m.input.source,
            batch: m.batch,
            gpus: m.data_parallel.as_ref().map_or(1, |d| d.gpus),
        }
    }

    /// Whether `other` is this run's partner along `axis`, in order: this
    /// the synthetic, smaller-batch or one-GPU side, `other` the rest
    /// identical.
    /// These facts with `axis`'s own set to a constant: two records can
    /// pair along `axis` only where these are equal.
    fn without(&self, axis: Axis) -> String {
        let mut f = self.clone();
        match axis {
            Axis::Input => f.input = InputSource::Synthetic,
            Axis::Batch => f.batch = 0,
            Axis::Gpus => f.gpus = 0,
        }
        format!("{f:?}")
    }

    fn pairs_with(&self, other: &Facts, axis: Axis) -> bool {
        let mut same = other.clone();
        match axis {
            Axis::Input => {
                if (self.input, other.input) != (InputSource::Synthetic, InputSource::Folder) {
                    return false;
                }
                same.input = self.input;
            }
            Axis::Batch => {
                if self.batch >= other.batch {
                    return false;
                }
                same.batch = self.batch;
            }
            Axis::Gpus => {
                if self.gpus != 1 || other.gpus <= 1 {
                    return false;
                }
                same.gpus = self.gpus;
            }
        }
        *self == same
    }
}

/// One measured pair: the base run (synthetic, smaller batch, one GPU) and
/// the other, and the other's images/s over the base's.
pub struct Pair<'a> {
    pub axis: Axis,
    pub base: (&'a ModelRun, &'a ModelRecord),
    pub other: (&'a ModelRun, &'a ModelRecord),
    pub ratio: f64,
}

impl Pair<'_> {
    /// What the ratio is of: `real / synthetic`, `64 / 32`, `8 / 1 GPUs`.
    fn what(&self) -> String {
        let (b, o) = (&self.base.1, &self.other.1);
        match self.axis {
            Axis::Input => "real / synthetic".to_string(),
            Axis::Batch => format!("batch {} / {}", o.batch, b.batch),
            Axis::Gpus => format!(
                "{} / 1 GPUs",
                o.data_parallel.as_ref().map_or(1, |d| d.gpus)
            ),
        }
    }
}

/// Every pair of model records (those that ran, with a throughput) that
/// differ along one axis only.
pub fn pairs(runs: &[ModelRun]) -> Vec<Pair<'_>> {
    let records: Vec<(&ModelRun, &ModelRecord, Facts, f64)> = runs
        .iter()
        .flat_map(|r| r.records.iter().map(move |m| (r, m)))
        .filter(|(_, m)| m.status == "ok")
        .filter_map(|(r, m)| {
            let ips = m.images_per_sec.filter(|v| v.is_finite() && *v > 0.0)?;
            Some((r, m, Facts::of(r, m), ips))
        })
        .collect();
    let mut out = Vec::new();
    for axis in Axis::ALL {
        // Records pair only within a group of equal facts but the axis's:
        // grouped by hash, each record meets its group alone, not every
        // record (which made a report quadratic in its records).
        let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
        let keys: Vec<String> = records.iter().map(|(_, _, f, _)| f.without(axis)).collect();
        for (i, k) in keys.iter().enumerate() {
            groups.entry(k.clone()).or_default().push(i);
        }
        let mut found = 0;
        'records: for (i, (br, bm, bf, bips)) in records.iter().enumerate() {
            for &j in &groups[&keys[i]] {
                let (or, om, of, oips) = &records[j];
                if bf.pairs_with(of, axis) {
                    if found == MAX_PAIRS {
                        break 'records;
                    }
                    found += 1;
                    out.push(Pair {
                        axis,
                        base: (*br, *bm),
                        other: (*or, *om),
                        ratio: oips / bips,
                    });
                }
            }
        }
    }
    out
}

/// The most pairs one comparison lists: records of equal facts repeated
/// many times would otherwise pair each with each (the table says where
/// it stopped).
pub const MAX_PAIRS: usize = 10_000;

/// The median of each kind of ratio (`batch 64 / 32`), in first-seen order.
fn medians(ratios: impl Iterator<Item = (String, f64)>) -> Vec<(String, f64, usize)> {
    let mut by_what: Vec<(String, Vec<f64>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (what, r) in ratios {
        match index.get(&what) {
            Some(&i) => by_what[i].1.push(r),
            None => {
                index.insert(what.clone(), by_what.len());
                by_what.push((what, vec![r]));
            }
        }
    }
    by_what
        .into_iter()
        .filter_map(|(what, v)| Stats::of(&v).map(|s| (what, s.median, v.len())))
        .collect()
}

/// A published table's own pairs along `axis` (same model, machine, GPU,
/// precision and the other two axes), as `what, ratio`.
fn published_ratios(table: &Table<ThroughputRow>, axis: Axis) -> Vec<(String, f64)> {
    let pairs_with = |a: &ThroughputRow, b: &ThroughputRow| {
        let rest = |r: &ThroughputRow| {
            (
                r.model.clone(),
                r.machine.clone(),
                r.gpu.clone(),
                r.precision.clone(),
            )
        };
        if rest(a) != rest(b) {
            return None;
        }
        match axis {
            Axis::Input => (a.input == "synthetic"
                && b.input == "real"
                && (a.batch, a.gpus) == (b.batch, b.gpus))
                .then(|| "real / synthetic".to_string()),
            Axis::Batch => (a.batch < b.batch && (&a.input, a.gpus) == (&b.input, b.gpus))
                .then(|| format!("batch {} / {}", b.batch, a.batch)),
            Axis::Gpus => (a.gpus == 1 && b.gpus > 1 && (&a.input, a.batch) == (&b.input, b.batch))
                .then(|| format!("{} / 1 GPUs", b.gpus)),
        }
    };
    let mut out = Vec::new();
    for a in &table.rows {
        for b in &table.rows {
            if let Some(what) = pairs_with(a, b) {
                out.push((what, b.images_per_sec / a.images_per_sec));
            }
        }
    }
    out
}

/// The `## Comparisons` section; nothing when no two records pair.
pub fn render(md: &mut String, runs: &[ModelRun], published: Option<&Published>) -> Result<()> {
    let all = pairs(runs);
    if all.is_empty() {
        return Ok(());
    }
    writeln!(md, "## Comparisons\n")?;
    writeln!(
        md,
        "Runs of the same model that differ in one thing only, as the tf_cnn_benchmarks sheet compares them: images/s of one over the other's. Everything else is equal: device and its name, tool, CPU threads, precision, layout, update, and the other two of input, batch and GPU count.\n"
    )?;
    for axis in Axis::ALL {
        let of_axis: Vec<&Pair> = all.iter().filter(|p| p.axis == axis).collect();
        if of_axis.is_empty() {
            continue;
        }
        writeln!(md, "### {}\n", axis.title())?;
        table(md, axis, &of_axis)?;
        if of_axis.len() == MAX_PAIRS {
            writeln!(
                md,
                "Listed: the first {MAX_PAIRS} pairs; more records pair than a table can show.\n"
            )?;
        }
        for (what, median, n) in medians(of_axis.iter().map(|p| (p.what(), p.ratio))) {
            writeln!(md, "Median {what}: **{median:.2}x** over {n} pair(s).\n")?;
        }
        for t in published.iter().flat_map(|p| &p.throughput) {
            let theirs = medians(published_ratios(t, axis).into_iter());
            if theirs.is_empty() {
                continue;
            }
            let list: Vec<String> = theirs
                .iter()
                .map(|(what, median, n)| format!("{what} {median:.2}x ({n} pairs)"))
                .collect();
            writeln!(
                md,
                "Published, for context ({}, TensorFlow; not measured here): median {}.\n",
                t.name,
                list.join(", ")
            )?;
        }
    }
    Ok(())
}

fn ips(m: &ModelRecord) -> String {
    m.images_per_sec
        .map_or(String::new(), |v| format!("{v:.1}"))
}

fn input_name(m: &ModelRecord) -> &'static str {
    match m.input.source {
        InputSource::Synthetic => "synthetic",
        InputSource::Folder => "real",
    }
}

/// One row per pair, with the columns that say what was held equal.
fn table(md: &mut String, axis: Axis, pairs: &[&Pair]) -> Result<()> {
    let (held, base, other) = match axis {
        Axis::Input => ("batch | GPUs", "synthetic", "real"),
        Axis::Batch => ("input | GPUs", "smaller batch", "larger batch"),
        Axis::Gpus => ("batch/GPU | input", "1 GPU", "more GPUs"),
    };
    let loader = if axis == Axis::Input {
        " loader img/s |"
    } else {
        ""
    };
    writeln!(
        md,
        "| model | {held} | device | dtype | layout | {base}: run | img/s | {other}: run | img/s |{loader} ratio |"
    )?;
    writeln!(
        md,
        "|---|---|---|---|---|---|---|---:|---|---:|{}---:|",
        if loader.is_empty() { "" } else { "---:|" }
    )?;
    for p in pairs {
        let ((brun, b), (orun, o)) = (p.base, p.other);
        let held = match axis {
            Axis::Input => format!("{} | {}", b.batch, gpus_shown(b)),
            Axis::Batch => format!("{} | {}", input_name(b), gpus_shown(b)),
            Axis::Gpus => format!("{} | {}", b.batch, input_name(b)),
        };
        let side = |run: &ModelRun, m: &ModelRecord| match axis {
            Axis::Input => run.label.clone(),
            Axis::Batch => format!("{} (batch {})", run.label, m.batch),
            Axis::Gpus => format!("{} ({} GPUs)", run.label, gpus_shown(m)),
        };
        let loader = match (axis, &o.input.folder) {
            (Axis::Input, Some(f)) => format!(" {:.1} |", f.loader_images_per_sec),
            (Axis::Input, None) => " |".to_string(),
            _ => String::new(),
        };
        writeln!(
            md,
            "| {} | {held} | {} | {} | {} | {} | {} | {} | {} |{loader} {:.2}x |",
            b.model,
            device_label(brun, b),
            b.dtype,
            b.layout,
            side(brun, b),
            ips(b),
            side(orun, o),
            ips(o),
            p.ratio
        )?;
    }
    writeln!(md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{DataParallel, Environment, FolderInput, Input};
    use std::path::PathBuf;

    fn stats(m: f64) -> Stats {
        Stats {
            min: m,
            median: m,
            max: m,
            mean: m,
            stddev: 0.0,
        }
    }

    /// A resnet50 record at `batch` that ran at `ips` images/s.
    fn record(batch: usize, ips: f64) -> ModelRecord {
        let step = 1000.0 * batch as f64 / ips;
        ModelRecord {
            model: "resnet50".into(),
            batch,
            device: Device::Gpu,
            dtype: DType::F32,
            layout: "nhwc".into(),
            params: 25_557_032,
            macs: 4_089_184_256,
            status: "ok".into(),
            forward_ms: Some(stats(step / 3.0)),
            backward_ms: Some(stats(step * 2.0 / 3.0)),
            update_ms: None,
            total_ms: Some(stats(step)),
            images_per_sec: Some(ips),
            gflops: None,
            runs: 10,
            loss: Some(6.9),
            memory: None,
            fused: None,
            gpu_paths: None,
            eager_total_ms: None,
            layers: Vec::new(),
            roofline: None,
            data_parallel: None,
            projection: None,
            input: Input::default(),
        }
    }

    fn folder(mut m: ModelRecord, input_bound: bool) -> ModelRecord {
        m.input = Input {
            source: InputSource::Folder,
            folder: Some(FolderInput {
                path: "/data/imagenet/train".into(),
                images: 1_281_167,
                classes: 1000,
                skipped: 0,
                transform: "train".into(),
                decoder: "zune-jpeg".into(),
                loader_threads: 8,
                prefetch: 4,
                loader_images_per_sec: 2500.0,
                wait_ms: stats(0.5),
                input_bound,
            }),
        };
        m
    }

    fn on_gpus(mut m: ModelRecord, gpus: usize) -> ModelRecord {
        m.data_parallel = Some(DataParallel {
            gpus,
            launcher: "in-process".into(),
            nccl: "2.21.5".into(),
            buckets: 5,
            gradient_bytes: 102_228_128,
            exposed_comm_ms: stats(1.0),
            rank_step_ms: vec![100.0; gpus],
            images_per_sec_per_gpu: 1.0,
            single_gpu_step_ms: 90.0,
            speedup: 1.0,
            efficiency: 1.0,
        });
        m
    }

    fn run(label: &str, gpu: &str, records: Vec<ModelRecord>) -> ModelRun {
        let mut env = Environment {
            cpu: "Xeon".into(),
            threads: 16,
            ..Environment::default()
        };
        if !gpu.is_empty() {
            env.gpu = Some(
                serde_json::from_value(serde_json::json!({
                    "name": gpu, "compute_capability": "9.0", "sms": 132,
                    "memory_bytes": 0, "clock_mhz": 0, "memory_clock_mhz": 0,
                    "memory_bus_bits": 0, "l2_bytes": 0, "driver_cuda": "13.0",
                    "cudnn_cudart": "", "cudnn": "9.10.2", "cublas": "", "peaks": []
                }))
                .unwrap(),
            );
        }
        ModelRun {
            path: PathBuf::from(label),
            environment: Some(env),
            peer: None,
            records,
            label: label.into(),
            complete: true,
        }
    }

    fn rendered(runs: &[ModelRun], published: Option<&Published>) -> String {
        let mut md = String::new();
        render(&mut md, runs, published).unwrap();
        md
    }

    #[test]
    fn a_synthetic_and_a_folder_run_give_real_over_synthetic() {
        let runs = [
            run("synth", "H100", vec![record(64, 1000.0)]),
            run("real", "H100", vec![folder(record(64, 900.0), true)]),
        ];
        let p = pairs(&runs);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].axis, Axis::Input);
        assert!((p[0].ratio - 0.9).abs() < 1e-12);
        let md = rendered(&runs, None);
        assert!(md.contains("### Real over synthetic input"), "{md}");
        let row = md.lines().find(|l| l.starts_with("| resnet50")).unwrap();
        assert!(
            row.contains("| 64 | 1 | gpu (H100) | f32 | nhwc | synth | 1000.0 | real | 900.0 | 2500.0 | 0.90x |"),
            "{row}"
        );
        assert!(
            md.contains("Median real / synthetic: **0.90x** over 1 pair(s)."),
            "{md}"
        );
        assert!(!md.contains("Published"), "{md}");
    }

    #[test]
    fn batch_64_over_32_and_its_median() {
        let runs = [
            run("a", "H100", vec![record(32, 1000.0), record(64, 1100.0)]),
            run("b", "H100", vec![record(32, 2000.0), record(64, 2400.0)]),
        ];
        let p = pairs(&runs);
        // Each run's 32 pairs with both 64s: the runs differ in nothing
        // a record says.
        assert_eq!(p.len(), 4);
        assert!(p
            .iter()
            .all(|p| p.axis == Axis::Batch && p.what() == "batch 64 / 32"));
        let md = rendered(&runs, None);
        assert!(md.contains("### Larger batch over smaller"), "{md}");
        assert!(
            md.contains("| a (batch 32) | 1000.0 | a (batch 64) | 1100.0 | 1.10x |"),
            "{md}"
        );
        // 1.1, 2.4, 0.55, 1.2: median 1.15.
        assert!(
            md.contains("Median batch 64 / 32: **1.15x** over 4 pair(s)."),
            "{md}"
        );
    }

    #[test]
    fn gpus_over_the_one_gpu_run() {
        let runs = [
            run("one", "H100", vec![record(64, 1000.0)]),
            run(
                "eight",
                "H100",
                vec![
                    on_gpus(record(64, 7600.0), 8),
                    on_gpus(record(64, 3900.0), 4),
                ],
            ),
        ];
        let p = pairs(&runs);
        assert_eq!(p.len(), 2, "8 and 4 over 1; 8 over 4 is not a comparison");
        let md = rendered(&runs, None);
        assert!(md.contains("### More GPUs over one"), "{md}");
        assert!(
            md.contains("| one (1 GPUs) | 1000.0 | eight (8 GPUs) | 7600.0 | 7.60x |"),
            "{md}"
        );
        assert!(md.contains("Median 8 / 1 GPUs: **7.60x**"), "{md}");
        assert!(md.contains("Median 4 / 1 GPUs: **3.90x**"), "{md}");
    }

    #[test]
    fn runs_differing_in_two_things_or_anything_else_are_not_paired() {
        let mut other_dtype = folder(record(64, 900.0), false);
        other_dtype.dtype = DType::Bf16;
        let runs = [
            run("synth", "H100", vec![record(32, 1000.0)]),
            // Input and batch both differ.
            run("real", "H100", vec![folder(record(64, 900.0), false)]),
            // Another GPU.
            run("a100", "A100", vec![folder(record(32, 900.0), false)]),
            run("bf16", "H100", vec![other_dtype]),
        ];
        assert!(pairs(&runs).is_empty());
        assert!(rendered(&runs, None).is_empty());
        // An update, or a failed run, is not the same either.
        let mut sgd = folder(record(32, 900.0), false);
        sgd.update_ms = Some(stats(1.0));
        let mut oom = folder(record(32, 900.0), false);
        oom.status = "OOM".into();
        let runs = [
            run("synth", "H100", vec![record(32, 1000.0)]),
            run("sgd", "H100", vec![sgd, oom]),
        ];
        assert!(pairs(&runs).is_empty());
    }

    #[test]
    fn with_published_the_sheets_own_medians_follow_ours() {
        let runs = [
            run("synth", "H100", vec![record(64, 1000.0)]),
            run("real", "H100", vec![folder(record(64, 990.0), false)]),
        ];
        let published = super::super::published::load().unwrap();
        let md = rendered(&runs, Some(&published));
        let line = md
            .lines()
            .find(|l| l.starts_with("Published, for context"))
            .unwrap();
        // 8 columns of synthetic and real, at 1, 2, 4 and 8 GPUs.
        assert!(line.contains("real / synthetic 1.00x (32 pairs)"), "{line}");
        // Only the input comparison was measured, so only its line.
        assert_eq!(md.matches("Published, for context").count(), 1);
    }

    #[test]
    fn a_report_over_a_synthetic_and_a_real_run_file_shows_the_ratio_and_the_sheet() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, m: ModelRecord| {
            let mut env = run("", "NVIDIA H100 80GB HBM3", vec![])
                .environment
                .unwrap();
            env.label = Some(name.into());
            let doc = serde_json::json!({
                "format_version": 1, "subcommand": "model", "environment": env,
                "records": [m], "complete": true
            });
            std::fs::write(dir.path().join(format!("{name}.json")), doc.to_string()).unwrap();
        };
        write("synthetic", record(64, 1000.0));
        write("imagenet", folder(record(64, 940.0), true));
        let inputs = crate::report::merge::split(&[dir.path().to_path_buf()]).unwrap();
        let runs = crate::report::models::load_files(inputs.models, &mut Vec::new());
        let opts = crate::report::options::Options {
            baseline: None,
            charts: None,
            price: None,
            epochs: 1,
            dataset_images: 1,
            published: true,
        };
        let md = crate::report::markdown::render(&[], &runs, &[], &opts).unwrap();
        assert!(
            md.contains("real input (1281167 images), loader 2500.0 img/s, input-bound"),
            "{md}"
        );
        assert!(
            md.contains("| synthetic | 1000.0 | imagenet | 940.0 | 2500.0 | 0.94x |"),
            "{md}"
        );
        assert!(
            md.contains("Median real / synthetic: **0.94x** over 1 pair(s)."),
            "{md}"
        );
        assert!(md.contains("### resnet50, batch 64"), "{md}");
        assert!(md.contains("| published | tf_cnn_benchmarks sheet (transcribed 2026-11-25) | Tesla P100 (dgx-1) | TensorFlow, synthetic | 1 | | | | 219 |"), "{md}");
        assert!(md.contains("| published | tf_cnn_benchmarks sheet (transcribed 2026-11-25) | Tesla P100 (dgx-1) | TensorFlow, real | 1 | | | | 218 |"), "{md}");
    }
}
