//! `cnnbench check`'s pipeline: one training step of each model on the
//! fast layers and on the reference (the CPU), or on the GPU and on the
//! CPU's fast layers, compared on the loss, every layer's output and
//! every parameter gradient.

use crate::note::note;
use crate::results::compared::Compared;
use crate::results::memory::Available;
use anyhow::{bail, Result};
use cnnbench_kernels::conv::reference::rel_l2_error;
use cnnbench_kernels::Isa;
use cnnbench_layers::cuda::nvrtc::Kernels;
use cnnbench_layers::cuda::{Gpu, GpuResult};
use cnnbench_layers::net::compare;
use cnnbench_layers::net::cpu::{CpuNet, CpuOptions};
use cnnbench_layers::net::gpu::{GpuNet, GpuOptions};
use cnnbench_layers::net::Graph;
use cnnbench_layers::{DType, Layout};

/// Relative L2 error allowed per layer output and per parameter gradient,
/// each computed from the same inputs: the fp32 threshold of one layer
/// (`conv --check`: 1e-5), times 10 for the end-to-end loss and for the
/// long sums of batch norm and the classifier. Correct layers here show
/// 1e-7 to 1e-5; a real mistake gives errors of order 1.
pub const NETWORK_TOLERANCE: f64 = 1e-4;

/// The GPU's thresholds against the CPU, per dtype, on the same relative
/// L2 errors. f32 allows for cuDNN's FFT and Winograd algorithms, which
/// round differently from direct summation; tf32 and f16 round every
/// product's inputs to 10 mantissa bits (2^-11), bf16 to 7 (2^-8), and a
/// layer's output adds its own rounding to the storage type. A real
/// mistake gives errors of order 1.
pub fn gpu_tolerance(d: DType) -> f64 {
    match d {
        DType::F32 => 1e-3,
        DType::Tf32 | DType::F16 => 1e-2,
        DType::Bf16 => 5e-2,
    }
}

/// The CPU side holds two networks (fast and reference, or the CPU's
/// beside the device's copies of what it compares): refuse in one line
/// what cannot fit, before anything is allocated.
pub fn check_host_memory(
    graphs: &[Graph],
    batch: usize,
    threads: usize,
    avail: Option<Available>,
) -> Result<()> {
    for g in graphs {
        // Both networks hold their tensors; only the fast one plans; the
        // reference's parameter gradients are copied to compare
        // (`compare_cpu`: AlexNet's are 244 MB, and aborted a check that
        // passed without them).
        let e = cnnbench_layers::net::cpu::estimate(g, batch, threads);
        let need = e.held.saturating_mul(2) + e.plans + g.params() as u128 * 4;
        if let Some(a) = avail.filter(|a| need > a.bytes / 10 * 9) {
            bail!(
                "{} at batch {}: the check needs about {} of host memory, but only {}",
                g.name,
                batch,
                crate::results::memory::size(need as u128),
                a.describe()
            );
        }
    }
    Ok(())
}

/// What every model is checked with.
pub struct Request {
    /// Images per step.
    pub batch: usize,
    /// Seed of the weights, images and labels.
    pub seed: u64,
    /// The GPU's precision and activation layout.
    pub dtype: DType,
    pub layout: Layout,
    /// The optional GPU paths the checked step takes.
    pub paths: cnnbench_layers::cuda::GpuPaths,
}

/// Checks each model in turn, on `gpu` against the CPU or, without one,
/// the CPU's fast layers against the reference (`threads`: the CPU's, for
/// the note); a stop signal ends it after the model being checked. Every
/// compared tensor, and how many models were checked.
pub fn run(
    graphs: &[Graph],
    gpu: Option<Gpu>,
    req: &Request,
    threads: usize,
) -> Result<(Vec<Compared>, usize)> {
    let (dtype, layout) = (req.dtype, req.layout);
    let stopped = || crate::signals::stopped();
    let mut checked = 0;
    let mut all = Vec::new();
    if let Some(gpu) = gpu {
        crate::driver::gpu::dtype_supported(&gpu.info.compute_capability, dtype)?;
        for g in graphs {
            cnnbench_layers::net::gpu::within_tensor_limit(g, req.batch)
                .map_err(|e| anyhow::anyhow!("{} on the GPU: {e}", g.name))?;
        }
        let cc = crate::driver::model::gpu::compute_capability(&gpu.info.compute_capability);
        let kernels = cnnbench_layers::ops::cuda_programs::compile_kernels(&gpu.ctx, cc)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for g in graphs.iter().take_while(|_| !stopped()) {
            note!(
                "cnnbench: checking {} at batch {} on {} ({dtype}, {layout}) against the CPU",
                g.name,
                req.batch,
                gpu.info.name
            );
            let opts = GpuOptions {
                dtype,
                layout,
                seed: req.seed,
                workspace_limit: crate::driver::conv::DEFAULT_WORKSPACE_LIMIT,
                per_layer: false,
                paths: req.paths,
            };
            let found = compare_gpu(&gpu, &kernels, g, req.batch, opts)
                .map_err(|e| anyhow::anyhow!("{} on the GPU: {e}", g.name))?;
            all.extend(found);
            checked += 1;
        }
    } else {
        for g in graphs.iter().take_while(|_| !stopped()) {
            note!(
                "cnnbench: checking {} at batch {} on the CPU ({threads} threads; the reference is slow)",
                g.name, req.batch
            );
            all.extend(
                compare_cpu(g, req.batch, req.seed)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", g.name))?,
            );
            checked += 1;
        }
    }
    Ok((all, checked))
}

fn compared(model: &str, tensor: String, rel_err: f64, tolerance: f64) -> Compared {
    Compared {
        model: model.into(),
        tensor,
        rel_err,
        tolerance,
        // NaN (a tensor left unwritten) fails.
        passed: rel_err <= tolerance,
    }
}

/// One training step on the GPU and on the CPU's fast layers, compared as
/// `compare_cpu` compares the CPU's: the loss end to end, then each GPU
/// layer on the CPU's inputs and output gradients; with `--cuda-graph`,
/// then the step replayed from its captured graph.
fn compare_gpu(
    gpu: &Gpu,
    kernels: &Kernels,
    g: &Graph,
    batch: usize,
    opts: GpuOptions,
) -> GpuResult<Vec<Compared>> {
    let tol = gpu_tolerance(opts.dtype);
    let mut cpu = CpuNet::new(
        g,
        batch,
        CpuOptions {
            isa: Isa::detect(),
            reference: false,
            seed: opts.seed,
            // Each GPU layer is compared with its own CPU layer's output.
            fuse_relu: false,
        },
    )?;
    cpu.forward()?;
    cpu.backward()?;
    let mut dev = GpuNet::new(gpu, kernels, g, batch, opts)?;
    let mut out = Vec::new();
    for p in compare::outputs(&mut dev, &cpu)? {
        let err = rel_l2_error(&p.got, &p.want);
        out.push(compared(&g.name, p.tensor, err, tol));
    }
    let scale = |parts: &[&[f32]]| compare::loss_scale(opts.dtype, parts);
    let grads = compare::gradients(&mut dev, &mut cpu, scale)?;
    let rms = compare::rms_of(grads.iter().map(|p| &p.want[..]));
    for p in grads {
        // A gradient the GPU did not produce is an error, not a pass.
        let err = if p.got.is_empty() {
            f64::NAN
        } else {
            compare::grad_error(&p.got, &p.want, rms)
        };
        out.push(compared(&g.name, p.tensor, err, tol));
    }
    if opts.paths.cuda_graph {
        // The step replayed from its CUDA graph: its loss against the
        // CPU's, its gradients against the eager step's on this GPU.
        for p in cnnbench_layers::net::cuda_graph::replayed_against_eager(&mut dev, &cpu)? {
            let err = match p.tensor.starts_with("loss") {
                true => rel_l2_error(&p.got, &p.want),
                false => compare::grad_error(&p.got, &p.want, rms),
            };
            out.push(compared(&g.name, p.tensor, err, tol));
        }
    }
    Ok(out)
}

/// One training step of the fast network and of the reference network,
/// compared tensor by tensor.
fn compare_cpu(g: &Graph, batch: usize, seed: u64) -> GpuResult<Vec<Compared>> {
    let opts = |reference| CpuOptions {
        isa: Isa::detect(),
        reference,
        seed,
        fuse_relu: !reference,
    };
    let mut fast = CpuNet::new(g, batch, opts(false))?;
    let mut slow = CpuNet::new(g, batch, opts(true))?;
    let mut out = Vec::new();
    let mut push = |tensor: String, rel_err: f64| {
        out.push(compared(&g.name, tensor, rel_err, NETWORK_TOLERANCE))
    };
    // End to end: the loss of each network run on its own.
    fast.forward()?;
    slow.forward()?;
    let (lf, ls) = (fast.loss()?, slow.loss()?);
    push("loss (end to end)".into(), rel_l2_error(&[lf], &[ls]));
    // Layer by layer: each reference layer reads the fast network's inputs
    // and output gradients (see `CpuNet::forward_from`).
    let errs = slow.forward_from(&fast)?;
    for (i, e) in errs.iter().enumerate().skip(1) {
        // A fused layer's own output is not formed: its ReLU's row checks
        // the fused output, named for every layer in it.
        let Some(e) = *e else { continue };
        let name = fast.fused_name(i);
        push(format!("{name}.output"), e);
    }
    fast.backward()?;
    slow.backward_from(&fast)?;
    let want: Vec<Vec<f32>> = slow.params_mut().iter().map(|p| p.grad.clone()).collect();
    let rms = compare::rms_of(want.iter().map(|g| &g[..]));
    for ((name, p), w) in fast.named_params().into_iter().zip(&want) {
        push(format!("{name}.grad"), compare::grad_error(&p.grad, w, rms));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_runs_scale_gradients_by_a_power_of_two() {
        let parts: [&[f32]; 2] = [&[1e-6, -3e-6], &[2e-6]];
        assert_eq!(compare::loss_scale(DType::F32, &parts), 1.0);
        let s = compare::loss_scale(DType::F16, &parts);
        assert_eq!(s.log2().fract(), 0.0, "{s}");
        let top = 3e-6 * s;
        assert!((1.0 / 32.0..=1.0 / 16.0).contains(&top), "{top}");
        assert_eq!(compare::loss_scale(DType::Bf16, &[&[0.0]]), 1.0);
    }

    #[test]
    fn tolerances_widen_with_lower_precision() {
        let t: Vec<f64> = DType::ALL.iter().map(|&d| gpu_tolerance(d)).collect();
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
        assert!(NETWORK_TOLERANCE < gpu_tolerance(DType::F32));
    }
}
