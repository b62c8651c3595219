//! The residual add. Its backward is free: the executor hands the output
//! gradient to both inputs as it is (no copy), see `net::cpu`.

pub mod cuda;

use crate::net::cpu_layer::{CpuLayer, Ctx};
use cnnbench_kernels::eltwise;

pub struct AddLayer;

impl CpuLayer for AddLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) {
        eltwise::sum(ctx.isa, inputs, out);
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
    ) {
    }
}
