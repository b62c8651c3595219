//! Machine-readable renderers: JSON and CSV.

use crate::results::record::CSV_HEADER;
use crate::results::{Environment, Record, Skipped};
use anyhow::{Context, Result};
use serde::Serialize;

#[derive(Serialize)]
struct JsonDoc<'a> {
    environment: &'a Environment,
    records: &'a [Record],
    #[serde(skip_serializing_if = "<[Skipped]>::is_empty")]
    skipped: &'a [Skipped],
    complete: bool,
}

/// `{"environment", "records", "skipped", "complete"}`; `skipped` only
/// when non-empty; `complete` false while the run goes on (an `--out` file
/// rewritten after every record) and when a signal stopped it.
pub fn json(
    env: &Environment,
    records: &[Record],
    skipped: &[Skipped],
    complete: bool,
) -> Result<String> {
    let mut s = serde_json::to_string_pretty(&JsonDoc {
        environment: env,
        records,
        skipped,
        complete,
    })?;
    s.push('\n');
    Ok(s)
}

pub fn csv(records: &[Record]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER)?;
    for r in records {
        w.write_record(r.csv_row())?;
    }
    Ok(String::from_utf8(w.into_inner().context("flushing CSV")?)?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn env() -> Environment {
        Environment::here(2, "avx512".into(), None, "t")
    }

    /// `--algo auto` on a GPU (with FindEx's time) and a CPU record.
    pub(crate) fn gpu_and_cpu_records() -> Vec<Record> {
        use crate::bench::Stats;
        use crate::results::record::{Ran, Subject, Timing};
        use crate::results::{Device, Dir};
        let record = |device, algo: &str, find: Option<f64>| {
            Record::new(
                Subject {
                    problem: "mb2ic8ih9oc16oh9kh3ph1".into(),
                    dir: Dir::Fwd,
                    device,
                    dtype: cnnbench_layers::DType::F32,
                    layout: "nhwc".into(),
                    algo: algo.into(),
                },
                Timing {
                    ms: Stats::of(&[0.25, 0.5]).unwrap(),
                    runs: 2,
                    flops: 1_000_000,
                    peak_gflops: None,
                },
                Ran {
                    check: None,
                    kernel: "k".into(),
                    bias: false,
                    workspace_bytes: 0,
                    cudnn_find_ms: find,
                },
            )
        };
        vec![
            record(Device::Gpu, "implicit_precomp_gemm", Some(0.25)),
            record(Device::Cpu, "direct", None),
        ]
    }

    #[test]
    fn csv_has_findex_time_last_empty_where_there_is_none() {
        let text = csv(&gpu_and_cpu_records()).unwrap();
        let mut rd = ::csv::Reader::from_reader(text.as_bytes());
        let head = rd.headers().unwrap().clone();
        assert_eq!(head.len(), CSV_HEADER.len());
        assert_eq!(head.iter().next_back(), Some("cudnn_find_ms"));
        let rows: Vec<_> = rd.records().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!((&rows[0][2], &rows[0][19]), ("gpu", "0.25"));
        assert_eq!((&rows[1][2], &rows[1][19]), ("cpu", ""));
        assert!(rows.iter().all(|r| r.len() == CSV_HEADER.len()));
    }

    #[test]
    fn json_lists_skipped_only_when_there_are_some() {
        let doc: serde_json::Value =
            serde_json::from_str(&json(&env(), &[], &[], true).unwrap()).unwrap();
        assert!(doc.get("skipped").is_none());
        assert_eq!(doc["complete"], true);
        assert!(
            doc["environment"].get("gpu").is_none(),
            "no gpu key on the CPU"
        );
        let s = Skipped {
            problem: "p".into(),
            dir: crate::results::Dir::BwdData,
            device: crate::results::Device::Gpu,
            dtype: cnnbench_layers::DType::F32,
            layout: "nchw".into(),
            algo: "algo#9".into(),
            status: "not supported".into(),
            workspace_bytes: None,
        };
        let doc: serde_json::Value =
            serde_json::from_str(&json(&env(), &[], &[s], false).unwrap()).unwrap();
        assert_eq!(doc["skipped"][0]["algo"], "algo#9");
        assert_eq!(doc["skipped"][0]["status"], "not supported");
    }
}
