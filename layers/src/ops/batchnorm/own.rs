//! Batch normalisation in training mode on cnnbench's own kernels
//! (`--own-bn`, `bn.cu`), in every dtype and layout. With `--fuse-bn` it
//! takes the ReLU after it, forward (and backward where the executor
//! allows), and the residual add with its ReLU, in every dtype and layout:
//! cuDNN's fused kernels take f16 NHWC only. Same parameters and
//! statistics as the cuDNN layer (f32 master values, running averages as
//! PyTorch updates them).

use super::fused::BnFused;
use super::kernels::{BnBwdArgs, BnFwdArgs, BnShape, STAT_ROWS};
use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx, GpuParam};
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuError, GpuResult};
use crate::core::backend::{Layer, ReluFusion};
use crate::core::DType;

pub struct OwnBatchNormGpuLayer {
    shape: BnShape,
    eps: f32,
    momentum: f32,
    gamma: GpuParam,
    beta: GpuParam,
    running_mean: DeviceBuffer,
    running_var: DeviceBuffer,
    /// [`STAT_ROWS`] rows of `c` floats: the saved statistics, the
    /// forward's scale and shift (the fused ReLU's mask in the backward
    /// pass) and the backward's coefficients.
    stats: DeviceBuffer,
    /// Bytes of the reductions' partial sums, which live in the shared
    /// workspace: each pass's launches fill and empty them, so one buffer
    /// serves every layer (77 MiB over ResNet-50's batch norms at 256
    /// when each held its own).
    part_bytes: usize,
    /// It may take what follows it (`--fuse-bn`).
    may_fuse: bool,
    /// With the add fused, it may read its output gradient's two parts
    /// itself instead of their sum (`--own-bn=parts`).
    may_read_parts: bool,
    /// The forward applies the ReLU (a fused ReLU, or the add's).
    relu_fwd: bool,
    /// What the backward pass runs besides the batch norm.
    bwd: BnFused,
}

impl OwnBatchNormGpuLayer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        shape: BnShape,
        eps: f32,
        momentum: f32,
        gamma: GpuParam,
        beta: GpuParam,
        may_fuse: bool,
        may_read_parts: bool,
    ) -> GpuResult<OwnBatchNormGpuLayer> {
        let s = &gpu.stream;
        let c = shape.c;
        let f32s =
            |v: f32, len: usize| DeviceBuffer::from_bytes(s, &DType::F32.encode(&vec![v; len]));
        Ok(OwnBatchNormGpuLayer {
            shape,
            eps,
            momentum,
            gamma,
            beta,
            running_mean: f32s(0.0, c)?,
            running_var: f32s(1.0, c)?,
            stats: f32s(0.0, STAT_ROWS * c)?,
            part_bytes: 4 * shape.part_floats(),
            may_fuse,
            may_read_parts,
            relu_fwd: false,
            bwd: BnFused::None,
        })
    }
}

impl OwnBatchNormGpuLayer {
    /// The partial sums' place in the shared workspace, which `plan` asked
    /// to hold them.
    fn part(&self, cx: &GpuCtx) -> GpuResult<DevPtr> {
        if cx.workspace.bytes < self.part_bytes {
            return Err(GpuError::invalid(
                "own batch norm",
                format!(
                    "the shared workspace holds {} bytes, the partial sums need {}: the layer ran before the network planned it",
                    cx.workspace.bytes, self.part_bytes
                ),
            ));
        }
        Ok(cx.workspace.ptr as DevPtr)
    }
}

impl<'g> Layer<Cuda<'g>> for OwnBatchNormGpuLayer {
    /// Nothing to choose: the partial sums' bytes, from the shared workspace.
    fn plan(
        &mut self,
        _cx: &mut GpuCtx<'g>,
        _x: &[DevPtr],
        _y: DevPtr,
        _dy: Option<DevPtr>,
        _dx: &mut [Option<DevPtr>],
    ) -> GpuResult<usize> {
        Ok(self.part_bytes)
    }

    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        let part = self.part(cx)?;
        let a = BnFwdArgs {
            x: x[0],
            z: (self.bwd == BnFused::AddRelu).then(|| x[1]),
            y,
            gamma: self.gamma.value.ptr(),
            beta: self.beta.value.ptr(),
            run_mean: self.running_mean.ptr(),
            run_var: self.running_var.ptr(),
            part,
            st: self.stats.ptr(),
            eps: self.eps,
            momentum: self.momentum,
            relu: self.relu_fwd,
        };
        // SAFETY: x, y (and z) hold the layer's tensor, the parameters and
        // running averages c floats, stats its size, and the shared
        // workspace at least the partial sums' (checked by `part`), which
        // nothing else uses while these launches run on the stream.
        unsafe { cx.kernels.bn_fwd(&cx.gpu.stream, &self.shape, &a) }
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let part = self.part(cx)?;
        let a = BnBwdArgs {
            x: x[0],
            dy: dy[0],
            // The second part where the executor let it read both
            // (`takes_gradient_parts`).
            dy2: dy.get(1).copied(),
            y,
            // The add's output gradient: the executor gives a fused layer
            // its buffer (the one the add hands on to z); the launches
            // refuse an add without it.
            dz: dx.get(1).copied().flatten(),
            dx: dx[0],
            gamma: self.gamma.value.ptr(),
            dgamma: self.gamma.grad.ptr(),
            dbeta: self.beta.grad.ptr(),
            part,
            st: self.stats.ptr(),
            mode: self.bwd,
        };
        // SAFETY: as in forward; dx and dz are sized like x; stats holds
        // what this layer's forward pass left.
        unsafe { cx.kernels.bn_bwd(&cx.gpu.stream, &self.shape, &a) }
    }

    /// With `--fuse-bn`: forward always, backward too where the executor
    /// allows it (the mask is recomputed from x, so costs no read).
    fn fuse_relu(&mut self, backward: bool) -> ReluFusion {
        if !self.may_fuse {
            return ReluFusion::None;
        }
        self.relu_fwd = true;
        if backward {
            self.bwd = BnFused::Relu;
            ReluFusion::ForwardBackward
        } else {
            ReluFusion::Forward
        }
    }

    fn fuse_add_relu(&mut self) -> bool {
        if self.may_fuse {
            self.relu_fwd = true;
            self.bwd = BnFused::AddRelu;
        }
        self.may_fuse
    }

    /// With the add fused and `--own-bn=parts`: the block output's two
    /// gradient parts (the next block's convolution's and its add's), which
    /// the sums pass adds as it reads them, saving the executor's sum (a
    /// pass reading both and writing a third tensor).
    fn takes_gradient_parts(&mut self, parts: usize) -> bool {
        self.may_read_parts && self.bwd == BnFused::AddRelu && parts == 2
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        vec![&mut self.gamma, &mut self.beta]
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        vec![&self.gamma, &self.beta]
    }

    fn scratch_bytes(&self) -> usize {
        // The partial sums are in the shared workspace, counted once.
        self.running_mean.bytes() + self.running_var.bytes() + self.stats.bytes()
    }

    fn kernels(&self) -> String {
        let st = self.shape.st.name();
        let layout = if self.shape.nhwc { "nhwc" } else { "nchw" };
        let fused = match (self.relu_fwd, self.bwd) {
            (_, BnFused::AddRelu) => " +add+relu",
            (true, BnFused::Relu) => " +relu",
            (true, _) => " +relu (forward)",
            (false, _) => "",
        };
        format!("cnnbench bn_{layout}_{st}{fused}")
    }
}
