//! Softmax cross-entropy loss against seeded labels (mean over the batch).

pub mod cpu;
pub mod cuda;
pub mod kernels;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::{input_grads, one_input, Elements, NodeCx, OpSpec, Traffic};
pub use cpu::SoftmaxXentLayer;

/// Softmax over the channels, then the mean cross-entropy against seeded
/// labels; the output is the loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxXentSpec;

impl OpSpec for SoftmaxXentSpec {
    fn kind(&self) -> &'static str {
        "softmax-xent"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        match one_input(x)? {
            d if d.h * d.w == 1 => Ok(Dims::new(1, 1, 1)),
            d => Err(format!("reads 1x1 logits, not {}x{} images", d.h, d.w)),
        }
    }

    /// Forward: the logits read, one loss per image written (and the
    /// labels, not counted). Backward: the logits read again (their
    /// softmax recomputed) and their gradient written.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(x[0].len() + y.len()),
            backward: Elements::per_image(x[0].len() + input_grads(x, input_grad)),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Ok(Box::new(SoftmaxXentLayer::new(
            cx.x[0].c,
            cx.labels.to_vec(),
        )))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let l = cuda::SoftmaxXentGpuLayer::new(b.gpu, cx.x[0].c, cx.labels, b.dtype)?;
        Ok(Some(Box::new(l)))
    }
}
