//! `cnnbench model`'s pipeline: whole-model training steps (forward,
//! backward, optionally the SGD update) on the CPU, one GPU, or
//! data-parallel replicas, each model's record pushed to the output as it
//! finishes. The command line ([`crate::cli`]) parses and checks the
//! options, builds a [`ModelRun`] and hands it to [`run`].
//!
//! The modules' imports point down: `data_parallel` -> `gpu`; `cpu`,
//! `gpu` -> `steps` -> `input` -> `timed` -> `record`, `options`.

pub mod cpu;
pub mod data_parallel;
pub mod gpu;
pub mod graph_steps;
pub mod graphs;
pub mod input;
pub mod options;
pub mod projection;
pub mod record;
pub mod steps;
pub mod timed;

pub use graphs::{fed_by_folder, resolve, sequences_in_nhwc};
pub use options::StepOptions;

use self::data_parallel::Config;
use self::input::DataPlan;
use self::projection::ProjectionPlan;
use crate::bench::RunPolicy;
use crate::driver::replicas::Replicas;
use crate::note::note;
use crate::output::model::ModelOutput;
use crate::results::Environment;
use anyhow::Result;
use cnnbench_kernels::Isa;
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::net::Graph;
use cnnbench_layers::{DType, Layout};
use std::process::ExitCode;

/// A model run as the command line decided it, every option checked.
pub struct ModelRun {
    pub graphs: Vec<Graph>,
    pub opts: StepOptions,
    pub policy: RunPolicy,
    pub dtype: DType,
    pub layout: Layout,
    /// Most cuDNN workspace a convolution algorithm may use.
    pub workspace_limit: usize,
    /// The GPU the models run on (a data-parallel run's first replica's),
    /// or `None` for the CPU.
    pub gpu: Option<Gpu>,
    pub replicas: Option<Replicas>,
    pub data: Option<DataPlan>,
    pub projecting: Option<ProjectionPlan>,
    /// The CPU path's kernels' ISA (`--isa`; the best one on a GPU run).
    pub isa: Isa,
}

/// Runs every model of `r` on `threads` worker threads, one `bar` step
/// each; `open` makes the output once the run's environment is known (not
/// on a launched rank other than 0, which sends its times to rank 0).
pub fn run(
    r: ModelRun,
    threads: usize,
    bar: &indicatif::ProgressBar,
    open: impl FnOnce(Environment) -> Result<ModelOutput>,
) -> Result<ExitCode> {
    let (opts, policy) = (&r.opts, r.policy);
    let isa = r.isa;
    let gpu = match r.gpu {
        Some(g) => Some(gpu::Setup::new(g, r.dtype, r.layout, r.workspace_limit)?),
        None => None,
    };
    let env = match &gpu {
        Some(setup) => setup.environment(threads, isa),
        None => Environment::here(threads, isa.name().into(), None, "wall clock"),
    };
    if let (Some(rep), Some(setup)) = (&r.replicas, &gpu) {
        if !rep.leads() {
            // A rank other than 0: its times go to rank 0, which reports.
            for g in &r.graphs {
                data_parallel::run(&Config::new(setup, g, opts, policy), rep, bar)?;
            }
            bar.finish_and_clear();
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut out = open(env)?;
    // The roofs each layer is placed against: measured once, before any
    // timed step.
    let basis = match opts.per_layer {
        true => {
            bar.set_message("measuring the memory bandwidth and compute peak (--per-layer)");
            let gpu = gpu.as_ref().map(gpu::Setup::gpu);
            // Against the best ISA's peak, as conv and rnn: a forced
            // narrower ISA shows as a lower fraction of the machine.
            Some(crate::driver::roofline::basis(
                gpu,
                r.dtype,
                threads,
                Isa::detect(),
            )?)
        }
        false => None,
    };
    let data = r.data.as_ref();
    // The host's memory, asked of every model before the first one runs:
    // each that does not fit is said now, and its row says OOM.
    let cpu_oom: Vec<bool> = r
        .graphs
        .iter()
        .map(|g| {
            let why = gpu
                .is_none()
                .then(|| cpu::does_not_fit(g, opts.batch))
                .flatten();
            if let Some(why) = &why {
                note!("cnnbench: {} at batch {}: {why}: OOM", g.name, opts.batch);
            }
            why.is_some()
        })
        .collect();
    for (g, oom) in r.graphs.iter().zip(cpu_oom) {
        bar.set_message(g.name.clone());
        let recs = match (&gpu, &r.replicas) {
            (None, _) if oom => vec![cpu::oom_record(g, opts.batch)],
            (Some(setup), Some(rep)) => {
                data_parallel::run(&Config::new(setup, g, opts, policy), rep, bar)?
            }
            (Some(setup), None) => gpu::run(setup, g, opts, data, policy, bar)?
                .into_iter()
                .collect(),
            (None, _) => cpu::run(g, opts, data, policy, isa, bar)?
                .into_iter()
                .collect(),
        };
        if recs.is_empty() {
            break;
        }
        for mut rec in recs {
            if let Some(plan) = &r.projecting {
                rec.projection = plan.project(g, &rec)?;
            }
            if let Some(b) = &basis {
                crate::driver::roofline::place(&mut rec, b);
            }
            out.push(rec)?;
        }
        bar.inc(1);
        if crate::signals::stopped() {
            break;
        }
    }
    bar.finish_and_clear();
    out.finish(crate::signals::stopped())
}
