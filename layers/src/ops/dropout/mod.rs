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
use crate::core::shape::Dims;
use crate::ops::spec::{input_grads, total, Elements, NodeCx, OpSpec, Traffic};
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

    /// Forward `x` read, `y` written; backward `dy` read, `dx` written.
    /// The mask is counted as regenerated from the step's seed (no
    /// traffic).
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(total(x) + y.len()),
            backward: Elements::per_image(y.len() + input_grads(x, input_grad)),
        }
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
