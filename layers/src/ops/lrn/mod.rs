//! Local response normalisation across channels (AlexNet).

pub mod cpu;
pub mod cuda;
pub mod kernels;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::{input_grads, Elements, NodeCx, OpSpec, Traffic};
use cnnbench_kernels::norm::lrn::LrnParams;
pub use cpu::LrnLayer;

/// Local response normalisation across channels, Caffe/PyTorch style:
/// `y = x / (k + alpha/size · Σ x²)^beta` over `size` neighbouring channels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnSpec {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub k: f32,
}

impl LrnSpec {
    pub fn params(&self) -> LrnParams {
        LrnParams {
            size: self.size,
            alpha: self.alpha,
            beta: self.beta,
            k: self.k,
        }
    }
}

impl OpSpec for LrnSpec {
    fn kind(&self) -> &'static str {
        "lrn"
    }

    /// Forward `x` read, `y` written; backward in cuDNN's form: `x`, `y`
    /// and `dy` read, `dx` written.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(x[0].len() + y.len()),
            backward: Elements::per_image(x[0].len() + 2 * y.len() + input_grads(x, input_grad)),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let x = cx.x[0];
        Ok(Box::new(LrnLayer::new(
            self.params(),
            x.c,
            cx.batch * x.len(),
        )))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let l = cuda::LrnGpuLayer::new(b, cx.batch, cx.y, self.params())?;
        Ok(Some(Box::new(l)))
    }
}
