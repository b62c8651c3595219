//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::loss;

pub struct SigmoidBceLayer {
    pub labels: Vec<u32>,
}

impl SigmoidBceLayer {
    pub fn new(labels: Vec<u32>) -> SigmoidBceLayer {
        SigmoidBceLayer { labels }
    }
}

impl Layer<Cpu> for SigmoidBceLayer {
    fn forward(&mut self, _: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        out.fill(loss::sigmoid_bce_fwd(inputs[0], &self.labels));
        Ok(())
    }

    /// The loss is the network's output: its gradient is 1, whatever `dys`.
    fn backward(
        &mut self,
        _: &mut Ctx,
        inputs: &[&[f32]],
        _: &[f32],
        _: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        if let Some(dx) = dxs[0].as_deref_mut() {
            loss::sigmoid_bce_bwd(inputs[0], &self.labels, dx);
        }
        Ok(())
    }

    fn set_labels(&mut self, _: &mut Ctx, labels: &[u32]) -> Result<bool> {
        crate::ops::loss::cpu::set_labels(&mut self.labels, labels, 2)?;
        Ok(true)
    }
}
