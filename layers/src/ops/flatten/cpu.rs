//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx};
use crate::core::backend::Layer;
use crate::core::error::Result;

pub struct FlattenLayer;

impl Layer<Cpu> for FlattenLayer {
    fn forward(&mut self, _: &mut Ctx, _: &[&[f32]], _: &mut [f32]) -> Result<()> {
        Ok(())
    }

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
}
