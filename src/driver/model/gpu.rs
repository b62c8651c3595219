//! `cnnbench model --device gpu`: whole models on cuDNN and cuBLAS, timed
//! with CUDA events on the benchmark stream (GPU time per phase, and per
//! layer with `--per-layer`).

use super::graph_steps::{graph_record, GraphSteps};
use super::input::DataPlan;
use super::options::StepOptions;
use super::record::{base_record, RunKind};
use super::steps::{time_steps, NetSteps};
use super::timed::RowTraffic;
use crate::bench::RunPolicy;
use crate::driver::gpu::dtype_supported;
use crate::note::note;
use crate::results::{Environment, MemoryBytes, ModelRecord};
use anyhow::{Context, Result};
use cnnbench_kernels::Isa;
use cnnbench_layers::cuda::nvrtc::Kernels;
use cnnbench_layers::cuda::{Gpu, GpuError};
use cnnbench_layers::net::gpu::{estimate, GpuNet, GpuOptions};
use cnnbench_layers::net::traffic::row_traffic;
use cnnbench_layers::net::Graph;
use cnnbench_layers::{DType, Layout};

pub const TIMER: &str =
    "CUDA events recorded around each phase (and layer, with --per-layer) on one non-blocking stream (GPU time)";

/// What is decided once for every model of a run.
pub struct Setup {
    gpu: Gpu,
    kernels: Kernels,
    dtype: DType,
    layout: Layout,
    workspace_limit: usize,
}

impl Setup {
    /// Checks the dtype against the GPU and compiles the NVRTC kernels
    /// (once, for every model).
    pub fn new(gpu: Gpu, dtype: DType, layout: Layout, workspace_limit: usize) -> Result<Setup> {
        dtype_supported(&gpu.info.compute_capability, dtype)?;
        let cc = compute_capability(&gpu.info.compute_capability);
        let kernels = cnnbench_layers::ops::cuda_programs::compile_kernels(&gpu.ctx, cc)
            .context("compiling the CUDA kernels")?;
        Ok(Setup {
            gpu,
            kernels,
            dtype,
            layout,
            workspace_limit,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn workspace_limit(&self) -> usize {
        self.workspace_limit
    }

    pub fn environment(&self, threads: usize, isa: Isa) -> Environment {
        Environment {
            gpu: Some(self.gpu.info.clone()),
            ..Environment::here(threads, isa.name().into(), None, TIMER)
        }
    }

    /// Where and in which precision and layout the models run.
    pub fn labels(&self) -> RunKind {
        (crate::results::Device::Gpu, self.dtype, self.layout.name())
    }
}

pub use cnnbench_layers::cuda::device::compute_capability;

fn gpu_err(e: GpuError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Times one model on the GPU; an `OOM` record when it does not fit, and
/// `None` when interrupted.
pub fn run(
    s: &Setup,
    g: &Graph,
    opts: &StepOptions,
    data: Option<&DataPlan>,
    policy: RunPolicy,
    bar: &indicatif::ProgressBar,
) -> Result<Option<ModelRecord>> {
    let oom = |why: String| {
        note!(
            "cnnbench: {} at batch {} on the GPU: {why}: OOM",
            g.name,
            opts.batch
        );
        Ok(Some(base_record(g, opts.batch, "OOM", s.labels())))
    };
    let need = estimate(g, opts.batch, s.dtype);
    let free = s.gpu.free_memory().map_err(gpu_err)? as u128;
    if need > free / 10 * 9 {
        return oom(format!(
            "needs about {:.1} GiB, more than the 90% a run may take of {:.1} GiB free",
            need as f64 / (1u128 << 30) as f64,
            free as f64 / (1u128 << 30) as f64
        ));
    }
    bar.set_message(format!("{}: choosing convolution algorithms", g.name));
    let gpu_opts = GpuOptions {
        dtype: s.dtype,
        layout: s.layout,
        seed: opts.seed,
        workspace_limit: s.workspace_limit,
        per_layer: opts.per_layer,
        paths: opts.paths,
    };
    let net = match GpuNet::new(&s.gpu, &s.kernels, g, opts.batch, gpu_opts) {
        Ok(n) => n,
        Err(e) if e.oom => return oom(e.to_string()),
        Err(e) => return Err(gpu_err(e)).context(format!("{} on the GPU", g.name)),
    };
    let mut steps = NetSteps {
        net,
        update: opts.update,
        hook: None,
        feed: data.map(|d| d.start(g, opts.batch)).transpose()?,
    };
    let timed = match time_steps(g, &mut steps, policy, bar) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) => return Err(e).context(format!("{} on the GPU", g.name)),
    };
    // `--cuda-graph`: the same steps replayed from one captured graph,
    // timed after the eager ones under the same policy.
    let mut graph = None;
    if opts.paths.cuda_graph {
        bar.set_message(format!("{}: capturing the step as a CUDA graph", g.name));
        let mut replayed = GraphSteps {
            steps: &mut steps,
            graph: None,
        };
        graph = match time_steps(g, &mut replayed, policy, bar) {
            Ok(Some(t)) => Some((t, replayed.bytes())),
            Ok(None) => return Ok(None),
            Err(e) => return Err(e).context(format!("{} on the GPU, as a CUDA graph", g.name)),
        };
    }
    // The record's main numbers: the graph's steps where there are some.
    let (main, graph_bytes) = graph.as_ref().map_or((&timed, 0), |(t, b)| (t, *b));
    let net = &steps.net;
    let m = net.memory();
    let mem = MemoryBytes {
        params: m.params,
        activations: m.activations,
        workspace: m.workspace + graph_bytes,
        total: m.params + m.activations + m.workspace + graph_bytes,
    };
    let loss = net.loss().map_err(gpu_err)?;
    let mut base = base_record(g, opts.batch, "ok", s.labels());
    base.gpu_paths = opts.paths.record_name();
    // `--fuse-bn`: what the batch norms took (`relu`, `add+relu`).
    base.fused = net.fused_names();
    if let Some(feed) = &steps.feed {
        base.input = feed.record(main);
        feed.note_skipped(&g.name);
    }
    let traffic = opts.per_layer.then(|| RowTraffic {
        rows: row_traffic(g, net),
        element_bytes: s.dtype.size_bytes(),
    });
    let rec = main.record(
        g,
        opts,
        base,
        loss,
        mem,
        |i| net.kernels(i),
        traffic.as_ref(),
        1,
    );
    Ok(Some(match graph {
        Some(_) => graph_record(rec, &timed),
        None => rec,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_capability_parses() {
        assert_eq!(compute_capability("9.0"), (9, 0));
        assert_eq!(compute_capability("12.1"), (12, 1));
        assert_eq!(compute_capability("?"), (0, 0));
    }
}
