//! The residual add on cuDNN's op-tensor. Its backward hands the output
//! gradient to both inputs unchanged, which the executor does by sharing
//! the buffer, so it has no backward work.

use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{OpTensorDesc, SCALARS};
use crate::backend::cuda::layer::{void, DevPtr, GpuCtx, GpuLayer};
use crate::backend::cuda::{check_cudnn, GpuResult};
use cudarc::cudnn::sys;

pub struct AddGpuLayer {
    t: TensorDesc,
    op: OpTensorDesc,
}

impl AddGpuLayer {
    pub fn new(t: TensorDesc) -> GpuResult<AddGpuLayer> {
        Ok(AddGpuLayer {
            t,
            op: OpTensorDesc::add()?,
        })
    }
}

/// `c = a + b` in one op-tensor call (the executor sums gradients with it
/// too).
pub fn add_into(
    cx: &GpuCtx,
    t: &TensorDesc,
    op: &OpTensorDesc,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
) -> GpuResult<()> {
    // SAFETY: a, b and c hold the described tensor.
    check_cudnn("cudnnOpTensor", unsafe {
        sys::cudnnOpTensor(
            cx.cudnn(),
            op.0,
            SCALARS.one(),
            t.0,
            void(a),
            SCALARS.one(),
            t.0,
            void(b),
            SCALARS.zero(),
            t.0,
            void(c),
        )
    })
}

impl GpuLayer for AddGpuLayer {
    fn forward(&mut self, cx: &GpuCtx, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        add_into(cx, &self.t, &self.op, x[0], x[1], y)
    }

    fn backward(
        &mut self,
        _cx: &GpuCtx,
        _x: &[DevPtr],
        _y: DevPtr,
        _dy: DevPtr,
        _dx: &[Option<DevPtr>],
    ) -> GpuResult<()> {
        Ok(())
    }

    fn kernels(&self) -> String {
        "cudnn op-tensor add".into()
    }
}
