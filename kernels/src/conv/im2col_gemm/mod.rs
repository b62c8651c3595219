//! im2col + GEMM (placeholder).

use super::{ConvAlgo, ConvPlan, ConvShape, Direction};
use crate::Isa;

pub struct Im2colGemm;

impl ConvAlgo for Im2colGemm {
    fn name(&self) -> &'static str {
        "im2col_gemm"
    }
    fn supports(&self, _: &ConvShape, _: Direction, _: Isa) -> Result<(), String> {
        Err("not built yet".into())
    }
    fn plan(&self, _: &ConvShape, _: Direction, _: Isa) -> Box<dyn ConvPlan> {
        unreachable!("supports() is false")
    }
}
