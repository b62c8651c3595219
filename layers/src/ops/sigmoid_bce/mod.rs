//! Sigmoid with binary cross-entropy against seeded 0/1 labels (mean over
//! the batch): Keras's `Dense(1, activation='sigmoid')` trained with
//! `binary_crossentropy`, PyTorch's `BCEWithLogitsLoss`. The output is
//! the loss.

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
pub use cpu::SigmoidBceLayer;

/// One logit per image, its label 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigmoidBceSpec;

impl OpSpec for SigmoidBceSpec {
    fn kind(&self) -> &'static str {
        "sigmoid-bce"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        match one_input(x)? {
            d if d.len() == 1 => Ok(Dims::new(1, 1, 1)),
            d => Err(format!("reads one logit per image, not {d}")),
        }
    }

    fn label_classes(&self) -> Option<usize> {
        Some(2)
    }

    /// As the softmax loss's: the logit read forward and again backward,
    /// with its gradient written.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(x[0].len() + y.len()),
            backward: Elements::per_image(x[0].len() + input_grads(x, input_grad)),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Ok(Box::new(SigmoidBceLayer::new(cx.labels.to_vec())))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        cuda::layer(cx, b)
    }
}
