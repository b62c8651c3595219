//! The CPU side.

use crate::backend::cpu::{CpuLayer, Ctx};
use cnnbench_kernels::eltwise;

pub struct ReluLayer;

impl CpuLayer for ReluLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) {
        eltwise::relu_fwd(ctx.isa, inputs[0], out);
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        _inputs: &[&[f32]],
        out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) {
        if let Some(dx) = dxs[0].as_deref_mut() {
            eltwise::relu_bwd(ctx.isa, out, dys, dx);
        }
    }

    fn sums_gradients(&self) -> bool {
        true
    }
}
