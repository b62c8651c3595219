//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::{Error, Result};
use cnnbench_kernels::loss;

pub struct SoftmaxXentLayer {
    classes: usize,
    pub labels: Vec<u32>,
    probs: Vec<f32>,
}

impl SoftmaxXentLayer {
    pub fn new(classes: usize, labels: Vec<u32>) -> SoftmaxXentLayer {
        let n = labels.len();
        SoftmaxXentLayer {
            classes,
            labels,
            probs: vec![0.0; n * classes],
        }
    }
}

impl Layer<Cpu> for SoftmaxXentLayer {
    fn forward(&mut self, _: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let l = loss::softmax_xent_fwd(self.classes, inputs[0], &self.labels, &mut self.probs);
        out.fill(l);
        Ok(())
    }

    /// The loss is the network's output: its gradient is 1, whatever `dys`.
    fn backward(
        &mut self,
        _: &mut Ctx,
        _: &[&[f32]],
        _: &[f32],
        _: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        if let Some(dx) = dxs[0].as_deref_mut() {
            loss::softmax_xent_bwd(self.classes, &self.probs, &self.labels, dx);
        }
        Ok(())
    }

    fn set_labels(&mut self, _: &mut Ctx, labels: &[u32]) -> Result<bool> {
        set_labels(&mut self.labels, labels, self.classes)?;
        Ok(true)
    }
}

/// Checks a batch's labels against the batch and the classes (a label
/// past the classes would index out of the logits) and copies them.
pub(crate) fn set_labels(held: &mut [u32], labels: &[u32], classes: usize) -> Result<()> {
    if labels.len() != held.len() {
        return Err(Error::invalid(
            "set labels",
            format!("{} labels for a batch of {}", labels.len(), held.len()),
        ));
    }
    if let Some(l) = labels.iter().find(|&&l| l as usize >= classes) {
        return Err(Error::invalid(
            "set labels",
            format!("label {l} is not below the model's {classes} classes"),
        ));
    }
    held.copy_from_slice(labels);
    Ok(())
}
