//! Channel concatenation (Inception modules): NHWC, so every pixel's
//! channels are copied from each input in turn.

pub mod cpu;
pub mod cuda;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::layer::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::ops::spec::{NodeCx, OpSpec};
pub use cpu::ConcatLayer;

/// Channel concatenation of all inputs, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConcatSpec;

impl OpSpec for ConcatSpec {
    fn kind(&self) -> &'static str {
        "concat"
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let x = cx.x[0];
        let widths = cx.x.iter().map(|d| d.c).collect();
        Ok(Box::new(ConcatLayer::new(cx.batch * x.h * x.w, widths)))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let x = cx.x[0];
        let widths: Vec<usize> = cx.x.iter().map(|d| d.c).collect();
        let blocks = cuda::blocks(
            b.layout,
            [cx.batch, x.h, x.w],
            &widths,
            b.dtype.size_bytes(),
        );
        Ok(Some(Box::new(cuda::ConcatGpuLayer::new(blocks))))
    }
}
