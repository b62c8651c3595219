//! Dropout in training mode: a fresh mask every step, kept elements scaled
//! by `1/(1-p)`.

pub mod cpu;
pub mod cuda;
pub mod kernels;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::ops::spec::{NodeCx, OpSpec};
pub use cpu::DropoutLayer;

/// Inverted dropout with probability `p`, its mask drawn per step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropoutSpec {
    pub p: f32,
}

impl OpSpec for DropoutSpec {
    fn kind(&self) -> &'static str {
        "dropout"
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let len = cx.batch * cx.x[0].len();
        Ok(Box::new(DropoutLayer::new(self.p, len, cx.index as u64)))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let x = cx.x[0];
        let l = cuda::DropoutGpuLayer::new(
            b.gpu,
            self.p,
            cx.index as u64,
            [cx.batch, x.c, x.h, x.w],
            b.dtype,
            b.layout,
        )?;
        Ok(Some(Box::new(l)))
    }
}
