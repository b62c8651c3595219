//! Direct convolution with hand-written SIMD micro-kernels (placeholder).

use super::{ConvAlgo, ConvPlan, ConvShape, Direction};
use crate::Isa;

pub struct Direct;

impl ConvAlgo for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }
    fn supports(&self, _: &ConvShape, _: Direction, _: Isa) -> Result<(), String> {
        Err("not built yet".into())
    }
    fn plan(&self, _: &ConvShape, _: Direction, _: Isa) -> Box<dyn ConvPlan> {
        unreachable!("supports() is false")
    }
}
