//! A sweep's output: every configuration's records together, each under
//! its label (the table and markdown as one section per configuration,
//! CSV with a leading `config` column, JSON as one document).

use super::table;
use super::Format;
use crate::results::store::RunFile;
use anyhow::Result;

/// The sweep in `format`; JSON says whether it `complete`d (false while
/// it goes on, and after a stop).
pub fn render(done: &[(String, RunFile)], format: Format, complete: bool) -> Result<String> {
    Ok(match format {
        Format::Table | Format::Md => {
            let mut s = String::new();
            for (label, f) in done {
                s += &format!("\n## {label}\n");
                s += &if format == Format::Md {
                    table::markdown(&f.records)
                } else {
                    table::text(&f.records)
                };
            }
            s
        }
        Format::Csv => {
            // One CSV: the configuration first, then the usual columns.
            let mut w = csv::Writer::from_writer(Vec::new());
            let mut head = vec!["config"];
            head.extend(crate::results::record::CSV_HEADER);
            w.write_record(&head)?;
            for (label, f) in done {
                for r in &f.records {
                    let mut row = vec![label.clone()];
                    row.extend(r.csv_row());
                    w.write_record(&row)?;
                }
            }
            String::from_utf8(w.into_inner()?)?
        }
        // Benchdnn is not among the record formats a sweep accepts.
        Format::Json | Format::Benchdnn => {
            let runs: Vec<serde_json::Value> = done
                .iter()
                .map(|(label, f)| {
                    serde_json::json!({"config": label, "environment": f.environment, "records": f.records, "skipped": f.skipped})
                })
                .collect();
            serde_json::to_string_pretty(
                &serde_json::json!({ "sweep": runs, "complete": complete }),
            )? + "\n"
        }
    })
}
