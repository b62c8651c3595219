//! `report --published`: other people's published numbers
//! (`results/published/`, compiled in) beside this report's measured rows
//! of the same model and batch. Context only: nothing here feeds the
//! report's statistics, medians, baselines or ratios.

use super::models::{device_label, gpus_shown, ModelRun};
use crate::results::InputSource;
use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::fmt::Write;

/// One published training step (jcjohnson/cnn-benchmarks and its cloud
/// re-run): forward, backward and total milliseconds on one GPU or CPU.
#[derive(Clone, Debug, Deserialize)]
pub struct StepRow {
    pub source: String,
    pub date: String,
    pub date_kind: String,
    /// cnnbench's name of the network (the CSV's `published_model`, the
    /// source's own name, is for people).
    pub model: String,
    pub gpu: String,
    /// A cuDNN version, or `none`.
    pub cudnn: String,
    pub batch: usize,
    pub forward_ms: f64,
    pub backward_ms: f64,
    pub total_ms: f64,
}

/// One published throughput (tf_cnn_benchmarks): images per second of all
/// GPUs together.
#[derive(Clone, Debug, Deserialize)]
pub struct ThroughputRow {
    pub source: String,
    pub date: String,
    pub date_kind: String,
    /// cnnbench's name of the network.
    pub model: String,
    pub machine: String,
    /// `none` on CPU instances.
    pub gpu: String,
    /// 0 on CPU instances.
    pub gpus: usize,
    /// Per GPU.
    pub batch: usize,
    /// `synthetic` or `real`.
    pub input: String,
    /// `mixed`, or empty where the source does not say.
    pub precision: String,
    pub images_per_sec: f64,
}

/// A published table: what the report calls it, and its rows.
pub struct Table<Row> {
    pub name: &'static str,
    pub rows: Vec<Row>,
}

/// Every published table, parsed.
pub struct Published {
    pub steps: Vec<Table<StepRow>>,
    pub throughput: Vec<Table<ThroughputRow>>,
}

/// The files, compiled in so that `--published` works from any folder.
const STEP_FILES: [(&str, &str, &str); 2] = [
    (
        "jcjohnson/cnn-benchmarks",
        "jcjohnson_cnn_benchmarks.csv",
        include_str!("../../results/published/jcjohnson_cnn_benchmarks.csv"),
    ),
    (
        "GPU in the Cloud (rejunity)",
        "gpu_in_the_cloud.csv",
        include_str!("../../results/published/gpu_in_the_cloud.csv"),
    ),
];
const THROUGHPUT_FILES: [(&str, &str, &str); 2] = [
    (
        "tf_cnn_benchmarks sheet",
        "tf_cnn_benchmarks_sheet.csv",
        include_str!("../../results/published/tf_cnn_benchmarks_sheet.csv"),
    ),
    (
        "FloydHub instances",
        "floydhub_instances.csv",
        include_str!("../../results/published/floydhub_instances.csv"),
    ),
];

/// The first columns every published CSV starts with, which is how
/// `report` tells them from results when walking `results/`.
const HEADER_START: &str = "source,date,date_kind,";

/// Whether a CSV's text is one of the published tables (not results).
pub fn is_published_csv(text: &str) -> bool {
    text.starts_with(HEADER_START)
}

fn parse<Row: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<Vec<Row>> {
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    rd.deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("results/published/{file}: row {}", i + 2)))
        .collect()
}

fn tables<Row: serde::de::DeserializeOwned>(
    files: &[(&'static str, &str, &str)],
) -> Result<Vec<Table<Row>>> {
    files
        .iter()
        .map(|&(name, file, text)| {
            Ok(Table {
                name,
                rows: parse(file, text)?,
            })
        })
        .collect()
}

/// Parses the compiled-in tables.
pub fn load() -> Result<Published> {
    Ok(Published {
        steps: tables(&STEP_FILES)?,
        throughput: tables(&THROUGHPUT_FILES)?,
    })
}

impl Published {
    /// Each table's name with the models and batches it has, e.g.
    /// `resnet50 (16)`.
    fn contents(&self) -> Vec<(&'static str, String)> {
        fn list<'a>(pairs: impl Iterator<Item = (&'a str, usize)>) -> String {
            let mut by_model: Vec<(&str, BTreeSet<usize>)> = Vec::new();
            for (model, batch) in pairs {
                match by_model.iter_mut().find(|(m, _)| *m == model) {
                    Some((_, b)) => {
                        b.insert(batch);
                    }
                    None => by_model.push((model, BTreeSet::from([batch]))),
                }
            }
            by_model
                .iter()
                .map(|(m, b)| {
                    let b: Vec<String> = b.iter().map(|b| b.to_string()).collect();
                    format!("{m} ({})", b.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        let steps = self.steps.iter().map(|t| {
            (
                t.name,
                list(t.rows.iter().map(|r| (r.model.as_str(), r.batch))),
            )
        });
        let throughput = self.throughput.iter().map(|t| {
            (
                t.name,
                list(t.rows.iter().map(|r| (r.model.as_str(), r.batch))),
            )
        });
        steps.chain(throughput).collect()
    }

    fn has(&self, model: &str, batch: usize) -> bool {
        let step = self
            .steps
            .iter()
            .any(|t| t.rows.iter().any(|r| r.model == model && r.batch == batch));
        let throughput = self
            .throughput
            .iter()
            .any(|t| t.rows.iter().any(|r| r.model == model && r.batch == batch));
        step || throughput
    }
}

/// A date as the tables give it: `2017-06-04`, or `transcribed 2026-11-25`
/// where the source carries none.
fn dated(date: &str, kind: &str) -> String {
    if kind == "published" {
        date.to_string()
    } else {
        format!("{kind} {date}")
    }
}

/// The `## Published` section: per measured model and batch, the measured
/// rows and then the published ones; a line for measured models no
/// table has, and what the tables do have.
pub fn render(md: &mut String, runs: &[ModelRun], published: &Published) -> Result<()> {
    let measured: BTreeSet<(&str, usize)> = runs
        .iter()
        .flat_map(|r| r.records.iter())
        .map(|m| (m.model.as_str(), m.batch))
        .collect();
    let (matched, unmatched): (Vec<_>, Vec<_>) = measured
        .iter()
        .partition(|(model, batch)| published.has(model, *batch));
    writeln!(md, "## Published\n")?;
    writeln!(
        md,
        "Published numbers from other tools, machines and years (`results/published/`, with their sources), beside this report's rows of the same model and batch. Context only: not measured here, and never part of this report's statistics, medians, baselines or ratios. Published step times are Torch at batch 16; published img/s are tf_cnn_benchmarks, all GPUs together, batch per GPU.\n"
    )?;
    if matched.is_empty() {
        let what: Vec<String> = measured
            .iter()
            .map(|(m, b)| format!("{m} batch {b}"))
            .collect();
        let what = if what.is_empty() {
            "no model was measured in this report".to_string()
        } else {
            format!("measured here: {}", what.join(", "))
        };
        writeln!(
            md,
            "No published row has the model and batch of a measured row ({what}). The published tables have (model (batches)):\n"
        )?;
        for (name, contents) in published.contents() {
            writeln!(md, "- {name}: {contents}")?;
        }
        writeln!(md)?;
        return Ok(());
    }
    for &(model, batch) in &matched {
        group(md, runs, published, model, batch)?;
    }
    if !unmatched.is_empty() {
        let what: Vec<String> = unmatched
            .iter()
            .map(|(m, b)| format!("{m} batch {b}"))
            .collect();
        writeln!(md, "No published rows for {}.\n", what.join(", "))?;
    }
    Ok(())
}

/// One model and batch: measured rows first, then each published table's.
fn group(
    md: &mut String,
    runs: &[ModelRun],
    published: &Published,
    model: &str,
    batch: usize,
) -> Result<()> {
    writeln!(md, "### {model}, batch {batch}\n")?;
    writeln!(
        md,
        "| | source | device | setup | GPUs | forward ms | backward ms | step ms | img/s |"
    )?;
    writeln!(md, "|---|---|---|---|---:|---:|---:|---:|---:|")?;
    let ms =
        |s: Option<crate::bench::Stats>| s.map_or(String::new(), |s| format!("{:.1}", s.median));
    for run in runs {
        for m in run
            .records
            .iter()
            .filter(|m| m.model == model && m.batch == batch)
        {
            let input = match m.input.source {
                InputSource::Synthetic => "synthetic",
                InputSource::Folder => "real",
            };
            writeln!(
                md,
                "| measured | {} | {} | {} {}, {input} | {} | {} | {} | {} | {} |",
                run.label,
                device_label(run, m),
                m.dtype,
                m.layout,
                gpus_shown(m),
                ms(m.forward_ms),
                ms(m.backward_ms),
                ms(m.total_ms),
                m.images_per_sec
                    .map_or(String::new(), |v| format!("{v:.1}")),
            )?;
        }
    }
    for t in &published.steps {
        for r in t
            .rows
            .iter()
            .filter(|r| r.model == model && r.batch == batch)
        {
            let cudnn = if r.cudnn == "none" {
                "no cuDNN".to_string()
            } else {
                format!("cuDNN {}", r.cudnn)
            };
            writeln!(
                md,
                "| published | {} ({}) | {} | Torch, {cudnn} | {} | {:.2} | {:.2} | {:.2} | |",
                t.name,
                dated(&r.date, &r.date_kind),
                r.gpu,
                // Published CPU rows name the CPU where others name the GPU.
                if r.gpu.starts_with("CPU") { "-" } else { "1" },
                r.forward_ms,
                r.backward_ms,
                r.total_ms,
            )?;
        }
    }
    for t in &published.throughput {
        for r in t
            .rows
            .iter()
            .filter(|r| r.model == model && r.batch == batch)
        {
            let device = if r.gpu == "none" {
                r.machine.clone()
            } else {
                format!("{} ({})", r.gpu, r.machine)
            };
            let precision = if r.precision.is_empty() {
                String::new()
            } else {
                format!(", {} precision", r.precision)
            };
            writeln!(
                md,
                "| published | {} ({}) | {device} | TensorFlow, {}{precision} | {} | | | | {} |",
                t.name,
                dated(&r.date, &r.date_kind),
                r.input,
                if r.gpus == 0 {
                    "-".to_string()
                } else {
                    r.gpus.to_string()
                },
                r.images_per_sec,
            )?;
        }
    }
    writeln!(md)?;
    let sources: BTreeSet<(&str, &str)> = published
        .steps
        .iter()
        .flat_map(|t| {
            t.rows
                .iter()
                .filter(|r| r.model == model && r.batch == batch)
                .map(move |r| (t.name, r.source.as_str()))
        })
        .chain(published.throughput.iter().flat_map(|t| {
            t.rows
                .iter()
                .filter(|r| r.model == model && r.batch == batch)
                .map(move |r| (t.name, r.source.as_str()))
        }))
        .collect();
    let sources: Vec<String> = sources
        .iter()
        .map(|(name, url)| format!("{name}: <{url}>"))
        .collect();
    writeln!(md, "Published sources: {}.\n", sources.join("; "))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> Published {
        load().unwrap()
    }

    fn step<'a>(p: &'a Published, table: &str, model: &str, gpu: &str, cudnn: &str) -> &'a StepRow {
        let t = p.steps.iter().find(|t| t.name.starts_with(table)).unwrap();
        let hits: Vec<&StepRow> = t
            .rows
            .iter()
            .filter(|r| r.model == model && r.gpu == gpu && r.cudnn == cudnn)
            .collect();
        assert_eq!(hits.len(), 1, "{table} {model} {gpu} {cudnn}");
        hits[0]
    }

    fn ips(p: &Published, table: &str, f: impl Fn(&ThroughputRow) -> bool) -> f64 {
        let t = p
            .throughput
            .iter()
            .find(|t| t.name.starts_with(table))
            .unwrap();
        let hits: Vec<&ThroughputRow> = t.rows.iter().filter(|r| f(r)).collect();
        assert_eq!(hits.len(), 1, "{table}");
        hits[0].images_per_sec
    }

    #[test]
    fn every_table_parses_and_every_row_has_a_source_and_a_date() {
        let p = tables();
        let counts: Vec<usize> = p
            .steps
            .iter()
            .map(|t| t.rows.len())
            .chain(p.throughput.iter().map(|t| t.rows.len()))
            .collect();
        assert_eq!(counts, [116, 66, 64, 25]);
        let models = cnnbench_layers::zoo::NAMES;
        let date_ok = |d: &str| {
            d.len() == 10
                && d.chars().enumerate().all(|(i, c)| {
                    if i == 4 || i == 7 {
                        c == '-'
                    } else {
                        c.is_ascii_digit()
                    }
                })
        };
        for t in &p.steps {
            for r in &t.rows {
                assert!(r.source.starts_with("https://"), "{r:?}");
                assert!(date_ok(&r.date), "{r:?}");
                assert!(["published", "transcribed"].contains(&r.date_kind.as_str()));
                assert!(models.contains(&r.model.as_str()), "{r:?}");
                assert_eq!(r.batch, 16);
                // Published totals are forward + backward, to the rounding.
                assert!(
                    (r.forward_ms + r.backward_ms - r.total_ms).abs() <= 0.011,
                    "{r:?}"
                );
            }
        }
        for t in &p.throughput {
            for r in &t.rows {
                assert!(r.source.starts_with("https://"), "{r:?}");
                assert!(date_ok(&r.date), "{r:?}");
                assert!(["published", "transcribed"].contains(&r.date_kind.as_str()));
                assert!(models.contains(&r.model.as_str()), "{r:?}");
                assert!(["synthetic", "real"].contains(&r.input.as_str()));
                assert!(r.images_per_sec > 0.0);
            }
        }
        for (_, _, text) in STEP_FILES.iter().chain(&THROUGHPUT_FILES) {
            assert!(is_published_csv(text));
        }
    }

    #[test]
    fn spot_values_match_the_seed_posts() {
        let p = tables();
        // jcjohnson's README: ResNet-50, Pascal Titan X, cuDNN 5.1.05.
        let r = step(&p, "jcjohnson", "resnet50", "Pascal Titan X", "5.1.05");
        assert_eq!(
            (r.forward_ms, r.backward_ms, r.total_ms),
            (35.03, 68.54, 103.58)
        );
        let r = step(
            &p,
            "jcjohnson",
            "vgg16",
            "CPU: Dual Xeon E5-2630 v3",
            "none",
        );
        assert_eq!(
            (r.forward_ms, r.backward_ms, r.total_ms),
            (3101.76, 5393.72, 8495.48)
        );
        // GPU in the Cloud: Tesla K80 on ResNet-200; Inception-V1 is googlenet.
        let r = step(&p, "GPU in the Cloud", "resnet200", "Tesla K80", "5.1.10");
        assert_eq!(
            (r.forward_ms, r.backward_ms, r.total_ms),
            (385.33, 904.29, 1289.63)
        );
        let r = step(&p, "GPU in the Cloud", "googlenet", "GRID K520", "5.1.10");
        assert_eq!(
            (r.forward_ms, r.backward_ms, r.total_ms),
            (86.28, 226.87, 313.15)
        );
        assert_eq!(r.date, "2017-05-30");
        // The sheet: first and last cells of its images/s block.
        let sheet = |model: &str, gpu: &str, gpus: usize, batch: usize, input: &str| {
            ips(&p, "tf_cnn", |r| {
                r.model == model
                    && r.gpu == gpu
                    && r.gpus == gpus
                    && r.batch == batch
                    && r.input == input
            })
        };
        assert_eq!(
            sheet("inception-v3", "Tesla P100", 1, 64, "synthetic"),
            142.0
        );
        assert_eq!(sheet("resnet50", "Tesla K80", 1, 64, "real"), 51.2);
        assert_eq!(sheet("resnet50", "Tesla P100", 8, 64, "synthetic"), 1734.0);
        assert_eq!(sheet("resnet50", "Tesla K80", 8, 32, "real"), 359.0);
        assert_eq!(sheet("inception-v3", "Tesla K80", 4, 32, "real"), 110.0);
        // FloydHub: ResNet-50 on GPU2, and with mixed precision.
        let floyd = |model: &str, batch: usize, precision: &str| {
            ips(&p, "FloydHub", |r| {
                r.model == model && r.batch == batch && r.precision == precision
            })
        };
        assert_eq!(floyd("resnet50", 128, ""), 387.0);
        assert_eq!(floyd("resnet50", 256, "mixed"), 717.0);
        assert_eq!(floyd("inception-v3", 16, ""), 2.8);
    }

    #[test]
    fn the_sheets_own_ratios_come_out_of_its_rows() {
        // Its speedup rows: resnet50 on 8 P100s at batch 64, synthetic,
        // 7.92x one; its P100 over K80 at 1 GPU, batch 32, real: 3.91x.
        let p = tables();
        let get = |gpu: &str, gpus: usize, batch: usize, input: &str| {
            ips(&p, "tf_cnn", |r| {
                r.model == "resnet50"
                    && r.gpu == gpu
                    && r.gpus == gpus
                    && r.batch == batch
                    && r.input == input
            })
        };
        let two = |x: f64| (x * 100.0).round() / 100.0;
        assert_eq!(
            two(get("Tesla P100", 8, 64, "synthetic") / get("Tesla P100", 1, 64, "synthetic")),
            7.92
        );
        assert_eq!(
            two(get("Tesla P100", 1, 32, "real") / get("Tesla K80", 1, 32, "real")),
            3.91
        );
    }

    fn run(label: &str, records: &[(&str, usize)]) -> ModelRun {
        let stats =
            |m: f64| serde_json::json!({"min": m, "median": m, "max": m, "mean": m, "stddev": 0.0});
        let records = records
            .iter()
            .map(|&(model, batch)| {
                serde_json::from_value(serde_json::json!({
                    "model": model, "batch": batch, "device": "cpu", "dtype": "f32",
                    "layout": "nhwc", "params": 1, "macs": 1, "status": "ok",
                    "forward_ms": stats(349.0), "backward_ms": stats(698.0),
                    "total_ms": stats(1047.0), "images_per_sec": 15.3, "gflops": 1.0,
                    "runs": 3, "loss": 6.9, "memory": null
                }))
                .unwrap()
            })
            .collect();
        ModelRun {
            path: label.into(),
            environment: None,
            peer: None,
            records,
            label: label.into(),
            complete: true,
        }
    }

    #[test]
    fn published_rows_sit_beside_the_measured_row_of_their_model_and_batch() {
        let runs = [run("csv:cpu", &[("resnet50", 16), ("resnet18", 4)])];
        let mut md = String::new();
        render(&mut md, &runs, &tables()).unwrap();
        assert!(md.contains("### resnet50, batch 16"), "{md}");
        assert!(
            md.contains("| measured | csv:cpu | cpu | f32 nhwc, synthetic | - | 349.0 | 698.0 | 1047.0 | 15.3 |"),
            "{md}"
        );
        assert!(
            md.contains("| published | jcjohnson/cnn-benchmarks (2017-06-04) | Pascal Titan X | Torch, cuDNN 5.1.05 | 1 | 35.03 | 68.54 | 103.58 | |"),
            "{md}"
        );
        assert!(md.contains("| published | GPU in the Cloud (rejunity) (2017-05-30) | CPU: Dual Xeon E5-2630 v3 | Torch, no cuDNN | - | 2477.61 | 4149.64 | 6627.25 | |"), "{md}");
        // No tf_cnn_benchmarks row has batch 16; resnet18 at 4 has none.
        assert!(!md.contains("tf_cnn_benchmarks sheet ("), "{md}");
        assert!(
            md.contains("No published rows for resnet18 batch 4."),
            "{md}"
        );
        assert!(
            md.contains("<https://github.com/jcjohnson/cnn-benchmarks/blob/"),
            "{md}"
        );
        // Every published line says so.
        for line in md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| |"))
        {
            assert!(
                line.starts_with("| measured |") || line.starts_with("| published |"),
                "{line}"
            );
        }
        // The sheet's rows, by GPU count and input, for its batches.
        let runs = [run("csv:gpu", &[("resnet50", 64)])];
        let mut md = String::new();
        render(&mut md, &runs, &tables()).unwrap();
        assert!(md.contains("| published | tf_cnn_benchmarks sheet (transcribed 2026-11-25) | Tesla P100 (dgx-1) | TensorFlow, real | 8 | | | | 1630 |"), "{md}");
        assert!(md.contains("| published | FloydHub instances (2017-12-14) | Tesla K80 (FloydHub GPU (4 cores, 64 GB)) | TensorFlow, synthetic | 1 | | | | 52 |"), "{md}");
    }

    #[test]
    fn without_a_match_one_line_says_so_and_the_tables_are_listed() {
        let runs = [run("csv:cpu", &[("resnet18", 4)])];
        let mut md = String::new();
        render(&mut md, &runs, &tables()).unwrap();
        assert!(md.contains("No published row has the model and batch of a measured row (measured here: resnet18 batch 4)."), "{md}");
        assert!(
            md.contains("- tf_cnn_benchmarks sheet: inception-v3 (32, 64), resnet50 (32, 64)"),
            "{md}"
        );
        assert!(
            md.contains("- jcjohnson/cnn-benchmarks: alexnet (16), googlenet (16),"),
            "{md}"
        );
        assert!(!md.contains("| published |"), "{md}");
        let mut md = String::new();
        render(&mut md, &[], &tables()).unwrap();
        assert!(
            md.contains("(no model was measured in this report)"),
            "{md}"
        );
    }

    #[test]
    fn published_numbers_stay_out_of_the_measured_sections() {
        let runs = [run("csv:cpu", &[("resnet50", 16)])];
        let opts = crate::report::options::Options {
            baseline: None,
            charts: None,
            price: None,
            epochs: 1,
            dataset_images: 1,
            published: true,
        };
        let md = crate::report::markdown::render(&[], &runs, &[], &opts).unwrap();
        let (measured, published) = md.split_once("## Published").unwrap();
        assert!(measured.contains("## Models"), "{md}");
        assert!(
            !measured.contains("Titan") && !measured.contains("published |"),
            "{md}"
        );
        assert!(published.contains("Pascal Titan X"), "{md}");
        let without = crate::report::markdown::render(
            &[],
            &runs,
            &[],
            &crate::report::options::Options {
                published: false,
                ..opts
            },
        )
        .unwrap();
        assert_eq!(without, measured);
    }
}
