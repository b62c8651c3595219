//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::eltwise;

pub struct DropoutLayer {
    p: f32,
    /// Distinguishes this layer's draws from another dropout's.
    salt: u64,
    mask: Vec<u8>,
}

impl DropoutLayer {
    pub fn new(p: f32, len: usize, salt: u64) -> DropoutLayer {
        DropoutLayer {
            p,
            salt,
            mask: vec![0; len],
        }
    }
}

impl Layer<Cpu> for DropoutLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let seed = ctx.step_seed ^ self.salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        eltwise::dropout_fwd(ctx.isa, inputs[0], self.p, seed, &mut self.mask, out);
        Ok(())
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        _inputs: &[&[f32]],
        _out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        if let Some(dx) = dxs[0].as_deref_mut() {
            eltwise::dropout_bwd(ctx.isa, dys[0], self.p, &self.mask, dx);
        }
        Ok(())
    }

    fn scratch_bytes(&self) -> usize {
        self.mask.len()
    }
}
