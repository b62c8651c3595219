//! `cnnbench report`: merge runs from the results store (any number of
//! machines) and peers' CSV files into one markdown report with charts,
//! optionally beside published numbers (`--published`).

use crate::note::note;
use crate::report::markdown::{self, ChartsDir, Options};
use crate::report::{cost, merge, models};
use crate::results::atomic::write_atomic;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench report results/ --out report.md --charts charts/\n  \
    cnnbench report results/ torch.csv --baseline threads=1\n  \
    cnnbench report results/ --published")]
pub struct ReportArgs {
    /// Results files or folders (searched recursively for *.json and peers' *.csv)
    #[arg(value_name = "PATH", default_value = "results")]
    paths: Vec<PathBuf>,
    /// Write the report here instead of stdout (checked before anything is read; a missing
    /// folder is made)
    #[arg(long, value_name = "FILE", value_parser = super::output::report_path)]
    out: Option<PathBuf>,
    /// Write SVG charts into this folder and link them from the report
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
    /// The run speedups are measured against: a label, key=value as in labels (threads=1), or part of a label
    #[arg(long, value_name = "SELECTOR")]
    baseline: Option<String>,
    /// Price runs that carry none, in US dollars per hour
    #[arg(long, value_name = "USD")]
    price_per_hour: Option<f64>,
    /// Price runs that carry none by instance name (from --price-list)
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// The price list for --instance
    #[arg(long, value_name = "FILE", default_value = "results/instances.toml")]
    price_list: PathBuf,
    /// Epochs of a full training run, for the cost section
    #[arg(long, default_value_t = cost::DEFAULT_EPOCHS)]
    epochs: u32,
    /// Images per epoch, for the cost section (the default is ImageNet-1k's training set)
    #[arg(long, default_value_t = cost::IMAGENET_IMAGES)]
    dataset_images: u64,
    /// Also print published numbers (jcjohnson/cnn-benchmarks and its cloud re-run: forward,
    /// backward and total ms at batch 16; the tf_cnn_benchmarks sheet and FloydHub: images/s by
    /// GPU count and input) beside measured rows of the same model and batch, marked published
    /// with their sources and dates; never part of the report's statistics. Built in; the CSVs
    /// and their sources are in results/published/
    #[arg(long)]
    published: bool,
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let inputs = merge::split(&args.paths)?;
    let mut unreadable = inputs.unreadable;
    let runs = merge::load_files(inputs.layers, &mut unreadable);
    let model_runs = models::load_files(inputs.models, &mut unreadable);
    for u in &unreadable {
        note!(
            "cnnbench: warning: not read: '{}': {}",
            u.path.display(),
            u.why
        );
    }
    if runs.is_empty() && model_runs.is_empty() {
        let not_read = match unreadable.len() {
            0 => String::new(),
            n => format!(" ({n} could not be read, listed above)"),
        };
        bail!(
            "no results with records under {}{not_read}",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let charts = match &args.charts {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create '{}'", dir.display()))?;
            Some(ChartsDir {
                dir: dir.clone(),
                link_prefix: link_prefix(args.out.as_ref(), dir),
            })
        }
        None => None,
    };
    if args.epochs == 0 || args.dataset_images == 0 {
        bail!("--epochs and --dataset-images must be at least 1");
    }
    let price = cost::resolve(
        args.price_per_hour,
        args.instance.as_deref(),
        &args.price_list,
    )?;
    let opts = Options {
        baseline: args.baseline.clone(),
        charts,
        price,
        epochs: args.epochs,
        dataset_images: args.dataset_images,
        published: args.published,
    };
    let md = markdown::render(&runs, &model_runs, &unreadable, &opts)?;
    match &args.out {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create '{}'", dir.display()))?;
            }
            write_atomic(path, &md)?;
            note!(
                "cnnbench: wrote the report of {} runs to {}",
                runs.len() + model_runs.len(),
                path.display()
            );
        }
        None => crate::output::print(&md)?,
    }
    // A report that covers less than it was given says so in its exit
    // code too, for scripts that do not read stderr.
    Ok(if unreadable.is_empty() {
        ExitCode::SUCCESS
    } else {
        note!(
            "cnnbench: {} input(s) could not be read; the report covers the rest (exit code 1)",
            unreadable.len()
        );
        ExitCode::from(1)
    })
}

/// How the report links a chart: relative to the report's folder when the
/// charts folder is inside it, else the charts folder as given.
fn link_prefix(report: Option<&PathBuf>, charts: &std::path::Path) -> String {
    let base = report
        .and_then(|r| r.parent())
        .filter(|p| !p.as_os_str().is_empty());
    let rel = match base {
        Some(b) => charts.strip_prefix(b).unwrap_or(charts),
        None => charts,
    };
    let s = rel.to_string_lossy();
    if s.is_empty() {
        String::new()
    } else {
        format!("{}/", s.trim_end_matches('/'))
    }
}
