//! Backward-filter: per group, `diff_wei[K x ocg] = colᵀ · diff_dst` summed
//! over all output pixels, with `col` the forward im2col matrix.
//!
//! Two ways to split the work, picked per problem:
//! - `Tiles`: threads own disjoint tiles of `diff_wei` (a range of K rows and
//!   of output channels) and each walks all pixels, im2col-ing only its own
//!   columns. No reduction; best when the weights are large (deep layers,
//!   few pixels), where per-thread partial sums would cost a big reduction.
//! - `Pixels`: threads take ranges of pixels and accumulate the whole
//!   `diff_wei` into a private partial sum, reduced at the end. Best when
//!   the weights are small and there are not enough tiles to share out, and
//!   for 1x1 stride-1 layers over many pixels (no im2col to share out).

use super::blas::{gemm_f32, MatRef};
use super::fwd::fwd_gather;
use super::gather::Gather;
use super::par::{SendPtr, Slots};
use crate::conv::ConvShape;
use crate::Isa;
use rayon::prelude::*;

/// Bytes of im2col chunk per thread (see `engine::COL_BUDGET`).
const COL_BUDGET: usize = 512 << 10;
/// Most K rows in one `Tiles` tile.
const MAX_TILE_K: usize = 576;
/// Weights (floats, all groups) from which `Tiles` pays off, per thread.
const TILES_FROM: usize = 64 << 10;

#[derive(Clone, Copy)]
struct Tile {
    g: usize,
    k0: usize,
    k1: usize,
    n0: usize,
    n1: usize,
}

enum Split {
    Tiles(Vec<Tile>),
    /// Pixel ranges, each accumulated into the running thread's partial sum.
    Pixels(Vec<(usize, usize)>),
}

struct Scratch {
    col: Vec<f32>,
    /// `Pixels` only: this thread's partial `diff_wei`.
    partial: Vec<f32>,
    /// Partial `diff_bias` (f64: sums over many pixels).
    bias: Vec<f64>,
    /// One chunk's bias sums, in f32 so the loop vectorises.
    bias32: Vec<f32>,
    touched: bool,
}

pub struct BwdFilterPlan {
    p: ConvShape,
    gather: Gather,
    split: Split,
    rows: usize,
    slots: Slots<Scratch>,
    workspace: usize,
    isa: Isa,
}

/// `len` cut into `parts` near-equal ranges, boundaries on multiples of
/// `align` where possible.
fn ranges(len: usize, parts: usize, align: usize) -> Vec<(usize, usize)> {
    let parts = parts.clamp(1, len.max(1));
    let mut out = Vec::with_capacity(parts);
    let mut a = 0;
    for i in 1..=parts {
        let mut b = if i == parts {
            len
        } else {
            (len * i / parts).next_multiple_of(align).min(len)
        };
        b = b.max(a);
        if b > a {
            out.push((a, b));
        }
        a = b;
    }
    out
}

/// How [`BwdFilterPlan::new`] splits the work: the gather, the split, the
/// pixels per GEMM, and each slot's im2col and partial-sum lengths.
struct Layout {
    gather: Gather,
    split: Split,
    rows: usize,
    col_len: usize,
    partial_len: usize,
}

impl BwdFilterPlan {
    /// The bytes [`BwdFilterPlan::new`] allocates.
    pub fn bytes_bound(p: &ConvShape) -> u128 {
        let l = Self::layout(p);
        let u = |v: usize| v as u128;
        let threads = u(rayon::current_num_threads().max(1));
        let split = match &l.split {
            Split::Tiles(t) => 2 * t.len() * std::mem::size_of::<Tile>(),
            Split::Pixels(r) => r.len() * 16,
        };
        threads * (4 * u(l.col_len + l.partial_len) + 8 * u(p.oc)) + u(split)
    }

    pub fn new(p: &ConvShape, isa: Isa) -> Self {
        let Layout {
            gather,
            split,
            rows,
            col_len,
            partial_len,
        } = Self::layout(p);
        let slots = Slots::new(|| Scratch {
            col: vec![0.0; col_len],
            partial: vec![0.0; partial_len],
            bias: vec![0.0; p.oc],
            bias32: vec![0.0; p.oc],
            touched: false,
        });
        let workspace = slots.len() * (4 * (col_len + partial_len) + 8 * p.oc);
        BwdFilterPlan {
            p: *p,
            gather,
            split,
            rows,
            slots,
            workspace,
            isa,
        }
    }

    fn layout(p: &ConvShape) -> Layout {
        let threads = rayon::current_num_threads().max(1);
        let gather = fwd_gather(p);
        let (k, ocg) = (gather.k(), p.ocg());
        let px = gather.pixels();
        // A 1x1 stride-1 layer reads its GEMM operand in place, so a thread
        // owning all of K costs no im2col; with many pixels per K row, one
        // GEMM over all of diff_wei per pixel chunk (B packed once, not once
        // per K tile) outruns the tiles even after the reduction: ResNet-50's
        // 512->256 at 28x28 went from 19.5 to 17.4 ms on 2 Zen 4 threads
        // (one run; 1.12x in 4 ABBA rounds). The reduction reads a partial
        // per thread, so the pixels must grow with the threads, and the
        // partials stay within 64 MiB.
        let partials = threads * p.g * k * ocg;
        let pixels_in_place =
            gather.reads_identity() && px >= k * threads.max(2) && partials <= 16 << 20;
        let (split, kb_max) = if p.g * k * ocg >= TILES_FROM * threads && !pixels_in_place {
            // Whole output-channel blocks of at most 256, then enough K
            // blocks for two tiles per thread, with a tile count that
            // divides evenly among the threads.
            let nbn = ocg.div_ceil(256);
            let per_g = nbn * p.g;
            let mut nbk = (2 * threads).div_ceil(per_g).max(1);
            while !(nbk * per_g).is_multiple_of(threads) && nbk < 4 * threads {
                nbk += 1;
            }
            // Keep a tile (the GEMM's dst, re-read every pixel chunk) near
            // L2-sized: at most MAX_TILE_K rows of K.
            let nbk = nbk.max(k.div_ceil(MAX_TILE_K)).min(k.div_ceil(16));
            let mut tiles = Vec::new();
            for g in 0..p.g {
                for &(k0, k1) in &ranges(k, nbk, 16) {
                    for &(n0, n1) in &ranges(ocg, nbn, 16) {
                        tiles.push(Tile { g, k0, k1, n0, n1 });
                    }
                }
            }
            let kb = tiles.iter().map(|t| t.k1 - t.k0).max().unwrap_or(1);
            (Split::Tiles(tiles), kb)
        } else {
            (Split::Pixels(ranges(px, 4 * threads, 1)), k)
        };
        // Pixels per GEMM (its reduction depth): many, so the dst tile's
        // read-modify-write per chunk is amortised; chunks of equal size.
        let rows = (COL_BUDGET / (4 * kb_max.max(1)))
            .clamp(256, 2048)
            .min(px)
            .max(1);
        let rows = px.div_ceil(px.div_ceil(rows).max(1)).max(1);
        let col_len = if gather.reads_identity() {
            0
        } else {
            rows * kb_max
        };
        let partial_len = if matches!(split, Split::Pixels(_)) {
            p.wei_len()
        } else {
            0
        };
        Layout {
            gather,
            split,
            rows,
            col_len,
            partial_len,
        }
    }

    pub fn workspace_bytes(&self) -> usize {
        self.workspace
    }

    pub fn run(
        &mut self,
        src: &[f32],
        diff_dst: &[f32],
        diff_wei: &mut [f32],
        diff_bias: Option<&mut [f32]>,
    ) {
        let p = self.p;
        assert!(
            src.len() >= p.src_len()
                && diff_dst.len() >= p.dst_len()
                && diff_wei.len() >= p.wei_len()
        );
        assert!(diff_bias.as_ref().is_none_or(|b| b.len() >= p.oc));
        for s in self.slots.iter_mut() {
            s.touched = false;
        }
        let want_bias = diff_bias.is_some();
        match &self.split {
            Split::Tiles(tiles) => {
                let (wei, bias) = (
                    SendPtr(diff_wei.as_mut_ptr()),
                    diff_bias.map(|b| SendPtr(b.as_mut_ptr())),
                );
                let me = &*self;
                tiles
                    .par_iter()
                    .for_each(|t| me.run_tile(t, src, diff_dst, wei, bias));
            }
            Split::Pixels(parts) => {
                let me = &*self;
                parts
                    .par_iter()
                    .for_each(|&(a, b)| me.run_pixels(a, b, src, diff_dst, want_bias));
                self.reduce(diff_wei, diff_bias);
            }
        }
    }

    /// The GEMM operand `colᵀ` (K x rows) for pixels `p0..p0+rows`, columns
    /// `k0..k1` of group `g`.
    #[allow(clippy::too_many_arguments)]
    fn col_t(
        &self,
        src: &[f32],
        g: usize,
        p0: usize,
        rows: usize,
        k0: usize,
        k1: usize,
        col: &mut [f32],
    ) -> MatRef {
        let gt = &self.gather;
        if gt.reads_identity() {
            // 1x1 stride 1 unpadded: the source rows are the im2col matrix.
            MatRef {
                ptr: src[p0 * gt.src_c + g * gt.cg + k0..].as_ptr(),
                rs: 1,
                cs: gt.src_c as isize,
            }
        } else {
            gt.im2col(src, g, p0, rows, k0, k1, col);
            MatRef {
                ptr: col.as_ptr(),
                rs: 1,
                cs: (k1 - k0) as isize,
            }
        }
    }

    fn run_tile(
        &self,
        t: &Tile,
        src: &[f32],
        diff_dst: &[f32],
        wei: SendPtr,
        bias: Option<SendPtr>,
    ) {
        let p = &self.p;
        let (k, ocg, px) = (self.gather.k(), p.ocg(), self.gather.pixels());
        let (kb, nb) = (t.k1 - t.k0, t.n1 - t.n0);
        let ch0 = t.g * ocg + t.n0;
        let mut s = self.slots.lock();
        let s = &mut *s;
        let do_bias = bias.is_some() && t.k0 == 0;
        s.bias[..nb].fill(0.0);
        let mut p0 = 0;
        while p0 < px {
            let rows = self.rows.min(px - p0);
            let lhs = self.col_t(src, t.g, p0, rows, t.k0, t.k1, &mut s.col);
            let rhs = MatRef {
                ptr: diff_dst[p0 * p.oc + ch0..].as_ptr(),
                rs: p.oc as isize,
                cs: 1,
            };
            // SAFETY: tiles partition diff_wei (distinct group, K range and
            // channel range), so rows k0..k1, columns n0..n1 of group g
            // belong to this tile alone; in bounds as asserted in `run`.
            // lhs/rhs cover kb x rows and rows x nb elements of live buffers.
            unsafe {
                let d = wei.ptr().add(t.g * k * ocg + t.k0 * ocg + t.n0);
                gemm_f32(self.isa, kb, nb, rows, d, ocg, p0 > 0, lhs, rhs);
            }
            if do_bias {
                let rows_dd = &diff_dst[p0 * p.oc..(p0 + rows) * p.oc];
                column_sums(rows_dd, p.oc, ch0, &mut s.bias32[..nb], &mut s.bias[..nb]);
            }
            p0 += rows;
        }
        if let (true, Some(b)) = (do_bias, bias) {
            // SAFETY: only the k0 == 0 tile of a (group, channel range)
            // writes these nb bias entries; in bounds as asserted in `run`.
            let b = unsafe { std::slice::from_raw_parts_mut(b.ptr().add(ch0), nb) };
            for (d, &v) in b.iter_mut().zip(&s.bias[..nb]) {
                *d = v as f32;
            }
        }
    }

    fn run_pixels(&self, a: usize, b: usize, src: &[f32], diff_dst: &[f32], want_bias: bool) {
        let p = &self.p;
        let (k, ocg) = (self.gather.k(), p.ocg());
        let mut s = self.slots.lock();
        let s = &mut *s;
        if !s.touched {
            s.partial.fill(0.0);
            s.bias.fill(0.0);
            s.touched = true;
        }
        let mut p0 = a;
        while p0 < b {
            let rows = self.rows.min(b - p0);
            for g in 0..p.g {
                let lhs = self.col_t(src, g, p0, rows, 0, k, &mut s.col);
                let rhs = MatRef {
                    ptr: diff_dst[p0 * p.oc + g * ocg..].as_ptr(),
                    rs: p.oc as isize,
                    cs: 1,
                };
                let d = &mut s.partial[g * k * ocg..(g + 1) * k * ocg];
                // SAFETY: d is this thread's own K x ocg partial; lhs/rhs
                // cover k x rows and rows x ocg elements of live buffers.
                unsafe { gemm_f32(self.isa, k, ocg, rows, d.as_mut_ptr(), ocg, true, lhs, rhs) };
            }
            if want_bias {
                let rows_dd = &diff_dst[p0 * p.oc..(p0 + rows) * p.oc];
                column_sums(rows_dd, p.oc, 0, &mut s.bias32, &mut s.bias);
            }
            p0 += rows;
        }
    }

    /// diff_wei (and diff_bias) = sum of the touched partials, in parallel.
    fn reduce(&self, diff_wei: &mut [f32], diff_bias: Option<&mut [f32]>) {
        let n = self.slots.len();
        let wl = self.p.wei_len();
        diff_wei[..wl]
            .par_chunks_mut(16 << 10)
            .enumerate()
            .for_each(|(i, out)| {
                let at = i * (16 << 10);
                out.fill(0.0);
                for j in 0..n {
                    let s = self.slots.read(j);
                    if s.touched {
                        let len = out.len();
                        for (o, &v) in out.iter_mut().zip(&s.partial[at..at + len]) {
                            *o += v;
                        }
                    }
                }
            });
        if let Some(db) = diff_bias {
            let db = &mut db[..self.p.oc];
            db.fill(0.0);
            for j in 0..n {
                let s = self.slots.read(j);
                if s.touched {
                    for (d, &v) in db.iter_mut().zip(&s.bias) {
                        *d += v as f32;
                    }
                }
            }
        }
    }
}

/// `acc[j] += Σ_rows m[row][c0 + j]` for the `acc.len()` columns from `c0`
/// of a row-major matrix with row length `stride`. Each chunk (a few hundred
/// rows) is summed in f32 (vectorised), then added to the f64 total.
fn column_sums(m: &[f32], stride: usize, c0: usize, tmp: &mut [f32], acc: &mut [f64]) {
    let nb = acc.len();
    tmp.fill(0.0);
    for row in m.chunks_exact(stride) {
        for (t, &v) in tmp.iter_mut().zip(&row[c0..c0 + nb]) {
            *t += v;
        }
    }
    for (a, &t) in acc.iter_mut().zip(tmp.iter()) {
        *a += t as f64;
    }
}
