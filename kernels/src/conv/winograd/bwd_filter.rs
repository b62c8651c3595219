//! Backward-filter by Winograd's F(3x3, 4x4), the same points as the
//! forward's F(4x4, 3x3): over each 4x4 tile of diff_dst `h` and the 6x6
//! tile of src `d` it reads, the 3x3 filter gradient is
//! `Gᵀ[(A h Aᵀ) ⊙ (Bᵀ d B)]G`, so the sum over tiles is 36 GEMMs that
//! reduce over the tiles, `Σ_t V[xi]ᵀ·H[xi]` (input x output channels),
//! and one inverse transform per pair of channels at the end.
//!
//! Per chunk of tiles, shared by all threads (the GEMMs reduce over tiles,
//! so a chunk is a block of their reduction): the input transform of src
//! (as the forward's), the gradient transform of diff_dst, straight into
//! the GEMM's panels; then the 36 GEMMs, each split by panels of output
//! channels, add into one f32 matrix per point. Then `dw = Gᵀ Σ G`.

use super::super::im2col_gemm::blas::{self, MatRef};
use super::super::im2col_gemm::packed::{self, NR};
use super::super::im2col_gemm::par::SendPtr;
use super::transform::{self, Lanes, ALPHA, CB, M, XI};
use super::{copy_lanes, WinogradPlan};
use crate::{on_isa, Isa};
use rayon::prelude::*;

/// Bytes of transformed tiles (`V` and `H`) per chunk: well inside a 32
/// MiB last-level cache, beside src, diff_dst and the sums.
pub(super) const CHUNK_BYTES: usize = 8 << 20;

/// Tiles per parallel task of the transforms.
const TILES_PER_TASK: usize = 8;

/// The backward-filter's buffers.
pub(super) struct FilterGrad {
    /// Tiles per chunk: the reduction of each GEMM call.
    chunk: usize,
    /// `V`: `[point][chunk][K]`.
    v: Vec<f32>,
    /// `H`: per point, panels of `panel_w` output channels, `[point][panel]
    /// [chunk][panel_w]` (zeros past N).
    h: Vec<f32>,
    panel_w: usize,
    /// Per point, `Σ V[xi]ᵀ·H[xi]` over all tiles: `[point][K][N]`.
    sums: Vec<f32>,
    packed: bool,
}

impl FilterGrad {
    /// Whether the GEMMs run on the packed kernel, their panels' width,
    /// `n` padded to whole panels, and the tiles per chunk.
    fn layout(
        k: usize,
        n: usize,
        tiles: usize,
        isa: Isa,
        chunk_bytes: usize,
    ) -> (bool, usize, usize, usize) {
        let packed = packed::available_for_all(isa);
        let panel_w = if packed { NR } else { n.max(1) };
        let n_pad = n.div_ceil(panel_w) * panel_w;
        let chunk = (chunk_bytes / (XI * (k + n_pad) * 4).max(1)).clamp(1, tiles.max(1));
        (packed, panel_w, n_pad, chunk)
    }

    /// The bytes [`FilterGrad::new`] allocates.
    pub(super) fn bytes_bound(
        k: usize,
        n: usize,
        tiles: usize,
        isa: Isa,
        chunk_bytes: usize,
    ) -> u128 {
        let (_, _, n_pad, chunk) = Self::layout(k, n, tiles, isa, chunk_bytes);
        let u = |v: usize| v as u128;
        4 * u(XI) * (u(chunk) * (u(k) + u(n_pad)) + u(k) * u(n))
    }

    pub(super) fn new(k: usize, n: usize, tiles: usize, isa: Isa, chunk_bytes: usize) -> Self {
        let (packed, panel_w, n_pad, chunk) = Self::layout(k, n, tiles, isa, chunk_bytes);
        FilterGrad {
            chunk,
            v: vec![0.0; XI * chunk * k],
            h: vec![0.0; XI * chunk * n_pad],
            panel_w,
            sums: vec![0.0; XI * k * n],
            packed,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        4 * (self.v.len() + self.h.len() + self.sums.len())
    }

    pub(super) fn packed(&self) -> bool {
        self.packed
    }
}

impl WinogradPlan {
    /// `diff_wei` (gHWIO) and `diff_bias` from src and diff_dst.
    pub(super) fn run_bwd_filter(
        &mut self,
        src: &[f32],
        dy: &[f32],
        dw: &mut [f32],
        db: Option<&mut [f32]>,
    ) {
        let mut fg = self.filter.take().expect("a backward-filter plan");
        let (k, n, tiles) = (self.q.ic, self.q.oc, self.tiles());
        let (chunk, panel_w, isa) = (fg.chunk, fg.panel_w, self.isa);
        let n_pad = n.div_ceil(panel_w) * panel_w;
        let (v, h, sums) = (
            SendPtr(fg.v.as_mut_ptr()),
            SendPtr(fg.h.as_mut_ptr()),
            SendPtr(fg.sums.as_mut_ptr()),
        );
        let this = &*self;
        let mut t0 = 0;
        while t0 < tiles {
            let t1 = tiles.min(t0 + chunk);
            let groups = (t1 - t0).div_ceil(TILES_PER_TASK);
            (0..groups).into_par_iter().for_each(|gi| {
                let g0 = t0 + gi * TILES_PER_TASK;
                let g1 = t1.min(g0 + TILES_PER_TASK);
                // SAFETY: rows g0-t0.. of each point's `chunk` rows of V.
                let vg = SendPtr(unsafe { v.ptr().add((g0 - t0) * k) });
                this.input_tiles(src, g0, g1, vg, chunk);
                this.grad_tiles(dy, g0, g1, t0, h, chunk, panel_w);
            });
            let first = t0 == 0;
            if fg.packed {
                let panels = n.div_ceil(NR);
                (0..XI * panels).into_par_iter().for_each(|item| {
                    let (xi, j) = (item / panels, item % panels);
                    let (n0, n1) = (j * NR, n.min(j * NR + NR));
                    // SAFETY: AVX-512 (checked when planned); V's and H's
                    // rows of point xi hold the chunk's t1 - t0 tiles, and
                    // this item alone writes the sums' columns n0..n1 of
                    // point xi.
                    unsafe {
                        packed::gemm_panels(
                            isa,
                            k,
                            t1 - t0,
                            v.ptr().add(xi * chunk * k),
                            k,
                            true,
                            h.ptr().add(xi * chunk * n_pad + j * chunk * NR),
                            chunk,
                            n0,
                            n1,
                            sums.ptr().add(xi * k * n + n0),
                            n,
                            !first,
                        )
                    };
                });
            } else {
                (0..XI).into_par_iter().for_each(|xi| {
                    // SAFETY: as above, one point per item.
                    unsafe {
                        blas::gemm_f32(
                            isa,
                            k,
                            n,
                            t1 - t0,
                            sums.ptr().add(xi * k * n),
                            n,
                            !first,
                            MatRef {
                                ptr: v.ptr().add(xi * chunk * k),
                                rs: 1,
                                cs: k as isize,
                            },
                            MatRef {
                                ptr: h.ptr().add(xi * chunk * n_pad),
                                rs: panel_w as isize,
                                cs: 1,
                            },
                        )
                    };
                });
            }
            t0 = t1;
        }
        self.inverse_filter(&fg.sums, dw);
        if let Some(db) = db {
            bias_grad(self.isa, n, &dy[..self.q.dst_len()], db);
        }
        self.filter = Some(fg);
    }

    /// `H = A h Aᵀ` of diff_dst's tiles `g0..g1` into rows `g0-t0..` of each
    /// point's panels (`chunk` rows of `panel_w`).
    #[allow(clippy::too_many_arguments)]
    fn grad_tiles(
        &self,
        dy: &[f32],
        g0: usize,
        g1: usize,
        t0: usize,
        h: SendPtr,
        chunk: usize,
        panel_w: usize,
    ) {
        let q = self.q;
        let (n, isa) = (q.oc, self.isa);
        let n_pad = n.div_ceil(panel_w) * panel_w;
        on_isa!(isa, {
            let mut g: [Lanes; M * M] = [[0.0; CB]; M * M];
            let mut out: [Lanes; XI] = [[0.0; CB]; XI];
            let mut scratch: [Lanes; M * ALPHA] = [[0.0; CB]; M * ALPHA];
            for t in g0..g1 {
                let (img, ty, tx) = self.tile(t);
                for c0 in (0..n).step_by(CB) {
                    let cb = CB.min(n - c0);
                    for (i, row) in g.iter_mut().enumerate() {
                        let (oy, ox) = (ty * M + i / M, tx * M + i % M);
                        if oy < q.oh && ox < q.ow {
                            let at = q.dst_idx(img, oy, ox, c0);
                            copy_lanes(&dy[at..at + cb], row.as_mut_ptr());
                        } else {
                            *row = [0.0; CB];
                        }
                    }
                    transform::grad(&g, &mut out, &mut scratch);
                    // `panel_w` is NR (= CB) or all of N, so a block of
                    // channels stays in one panel.
                    let off = (c0 / panel_w) * chunk * panel_w + (t - t0) * panel_w + c0 % panel_w;
                    for (xi, o) in out.iter().enumerate() {
                        // SAFETY: row t - t0 < chunk of point xi's panel,
                        // cb channels inside it; written by this tile only.
                        copy_lanes(&o[..cb], unsafe { h.ptr().add(xi * chunk * n_pad + off) });
                    }
                }
            }
        })
    }

    /// `dw = Gᵀ x G` for every pair of channels, row-parallel over K.
    fn inverse_filter(&self, sums: &[f32], dw: &mut [f32]) {
        let (k, n, isa) = (self.q.ic, self.q.oc, self.isa);
        let out = SendPtr(dw.as_mut_ptr());
        (0..k).into_par_iter().for_each(|kk| {
            on_isa!(isa, {
                let mut x: [Lanes; XI] = [[0.0; CB]; XI];
                let mut w: [Lanes; 9] = [[0.0; CB]; 9];
                let mut scratch: [Lanes; 3 * ALPHA] = [[0.0; CB]; 3 * ALPHA];
                for c0 in (0..n).step_by(CB) {
                    let cb = CB.min(n - c0);
                    for (xi, row) in x.iter_mut().enumerate() {
                        let at = (xi * k + kk) * n + c0;
                        copy_lanes(&sums[at..at + cb], row.as_mut_ptr());
                    }
                    transform::filter_grad(&x, &mut w, &mut scratch);
                    for (tap, wt) in w.iter().enumerate() {
                        // SAFETY: tap's row kk, columns c0..c0+cb of the
                        // gHWIO weights; only this item writes row kk.
                        copy_lanes(&wt[..cb], unsafe { out.ptr().add((tap * k + kk) * n + c0) });
                    }
                }
            })
        });
    }
}

/// `db[c] = Σ dy[.., c]` over every pixel, in f64, parallel over blocks of
/// [`CB`] channels with the sums on the stack: nothing allocated per call.
fn bias_grad(isa: Isa, n: usize, dy: &[f32], db: &mut [f32]) {
    db[..n].par_chunks_mut(CB).enumerate().for_each(|(b, out)| {
        let c0 = b * CB;
        on_isa!(isa, {
            let mut s = [0.0f64; CB];
            for row in dy.chunks_exact(n) {
                for (a, &x) in s.iter_mut().zip(&row[c0..c0 + out.len()]) {
                    *a += x as f64;
                }
            }
            for (d, a) in out.iter_mut().zip(s) {
                *d = a as f32;
            }
        })
    });
}
