//! ReLU. Its backward sums the gradients of all consumers of its output on
//! the way (a ResNet block's input feeds both the branch and the shortcut).

pub mod cpu;
pub mod cuda;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::ops::spec::{NodeCx, OpSpec};
pub use cpu::ReluLayer;

/// ReLU: no parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReluSpec;

impl OpSpec for ReluSpec {
    fn kind(&self) -> &'static str {
        "relu"
    }

    fn cpu(&self, _cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Ok(Box::new(ReluLayer))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let t = b.tensor_desc(cx.batch, cx.y)?;
        Ok(Some(Box::new(cuda::ReluGpuLayer::new(t)?)))
    }
}
