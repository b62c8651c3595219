//! LRN across channels on cuDNN, or on `lrn.cu` where cuDNN refuses the
//! dtype (bf16).

use super::kernels::{LrnBy, LrnShape};
use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{LrnDesc, SCALARS};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{check_cudnn, GpuResult};
use crate::core::backend::Layer;
use crate::core::dtype::Storage;
use crate::core::shape::Dims;
use crate::core::Layout;
use cnnbench_kernels::norm::lrn::LrnParams;

pub enum LrnGpuLayer {
    Cudnn {
        t: TensorDesc,
        lrn: LrnDesc,
    },
    Nvrtc {
        st: Storage,
        shape: LrnShape,
        p: LrnParams,
    },
}

const MODE: sys::cudnnLRNMode_t = sys::cudnnLRNMode_t::CUDNN_LRN_CROSS_CHANNEL_DIM1;

impl LrnGpuLayer {
    /// For `b`'s dtype and layout, on `batch` images of `d`.
    pub fn new(b: &Cuda, batch: usize, d: Dims, p: LrnParams) -> GpuResult<LrnGpuLayer> {
        Ok(match LrnBy::for_dtype(b.dtype) {
            LrnBy::Cudnn => LrnGpuLayer::Cudnn {
                t: b.tensor_desc(batch, d)?,
                lrn: LrnDesc::new(p.size, p.alpha, p.beta, p.k)?,
            },
            LrnBy::Nvrtc => LrnGpuLayer::Nvrtc {
                st: b.dtype.storage(),
                shape: LrnShape {
                    n: batch,
                    c: d.c,
                    hw: d.h * d.w,
                    nchw: b.layout == Layout::Nchw,
                },
                p,
            },
        })
    }
}

impl<'g> Layer<Cuda<'g>> for LrnGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        match self {
            // SAFETY: x and y hold the described tensor.
            LrnGpuLayer::Cudnn { t, lrn } => check_cudnn("cudnnLRNCrossChannelForward", unsafe {
                sys::cudnnLRNCrossChannelForward(
                    cx.cudnn(),
                    lrn.0,
                    MODE,
                    SCALARS.one(),
                    t.0,
                    void(x[0]),
                    SCALARS.zero(),
                    t.0,
                    void(y),
                )
            }),
            // SAFETY: x and y hold `shape`'s elements in the run's storage.
            LrnGpuLayer::Nvrtc { st, shape, p } => unsafe {
                cx.kernels.lrn_fwd(&cx.gpu.stream, *st, shape, p, x[0], y)
            },
        }
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
        match self {
            // SAFETY: every tensor is the described one.
            LrnGpuLayer::Cudnn { t, lrn } => check_cudnn("cudnnLRNCrossChannelBackward", unsafe {
                sys::cudnnLRNCrossChannelBackward(
                    cx.cudnn(),
                    lrn.0,
                    MODE,
                    SCALARS.one(),
                    t.0,
                    void(y),
                    t.0,
                    void(dy),
                    t.0,
                    void(x[0]),
                    SCALARS.zero(),
                    t.0,
                    void(dx),
                )
            }),
            // SAFETY: every tensor holds `shape`'s elements; dx is its own
            // buffer.
            LrnGpuLayer::Nvrtc { st, shape, p } => unsafe {
                cx.kernels
                    .lrn_bwd(&cx.gpu.stream, *st, shape, p, x[0], y, dy, dx)
            },
        }
    }

    fn kernels(&self) -> String {
        match self {
            LrnGpuLayer::Cudnn { .. } => "cudnn lrn cross-channel".into(),
            LrnGpuLayer::Nvrtc { .. } => "lrn.cu cross-channel".into(),
        }
    }
}
