//! Backward-data for few input channels per group (the RGB stem): the
//! phase-gather GEMMs would have only `icg` columns, so instead compute
//! `col = diff_dst · Wᵀ` (`taps·icg` columns) and scatter-add it into
//! diff_src (col2im). Work items are whole images, so each item owns its
//! slice of diff_src and the scatter needs no synchronisation.

use super::blas::{gemm_f32, MatRef};
use super::par::{SendPtr, Slots};
use crate::conv::ConvShape;
use crate::Isa;
use rayon::prelude::*;

/// Output pixels per GEMM: their `col` rows (`taps·icg` floats each) stay
/// in L2 for the scatter that follows.
const ROWS: usize = 512;

pub struct Col2imPlan {
    p: ConvShape,
    rows: usize,
    slots: Slots<Vec<f32>>,
    isa: Isa,
}

impl Col2imPlan {
    /// Worth it (and balanced) when channels are few and there are at
    /// least as many images as threads.
    pub fn fits(p: &ConvShape) -> bool {
        p.icg() < 16 && p.mb >= rayon::current_num_threads()
    }

    /// The bytes [`Col2imPlan::new`] allocates.
    pub fn bytes_bound(p: &ConvShape) -> u128 {
        let per_slot = 4 * (ROWS.min(p.oh * p.ow) * p.taps() * p.icg()) as u128;
        rayon::current_num_threads().max(1) as u128 * per_slot
    }

    pub fn new(p: &ConvShape, isa: Isa) -> Self {
        let rows = ROWS.min(p.oh * p.ow);
        let len = rows * p.taps() * p.icg();
        Col2imPlan {
            p: *p,
            rows,
            slots: Slots::new(|| vec![0.0; len]),
            isa,
        }
    }

    pub fn workspace_bytes(&self) -> usize {
        self.slots.len() * 4 * self.rows * self.p.taps() * self.p.icg()
    }

    pub fn run(&mut self, diff_dst: &[f32], wei: &[f32], diff_src: &mut [f32]) {
        let p = self.p;
        assert!(
            diff_dst.len() >= p.dst_len()
                && wei.len() >= p.wei_len()
                && diff_src.len() >= p.src_len()
        );
        let img_len = p.ih * p.iw * p.ic;
        let out = SendPtr(diff_src.as_mut_ptr());
        let me = &*self;
        (0..p.mb).into_par_iter().for_each(|n| {
            // SAFETY: image n's diff_src elements belong to this item alone
            // (items are distinct images); in bounds as asserted above.
            let img =
                unsafe { std::slice::from_raw_parts_mut(out.ptr().add(n * img_len), img_len) };
            me.image(n, diff_dst, wei, img);
        });
    }

    fn image(&self, n: usize, diff_dst: &[f32], wei: &[f32], img: &mut [f32]) {
        let p = &self.p;
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let width = taps * icg;
        let plane = p.oh * p.ow;
        img.fill(0.0);
        let mut col = self.slots.lock();
        for g in 0..p.g {
            let mut p0 = 0;
            while p0 < plane {
                let rows = self.rows.min(plane - p0);
                let at = (n * plane + p0) * p.oc + g * ocg;
                let lhs = MatRef {
                    ptr: diff_dst[at..].as_ptr(),
                    rs: p.oc as isize,
                    cs: 1,
                };
                // Wᵀ in place: gHWIO row (tap, c) is column (tap, c) here.
                let rhs = MatRef {
                    ptr: wei[g * width * ocg..].as_ptr(),
                    rs: 1,
                    cs: ocg as isize,
                };
                // SAFETY: col holds rows x width floats of this thread's own
                // scratch; lhs reads rows x ocg of diff_dst, rhs ocg x width
                // of group g's weights (lengths asserted in `run`).
                unsafe {
                    gemm_f32(
                        self.isa,
                        rows,
                        width,
                        ocg,
                        col.as_mut_ptr(),
                        width,
                        false,
                        lhs,
                        rhs,
                    )
                };
                for (i, row) in col[..rows * width].chunks_exact(width).enumerate() {
                    let (oh, ow) = ((p0 + i) / p.ow, (p0 + i) % p.ow);
                    for r in 0..p.kh {
                        let Some(ih) = p.in_row(oh, r) else { continue };
                        for s in 0..p.kw {
                            let Some(iw) = p.in_col(ow, s) else { continue };
                            let dst = &mut img[(ih * p.iw + iw) * p.ic + g * icg..][..icg];
                            let src = &row[(r * p.kw + s) * icg..][..icg];
                            for (d, v) in dst.iter_mut().zip(src) {
                                *d += v;
                            }
                        }
                    }
                }
                p0 += rows;
            }
        }
    }
}
