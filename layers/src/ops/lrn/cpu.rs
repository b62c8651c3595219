//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::norm::lrn::{self, LrnParams};

pub struct LrnLayer {
    p: LrnParams,
    c: usize,
    /// `k + α/n·Σx²` per element, saved for the backward pass.
    scale: Vec<f32>,
}

impl LrnLayer {
    pub fn new(p: LrnParams, c: usize, len: usize) -> LrnLayer {
        LrnLayer {
            p,
            c,
            scale: vec![0.0; len],
        }
    }
}

impl Layer<Cpu> for LrnLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        if ctx.reference {
            lrn::reference_fwd(&self.p, self.c, inputs[0], out);
        } else {
            lrn::fwd(&self.p, self.c, inputs[0], out, &mut self.scale);
        }
        Ok(())
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        inputs: &[&[f32]],
        out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        let Some(dx) = dxs[0].as_deref_mut() else {
            return Ok(());
        };
        if ctx.reference {
            lrn::reference_bwd(&self.p, self.c, inputs[0], dys[0], dx);
        } else {
            lrn::bwd(&self.p, self.c, inputs[0], out, &self.scale, dys[0], dx);
        }
        Ok(())
    }

    fn scratch_bytes(&self) -> usize {
        self.scale.len() * 4
    }
}
