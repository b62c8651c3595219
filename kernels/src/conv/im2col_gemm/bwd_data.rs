//! Backward-data as forward convolutions of `diff_dst`, one per stride phase.
//!
//! Input pixel `ih` receives `diff_dst[oh]·W[r]` for every tap with
//! `oh·sh + r·dil − ph = ih`. Splitting input rows by `ih mod sh` (and
//! columns likewise) makes the set of contributing taps, and their offsets
//! into `diff_dst`, the same for every pixel of a phase: each phase is a
//! stride-1 gather conv whose weights are `W[r][s]ᵀ` for its taps. Every
//! input pixel is written exactly once, by one work item (no col2im
//! scatter-add, no races); phases with no taps write zeros.

use super::engine::{ConvGemm, Engine, Weights};
use super::gather::{AxisMap, Gather};
use super::par::SendPtr;
use crate::conv::ConvShape;
use crate::Isa;
use rayon::prelude::*;

/// Phase `q` (input positions `q, q+s, ...`) along one axis of length
/// `in_len`; the taps that reach it and where they read `diff_dst`.
fn phase_axis(
    q: usize,
    in_len: usize,
    out_len: usize,
    k: usize,
    s: usize,
    pad: usize,
    dil: usize,
) -> (AxisMap, Vec<usize>) {
    let mut taps = Vec::new();
    let mut offs = Vec::new();
    // Taps in descending order, so offsets ascend: for stride 1 the taps of
    // a kernel row then read consecutive diff_dst pixels (one copy in im2col).
    for r in (0..k).rev() {
        // oh = (ih + pad − r·dil) / s must be exact.
        let num = (q + pad) as isize - (r * dil) as isize;
        if num.rem_euclid(s as isize) == 0 {
            taps.push(r);
            offs.push(num.div_euclid(s as isize));
        }
    }
    let map = AxisMap {
        len: (in_len - q).div_ceil(s),
        src_len: out_len,
        src_step: 1,
        offs,
        dst_start: q,
        dst_step: s,
    };
    (map, taps)
}

/// Output channels per group from which backward-data reads the weights in
/// place, one GEMM per tap, instead of transposing them per call.
const PER_TAP_FROM: usize = 512;

/// Output channels per group (the reduction of a 1x1 layer's GEMM) from
/// which a single-tap phase with transposed weights runs on the packed
/// GEMM (see `engine::ConvGemm::packable`) rather than the `gemm` crate:
/// ResNet-50's 1x1 layers at batch 16, 8 ABBA rounds on a Zen 5 VM, 2
/// threads: 1.06x at 28x28 and 1.08x at 56x56 with 128, 0.97x with 64.
/// On the Zen 4 VM (2 threads, 3 ABBA rounds), once the packed GEMM
/// streamed outputs larger than the caches, 64 won too: 1.12x on 256
/// channels in and 64 out at 56x56, whose 51 MB diff_src streams, and
/// 1.07x on 64 and 64 at 56x56, whose 12.8 MB does not.
const PACKED_FROM_OC: usize = 64;

/// One `icg x ocg` block of W to transpose into the phase weight buffer.
struct Transpose {
    src: usize,
    dst: usize,
}

pub struct BwdDataPlan {
    p: ConvShape,
    engine: Engine,
    /// Per-call weights: for each phase and group, `[taps·ocg x icg]`.
    wt: Vec<f32>,
    blocks: Vec<Transpose>,
}

/// One stride-1 conv per stride phase, the weight blocks to transpose
/// into the per-call buffer, and that buffer's length.
fn phases(p: &ConvShape) -> (Vec<ConvGemm>, Vec<Transpose>, usize) {
    let (icg, ocg) = (p.icg(), p.ocg());
    // With wide taps (k = ocg per GEMM) one GEMM per tap straight from
    // gHWIO is as fast as one long GEMM and saves the per-call transpose,
    // which is costly for deep layers (big weights, few pixels).
    let per_tap = ocg >= PER_TAP_FROM;
    let mut convs = Vec::new();
    let mut blocks = Vec::new();
    let mut off = 0;
    for qy in 0..p.sh.min(p.ih) {
        let (y, rs) = phase_axis(qy, p.ih, p.oh, p.kh, p.sh, p.ph, p.dil_h());
        for qx in 0..p.sw.min(p.iw) {
            let (x, ss) = phase_axis(qx, p.iw, p.ow, p.kw, p.sw, p.pw, p.dil_w());
            let gather = Gather {
                mb: p.mb,
                y: y.clone(),
                x,
                src_c: p.oc,
                cg: ocg,
            };
            let k = gather.k();
            if per_tap {
                let offs = rs
                    .iter()
                    .flat_map(|&r| ss.iter().map(move |&s| (r, s)))
                    .map(|(r, s)| p.wei_idx(0, r, s, 0, 0))
                    .collect();
                convs.push(ConvGemm {
                    gather,
                    groups: p.g,
                    dg: icg,
                    dst_c: p.ic,
                    dst_h: p.ih,
                    dst_w: p.iw,
                    // Measured: the packed path does not pay off here.
                    packed: false,
                    wei: Weights::TapsT {
                        offs,
                        group: p.taps() * icg * ocg,
                        cs: ocg,
                    },
                });
                continue;
            }
            for g in 0..p.g {
                for (a, &r) in rs.iter().enumerate() {
                    for (b, &s) in ss.iter().enumerate() {
                        blocks.push(Transpose {
                            src: p.wei_idx(g, r, s, 0, 0),
                            dst: off + g * k * icg + (a * ss.len() + b) * ocg * icg,
                        });
                    }
                }
            }
            convs.push(ConvGemm {
                gather,
                groups: p.g,
                dg: icg,
                dst_c: p.ic,
                dst_h: p.ih,
                dst_w: p.iw,
                wei: Weights::Dense { off },
                packed: ocg >= PACKED_FROM_OC,
            });
            off += p.g * k * icg;
        }
    }
    (convs, blocks, off)
}

impl BwdDataPlan {
    /// The bytes [`BwdDataPlan::new`] allocates.
    pub fn bytes_bound(p: &ConvShape, isa: Isa) -> u128 {
        let (convs, blocks, off) = phases(p);
        Engine::bytes_bound(&convs, isa)
            + 4 * off as u128
            + 2 * (blocks.len() * std::mem::size_of::<Transpose>()) as u128
    }

    pub fn new(p: &ConvShape, isa: Isa) -> Self {
        let (convs, blocks, off) = phases(p);
        BwdDataPlan {
            p: *p,
            engine: Engine::new(convs, isa),
            wt: vec![0.0; off],
            blocks,
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn workspace_bytes(&self) -> usize {
        self.engine.workspace_bytes() + 4 * self.wt.len()
    }

    pub fn run(&mut self, diff_dst: &[f32], wei: &[f32], diff_src: &mut [f32]) {
        let (icg, ocg) = (self.p.icg(), self.p.ocg());
        assert!(wei.len() >= self.p.wei_len(), "weights too small");
        if self.blocks.is_empty() {
            // Per-tap weights: read in place.
            return self.engine.run(diff_dst, wei, None, diff_src);
        }
        let wt = SendPtr(self.wt.as_mut_ptr());
        let wt_len = self.wt.len();
        // Small blocks (depthwise) go in batches so rayon overhead stays low.
        let min_len = (4096 / (icg * ocg)).max(1);
        self.blocks.par_iter().with_min_len(min_len).for_each(|t| {
            assert!(t.dst + icg * ocg <= wt_len);
            // SAFETY: every block owns a distinct icg·ocg range of `wt`
            // (distinct phase/group/tap), in bounds as asserted; `self.wt`
            // is borrowed mutably for the whole parallel call.
            let dst = unsafe { std::slice::from_raw_parts_mut(wt.ptr().add(t.dst), icg * ocg) };
            transpose(&wei[t.src..t.src + icg * ocg], icg, ocg, dst);
        });
        self.engine.run(diff_dst, &self.wt, None, diff_src);
    }
}

/// `dst[cols x rows] = src[rows x cols]ᵀ`, in cache-sized tiles.
fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    const T: usize = 16;
    for i0 in (0..rows).step_by(T) {
        for j0 in (0..cols).step_by(T) {
            for i in i0..(i0 + T).min(rows) {
                for j in j0..(j0 + T).min(cols) {
                    dst[j * rows + i] = src[i * cols + j];
                }
            }
        }
    }
}
