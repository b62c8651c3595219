//! What every layer subcommand does with its records: render them (table,
//! markdown, CSV, JSON) to stdout or `--out`, and keep them in the results
//! store, both rewritten after every record so that an interrupted run
//! keeps what it finished.

use super::{table, writers, Format};
use crate::note::note;
use crate::results::atomic::{rewritable, write_atomic};
use crate::results::store::{RunFile, Store, FORMAT_VERSION};
use crate::results::{Environment, Record, Skipped};
use anyhow::Result;
use cnnbench_layers::DType;
use std::path::PathBuf;
use std::process::ExitCode;

pub struct Output {
    pub env: Environment,
    pub records: Vec<Record>,
    pub skipped: Vec<Skipped>,
    format: Format,
    path: Option<PathBuf>,
    store: Option<Store>,
    subcommand: &'static str,
    /// The run's dtype, for the GPU preamble.
    dtype: DType,
}

impl Output {
    /// A sink writing `format` to stdout (or `path`) and the run's file
    /// in `store`; writes the empty run at once.
    pub fn new(
        env: Environment,
        format: Format,
        path: Option<PathBuf>,
        store: Option<Store>,
        subcommand: &'static str,
        dtype: DType,
    ) -> Result<Output> {
        let out = Output {
            env,
            records: Vec::new(),
            skipped: Vec::new(),
            format,
            path,
            store,
            subcommand,
            dtype,
        };
        out.save(false, false)?;
        Ok(out)
    }

    /// The run in its format (`complete`: whether it has ended, and not
    /// by a signal; JSON says so).
    fn render(&self, complete: bool) -> Result<String> {
        Ok(match self.format {
            Format::Table => {
                self.preamble() + &table::text(&self.records) + &table::skipped_text(&self.skipped)
            }
            Format::Md => {
                self.preamble()
                    + "\n"
                    + &table::markdown(&self.records)
                    + &table::skipped_text(&self.skipped)
            }
            Format::Csv => writers::csv(&self.records)?,
            // Benchdnn is not among the record formats (the parser refuses it).
            Format::Json | Format::Benchdnn => {
                writers::json(&self.env, &self.records, &self.skipped, complete)?
            }
        })
    }

    /// One line saying where and how the numbers were measured.
    fn preamble(&self) -> String {
        let e = &self.env;
        if let Some(g) = &e.gpu {
            let peak = g.peak(self.dtype);
            return format!(
                "# cnnbench {} ({}) | {} | cuDNN {} | cuBLAS {} | driver CUDA {} | {} | peak {} | median of timed runs (CUDA events)\n",
                e.cnnbench.version,
                e.cnnbench.git,
                g.name,
                g.cudnn_label(),
                g.cublas,
                g.driver_cuda,
                self.dtype.math(),
                peak.map_or("?".into(), |p| format!("{:.1} TFLOP/s ({})", p.tflops, p.source)),
            );
        }
        format!(
            "# cnnbench {} ({}) | {} | {} threads | isa {} | FP32 peak {} GFLOP/s (measured) | median of timed runs\n",
            e.cnnbench.version,
            e.cnnbench.git,
            e.cpu,
            e.threads,
            e.isa,
            e.peak_gflops.map_or("?".into(), |p| format!("{p:.0}")),
        )
    }

    /// The best peak measured so far, for the environment (each record
    /// carries its own fraction of the peak it was made with).
    pub fn note_peak(&mut self, gflops: f64) {
        self.env.peak_gflops = Some(self.env.peak_gflops.map_or(gflops, |p| p.max(gflops)));
    }

    /// Adds a finished record, as it was made.
    pub fn push(&mut self, r: Record) -> Result<()> {
        self.records.push(r);
        self.save(false, false)
    }

    pub fn push_skipped(&mut self, s: Skipped) -> Result<()> {
        self.skipped.push(s);
        self.save(false, false)
    }

    /// Rewrites `--out` and the store file with everything so far (`last`:
    /// the run's final write).
    fn save(&self, complete: bool, last: bool) -> Result<()> {
        let file = RunFile {
            format_version: FORMAT_VERSION,
            subcommand: self.subcommand.into(),
            environment: self.env.clone(),
            records: self.records.clone(),
            skipped: self.skipped.clone(),
            complete,
        };
        save_run(
            self.path.as_deref(),
            || self.render(complete),
            self.store.as_ref(),
            &file,
            last,
        )
    }

    /// Writes the final output and turns what happened into the exit code:
    /// 128 + the signal when stopped by one (130 for Ctrl-C), 1 when a
    /// check failed.
    pub fn finish(&self, interrupted: bool) -> Result<ExitCode> {
        self.save(!interrupted, true)?;
        let out = self.path.as_deref();
        if let Some(code) = end_run(
            out,
            self.render(!interrupted)?,
            self.records.len(),
            self.store.as_ref(),
            interrupted,
        )? {
            return Ok(code);
        }
        let failed = self
            .records
            .iter()
            .filter(|r| r.check.is_some_and(|c| !c.passed))
            .count();
        if failed > 0 {
            note!("cnnbench: {failed} record(s) failed --check");
            return Ok(ExitCode::from(1));
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Rewrites `--out` (when given) with what `render` makes, and the store
/// file (unless `--no-save`) with `file`: after every record, so that an
/// interrupted run keeps what it finished (an `--out` that is a FIFO or a
/// device only once, on the `last` write). Shared by every measuring
/// subcommand, whatever its records.
pub fn save_run<R: serde::Serialize>(
    out: Option<&std::path::Path>,
    render: impl FnOnce() -> Result<String>,
    store: Option<&Store>,
    file: &RunFile<R>,
    last: bool,
) -> Result<()> {
    if let Some(path) = out.filter(|p| last || rewritable(p)) {
        write_atomic(path, &render()?)?;
    }
    if let Some(store) = store {
        store.save(file)?;
    }
    Ok(())
}

/// The end of a run: the output on stdout (or a line saying where `--out`
/// put it), and when a signal stopped the run, where the finished records
/// are and exit code 128 + the signal.
pub fn end_run(
    out: Option<&std::path::Path>,
    rendered: String,
    records: usize,
    store: Option<&Store>,
    interrupted: bool,
) -> Result<Option<ExitCode>> {
    match out {
        Some(path) => note!("cnnbench: wrote {records} records to {}", path.display()),
        None => super::print(&rendered)?,
    }
    if !interrupted {
        return Ok(None);
    }
    let kept = store.map_or(String::new(), |s| format!(" (in {})", s.path.display()));
    note!(
        "cnnbench: {}; kept the {records} finished records{kept}",
        crate::signals::stopped_by()
    );
    Ok(Some(crate::signals::exit_code()))
}
