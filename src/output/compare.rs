//! `compare`'s side-by-side table: its cells (numbers formatted in one
//! place) and its rendering as a table, markdown, CSV or JSON.

use super::table::{aligned, Align};
use super::Format;
use anyhow::Result;

/// The comparison as a table: problem | dir | dtype layout | median ms per
/// run | each run's time over the first's. A run without the row shows
/// `-`.
pub struct SideBySide {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// The times and ratios of each row unrounded (the cells after the key
    /// columns), for JSON.
    pub numbers: Vec<Vec<Option<f64>>>,
    /// How many leading columns are labels (the rest are numbers).
    pub keys: usize,
}

impl SideBySide {
    /// An empty table under `head`, whose first `keys` columns are labels.
    pub fn new(head: Vec<String>, keys: usize) -> SideBySide {
        SideBySide {
            head,
            rows: Vec::new(),
            numbers: Vec::new(),
            keys,
        }
    }

    /// One row: its labels, then its numbers (3 decimals, `-` where
    /// missing), kept unrounded for JSON.
    pub fn push(&mut self, mut labels: Vec<String>, values: Vec<Option<f64>>) {
        labels.extend(
            values
                .iter()
                .map(|v| v.map_or("-".into(), |v| format!("{v:.3}"))),
        );
        self.rows.push(labels);
        self.numbers.push(values);
    }

    pub fn render(&self, format: Format) -> Result<String> {
        let align: Vec<Align> = (0..self.head.len())
            .map(|c| {
                if c < self.keys {
                    Align::Left
                } else {
                    Align::Right
                }
            })
            .collect();
        Ok(match format {
            Format::Csv => {
                let mut w = csv::Writer::from_writer(Vec::new());
                w.write_record(&self.head)?;
                for row in &self.rows {
                    w.write_record(row)?;
                }
                String::from_utf8(w.into_inner()?)?
            }
            Format::Json => {
                // One object per row, keyed by the column heads; times and
                // ratios as numbers, a missing one as null.
                let rows: Vec<serde_json::Map<String, serde_json::Value>> = self
                    .rows
                    .iter()
                    .zip(&self.numbers)
                    .map(|(row, values)| {
                        let keys = row[..self.keys].iter().map(|c| c.as_str().into());
                        let values = values.iter().map(|v| {
                            v.filter(|v| v.is_finite())
                                .map_or(serde_json::Value::Null, Into::into)
                        });
                        self.head.iter().cloned().zip(keys.chain(values)).collect()
                    })
                    .collect();
                serde_json::to_string_pretty(&rows)? + "\n"
            }
            Format::Md => aligned(&self.head, &align, &self.rows, true),
            _ => aligned(&self.head, &align, &self.rows, false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_by_side_table_renders_in_every_format() {
        let t = SideBySide {
            head: vec![
                "problem".into(),
                "dir".into(),
                "dtype layout".into(),
                "a ms".into(),
                "b ms".into(),
                "b / a".into(),
            ],
            rows: vec![vec![
                "mb1ic8ih9oc16oh7kh3".into(),
                "fwd".into(),
                "f32 nhwc".into(),
                "0.000".into(),
                "-".into(),
                "-".into(),
            ]],
            numbers: vec![vec![Some(0.0004), None, None]],
            keys: 3,
        };
        let json: serde_json::Value =
            serde_json::from_str(&t.render(Format::Json).unwrap()).unwrap();
        assert_eq!(json[0]["a ms"], 0.0004, "unrounded");
        assert_eq!(json[0]["b ms"], serde_json::Value::Null);
        assert_eq!(json[0]["dir"], "fwd");
        let csv = t.render(Format::Csv).unwrap();
        assert_eq!(
            csv.lines().nth(1),
            Some("mb1ic8ih9oc16oh7kh3,fwd,f32 nhwc,0.000,-,-")
        );
        assert!(t.render(Format::Md).unwrap().starts_with("| problem |"));
        assert!(t.render(Format::Table).unwrap().starts_with("problem "));
    }
}
