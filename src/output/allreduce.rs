//! `cnnbench allreduce`'s output: JSON (the run file), CSV (one row per
//! size, type and placement) and the table, after nccl-tests' columns.

use super::table::{aligned, Align};
use super::Format;
use crate::results::allreduce_record::AllreduceRecord;
use crate::results::store::RunFile;
use anyhow::{Context, Result};
use cnnbench_layers::cuda::nccl;

const CSV_HEADER: [&str; 13] = [
    "elements",
    "bytes",
    "dtype",
    "in_place",
    "ranks",
    "launcher",
    "time_us_min",
    "time_us_median",
    "time_us_max",
    "algbw_gbps",
    "busbw_gbps",
    "runs",
    "status",
];

pub fn render(file: &RunFile<AllreduceRecord>, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(file)? + "\n",
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(CSV_HEADER)?;
            for r in &file.records {
                w.write_record([
                    r.elements.to_string(),
                    r.bytes.to_string(),
                    r.dtype.clone(),
                    r.in_place.to_string(),
                    r.ranks.to_string(),
                    r.launcher.clone(),
                    format!("{:.2}", r.time_us.min),
                    format!("{:.2}", r.time_us.median),
                    format!("{:.2}", r.time_us.max),
                    format!("{:.2}", r.algbw_gbps),
                    format!("{:.2}", r.busbw_gbps),
                    r.runs.to_string(),
                    r.status.clone(),
                ])?;
            }
            String::from_utf8(w.into_inner().context("flushing CSV")?)?
        }
        _ => {
            let e = &file.environment;
            let gpu = e.gpu.as_ref().map_or("?".into(), |g| g.name.clone());
            let ranks = file.records.first().map_or(0, |r| r.ranks);
            let mut s = format!(
                "# cnnbench {} ({}) | {gpu} | NCCL {} | all-reduce (mean) over {ranks} ranks, median (min-max) of the slowest rank's time\n",
                e.cnnbench.version,
                e.cnnbench.git,
                nccl::version().unwrap_or_else(|_| "?".into())
            );
            let rows: Vec<Vec<String>> = file
                .records
                .iter()
                .map(|r| {
                    vec![
                        r.elements.to_string(),
                        crate::results::memory::size(r.bytes as u128),
                        r.dtype.clone(),
                        if r.in_place { "in" } else { "out" }.into(),
                        format!(
                            "{:.1} ({:.1}-{:.1})",
                            r.time_us.median, r.time_us.min, r.time_us.max
                        ),
                        format!("{:.2}", r.algbw_gbps),
                        format!("{:.2}", r.busbw_gbps),
                        r.status.clone(),
                    ]
                })
                .collect();
            use Align::{Left as L, Right as R};
            s += &aligned(
                &[
                    "elements",
                    "size",
                    "dtype",
                    "place",
                    "time us",
                    "algbw GB/s",
                    "busbw GB/s",
                    "status",
                ],
                &[R, R, L, L, R, R, R, L],
                &rows,
                format == Format::Md,
            );
            s
        }
    })
}
