//! The GPU half of the executor: [`GpuNet`] is the one [`Executor`] on the
//! [`Cuda`] backend, every tensor on the device in the run's dtype and
//! layout, with the CUDA layer of each op, the memory estimate made before
//! allocating, and the algorithm search before the first step.
//!
//! The graph and buffer plan are the CPU's ([`super::plan::BufferPlan`]);
//! gradients of a tensor read by several layers are summed by cuDNN's
//! op-tensor into a buffer of their own before its producer's backward.

use super::exec::{ExecOptions, Executor};
use super::graph::Graph;
use super::plan::BufferPlan;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::cudnn;
use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::nvrtc::Kernels;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuPaths, GpuResult};
use crate::core::{DType, Layout};

pub use super::exec::{Memory as GpuMemory, StepMs};

#[derive(Clone, Copy, Debug)]
pub struct GpuOptions {
    pub dtype: DType,
    pub layout: Layout,
    pub seed: u64,
    /// The most workspace a convolution algorithm may use.
    pub workspace_limit: usize,
    /// Time every layer with CUDA events (`--per-layer`).
    pub per_layer: bool,
    /// The optional paths the run takes (all off by default).
    pub paths: GpuPaths,
}

pub type GpuNet<'g> = Executor<Cuda<'g>>;

/// Device bytes [`GpuNet::new`] allocates for activations, gradients and
/// parameters: the memory check made before allocating.
pub fn estimate(graph: &Graph, batch: usize, dtype: DType) -> u128 {
    let plan = BufferPlan::new(graph, batch, |_| false);
    let es = dtype.size_bytes() as u128;
    let half = matches!(dtype, DType::F16 | DType::Bf16);
    let params = graph.params() as u128 * if half { 16 } else { 12 };
    let elems: u128 = plan
        .act_len
        .iter()
        .chain(&plan.grad_len)
        .map(|&l| l as u128)
        .sum();
    params + elems * es
}

/// Whether cuDNN takes every activation of `graph` at `batch` (each under
/// 2^31 elements, [`cudnn::MAX_TENSOR_ELEMENTS`]); if not, the first layer
/// over the limit and why, in one line.
pub fn within_tensor_limit(graph: &Graph, batch: usize) -> Result<(), String> {
    for n in &graph.nodes {
        let d = n.out;
        cudnn::within_tensor_limit([batch, d.c, d.h, d.w])
            .map_err(|e| format!("layer {} at batch {batch}: {e}", n.name))?;
    }
    Ok(())
}

impl<'g> Executor<Cuda<'g>> {
    /// Allocates every tensor, makes every layer with the same initial
    /// parameters, image and labels as the CPU's ([`super::init`]), and chooses
    /// each convolution's algorithms on its own tensors.
    pub fn new(
        gpu: &'g Gpu,
        kernels: &'g Kernels,
        graph: &Graph,
        batch: usize,
        opts: GpuOptions,
    ) -> GpuResult<GpuNet<'g>> {
        let backend = Cuda::new(gpu, kernels, opts.dtype, opts.layout, opts.paths)?;
        let cx = backend.ctx(opts.seed, opts.workspace_limit);
        let exec = ExecOptions {
            seed: opts.seed,
            per_layer: opts.per_layer,
            // `--fuse-bn`: the batch norm takes the ReLU after it, and
            // (unless `--fuse-bn=relu`) the residual add before that ReLU,
            // where cuDNN's fused kernels apply (see ops::batchnorm::cuda);
            // `--own-kernels`: an add not taken so takes its ReLU forward.
            fuse_relu: opts.paths.fuse_bn || opts.paths.own_kernels,
            fuse_add: opts.paths.fuse_bn && !opts.paths.fuse_bn_relu_only,
        };
        let mut net = Executor::build(backend, cx, graph, batch, exec)?;
        net.choose_algorithms(opts.workspace_limit)?;
        Ok(net)
    }

    /// Each layer's `plan` (the convolutions' FindEx) with a search
    /// workspace as large as the limit (halved until it fits), then one
    /// shared workspace of what the choices need.
    fn choose_algorithms(&mut self, mut limit: usize) -> GpuResult<()> {
        let gpu = self.backend.gpu;
        let search = loop {
            match DeviceBuffer::alloc(&gpu.stream, limit) {
                Ok(b) => break b,
                Err(e) if e.oom && limit > (16 << 20) => limit /= 2,
                Err(e) => return Err(e),
            }
        };
        self.cx.workspace = Workspace {
            ptr: search.as_void(),
            bytes: search.bytes(),
        };
        self.cx.workspace_limit = limit;
        let need = self.plan_layers();
        self.cx.workspace = Workspace::NONE;
        drop(search);
        let shared = DeviceBuffer::alloc(&gpu.stream, need?)?;
        self.cx.workspace = Workspace {
            ptr: shared.as_void(),
            bytes: shared.bytes(),
        };
        self.cx.workspace_buf = Some(shared);
        gpu.synchronize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo;

    #[test]
    fn device_estimate_counts_half_copies() {
        let g = zoo::build("resnet50").expect("zoo model");
        let f32b = estimate(&g, 16, DType::F32);
        let f16b = estimate(&g, 16, DType::F16);
        // Activations halve; parameters gain a half copy and its gradient.
        assert!(f16b < f32b);
        let p = g.params() as u128;
        assert_eq!(f32b - p * 12, 2 * (f16b - p * 16));
    }

    #[test]
    fn tensors_past_cudnns_limit_are_named_before_allocating() {
        let g = zoo::build("resnet50").expect("zoo model");
        assert!(within_tensor_limit(&g, 1024).is_ok());
        // conv1's output: 4096 x 64 x 112 x 112 = 3.3e9 elements.
        let e = within_tensor_limit(&g, 4096).unwrap_err();
        assert!(
            e.starts_with("layer conv1 at batch 4096: a 4096x64x112x112 tensor"),
            "{e}"
        );
    }
}
