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
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment::here(2, "avx512".into(), None, "t")
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
