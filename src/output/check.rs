//! `cnnbench check`'s output: the table (per model the loss, the worst
//! layer output and the worst gradient; every tensor with `--verbose`) or
//! JSON.

use super::table::{aligned, Align};
use super::Format;
use crate::results::compared::Compared;
use anyhow::Result;

/// Every compared tensor in `format` (table or JSON).
pub fn render(all: &[Compared], format: Format, verbose: bool) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(all)? + "\n",
        // Table is the only other format `check` accepts.
        _ => table(all, verbose),
    })
}

fn table(all: &[Compared], verbose: bool) -> String {
    let fmt = |c: &Compared| {
        vec![
            c.model.clone(),
            c.tensor.clone(),
            format!("{:.2e}", c.rel_err),
            format!("{:.0e}", c.tolerance),
            if c.passed { "pass" } else { "FAIL" }.into(),
        ]
    };
    let mut rows = Vec::new();
    let mut models: Vec<&str> = all.iter().map(|c| c.model.as_str()).collect();
    models.dedup();
    for m in models {
        let of: Vec<&Compared> = all.iter().filter(|c| c.model == m).collect();
        if verbose {
            rows.extend(of.iter().map(|c| fmt(c)));
            continue;
        }
        // The loss, then the worst layer output and the worst gradient,
        // with how many were compared.
        rows.push(fmt(of[0]));
        for (what, suffix) in [("layer outputs", ".output"), ("gradients", ".grad")] {
            let part: Vec<&Compared> = of
                .iter()
                .copied()
                .filter(|c| c.tensor.ends_with(suffix))
                .collect();
            if let Some(worst) = part.iter().max_by(|a, b| a.rel_err.total_cmp(&b.rel_err)) {
                let mut row = fmt(worst);
                row[1] = format!("worst of {} {what}: {}", part.len(), worst.tensor);
                let failed = part.iter().filter(|c| !c.passed).count();
                if failed > 0 {
                    row[4] = format!("FAIL ({failed})");
                }
                rows.push(row);
            }
        }
    }
    use Align::{Left as L, Right as R};
    aligned(
        &["model", "compared", "rel. L2 error", "tolerance", "result"],
        &[L, L, R, R, L],
        &rows,
        false,
    )
}
