//! ReLU on cuDNN's activation forward and backward.

use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{ActivationDesc, SCALARS};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{check_cudnn, GpuResult};
use crate::core::backend::Layer;

pub struct ReluGpuLayer {
    t: TensorDesc,
    act: ActivationDesc,
}

impl ReluGpuLayer {
    pub fn new(t: TensorDesc) -> GpuResult<ReluGpuLayer> {
        Ok(ReluGpuLayer {
            t,
            act: ActivationDesc::relu()?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for ReluGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x and y hold the described tensor.
        check_cudnn("cudnnActivationForward", unsafe {
            sys::cudnnActivationForward(
                cx.cudnn(),
                self.act.0,
                SCALARS.one(),
                self.t.0,
                void(x[0]),
                SCALARS.zero(),
                self.t.0,
                void(y),
            )
        })
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dy = dy[0];
        let Some(dx) = dx[0] else { return Ok(()) };
        // SAFETY: every tensor is the described one.
        check_cudnn("cudnnActivationBackward", unsafe {
            sys::cudnnActivationBackward(
                cx.cudnn(),
                self.act.0,
                SCALARS.one(),
                self.t.0,
                void(y),
                self.t.0,
                void(dy),
                self.t.0,
                void(x[0]),
                SCALARS.zero(),
                self.t.0,
                void(dx),
            )
        })
    }

    fn kernels(&self) -> String {
        "cudnn activation relu".into()
    }
}
