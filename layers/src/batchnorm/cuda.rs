//! Batch normalisation in training mode on cuDNN: batch statistics, the
//! running averages updated, and the saved mean and inverse deviation
//! reused by the backward pass. Scale, shift and statistics are fp32 for
//! every data type (cuDNN's rule for half data), so they are the master
//! parameters themselves.

use crate::cuda::cudnn::TensorDesc;
use crate::cuda::cudnn_ops::{bn_epsilon, bn_mode, SCALARS};
use crate::cuda::{check_cudnn, DeviceBuffer, Gpu, GpuResult};
use crate::net::gpu_layer::{void, DevPtr, GpuCtx, GpuLayer, GpuParam};
use crate::{DType, Layout};
use cudarc::cudnn::sys;

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
}

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
        })
    }
}

impl GpuLayer for BatchNormGpuLayer {
    fn forward(&mut self, cx: &GpuCtx, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x and y hold the described tensor; the statistics and
        // parameters hold C floats.
        check_cudnn("cudnnBatchNormalizationForwardTraining", unsafe {
            sys::cudnnBatchNormalizationForwardTraining(
                cx.cudnn(),
                self.mode,
                SCALARS.one(),
                SCALARS.zero(),
                self.x.0,
                void(x[0]),
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
            )
        })
    }

    fn backward(
        &mut self,
        cx: &GpuCtx,
        x: &[DevPtr],
        _y: DevPtr,
        dy: DevPtr,
        dx: &[Option<DevPtr>],
    ) -> GpuResult<()> {
        let dx = dx[0].unwrap_or_else(|| self.dx_sink.as_ref().map_or(0, |b| b.ptr()));
        // SAFETY: as in `forward`; dx is sized like x.
        check_cudnn("cudnnBatchNormalizationBackward", unsafe {
            sys::cudnnBatchNormalizationBackward(
                cx.cudnn(),
                self.mode,
                SCALARS.one(),
                SCALARS.zero(),
                SCALARS.one(),
                SCALARS.zero(),
                self.x.0,
                void(x[0]),
                self.x.0,
                void(dy),
                self.x.0,
                void(dx),
                self.param.0,
                self.gamma.value.as_void(),
                self.gamma.grad.as_void(),
                self.beta.grad.as_void(),
                self.eps,
                self.save_mean.as_void(),
                self.save_invstd.as_void(),
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
        4 * self.running_mean.bytes() + self.dx_sink.as_ref().map_or(0, |b| b.bytes())
    }

    fn kernels(&self) -> String {
        format!("cudnn batchnorm {:?}", self.mode)
            .replace("CUDNN_BATCHNORM_", "")
            .to_lowercase()
    }
}
