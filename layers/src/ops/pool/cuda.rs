//! Max and average pooling on the GPU: cuDNN where its output size (always
//! rounded down) is the layer's, cnnbench's NVRTC kernel (same window rule
//! as the CPU's) for ceil-mode layers whose output is one larger. With
//! `--own-kernels`, NHWC max pooling runs on cnnbench's channel-vector
//! kernels whose forward saves each window's argmax (one byte per output
//! element), so that the backward reads only that and dy, not x; and a
//! global average pooling (one window over the whole input) runs on the
//! NVRTC kernel above, whose backward is one coalesced pass: cuDNN's
//! backward took 3.0 ms for imdb-fasttext's 50 channels x 400 steps at
//! batch 128 on an H200, against 0.022 ms forward.

use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{cudnn_pool_size, PoolMode, PoolingDesc, SCALARS};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{check_cudnn, DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::Layer;
use crate::core::{DType, Layout};
use cnnbench_kernels::pool::PoolShape;

struct Cudnn {
    desc: PoolingDesc,
    x: TensorDesc,
    y: TensorDesc,
}

pub struct PoolGpuLayer {
    shape: PoolShape,
    max: bool,
    dtype: DType,
    layout: Layout,
    /// `None`: the NVRTC kernel runs (a ceil-mode layer, which cuDNN
    /// cannot size, or a global average with `--own-kernels`, which it
    /// could).
    cudnn: Option<Cudnn>,
    /// With `--own-kernels` (NHWC max pooling): each output element's
    /// argmax byte; the own kernels run instead of the above.
    argmax: Option<DeviceBuffer>,
}

/// One window over the whole input, no padding: a 1x1 output.
pub fn is_global_avg(p: &PoolShape) -> bool {
    p.oh == 1 && p.ow == 1 && p.kh == p.ih && p.kw == p.iw && p.ph == 0 && p.pw == 0
}

/// Whether cuDNN computes this pooling (its output size matches).
pub fn cudnn_fits(p: &PoolShape) -> bool {
    cudnn_pool_size(p.ih, p.kh, p.sh, p.ph) == p.oh
        && cudnn_pool_size(p.iw, p.kw, p.sw, p.pw) == p.ow
}

impl PoolGpuLayer {
    pub fn new(shape: PoolShape, max: bool, dtype: DType, layout: Layout) -> GpuResult<Self> {
        let p = shape;
        let cudnn = if cudnn_fits(&p) {
            Some(Cudnn {
                desc: PoolingDesc::new(
                    PoolMode::new(max, p.count_pad),
                    [p.kh, p.kw],
                    [p.sh, p.sw],
                    [p.ph, p.pw],
                )?,
                x: TensorDesc::new(layout, dtype, p.mb, p.c, p.ih, p.iw)?,
                y: TensorDesc::new(layout, dtype, p.mb, p.c, p.oh, p.ow)?,
            })
        } else {
            None
        };
        Ok(PoolGpuLayer {
            shape,
            max,
            dtype,
            layout,
            cudnn,
            argmax: None,
        })
    }

    /// A global average pooling (`--own-kernels`; see [`is_global_avg`])
    /// on the NVRTC kernel, in either layout; else `None`.
    pub fn own_global_avg(
        shape: PoolShape,
        max: bool,
        dtype: DType,
        layout: Layout,
    ) -> Option<Self> {
        (!max && is_global_avg(&shape)).then_some(PoolGpuLayer {
            shape,
            max,
            dtype,
            layout,
            cudnn: None,
            argmax: None,
        })
    }

    /// NHWC max pooling on the own kernels (`--own-kernels`), where the
    /// window fits their argmax byte; else `None`.
    pub fn own_nhwc_max(gpu: &Gpu, shape: PoolShape, dtype: DType) -> GpuResult<Option<Self>> {
        if !super::kernels::maxpool_nhwc_fits(&shape) {
            return Ok(None);
        }
        Ok(Some(PoolGpuLayer {
            shape,
            max: true,
            dtype,
            layout: Layout::Nhwc,
            cudnn: None,
            argmax: Some(DeviceBuffer::alloc(&gpu.stream, shape.dst_len())?),
        }))
    }
}

impl<'g> Layer<Cuda<'g>> for PoolGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        if let Some(arg) = &self.argmax {
            // SAFETY: x and y hold the shape's NHWC tensors in the run's
            // dtype, arg one byte per output element.
            return unsafe {
                cx.kernels.maxpool_nhwc_fwd(
                    &cx.gpu.stream,
                    self.dtype.storage(),
                    &self.shape,
                    x[0],
                    y,
                    arg.ptr(),
                )
            };
        }
        let nchw = self.layout == Layout::Nchw;
        match &self.cudnn {
            // SAFETY: x and y hold the described tensors.
            Some(c) => check_cudnn("cudnnPoolingForward", unsafe {
                sys::cudnnPoolingForward(
                    cx.cudnn(),
                    c.desc.0,
                    SCALARS.one(),
                    c.x.0,
                    void(x[0]),
                    SCALARS.zero(),
                    c.y.0,
                    void(y),
                )
            }),
            // SAFETY: x and y hold the shape's tensors in the run's dtype.
            None => unsafe {
                cx.kernels.pool_fwd(
                    &cx.gpu.stream,
                    self.dtype.storage(),
                    &self.shape,
                    self.max,
                    nchw,
                    x[0],
                    y,
                )
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
        if let Some(arg) = &self.argmax {
            // SAFETY: as in `forward`; arg was written by this step's
            // forward, earlier on the stream.
            return unsafe {
                cx.kernels.maxpool_nhwc_bwd(
                    &cx.gpu.stream,
                    self.dtype.storage(),
                    &self.shape,
                    arg.ptr(),
                    dy,
                    dx,
                )
            };
        }
        let nchw = self.layout == Layout::Nchw;
        match &self.cudnn {
            // SAFETY: every tensor is the described one.
            Some(c) => check_cudnn("cudnnPoolingBackward", unsafe {
                sys::cudnnPoolingBackward(
                    cx.cudnn(),
                    c.desc.0,
                    SCALARS.one(),
                    c.y.0,
                    void(y),
                    c.y.0,
                    void(dy),
                    c.x.0,
                    void(x[0]),
                    SCALARS.zero(),
                    c.x.0,
                    void(dx),
                )
            }),
            // SAFETY: as in `forward`.
            None => unsafe {
                cx.kernels.pool_bwd(
                    &cx.gpu.stream,
                    self.dtype.storage(),
                    &self.shape,
                    self.max,
                    nchw,
                    x[0],
                    dy,
                    dx,
                )
            },
        }
    }

    fn scratch_bytes(&self) -> usize {
        self.argmax.as_ref().map_or(0, DeviceBuffer::bytes)
    }

    fn kernels(&self) -> String {
        let what = if self.max { "max" } else { "avg" };
        if self.argmax.is_some() {
            return "cnnbench maxpool_nhwc fwd+argmax, bwd gather (channel vectors)".into();
        }
        match (&self.cudnn, cudnn_fits(&self.shape)) {
            (Some(_), _) => format!("cudnn pooling {what}"),
            (None, true) => format!("cnnbench pool_{what} (global), bwd gather"),
            (None, false) => format!("nvrtc pool_{what} (ceil mode)"),
        }
    }
}
