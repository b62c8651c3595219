//! `cnnbench model` on the CPU: whole models on the crate's own layers,
//! each phase and layer timed on the host clock.

use super::input::DataPlan;
use super::options::StepOptions;
use super::record::{base_record, CPU};
use super::steps::{time_steps, NetSteps};
use super::timed::RowTraffic;
use crate::bench::RunPolicy;
use crate::results::memory::available;
use crate::results::{MemoryBytes, ModelRecord};
use anyhow::Result;
use cnnbench_kernels::Isa;
use cnnbench_layers::net::cpu::{estimate, CpuNet, CpuOptions};
use cnnbench_layers::net::traffic::row_traffic;
use cnnbench_layers::net::Graph;

/// Why `g` at `batch` does not fit in the host memory available (its
/// estimate, without fusion, is more than 90% of it), or `None`. The run
/// asks it of every model before the first one runs.
pub fn does_not_fit(g: &Graph, batch: usize) -> Option<String> {
    let threads = rayon::current_num_threads();
    let need = estimate(g, batch, threads).total();
    let avail = available(threads)?;
    (need > avail.bytes / 10 * 9).then(|| {
        format!(
            "needs about {}, more than the 90% a run may take of {}",
            crate::results::memory::size(need),
            avail.describe()
        )
    })
}

/// The `OOM` row of a model that [`does_not_fit`].
pub fn oom_record(g: &Graph, batch: usize) -> ModelRecord {
    base_record(g, batch, "OOM", CPU)
}

/// Times one model (one that fits: see [`does_not_fit`]); `None` when
/// interrupted before it finished.
pub fn run(
    g: &Graph,
    opts: &StepOptions,
    data: Option<&DataPlan>,
    policy: RunPolicy,
    isa: Isa,
    bar: &indicatif::ProgressBar,
) -> Result<Option<ModelRecord>> {
    let cpu_opts = CpuOptions {
        isa,
        reference: false,
        seed: opts.seed,
        fuse_relu: opts.fuse_relu,
    };
    let mut steps = NetSteps {
        net: CpuNet::new(g, opts.batch, cpu_opts)
            .map_err(|e| anyhow::anyhow!("{}: {e}", g.name))?,
        update: opts.update,
        hook: None,
        feed: data.map(|d| d.start(g, opts.batch)).transpose()?,
    };
    // The first step always runs untimed: it times the convolution
    // algorithms of each layer and keeps the fastest.
    let Some(timed) = time_steps(g, &mut steps, policy, bar)? else {
        return Ok(None);
    };
    let net = &steps.net;
    let mem = net.memory();
    let mem = MemoryBytes {
        params: mem.params,
        activations: mem.activations,
        workspace: mem.workspace,
        total: mem.total(),
    };
    let mut base = base_record(g, opts.batch, "ok", CPU);
    base.fused = net.fused_names();
    if let Some(feed) = &steps.feed {
        base.input = feed.record(&timed);
        feed.note_skipped(&g.name);
    }
    let loss = net.loss().map_err(|e| anyhow::anyhow!("{e}"))?;
    let traffic = opts.per_layer.then(|| RowTraffic {
        rows: row_traffic(g, net),
        element_bytes: CPU.1.size_bytes(),
    });
    Ok(Some(timed.record(
        g,
        opts,
        base,
        loss,
        mem,
        |i| net.kernels(i),
        traffic.as_ref(),
        1,
    )))
}
