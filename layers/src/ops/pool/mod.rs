//! Max and average pooling (global average included).

pub mod cpu;
pub mod cuda;
pub mod kernels;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::{window_out, Dims};
use crate::ops::spec::{input_grads, one_input, Elements, NodeCx, OpSpec, Traffic};
use cnnbench_kernels::pool::PoolShape;
pub use cpu::PoolLayer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average; `count_pad` counts padded cells in the divisor (PyTorch's
    /// `count_include_pad=True`, its default).
    Avg {
        count_pad: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    pub kind: PoolKind,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub ph: usize,
    pub pw: usize,
    /// Round the output size up (Caffe, and PyTorch's `ceil_mode=True`).
    pub ceil: bool,
}

impl PoolSpec {
    /// The pooling problem at batch `mb` reading `x` and writing `y`, and
    /// whether it is max pooling.
    pub fn shape(&self, x: Dims, y: Dims, mb: usize) -> (PoolShape, bool) {
        let (max, count_pad) = match self.kind {
            PoolKind::Max => (true, false),
            PoolKind::Avg { count_pad } => (false, count_pad),
        };
        let shape = PoolShape {
            mb,
            c: x.c,
            ih: x.h,
            iw: x.w,
            oh: y.h,
            ow: y.w,
            kh: self.kh,
            kw: self.kw,
            sh: self.sh,
            sw: self.sw,
            ph: self.ph,
            pw: self.pw,
            count_pad,
        };
        (shape, max)
    }
}

impl OpSpec for PoolSpec {
    fn kind(&self) -> &'static str {
        match self.kind {
            PoolKind::Max => "maxpool",
            PoolKind::Avg { .. } => "avgpool",
        }
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        let d = one_input(x)?;
        let (h, w) = window_out(
            d,
            (self.kh, self.kw),
            (self.sh, self.sw),
            (self.ph, self.pw),
            self.ceil,
        )?;
        Ok(Dims::new(h, w, d.c))
    }

    /// Forward `x` read, `y` written. Backward: average pooling reads
    /// `dy` and writes `dx`; max pooling in cuDNN's form reads `x`, `y`
    /// and `dy` (to find each window's maximum) and writes `dx`.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        let find_max = match self.kind {
            PoolKind::Max => x[0].len() + y.len(),
            PoolKind::Avg { .. } => 0,
        };
        Traffic {
            forward: Elements::per_image(x[0].len() + y.len()),
            backward: Elements::per_image(y.len() + find_max + input_grads(x, input_grad)),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let (shape, max) = self.shape(cx.x[0], cx.y, cx.batch);
        Ok(Box::new(PoolLayer::new(shape, max)))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let (shape, max) = self.shape(cx.x[0], cx.y, cx.batch);
        if b.paths.own_kernels {
            let own = if max && b.layout == crate::core::Layout::Nhwc {
                cuda::PoolGpuLayer::own_nhwc_max(b.gpu, shape, b.dtype)?
            } else {
                cuda::PoolGpuLayer::own_global_avg(shape, max, b.dtype, b.layout)
            };
            if let Some(l) = own {
                return Ok(Some(Box::new(l)));
            }
        }
        let l = cuda::PoolGpuLayer::new(shape, max, b.dtype, b.layout)?;
        Ok(Some(Box::new(l)))
    }
}
