//! `model --gpus N` and `model --launcher ...`: data-parallel training
//! steps, one replica per GPU, gradients averaged over NCCL in buckets
//! while the backward pass runs ([`cnnbench_layers::net::data_parallel`]).
//!
//! Every replica first times the plain single-GPU step (no NCCL): rank 0's
//! is the baseline of the speedup, and the replicas agree (an all-reduce
//! of the largest) on how many data-parallel steps to time, so that none
//! stops early and leaves the others waiting in an all-reduce. Each
//! data-parallel step then takes as long as its slowest replica.
//!
//! With `--gpus`, the replicas are threads of this process on
//! `ncclCommInitAll`'s communicators. With `--launcher`, this process is
//! one rank of a job started by torchrun or srun: rank 0 makes NCCL's
//! unique id and hands it out over the TCP rendezvous
//! ([`crate::dist::rendezvous`]), which later brings every rank's times
//! back to rank 0, the only rank that prints and saves a record.

use super::gpu::Setup;
use super::options::StepOptions;
use super::record::{base_record, RunKind};
use super::steps::{fixed_steps, time_steps, NetSteps};
use super::timed::Timed;
use crate::bench::{RunPolicy, Stats};
use crate::driver::replicas::{CommFrom, Meet, OtherReplicaFailed, Replicas};
use crate::results::{DataParallel, MemoryBytes, ModelRecord};
use anyhow::{anyhow, Context, Result};
use cnnbench_layers::cuda::nccl;
use cnnbench_layers::cuda::{DeviceBuffer, Gpu};
use cnnbench_layers::net::data_parallel::GradExchange;
use cnnbench_layers::net::gpu::{GpuNet, GpuOptions};
use cnnbench_layers::net::Graph;
use cnnbench_layers::{DType, Layout};
use serde::{Deserialize, Serialize};

/// What each replica measured, sent to rank 0 (as JSON between processes).
#[derive(Serialize, Deserialize)]
struct ReplicaResult {
    /// The plain single-GPU steps.
    single: Timed,
    single_loss: f32,
    /// The data-parallel steps; `None` when a stop signal ended the single
    /// GPU timing first (on any replica).
    data_parallel: Option<Timed>,
    loss: f32,
    memory: MemoryBytes,
    kernels: Vec<String>,
    buckets: usize,
    gradient_bytes: usize,
}

/// What every replica of a model is run with.
pub struct Config<'a> {
    pub g: &'a Graph,
    pub opts: &'a StepOptions,
    pub policy: RunPolicy,
    pub dtype: DType,
    pub layout: Layout,
    pub workspace_limit: usize,
    pub per_layer: bool,
    pub labels: RunKind,
}

impl<'a> Config<'a> {
    /// What each replica of a data-parallel run of `g` is run with: what
    /// `setup` decided for every model.
    pub fn new(
        setup: &Setup,
        g: &'a Graph,
        opts: &'a StepOptions,
        policy: RunPolicy,
    ) -> Config<'a> {
        Config {
            g,
            opts,
            policy,
            dtype: setup.dtype(),
            layout: setup.layout(),
            workspace_limit: setup.workspace_limit(),
            per_layer: opts.per_layer,
            labels: setup.labels(),
        }
    }
}

/// Times `cfg`'s model on the replicas: the single-GPU record, then the
/// data-parallel one (both on rank 0; none on the other ranks, and only
/// the first when a stop signal came before the data-parallel steps).
pub fn run(
    cfg: &Config<'_>,
    replicas: &Replicas,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<ModelRecord>> {
    let name = &cfg.g.name;
    let ran = replicas.run(name, &fingerprint(cfg), bar, |dev, from, bar, meet| {
        replica(cfg, dev, from, bar, meet)
    })?;
    match ran {
        Some((results, launcher)) => records(cfg, results, launcher),
        None => Ok(Vec::new()),
    }
}

/// What every rank must run alike: rank 0 refuses to start with a rank
/// whose arguments differ.
fn fingerprint(cfg: &Config<'_>) -> String {
    let a = cfg.opts;
    format!(
        "cnnbench {} | {} batch {} {} {} | update {} | warmup {} runs {} to {} min-time {} s | seed {} | per-layer {}",
        env!("CARGO_PKG_VERSION"),
        cfg.g.name,
        a.batch,
        cfg.dtype,
        cfg.layout,
        a.update,
        cfg.policy.warmup,
        cfg.policy.min_runs,
        cfg.policy.max_runs,
        cfg.policy.min_time.as_secs_f64(),
        a.seed,
        cfg.per_layer
    )
}

/// One replica on device `dev`: the single-GPU steps, then (when no
/// replica was stopped) the data-parallel ones.
fn replica(
    cfg: &Config<'_>,
    dev: usize,
    from: CommFrom,
    bar: &indicatif::ProgressBar,
    meet: &Meet,
) -> Result<ReplicaResult> {
    let gpu = Gpu::open_ordinal(dev).map_err(|e| anyhow!("{e}"))?;
    let setup = Setup::new(gpu, cfg.dtype, cfg.layout, cfg.workspace_limit)?;
    let (gpu, kernels) = (setup.gpu(), setup.kernels());
    let g = cfg.g;
    bar.set_message(format!("{}: choosing convolution algorithms", g.name));
    let opts = GpuOptions {
        dtype: cfg.dtype,
        layout: cfg.layout,
        seed: cfg.opts.seed,
        workspace_limit: cfg.workspace_limit,
        per_layer: cfg.per_layer,
        paths: cfg.opts.paths,
    };
    let net = GpuNet::new(gpu, kernels, g, cfg.opts.batch, opts).map_err(|e| anyhow!("{e}"))?;
    let comm = from.comm(gpu)?;
    let mut steps = NetSteps {
        net,
        update: cfg.opts.update,
        hook: None,
        feed: None,
    };
    let single = time_steps(g, &mut steps, cfg.policy, bar)?;
    let single_loss = steps.net.loss().map_err(|e| anyhow!("{e}"))?;
    let exchange = GradExchange::new(&steps.net, comm).map_err(|e| anyhow!("{e}"))?;
    let (buckets, gradient_bytes) = (exchange.buckets(), exchange.bytes());
    // The first collective follows: every replica of this process must
    // have come this far.
    if !meet.all_ready(true) {
        return Err(OtherReplicaFailed.into());
    }
    // Every replica takes part in both agreements, stopped or not.
    let mut scratch = DeviceBuffer::alloc(&gpu.stream, 4).map_err(|e| anyhow!("{e}"))?;
    let mut agree = |v: f32| {
        exchange
            .max_over_ranks(v, &mut scratch)
            .map_err(|e| anyhow!("{e}"))
    };
    let stopped = agree(if single.is_none() { 1.0 } else { 0.0 })? > 0.0;
    let runs = agree(single.as_ref().map_or(0, Timed::runs) as f32)? as usize;
    let memory = |net: &GpuNet<'_>| {
        let m = net.memory();
        MemoryBytes {
            params: m.params,
            activations: m.activations,
            workspace: m.workspace,
            total: m.total(),
        }
    };
    let kernels_of = |net: &GpuNet<'_>| (0..g.nodes.len()).map(|i| net.kernels(i)).collect();
    let Some(single) = single.filter(|_| !stopped) else {
        return Ok(ReplicaResult {
            single: Timed::default(),
            single_loss,
            data_parallel: None,
            loss: single_loss,
            memory: memory(&steps.net),
            kernels: kernels_of(&steps.net),
            buckets,
            gradient_bytes,
        });
    };
    steps.hook = Some(Box::new(exchange));
    let warmup = cfg.policy.warmup.max(1);
    let dp = fixed_steps(g, &mut steps, warmup, runs.max(1), Some(bar))?;
    Ok(ReplicaResult {
        single,
        single_loss,
        data_parallel: Some(dp),
        loss: steps.net.loss().map_err(|e| anyhow!("{e}"))?,
        memory: memory(&steps.net),
        kernels: kernels_of(&steps.net),
        buckets,
        gradient_bytes,
    })
}

/// Rank 0's records from every replica's results (rank order).
fn records(
    cfg: &Config<'_>,
    results: Vec<ReplicaResult>,
    launcher: &str,
) -> Result<Vec<ModelRecord>> {
    let (g, opts) = (cfg.g, cfg.opts);
    let gpus = results.len();
    let r0 = results.first().context("no replica ran")?;
    let kernel = |i: usize| r0.kernels.get(i).cloned().unwrap_or_default();
    let base = || ModelRecord {
        gpu_paths: opts.paths.record_name(),
        ..base_record(g, opts.batch, "ok", cfg.labels)
    };
    if r0.data_parallel.is_none() {
        // Stopped before the data-parallel steps: what finished, if any.
        if r0.single.runs() == 0 {
            return Ok(Vec::new());
        }
        let single = r0
            .single
            .record(g, opts, base(), r0.single_loss, r0.memory, kernel, None, 1);
        return Ok(vec![single]);
    }
    let single = r0
        .single
        .record(g, opts, base(), r0.single_loss, r0.memory, kernel, None, 1);
    let rank_step_ms: Vec<f64> = results
        .iter()
        .map(|r| {
            r.data_parallel
                .as_ref()
                .map_or(f64::NAN, Timed::median_step)
        })
        .collect();
    let steps: Vec<Timed> = results
        .iter()
        .filter_map(|r| r.data_parallel.clone())
        .collect();
    let merged = Timed::slowest_of(steps).context("no data-parallel steps")?;
    let mut rec = merged.record(g, opts, base(), r0.loss, r0.memory, kernel, None, gpus);
    let step = merged.median_step();
    let single_step = r0.single.median_step();
    let speedup = gpus as f64 * single_step / step;
    rec.data_parallel = Some(DataParallel {
        gpus,
        launcher: launcher.into(),
        nccl: nccl::version().map_err(|e| anyhow!("{e}"))?,
        buckets: r0.buckets,
        gradient_bytes: r0.gradient_bytes,
        exposed_comm_ms: Stats::of(merged.exchange()).context("no data-parallel steps")?,
        rank_step_ms,
        images_per_sec_per_gpu: opts.batch as f64 / (step / 1e3),
        single_gpu_step_ms: single_step,
        speedup,
        efficiency: speedup / gpus as f64,
    });
    Ok(vec![single, rec])
}
