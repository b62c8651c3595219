//! Direct convolution: hand-written SIMD micro-kernels run straight off the
//! NHWC tensors, with no im2col buffer.
//!
//! - [`fwd`]: indirect GEMM (XNNPACK's IGEMM): tiles of output pixels x
//!   output channels, one input pointer per pixel and tap, padding taps
//!   pointing at a zero row so the inner loop never branches (a tile with
//!   every tap inside: one pointer per pixel, one offset per tap).
//! - [`bwd_data`]: the same micro-kernel over stride phase classes of input
//!   pixels, with weights transposed per call.
//! - [`bwd_filter`]: an outer-product micro-kernel reduced over runs of
//!   output pixels.
//!
//! The micro-kernels ([`ukernel`]) are written once over a small SIMD trait
//! ([`simd`]) and compiled per ISA (AVX-512F, AVX2+FMA, scalar) behind
//! `#[target_feature]` entry points; the plan picks the ISA it was given.

mod bwd_data;
mod bwd_filter;
mod fwd;
mod packed_rows;
mod rows_gemm;
mod simd;
mod ukernel;
mod util;

use super::{ConvAlgo, ConvPlan, ConvShape, Direction};
use crate::Isa;
pub use packed_rows::{transpose_avx512, PackedRows};
pub use rows_gemm::rows_gemm;

pub struct Direct;

impl ConvAlgo for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn supports(&self, _: &ConvShape, _: Direction, isa: Isa) -> Result<(), String> {
        if isa.is_supported() {
            Ok(())
        } else {
            Err(format!("this CPU lacks {isa}"))
        }
    }

    fn plan(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Box<dyn ConvPlan> {
        // Running a kernel compiled for a missing ISA would be undefined
        // behaviour, so refuse loudly instead.
        assert!(
            isa.is_supported(),
            "direct conv planned for {isa}, which this CPU lacks"
        );
        match dir {
            Direction::Fwd => Box::new(fwd::FwdPlan::new(p, isa)),
            Direction::BwdData => Box::new(bwd_data::BwdDataPlan::new(p, isa)),
            Direction::BwdFilter => Box::new(bwd_filter::BwdFilterPlan::new(p, isa)),
        }
    }
}
