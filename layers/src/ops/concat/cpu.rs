//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::eltwise;

pub struct ConcatLayer {
    pixels: usize,
    widths: Vec<usize>,
}

impl ConcatLayer {
    pub fn new(pixels: usize, widths: Vec<usize>) -> ConcatLayer {
        ConcatLayer { pixels, widths }
    }
}

impl Layer<Cpu> for ConcatLayer {
    fn forward(&mut self, _ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        eltwise::concat_channels(self.pixels, inputs, &self.widths, out);
        Ok(())
    }

    fn backward(
        &mut self,
        _ctx: &mut Ctx,
        _inputs: &[&[f32]],
        _out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        let total: usize = self.widths.iter().sum();
        let mut offset = 0;
        for (dx, &w) in dxs.iter_mut().zip(&self.widths) {
            if let Some(dx) = dx.as_deref_mut() {
                eltwise::split_channels(self.pixels, dys[0], total, offset, dx);
            }
            offset += w;
        }
        Ok(())
    }
}
