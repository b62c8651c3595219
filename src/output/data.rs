//! `cnnbench data`'s output: `data bench`'s run file as JSON, CSV (one row
//! per thread count) and the table; `data synth`'s summary line; and
//! `data dump`'s image as `.npy`.

use super::table::{aligned, Align};
use super::Format;
use crate::results::loader_record::LoaderRecord;
use crate::results::store::RunFile;
use anyhow::{Context, Result};
use cnnbench_data::synth::SynthSummary;
use npyz::WriterBuilder;
use std::path::Path;

const BENCH_CSV_HEADER: [&str; 18] = [
    "path",
    "images_in_tree",
    "transform",
    "size",
    "decoder",
    "loader_threads",
    "batch",
    "prefetch",
    "images",
    "seconds",
    "images_per_sec",
    "mb_per_sec",
    "batch_ms_median",
    "read_ms",
    "decode_ms",
    "augment_ms",
    "copy_ms",
    "skipped",
];

/// `data bench`'s run file in `format`.
pub fn render_bench(file: &RunFile<LoaderRecord>, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(file)? + "\n",
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(BENCH_CSV_HEADER)?;
            for r in &file.records {
                w.write_record([
                    r.path.clone(),
                    r.images_in_tree.to_string(),
                    r.transform.clone(),
                    r.size.to_string(),
                    r.decoder.clone(),
                    r.loader_threads.to_string(),
                    r.batch.to_string(),
                    r.prefetch.to_string(),
                    r.images.to_string(),
                    format!("{:.3}", r.seconds),
                    format!("{:.1}", r.images_per_sec),
                    format!("{:.1}", r.mb_per_sec),
                    format!("{:.2}", r.batch_ms.median),
                    format!("{:.3}", r.read_ms),
                    format!("{:.3}", r.decode_ms),
                    format!("{:.3}", r.augment_ms),
                    format!("{:.3}", r.copy_ms),
                    r.skipped.to_string(),
                ])?;
            }
            String::from_utf8(w.into_inner().context("flushing CSV")?)?
        }
        _ => {
            let md = format == Format::Md;
            let mut s = match file.records.first() {
                Some(r) => format!(
                    "# cnnbench {} | {} | loader alone: {} ({} images), {} {}px, batch {}, prefetch {}, {}\n",
                    file.environment.cnnbench.version,
                    file.environment.cpu,
                    r.path,
                    r.images_in_tree,
                    r.transform,
                    r.size,
                    r.batch,
                    r.prefetch,
                    r.decoder
                ),
                None => String::from("# no thread count finished\n"),
            };
            let head = [
                "threads", "images/s", "MB/s", "batch ms", "read", "decode", "augment", "copy",
                "skipped",
            ];
            let rows: Vec<Vec<String>> = file
                .records
                .iter()
                .map(|r| {
                    vec![
                        r.loader_threads.to_string(),
                        format!("{:.1}", r.images_per_sec),
                        format!("{:.1}", r.mb_per_sec),
                        format!(
                            "{:.1} ({:.1}-{:.1})",
                            r.batch_ms.median, r.batch_ms.min, r.batch_ms.max
                        ),
                        format!("{:.2}", r.read_ms),
                        format!("{:.2}", r.decode_ms),
                        format!("{:.2}", r.augment_ms),
                        format!("{:.2}", r.copy_ms),
                        r.skipped.to_string(),
                    ]
                })
                .collect();
            s.push_str(&aligned(&head, &[Align::Right; 9], &rows, md));
            s.push_str(
                "read/decode/augment/copy: ms of one loader thread per image; batch ms: median (min-max) wait per batch\n",
            );
            s
        }
    })
}

/// `data synth`'s line: what was written to `dir`, in `seconds`.
pub fn synth_summary(
    summary: &SynthSummary,
    classes: usize,
    dir: &Path,
    seconds: f64,
    quality: u8,
) -> String {
    format!(
        "wrote {} JPEGs in {} classes to {} in {:.1} s: mean {:.1} KB, mean {:.0}x{:.0}, quality {}\n",
        summary.files,
        classes,
        dir.display(),
        seconds,
        summary.mean_bytes / 1e3,
        summary.mean_width,
        summary.mean_height,
        quality,
    )
}

/// `data`'s f32 values of `shape` as a `.npy` file's bytes.
pub fn npy(shape: &[u64], data: &[f32]) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut w = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut buf)
            .begin_nd()
            .context("writing .npy")?;
        w.extend(data.iter().copied()).context("writing .npy")?;
        w.finish().context("writing .npy")?;
    }
    Ok(buf)
}
