//! ReLU. Its backward sums the gradients of all consumers of its output on
//! the way (a ResNet block's input feeds both the branch and the shortcut).

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
pub use cpu::ReluLayer;

/// ReLU: no parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReluSpec;

impl OpSpec for ReluSpec {
    fn kind(&self) -> &'static str {
        "relu"
    }

    /// Forward `x` read, `y` written; backward in cuDNN's form:
    /// `y` and `dy` read, `dx` written.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(x[0].len() + y.len()),
            backward: Elements::per_image(2 * y.len() + input_grads(x, input_grad)),
        }
    }

    fn cpu(&self, _cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Ok(Box::new(ReluLayer))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        if b.paths.own_kernels {
            let n = cx.batch * cx.y.len();
            return Ok(Some(Box::new(cuda::OwnReluGpuLayer::new(
                n,
                b.dtype.storage(),
            ))));
        }
        let t = b.tensor_desc(cx.batch, cx.y)?;
        Ok(Some(Box::new(cuda::ReluGpuLayer::new(t)?)))
    }
}
