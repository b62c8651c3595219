//! One row per problem x direction x algorithm, for people.

use crate::results::Record;

const HEADER: [&str; 11] = [
    "problem",
    "dir",
    "algo",
    "kernel",
    "runs",
    "min ms",
    "median ms",
    "max ms",
    "stddev",
    "GFLOP/s",
    "% peak",
];

/// The column of cuDNN's FindEx time, shown when some record has one
/// (`--algo auto` on a GPU); `-` in the rows without.
const FIND_MS: &str = "FindEx ms";

fn has_find_ms(records: &[Record]) -> bool {
    records.iter().any(|r| r.cudnn_find_ms.is_some())
}

fn cells(r: &Record, find_ms: bool) -> Vec<String> {
    let mut row = vec![
        r.problem.clone(),
        r.dir.to_string(),
        r.algo.clone(),
        r.kernel.clone(),
        r.runs.to_string(),
        format!("{:.3}", r.ms.min),
        format!("{:.3}", r.ms.median),
        format!("{:.3}", r.ms.max),
        format!("{:.3}", r.ms.stddev),
        format!("{:.1}", r.gflops),
        r.peak_fraction
            .map_or("-".into(), |f| format!("{:.1}", f * 100.0)),
    ];
    if find_ms {
        row.push(r.cudnn_find_ms.map_or("-".into(), |ms| format!("{ms:.3}")));
    }
    if let Some(c) = r.check {
        row.push(format!(
            "{} ({:.1e})",
            if c.passed { "ok" } else { "FAIL" },
            c.rel_err
        ));
    }
    row
}

fn header(records: &[Record]) -> Vec<String> {
    let mut h: Vec<String> = HEADER.iter().map(|s| s.to_string()).collect();
    if has_find_ms(records) {
        h.push(FIND_MS.into());
    }
    if records.iter().any(|r| r.check.is_some()) {
        h.push("check (rel err)".into());
    }
    h
}

/// Is the column numeric (right-aligned)?
fn numeric(col: usize, name: &str) -> bool {
    (4..=10).contains(&col) || name == FIND_MS
}

/// Column alignment in [`aligned`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// An aligned text table, or a GitHub-flavoured markdown one with `md`.
pub fn aligned<S: AsRef<str>>(
    head: &[S],
    align: &[Align],
    rows: &[Vec<String>],
    md: bool,
) -> String {
    let head: Vec<String> = head.iter().map(|h| h.as_ref().to_string()).collect();
    let right = |i: usize| align.get(i) == Some(&Align::Right);
    if md {
        let mut out = format!("| {} |\n", head.join(" | "));
        let marks: Vec<&str> = (0..head.len())
            .map(|i| if right(i) { "---:" } else { "---" })
            .collect();
        out += &format!("|{}|\n", marks.join("|"));
        for row in rows {
            let row: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            out += &format!("| {} |\n", row.join(" | "));
        }
        return out;
    }
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |row: &[String]| {
        let parts: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                // Padded by hand: `format!`'s width stops at 65535, and a
                // cell (a user's problem name) may be longer.
                let pad = " ".repeat(width[i].saturating_sub(c.chars().count()));
                if right(i) {
                    pad + c
                } else {
                    c.clone() + &pad
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&head);
    out += &line(&width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
    for row in rows {
        out += &line(row);
    }
    out
}

fn record_table(records: &[Record], md: bool) -> String {
    let head = header(records);
    let align: Vec<Align> = head
        .iter()
        .enumerate()
        .map(|(i, name)| {
            if numeric(i, name) {
                Align::Right
            } else {
                Align::Left
            }
        })
        .collect();
    let find_ms = has_find_ms(records);
    let rows: Vec<Vec<String>> = records.iter().map(|r| cells(r, find_ms)).collect();
    aligned(&head, &align, &rows, md)
}

/// An aligned text table.
pub fn text(records: &[Record]) -> String {
    record_table(records, false)
}

/// A GitHub-flavoured markdown table.
pub fn markdown(records: &[Record]) -> String {
    record_table(records, true)
}

/// Algorithms that were asked for but not timed, one line each (empty when
/// there are none).
pub fn skipped_text(skipped: &[crate::results::Skipped]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nnot timed:\n");
    for k in skipped {
        s += &format!(
            "  {} {} {}: {}{}\n",
            k.problem,
            k.dir,
            k.algo,
            k.status,
            k.workspace_bytes
                .map_or(String::new(), |b| format!(" (workspace {b} bytes)"))
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Skipped;

    #[test]
    fn cells_past_formats_width_limit_are_padded() {
        let long = "x".repeat(70_000);
        let t = aligned(
            &["name", "ms"],
            &[Align::Left, Align::Right],
            &[
                vec![long.clone(), "1.0".into()],
                vec!["a".into(), "22.5".into()],
            ],
            false,
        );
        let last = t.lines().last().unwrap();
        assert_eq!(last.len(), 70_000 + 2 + 4);
        assert!(last.starts_with("a ") && last.ends_with("22.5"));
    }

    #[test]
    fn findex_time_is_a_column_when_a_record_has_one() {
        let records = crate::output::writers::tests::gpu_and_cpu_records();
        let t = text(&records);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].ends_with("% peak  FindEx ms"), "{t}");
        assert!(lines[2].ends_with("    0.250"), "{t}");
        assert!(lines[3].ends_with("        -"), "{t}");
        let md = markdown(&records);
        assert!(md.lines().nth(1).unwrap().ends_with("|---:|---:|"), "{md}");
        assert!(md.lines().nth(3).unwrap().ends_with("| - |"), "{md}");
        // CPU records only: no such column.
        assert!(!text(&records[1..]).contains("FindEx"));
    }

    #[test]
    fn skipped_algorithms_are_listed_with_their_status() {
        assert_eq!(skipped_text(&[]), "");
        let s = Skipped {
            problem: "mb2ic8ih9oc16oh7kh3".into(),
            dir: crate::results::Dir::Fwd,
            device: crate::results::Device::Gpu,
            dtype: cnnbench_layers::DType::F16,
            layout: "nhwc".into(),
            algo: "fft".into(),
            status: "over workspace limit".into(),
            workspace_bytes: Some(1 << 20),
        };
        assert_eq!(
            skipped_text(&[s]),
            "\nnot timed:\n  mb2ic8ih9oc16oh7kh3 fwd fft: over workspace limit (workspace 1048576 bytes)\n"
        );
    }
}
