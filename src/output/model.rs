//! `cnnbench model`'s output: the records of a run as JSON, CSV or
//! tables (the models, each model's layers, where real input came from,
//! and projected data-parallel steps), rewritten after every model; and
//! `--describe`'s layer tables ([`describe`]).

pub mod describe;

use super::sink::{end_run, save_run};
use super::table::{aligned, Align};
use super::Format;
use crate::bench::Stats;
use crate::results::model_record::MODEL_CSV_HEADER;
use crate::results::store::{RunFile, Store, FORMAT_VERSION};
use crate::results::{self, Environment, LayerTime, ModelRecord, ProjectionSet};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Renders and keeps the records of a model run.
pub struct ModelOutput {
    env: Environment,
    records: Vec<ModelRecord>,
    format: Format,
    path: Option<PathBuf>,
    store: Option<Store>,
}

impl ModelOutput {
    /// The output of a run in `env` (priced, its `store` file made),
    /// rendered in `format` to `path` (`--out`) or stdout: `path` and the
    /// store file get the (empty) run at once.
    pub fn new(
        env: Environment,
        format: Format,
        path: Option<PathBuf>,
        store: Option<Store>,
    ) -> Result<ModelOutput> {
        let out = ModelOutput {
            store,
            env,
            records: Vec::new(),
            format,
            path,
        };
        out.save(false, false)?;
        Ok(out)
    }

    pub fn push(&mut self, r: ModelRecord) -> Result<()> {
        self.records.push(r);
        self.save(false, false)
    }

    /// As the layer sink's: `last` is the run's final write.
    fn save(&self, complete: bool, last: bool) -> Result<()> {
        let file = RunFile {
            format_version: FORMAT_VERSION,
            subcommand: "model".into(),
            environment: self.env.clone(),
            records: self.records.clone(),
            skipped: Vec::new(),
            complete,
        };
        save_run(
            self.path.as_deref(),
            || self.render(complete),
            self.store.as_ref(),
            &file,
            last,
        )
    }

    /// As the layer sink's: JSON says whether the run is `complete`.
    fn render(&self, complete: bool) -> Result<String> {
        Ok(match self.format {
            Format::Json => {
                #[derive(Serialize)]
                struct Doc<'a> {
                    environment: &'a Environment,
                    records: &'a [ModelRecord],
                    complete: bool,
                }
                let doc = Doc {
                    environment: &self.env,
                    records: &self.records,
                    complete,
                };
                serde_json::to_string_pretty(&doc)? + "\n"
            }
            Format::Csv => {
                let mut w = csv::Writer::from_writer(Vec::new());
                w.write_record(MODEL_CSV_HEADER)?;
                for r in &self.records {
                    w.write_record(r.csv_row())?;
                }
                String::from_utf8(w.into_inner().context("flushing CSV")?)?
            }
            Format::Table | Format::Md | Format::Benchdnn => {
                let md = self.format == Format::Md;
                let e = &self.env;
                let (machine, clock) = match &e.gpu {
                    Some(g) => (
                        format!(
                            "{} | cuDNN {} | cuBLAS {}",
                            g.name,
                            g.cudnn_label(),
                            g.cublas
                        ),
                        "GPU time (CUDA events)",
                    ),
                    None => (
                        format!("{} | {} threads | isa {}", e.cpu, e.threads, e.isa),
                        "wall clock",
                    ),
                };
                let mut s = format!(
                    "# cnnbench {} ({}) | {machine} | training steps, median (min-max) of timed steps, {clock}\n",
                    e.cnnbench.version, e.cnnbench.git
                );
                s += &models_table(&self.records, md);
                for r in &self.records {
                    if let Some(f) = &r.input.folder {
                        s += &input_line(r, f);
                    }
                }
                for r in &self.records {
                    if let Some(p) = &r.gpu_paths {
                        s += &format!("{}: GPU paths {p}\n", r.model);
                    }
                }
                s += &self
                    .records
                    .iter()
                    .filter_map(graph_line)
                    .collect::<String>();
                for r in self.records.iter().filter(|r| !r.layers.is_empty()) {
                    s += &format!("\n## {} (batch {}), per layer\n", r.model, r.batch);
                    s += &layers_table(r, md);
                }
                for r in &self.records {
                    if let Some(p) = &r.projection {
                        s += &projection_section(r, p, md);
                    }
                }
                s
            }
        })
    }

    pub fn finish(&self, interrupted: bool) -> Result<ExitCode> {
        self.save(!interrupted, true)?;
        let out = self.path.as_deref();
        let end = end_run(
            out,
            self.render(!interrupted)?,
            self.records.len(),
            self.store.as_ref(),
            interrupted,
        )?;
        Ok(end.unwrap_or(ExitCode::SUCCESS))
    }
}

/// A `--cuda-graph` run's two steps under the table: the graph's (the
/// record's main numbers) and the eager one timed before it.
fn graph_line(r: &ModelRecord) -> Option<String> {
    let (graph, eager) = (r.total_ms?.median, r.eager_total_ms?.median);
    Some(format!(
        "{}: CUDA graph step {graph:.3} ms, eager step {eager:.3} ms ({:.2}x)\n",
        r.model,
        eager / graph
    ))
}

fn ms_range(s: &Option<Stats>) -> String {
    s.map_or("-".into(), |s| {
        format!("{:.1} ({:.1}-{:.1})", s.median, s.min, s.max)
    })
}

fn gib(b: usize) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn models_table(records: &[ModelRecord], md: bool) -> String {
    let header = [
        "model", "batch", "params", "fwd ms", "bwd ms", "step ms", "img/s", "GFLOP/s", "memory",
        "runs", "status",
    ];
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.model.clone(),
                r.batch.to_string(),
                r.params.to_string(),
                ms_range(&r.forward_ms),
                ms_range(&r.backward_ms),
                ms_range(&r.total_ms),
                r.images_per_sec.map_or("-".into(), |v| format!("{v:.1}")),
                r.gflops.map_or("-".into(), |v| format!("{v:.1}")),
                r.memory.map_or("-".into(), |m| gib(m.total)),
                r.runs.to_string(),
                r.status.clone(),
            ]
        })
        .collect();
    use Align::{Left as L, Right as R};
    aligned(&header, &[L, R, R, R, R, R, R, R, R, R, L], &rows, md)
}

/// Where a real-data run's images came from and whether the loader kept
/// up, in two lines under the table.
fn input_line(r: &ModelRecord, f: &results::FolderInput) -> String {
    let step = r.total_ms.map_or(0.0, |s| s.median);
    let share = if step > 0.0 {
        100.0 * f.wait_ms.median / step
    } else {
        0.0
    };
    format!(
        "{} input: {} ({} images, {} classes{}), {} transform, {}, {} loader thread(s), prefetch {}
           loader {:.1} img/s (its threads' capacity) vs step {:.1} img/s; each step waited {:.2} ms (median, {share:.1}% of the step): {}
",
        r.model,
        f.path,
        f.images,
        f.classes,
        if f.skipped > 0 {
            format!(", {} skipped", f.skipped)
        } else {
            String::new()
        },
        f.transform,
        f.decoder,
        f.loader_threads,
        f.prefetch,
        f.loader_images_per_sec,
        r.images_per_sec.unwrap_or(0.0),
        f.wait_ms.median,
        if f.input_bound {
            "INPUT-BOUND"
        } else {
            "compute-bound"
        },
    )
}

/// A record's projections, marked as such, with every assumption.
fn projection_section(r: &ModelRecord, p: &ProjectionSet, md: bool) -> String {
    let mut s = format!(
        "\n## {} (batch {} per GPU), PROJECTED data-parallel steps (a model from this run's per-layer backward times, not a measurement)\n",
        r.model, r.batch
    );
    let rows: Vec<Vec<String>> = p
        .rows
        .iter()
        .map(|x| {
            vec![
                x.gpus.to_string(),
                x.nodes.to_string(),
                x.buckets.to_string(),
                x.algorithm.clone(),
                format!("{:.2}", x.comm_ms),
                format!("{:.2}", x.exposed_ms),
                format!("{:.1}", x.step_ms),
                format!("{:.0}", x.images_per_sec),
                format!("{:.1}", x.speedup),
                format!("{:.1}%", 100.0 * x.efficiency),
            ]
        })
        .collect();
    use Align::{Left as L, Right as R};
    s += &aligned(
        &[
            "GPUs",
            "nodes",
            "buckets",
            "all-reduce",
            "comm ms",
            "exposed ms",
            "step ms",
            "img/s",
            "speedup",
            "efficiency",
        ],
        &[R, R, R, L, R, R, R, R, R, R],
        &rows,
        md,
    );
    s += "\nAssumptions:\n";
    for a in &p.assumptions {
        s += &format!("{}- {a}\n", if md { "" } else { "  " });
    }
    s
}

/// A record's per-layer table; with each pass's bytes, rates and roofline
/// where the record has them (`--per-layer` runs since the roofline),
/// under a line that says what those columns mean.
fn layers_table(r: &ModelRecord, md: bool) -> String {
    let layers = &r.layers;
    let roof = layers.iter().any(|l| l.roofline.is_some());
    let mut header = vec!["layer", "type", "output", "fwd ms", "bwd ms", "% step"];
    if roof {
        header.extend([
            "fwd MB", "bwd MB", "fwd GB/s", "bwd GB/s", "fwd roof", "bwd roof",
        ]);
    }
    header.push("algorithms");
    let label = r
        .roofline
        .as_ref()
        .map_or("peak", |b| b.peak_label.as_str());
    let rows: Vec<Vec<String>> = layers
        .iter()
        .map(|l| {
            let mut row = vec![
                l.name.clone(),
                l.kind.clone(),
                l.output.clone(),
                format!("{:.3}", l.forward_ms),
                format!("{:.3}", l.backward_ms),
                format!("{:.1}", l.percent),
            ];
            if roof {
                row.extend(roofline_cells(l, label));
            }
            row.push(l.kernels.clone());
            row
        })
        .collect();
    use Align::{Left as L, Right as R};
    let mut align = vec![L, L, R, R, R, R];
    if roof {
        align.extend([R; 6]);
    }
    align.push(L);
    let mut s = String::new();
    if roof {
        s += &roofline_legend(r);
    }
    s + &aligned(&header, &align, &rows, md)
}

/// A layer's MB, GB/s and roofline cells, forward and backward.
fn roofline_cells(l: &LayerTime, label: &str) -> Vec<String> {
    let Some(r) = &l.roofline else {
        return vec!["-".to_string(); 6];
    };
    let mb = |b: u64| match b as f64 / 1e6 {
        m if m < 10.0 && b > 0 => format!("{m:.2}"),
        m => format!("{m:.1}"),
    };
    let gbs = |g: Option<f64>| g.map_or("-".into(), |g| format!("{g:.1}"));
    vec![
        mb(r.forward.bytes),
        mb(r.backward.bytes),
        gbs(r.forward.gbs),
        gbs(r.backward.gbs),
        r.forward.cell(label),
        r.backward.cell(label),
    ]
}

/// What the roofline columns mean, and the roofs of this run.
fn roofline_legend(r: &ModelRecord) -> String {
    let mut s = "MB: the least bytes each pass must move (every tensor it touches read or written once, parameters and gradients included; caches ignored); GB/s: MB over the median time; roof: a pass under the ridge is memory-bound and shows % of the bandwidth (BW; over 100% where its tensors stayed in a cache), one above it % of the compute peak".to_string();
    if let Some(b) = &r.roofline {
        let nominal = b
            .bandwidth_nominal_gbs
            .map_or(String::new(), |n| format!("; nominal {n:.0} GB/s"));
        s += &format!(
            " ({label}).\nBandwidth {:.1} GB/s: {}{nominal}. Peak {label} {:.1} GFLOP/s: {}. Ridge {:.1} FLOPs/byte; {} bytes per element.\n",
            b.bandwidth_gbs,
            b.bandwidth_from,
            b.peak_gflops,
            b.peak_from,
            b.ridge(),
            b.element_bytes,
            label = b.peak_label,
        );
    } else {
        s += ".\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::roofline::{LayerRoofline, PassRoofline, RooflineBasis};

    fn record(roofline: bool) -> ModelRecord {
        let basis = RooflineBasis {
            bandwidth_gbs: 100.0,
            bandwidth_from: "a test copy".into(),
            bandwidth_nominal_gbs: None,
            peak_gflops: 1000.0,
            peak_from: "a test loop".into(),
            peak_label: "FMA".into(),
            element_bytes: 4,
        };
        let mut rec = crate::driver::model::record::base_record(
            &cnnbench_layers::zoo::build("mnist-mlp").expect("zoo model"),
            8,
            "ok",
            crate::driver::model::record::CPU,
        );
        let mut relu = LayerTime {
            name: "relu1".into(),
            kind: "relu".into(),
            output: "512".into(),
            forward_ms: 1.0,
            backward_ms: 2.0,
            percent: 10.0,
            kernels: String::new(),
            roofline: None,
        };
        let mut fc = LayerTime {
            name: "fc1".into(),
            kind: "fc".into(),
            kernels: "gemm".into(),
            ..relu.clone()
        };
        if roofline {
            // 61 MB in 1 ms: 61 GB/s; 3 GB and 100 GFLOP in 0.25 s: 12
            // GB/s and 400 GFLOP/s (33 FLOPs per byte: compute-bound).
            relu.roofline = Some(LayerRoofline {
                forward: PassRoofline::timed(61_000_000, 0, 1.0),
                backward: PassRoofline::timed(0, 0, 2.0),
            });
            fc.roofline = Some(LayerRoofline {
                forward: PassRoofline::timed(3_000_000_000, 100_000_000_000, 250.0),
                backward: PassRoofline::timed(6_000_000_000, 200_000_000_000, 500.0),
            });
        }
        rec.layers = vec![relu, fc];
        crate::driver::roofline::place(&mut rec, &basis);
        rec
    }

    #[test]
    fn the_layer_table_shows_bytes_rates_and_roofs() {
        let t = layers_table(&record(true), false);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("MB: the least bytes"), "{t}");
        assert!(
            lines[1].contains("Bandwidth 100.0 GB/s: a test copy"),
            "{t}"
        );
        assert!(lines[1].contains("Ridge 10.0 FLOPs/byte"), "{t}");
        for col in ["fwd MB", "bwd GB/s", "fwd roof", "bwd roof", "algorithms"] {
            assert!(lines[2].contains(col), "{col}: {t}");
        }
        let cells = |line: &str| {
            line.split_whitespace()
                .skip(6)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(cells(lines[4]), "61.0 0.0 61.0 - 61% BW -", "{t}");
        assert_eq!(
            cells(lines[5]),
            "3000.0 6000.0 12.0 12.0 40% FMA 40% FMA gemm",
            "{t}"
        );
    }

    #[test]
    fn an_old_record_keeps_the_old_table() {
        let t = layers_table(&record(false), false);
        let head = t.lines().next().unwrap_or_default();
        assert_eq!(
            head.split_whitespace().collect::<Vec<_>>(),
            [
                "layer",
                "type",
                "output",
                "fwd",
                "ms",
                "bwd",
                "ms",
                "%",
                "step",
                "algorithms"
            ]
        );
        assert!(!t.contains("GB/s"), "{t}");
    }
}

#[cfg(test)]
mod graph_line_tests {
    use super::*;
    use crate::results::{Device, Input};
    use cnnbench_layers::DType;

    fn stats(median: f64) -> Option<Stats> {
        Stats::of(&[median])
    }

    #[test]
    fn a_cuda_graph_run_says_both_steps_under_the_table() {
        let mut r: ModelRecord = serde_json::from_value(serde_json::json!({
            "model": "imdb-bilstm", "batch": 128, "device": "gpu", "dtype": "f32",
            "layout": "nhwc", "params": 1, "macs": 1, "status": "ok",
            "forward_ms": null, "backward_ms": null, "total_ms": null,
            "images_per_sec": null, "gflops": null, "runs": 1, "loss": null,
            "memory": null
        }))
        .expect("a record");
        assert_eq!(
            (r.device, r.dtype, r.input.clone()),
            (Device::Gpu, DType::F32, Input::default())
        );
        assert_eq!(graph_line(&r), None);
        r.total_ms = stats(0.5);
        assert_eq!(graph_line(&r), None, "an eager run has no line");
        r.eager_total_ms = stats(1.25);
        assert_eq!(
            graph_line(&r).as_deref(),
            Some("imdb-bilstm: CUDA graph step 0.500 ms, eager step 1.250 ms (2.50x)\n")
        );
    }
}
