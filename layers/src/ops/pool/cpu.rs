//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::pool::{self, reference, PoolShape};

pub struct PoolLayer {
    shape: PoolShape,
    max: bool,
    /// The winning input pixel of each max-pool output.
    argmax: Vec<u32>,
}

impl PoolLayer {
    pub fn new(shape: PoolShape, max: bool) -> PoolLayer {
        PoolLayer {
            shape,
            max,
            argmax: if max {
                vec![0; shape.dst_len()]
            } else {
                Vec::new()
            },
        }
    }
}

impl Layer<Cpu> for PoolLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let p = &self.shape;
        match (ctx.reference, self.max) {
            (true, max) => reference::fwd(p, max, inputs[0], out),
            (false, true) => pool::max_fwd(ctx.isa, p, inputs[0], out, &mut self.argmax),
            (false, false) => pool::avg_fwd(ctx.isa, p, inputs[0], out),
        }
        Ok(())
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        inputs: &[&[f32]],
        _out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        let Some(dx) = dxs[0].as_deref_mut() else {
            return Ok(());
        };
        let p = &self.shape;
        match (ctx.reference, self.max) {
            (true, max) => reference::bwd(p, max, inputs[0], dys[0], dx),
            (false, true) => pool::max_bwd(p, dys[0], &self.argmax, dx),
            (false, false) => pool::avg_bwd(ctx.isa, p, dys[0], dx),
        }
        Ok(())
    }

    fn scratch_bytes(&self) -> usize {
        self.argmax.len() * 4
    }
}
