//! Batch normalisation in training mode on cuDNN: batch statistics, the
//! running averages updated, and the saved mean and inverse deviation
//! reused by the backward pass. Scale, shift and statistics are fp32 for
//! every data type (cuDNN's rule for half data), so they are the master
//! parameters themselves.
//!
//! The `Ex` entry points run, as PyTorch calls them: only they reach
//! cuDNN's persistent NHWC kernels, which need a workspace and a reserve
//! space kept from the forward pass to the backward. Both are sized and
//! allocated once, here.

use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx, GpuParam};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{bn_epsilon, bn_mode, SCALARS};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{check_cudnn, DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::Layer;
use crate::core::{DType, Layout};

pub struct BatchNormGpuLayer {
    x: TensorDesc,
    param: TensorDesc,
    mode: sys::cudnnBatchNormMode_t,
    eps: f64,
    momentum: f64,
    gamma: GpuParam,
    beta: GpuParam,
    running_mean: DeviceBuffer,
    running_var: DeviceBuffer,
    save_mean: DeviceBuffer,
    save_invstd: DeviceBuffer,
    /// cuDNN always writes dx: where it goes when nothing needs it.
    dx_sink: Option<DeviceBuffer>,
    workspace: DeviceBuffer,
    reserve: DeviceBuffer,
}

const OPS: sys::cudnnBatchNormOps_t = sys::cudnnBatchNormOps_t::CUDNN_BATCHNORM_OPS_BN;

impl BatchNormGpuLayer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        [n, c, h, w]: [usize; 4],
        dtype: DType,
        layout: Layout,
        eps: f32,
        momentum: f32,
        gamma: GpuParam,
        beta: GpuParam,
        input_grad: bool,
    ) -> GpuResult<BatchNormGpuLayer> {
        let x = TensorDesc::new(layout, dtype, n, c, h, w)?;
        let mode = bn_mode(layout);
        let param = TensorDesc::derived_bn(&x, mode)?;
        let s = &gpu.stream;
        let f32s = |v: f32| -> GpuResult<DeviceBuffer> {
            DeviceBuffer::from_bytes(s, &DType::F32.encode(&vec![v; c]))
        };
        let (ws, reserve) = scratch_sizes(gpu, &x, &param, mode)?;
        let dx_sink = if input_grad {
            None
        } else {
            Some(DeviceBuffer::alloc(s, n * c * h * w * dtype.size_bytes())?)
        };
        Ok(BatchNormGpuLayer {
            x,
            param,
            mode,
            eps: bn_epsilon(eps),
            momentum: momentum as f64,
            gamma,
            beta,
            running_mean: f32s(0.0)?,
            running_var: f32s(1.0)?,
            save_mean: f32s(0.0)?,
            save_invstd: f32s(0.0)?,
            dx_sink,
            workspace: DeviceBuffer::alloc(s, ws)?,
            reserve: DeviceBuffer::alloc(s, reserve)?,
        })
    }
}

/// The workspace (the larger of the two passes') and the reserve space the
/// `Ex` calls want.
fn scratch_sizes(
    gpu: &Gpu,
    x: &TensorDesc,
    param: &TensorDesc,
    mode: sys::cudnnBatchNormMode_t,
) -> GpuResult<(usize, usize)> {
    let h = gpu.cudnn.0;
    let null_act = std::ptr::null_mut();
    let null_t = std::ptr::null_mut();
    let (mut fwd, mut bwd, mut reserve) = (0usize, 0usize, 0usize);
    // SAFETY: valid handle and descriptors; no z tensor or activation
    // (plain batch norm); out-pointers to locals.
    unsafe {
        check_cudnn(
            "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize",
            sys::cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
                h, mode, OPS, x.0, null_t, x.0, param.0, null_act, &mut fwd,
            ),
        )?;
        check_cudnn(
            "cudnnGetBatchNormalizationBackwardExWorkspaceSize",
            sys::cudnnGetBatchNormalizationBackwardExWorkspaceSize(
                h, mode, OPS, x.0, x.0, x.0, null_t, x.0, param.0, null_act, &mut bwd,
            ),
        )?;
        check_cudnn(
            "cudnnGetBatchNormalizationTrainingExReserveSpaceSize",
            sys::cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
                h,
                mode,
                OPS,
                null_act,
                x.0,
                &mut reserve,
            ),
        )?;
    }
    Ok((fwd.max(bwd), reserve))
}

impl<'g> Layer<Cuda<'g>> for BatchNormGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x and y hold the described tensor; the statistics and
        // parameters hold C floats; workspace and reserve were sized for
        // these descriptors.
        check_cudnn("cudnnBatchNormalizationForwardTrainingEx", unsafe {
            sys::cudnnBatchNormalizationForwardTrainingEx(
                cx.cudnn(),
                self.mode,
                OPS,
                SCALARS.one(),
                SCALARS.zero(),
                self.x.0,
                void(x[0]),
                std::ptr::null_mut(),
                std::ptr::null(),
                self.x.0,
                void(y),
                self.param.0,
                self.gamma.value.as_void(),
                self.beta.value.as_void(),
                self.momentum,
                self.running_mean.as_void(),
                self.running_var.as_void(),
                self.eps,
                self.save_mean.as_void(),
                self.save_invstd.as_void(),
                std::ptr::null_mut(),
                self.workspace.as_void(),
                self.workspace.bytes(),
                self.reserve.as_void(),
                self.reserve.bytes(),
            )
        })
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        _y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dy = dy[0];
        let dx = dx[0].unwrap_or_else(|| self.dx_sink.as_ref().map_or(0, |b| b.ptr()));
        // SAFETY: as in `forward`; dx is sized like x; the reserve space
        // holds what this layer's forward left.
        check_cudnn("cudnnBatchNormalizationBackwardEx", unsafe {
            sys::cudnnBatchNormalizationBackwardEx(
                cx.cudnn(),
                self.mode,
                OPS,
                SCALARS.one(),
                SCALARS.zero(),
                SCALARS.one(),
                SCALARS.zero(),
                self.x.0,
                void(x[0]),
                std::ptr::null_mut(),
                std::ptr::null(),
                self.x.0,
                void(dy),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                self.x.0,
                void(dx),
                self.param.0,
                self.gamma.value.as_void(),
                self.beta.value.as_void(),
                self.gamma.grad.as_void(),
                self.beta.grad.as_void(),
                self.eps,
                self.save_mean.as_void(),
                self.save_invstd.as_void(),
                std::ptr::null_mut(),
                self.workspace.as_void(),
                self.workspace.bytes(),
                self.reserve.as_void(),
                self.reserve.bytes(),
            )
        })
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        vec![&mut self.gamma, &mut self.beta]
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        vec![&self.gamma, &self.beta]
    }

    fn scratch_bytes(&self) -> usize {
        4 * self.running_mean.bytes()
            + self.dx_sink.as_ref().map_or(0, |b| b.bytes())
            + self.workspace.bytes()
            + self.reserve.bytes()
    }

    fn kernels(&self) -> String {
        format!("cudnn batchnorm {:?}", self.mode)
            .replace("CUDNN_BATCHNORM_", "")
            .to_lowercase()
    }
}
