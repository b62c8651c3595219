//! The CPU side.

use crate::backend::cpu::{CpuLayer, Ctx};

pub struct FlattenLayer;

impl CpuLayer for FlattenLayer {
    fn forward(&mut self, _: &mut Ctx, _: &[&[f32]], _: &mut [f32]) {}

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
