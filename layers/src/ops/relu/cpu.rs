//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::eltwise;

pub struct ReluLayer;

impl Layer<Cpu> for ReluLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        eltwise::relu_fwd(ctx.isa, inputs[0], out);
        Ok(())
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        _inputs: &[&[f32]],
        out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        if let Some(dx) = dxs[0].as_deref_mut() {
            eltwise::relu_bwd(ctx.isa, out, dys, dx);
        }
        Ok(())
    }

    fn sums_gradients(&self) -> bool {
        true
    }
}
