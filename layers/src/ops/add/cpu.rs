//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::backend::ReluFusion;
use crate::core::error::Result;
use cnnbench_kernels::eltwise;

#[derive(Default)]
pub struct AddLayer {
    /// Applies the ReLU after it in the same pass (forward only: the
    /// ReLU's backward still runs, on this fused output).
    relu: bool,
}

impl Layer<Cpu> for AddLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        if self.relu {
            eltwise::sum_relu(ctx.isa, inputs, out);
        } else {
            eltwise::sum(ctx.isa, inputs, out);
        }
        Ok(())
    }

    /// Never called: the executor aliases both input gradients to the
    /// output gradient.
    fn backward(
        &mut self,
        _: &mut Ctx,
        _: &[&[f32]],
        _: &[f32],
        _: &[&[f32]],
        _: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        Ok(())
    }

    fn fuse_relu(&mut self, _backward: bool) -> ReluFusion {
        self.relu = true;
        ReluFusion::Forward
    }

    fn kernels(&self) -> String {
        if self.relu {
            "relu fused (forward)".into()
        } else {
            String::new()
        }
    }
}
