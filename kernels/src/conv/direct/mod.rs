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

use super::{ConvAlgo, ConvPlan, ConvShape, Direction, PLAN_SMALL_BYTES};
use crate::Isa;
pub use packed_rows::{strided_fits, transpose_avx512, transpose_avx512_strided, PackedRows};
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

    fn workspace_bound(&self, p: &ConvShape, dir: Direction, isa: Isa) -> u128 {
        PLAN_SMALL_BYTES
            + match dir {
                Direction::Fwd => fwd::FwdPlan::bytes_bound(p, isa),
                Direction::BwdData => bwd_data::BwdDataPlan::bytes_bound(p, isa),
                Direction::BwdFilter => bwd_filter::BwdFilterPlan::bytes_bound(p, isa),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::{reference, TestInputs};
    use util::AlignedBuf;

    fn shape(ic: usize, ih: usize, oc: usize, k: usize, s: usize, p: usize) -> ConvShape {
        let o = (ih + 2 * p - k) / s + 1;
        ConvShape {
            mb: 1,
            g: 1,
            ic,
            ih,
            iw: ih,
            oc,
            oh: o,
            ow: o,
            kh: k,
            kw: k,
            sh: s,
            sw: s,
            ph: p,
            pw: p,
            dh: 0,
            dw: 0,
        }
    }

    /// Outputs over this crate's test threshold (64 KiB) go out with
    /// non-temporal stores: whole vectors at a 64-byte, 16-byte or 4-byte
    /// aligned start, a masked tail (40 channels), merged kernel rows (the
    /// stem), flat taps, several passes (only the last streams), and
    /// backward-data's stride classes with and without taps, on every ISA,
    /// against the reference.
    #[test]
    fn streamed_outputs_match_reference_at_every_alignment() {
        let cases = [
            (Direction::Fwd, shape(3, 64, 64, 7, 2, 3)),
            (Direction::Fwd, shape(3, 64, 40, 7, 2, 3)),
            (Direction::Fwd, shape(16, 40, 40, 3, 1, 1)),
            // 9 taps of 600 channels: passes before the streamed last one.
            (Direction::Fwd, shape(600, 17, 64, 3, 1, 1)),
            (Direction::BwdData, shape(48, 40, 16, 3, 2, 1)),
            (Direction::BwdData, shape(40, 48, 24, 1, 2, 0)),
        ];
        for (dir, p) in cases {
            let out_len = TestInputs::out_len(&p, dir);
            assert!(crate::stream::bypasses_cache(out_len), "{p:?}");
            let inputs = TestInputs::new(&p);
            let want = inputs.want(&p, dir);
            for isa in Isa::supported() {
                let mut plan = Direct.plan(&p, dir, isa);
                let mut buf = AlignedBuf::zeroed(out_len + 16);
                for off in [0, 4, 1] {
                    let out = &mut buf.as_mut_slice()[off..off + out_len];
                    out.fill(f32::NAN);
                    inputs.execute(plan.as_mut(), dir, out);
                    let e = reference::rel_l2_error(out, &want);
                    assert!(e <= 1e-5, "{dir} {isa} offset {off}: {e:e} on {p:?}");
                }
            }
        }
    }
}
