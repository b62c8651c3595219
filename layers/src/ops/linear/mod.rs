//! Fully connected: `y[N×out] = x[N×in]·W[in×out] + b`, on the kernels crate's GEMM.

pub mod cpu;
pub mod cuda;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::backend::HostOrder;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::init::fan_in_uniform;
use crate::core::shape::Dims;
use crate::core::Layout;
use crate::ops::spec::{one_input, weighted, NodeCx, OpSpec, Traffic};
pub use cpu::LinearLayer;

/// Fully connected, `out` features, with bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearSpec {
    pub out: usize,
}

impl OpSpec for LinearSpec {
    fn kind(&self) -> &'static str {
        "fc"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        match one_input(x)? {
            d if d.h * d.w == 1 => Ok(Dims::new(1, 1, self.out)),
            d => Err(format!(
                "reads 1x1 features, not {}x{} images: flatten them first",
                d.h, d.w
            )),
        }
    }

    fn param_sizes(&self, x: &[Dims]) -> Vec<usize> {
        vec![x[0].c * self.out, self.out]
    }

    fn macs(&self, x: &[Dims], _y: Dims) -> u64 {
        (x[0].c * self.out) as u64
    }

    fn init(&self, cx: &NodeCx) -> Vec<Vec<f32>> {
        let inf = cx.x[0].len();
        let s = cx.layer_seed();
        vec![
            fan_in_uniform(inf * self.out, inf, s),
            fan_in_uniform(self.out, inf, s ^ 1),
        ]
    }

    /// As a convolution's ([`weighted`]).
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        let p = self.param_sizes(x);
        weighted(x[0], y, p[0], p.iter().sum(), input_grad)
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let mut p = self.init(cx).into_iter();
        let (w, b) = (p.next().unwrap_or_default(), p.next().unwrap_or_default());
        Ok(Box::new(LinearLayer::new(
            cx.batch,
            cx.x[0].len(),
            self.out,
            w,
            b,
        )))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        // The flatten before a fully connected layer follows the layout:
        // its weight rows are permuted to match on NCHW.
        let order = match cx.flattened {
            Some(s) if b.layout == Layout::Nchw && s.h * s.w > 1 => HostOrder::LinearRows {
                h: s.h,
                w: s.w,
                c: s.c,
            },
            _ => HostOrder::Plain,
        };
        let host = self.init(cx);
        let half = b.half_storage();
        let l = cuda::LinearGpuLayer::new(
            &b.gpu.stream,
            [cx.batch, cx.x[0].len(), self.out],
            b.dtype,
            b.param(&host[0], order, half)?,
            b.param(&host[1], HostOrder::Plain, half)?,
        )?;
        Ok(Some(Box::new(l)))
    }
}
