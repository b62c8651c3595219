//! LRN across channels on cuDNN.

use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{LrnDesc, SCALARS};
use crate::backend::cuda::layer::{void, Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::{check_cudnn, GpuResult};
use crate::core::backend::Layer;
use crate::ops::lrn::LrnSpec;
use cudarc::cudnn::sys;

pub struct LrnGpuLayer {
    t: TensorDesc,
    lrn: LrnDesc,
}

const MODE: sys::cudnnLRNMode_t = sys::cudnnLRNMode_t::CUDNN_LRN_CROSS_CHANNEL_DIM1;

impl LrnGpuLayer {
    pub fn new(t: TensorDesc, s: &LrnSpec) -> GpuResult<LrnGpuLayer> {
        Ok(LrnGpuLayer {
            t,
            lrn: LrnDesc::new(s.size, s.alpha, s.beta, s.k)?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for LrnGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x and y hold the described tensor.
        check_cudnn("cudnnLRNCrossChannelForward", unsafe {
            sys::cudnnLRNCrossChannelForward(
                cx.cudnn(),
                self.lrn.0,
                MODE,
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
        check_cudnn("cudnnLRNCrossChannelBackward", unsafe {
            sys::cudnnLRNCrossChannelBackward(
                cx.cudnn(),
                self.lrn.0,
                MODE,
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
        "cudnn lrn cross-channel".into()
    }
}
