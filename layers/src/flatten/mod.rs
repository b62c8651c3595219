//! Flatten: in NHWC an image's `h x w x c` values are already one row, so
//! the executor makes the output share the input's memory, and the
//! gradient likewise; nothing runs.

use crate::net::cpu_layer::{CpuLayer, Ctx};

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
