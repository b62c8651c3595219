//! Winograd's F(4x4, 3x3) for 3x3 convolutions at stride 1, forward and
//! backward-data: 36 multiplications for each 4x4 block of outputs and
//! pair of channels, where the direct convolution does 144 (see
//! [`transform`]). The time it saves is real arithmetic not done, so the
//! GFLOP/s reported for it count the direct convolution's FLOPs: they are
//! an effective rate and can pass the FMA peak.
//!
//! One call:
//! 1. the filter transform `U = G w Gᵀ`, 36 matrices of `K x N` (input x
//!    output channels), written straight into the GEMM's packed panels;
//! 2. then per chunk of tiles (sized so that its transformed tiles stay in
//!    the last-level cache): the input transform `V = Bᵀ d B` of every 6x6
//!    tile into 36 matrices of `tiles x K`; 36 GEMMs `M = V·U`; the output
//!    transform `Aᵀ M A` of every tile into dst, with the bias.
//!
//! Backward-data is the forward convolution of diff_dst with the weights
//! flipped and transposed (padding `2 - p`), so it runs the same code on
//! that problem; its filter transform reads the weights in that order.
//!
//! The GEMMs run on the packed AVX-512 micro-kernel of the 1x1 layers
//! ([`super::im2col_gemm::packed`]) where the CPU has AVX-512, else on the
//! `gemm` crate; the transforms run on the plan's ISA.

mod transform;

use super::im2col_gemm::blas::{self, MatRef};
use super::im2col_gemm::packed::{self, PackedB, NR};
use super::im2col_gemm::par::SendPtr;
use super::{f32_tolerance, ConvAlgo, ConvArgs, ConvPlan, ConvShape, Direction};
use crate::{on_isa, Isa};
use rayon::prelude::*;
use transform::{Lanes, ALPHA, CB, M, XI};

/// Bytes of transformed tiles (`V` and `M`) per chunk: well inside a 32 MiB
/// last-level cache, beside the input, output and weights.
const CHUNK_BYTES: usize = 8 << 20;

/// Relative L2 error allowed: the transforms scale values by up to 5 and
/// sum 36 points, so F(4x4, 3x3) rounds more than a direct sum; measured
/// 2-4e-6 on random layers of 64-512 channels (`numpy`, f32).
const TOLERANCE: f64 = 5e-5;

pub struct Winograd;

impl ConvAlgo for Winograd {
    fn name(&self) -> &'static str {
        "winograd"
    }

    fn supports(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Result<(), String> {
        if dir == Direction::BwdFilter {
            return Err("runs forward and backward-data only".into());
        }
        if p.g != 1 {
            return Err("runs one group only".into());
        }
        if (p.kh, p.kw, p.sh, p.sw, p.dh, p.dw) != (3, 3, 1, 1, 0, 0) {
            return Err("runs 3x3 kernels at stride 1 without dilation only".into());
        }
        if p.ph > 2 || p.pw > 2 {
            return Err("runs padding of at most 2 only".into());
        }
        let best = Isa::detect();
        if isa != best {
            return Err(format!(
                "its GEMMs run on the best ISA here ({best}); use --isa auto"
            ));
        }
        Ok(())
    }

    fn plan(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Box<dyn ConvPlan> {
        Box::new(WinogradPlan::new(p, dir, isa))
    }

    fn tolerance(&self, p: &ConvShape, dir: Direction) -> f64 {
        f32_tolerance(p, dir).max(TOLERANCE)
    }
}

/// The transformed weights, one `K x N` matrix per point of the tile.
enum Weights {
    /// In the AVX-512 micro-kernel's panels of [`NR`] columns.
    Packed(Vec<PackedB>),
    /// Row-major, `[point][K][N]`, for the `gemm` crate.
    Plain(Vec<f32>),
}

struct WinogradPlan {
    /// The problem as asked.
    p: ConvShape,
    dir: Direction,
    /// The forward problem that runs: `p`, or for backward-data its
    /// transpose (diff_dst in, diff_src out).
    q: ConvShape,
    isa: Isa,
    tiles_h: usize,
    tiles_w: usize,
    /// Tiles per chunk.
    chunk: usize,
    weights: Weights,
    /// `V`: `[point][chunk][K]`.
    v: Vec<f32>,
    /// `M`: `[point][chunk][N]`.
    m: Vec<f32>,
}

/// The forward problem whose output is `p`'s backward-data.
fn transposed(p: &ConvShape) -> ConvShape {
    ConvShape {
        ic: p.oc,
        ih: p.oh,
        iw: p.ow,
        oc: p.ic,
        oh: p.ih,
        ow: p.iw,
        ph: 2 - p.ph,
        pw: 2 - p.pw,
        ..*p
    }
}

impl WinogradPlan {
    fn new(p: &ConvShape, dir: Direction, isa: Isa) -> Self {
        Self::with_chunk_bytes(p, dir, isa, CHUNK_BYTES)
    }

    /// A plan whose chunks of transformed tiles take about `chunk_bytes`
    /// (tests use small ones to run many chunks).
    fn with_chunk_bytes(p: &ConvShape, dir: Direction, isa: Isa, chunk_bytes: usize) -> Self {
        assert!(
            isa.is_supported(),
            "winograd planned for {isa}, which this CPU lacks"
        );
        let q = match dir {
            Direction::Fwd => *p,
            Direction::BwdData => transposed(p),
            Direction::BwdFilter => panic!("winograd has no backward-filter"),
        };
        let (k, n) = (q.ic, q.oc);
        let (tiles_h, tiles_w) = (q.oh.div_ceil(M), q.ow.div_ceil(M));
        let tiles = q.mb * tiles_h * tiles_w;
        let per_tile = XI * (k + n) * 4;
        let mut chunk = (chunk_bytes / per_tile.max(1)).clamp(6, tiles.max(6));
        // As many chunks as that takes, evened out, in whole micro-tiles.
        let chunks = tiles.div_ceil(chunk).max(1);
        chunk = tiles.div_ceil(chunks).div_ceil(6) * 6;
        let weights = if isa == Isa::Avx512 && packed::available() {
            Weights::Packed((0..XI).map(|_| PackedB::new(k, n)).collect())
        } else {
            Weights::Plain(vec![0.0; XI * k * n])
        };
        WinogradPlan {
            p: *p,
            dir,
            q,
            isa,
            tiles_h,
            tiles_w,
            chunk,
            weights,
            v: vec![0.0; XI * chunk * k],
            m: vec![0.0; XI * chunk * n],
        }
    }

    fn tiles(&self) -> usize {
        self.q.mb * self.tiles_h * self.tiles_w
    }

    /// Image, tile row and tile column of tile `t`.
    fn tile(&self, t: usize) -> (usize, usize, usize) {
        let per_image = self.tiles_h * self.tiles_w;
        (
            t / per_image,
            (t % per_image) / self.tiles_w,
            t % self.tiles_w,
        )
    }

    fn run(&mut self, src: &[f32], wei: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
        self.transform_filter(wei);
        let tiles = self.tiles();
        let mut t0 = 0;
        while t0 < tiles {
            let t1 = tiles.min(t0 + self.chunk);
            self.transform_input(src, t0, t1);
            self.multiply(t1 - t0);
            self.transform_output(bias, dst, t0, t1);
            t0 = t1;
        }
    }

    /// `U = G w Gᵀ` for every pair of channels, into the GEMM's layout.
    fn transform_filter(&mut self, wei: &[f32]) {
        let (k, n, isa) = (self.q.ic, self.q.oc, self.isa);
        // Where point `xi`, row `kk`, columns `c0..` go: a panel of NR
        // columns (c0 is a multiple of CB = NR) or a plain row.
        let (bases, panel_w): (Vec<SendPtr>, usize) = match &mut self.weights {
            Weights::Packed(packs) => (
                packs
                    .iter_mut()
                    .map(|b| SendPtr(b.panels_mut().as_mut_ptr()))
                    .collect(),
                NR,
            ),
            Weights::Plain(u) => (
                u.chunks_exact_mut(k * n)
                    .map(|m| SendPtr(m.as_mut_ptr()))
                    .collect(),
                n,
            ),
        };
        const { assert!(CB == NR) };
        let bwd = self.dir == Direction::BwdData;
        // Tap t of the forward problem's weights, row kk, column c: for
        // backward-data, the original weights flipped and transposed.
        let at = |t: usize, kk: usize, c: usize| {
            if bwd {
                wei[((8 - t) * n + c) * k + kk]
            } else {
                wei[(t * k + kk) * n + c]
            }
        };
        let blocks = n.div_ceil(CB);
        let rows_per_item = 16;
        let items = blocks * k.div_ceil(rows_per_item);
        (0..items).into_par_iter().for_each(|item| {
            let (b, r0) = (item % blocks, (item / blocks) * rows_per_item);
            let (c0, cb) = (b * CB, CB.min(n - b * CB));
            on_isa!(isa, {
                let mut w: [Lanes; 9] = [[0.0; CB]; 9];
                let mut u: [Lanes; XI] = [[0.0; CB]; XI];
                for kk in r0..k.min(r0 + rows_per_item) {
                    for (t, wt) in w.iter_mut().enumerate() {
                        for (c, x) in wt[..cb].iter_mut().enumerate() {
                            *x = at(t, kk, c0 + c);
                        }
                    }
                    transform::filter(&w, &mut u);
                    let off = (c0 / panel_w) * k * panel_w + kk * panel_w + c0 % panel_w;
                    for (xi, ux) in u.iter().enumerate() {
                        // SAFETY: `off + cb` stays inside point xi's matrix
                        // (K rows of panels of panel_w columns, or of N), and
                        // only this item writes row kk's columns c0..c0+cb.
                        unsafe {
                            std::ptr::copy_nonoverlapping(ux.as_ptr(), bases[xi].ptr().add(off), cb)
                        };
                    }
                }
            })
        });
    }

    /// `V = Bᵀ d B` of tiles `t0..t1` into rows `0..t1-t0` of each point.
    fn transform_input(&mut self, src: &[f32], t0: usize, t1: usize) {
        let q = self.q;
        let (k, chunk, isa) = (q.ic, self.chunk, self.isa);
        let v = SendPtr(self.v.as_mut_ptr());
        let this = &*self;
        (t0..t1).into_par_iter().with_min_len(4).for_each(|t| {
            let (img, ty, tx) = this.tile(t);
            let y0 = (ty * M) as isize - q.ph as isize;
            let x0 = (tx * M) as isize - q.pw as isize;
            on_isa!(isa, {
                let mut d: [Lanes; XI] = [[0.0; CB]; XI];
                let mut out: [Lanes; XI] = [[0.0; CB]; XI];
                for c0 in (0..k).step_by(CB) {
                    let cb = CB.min(k - c0);
                    for y in 0..ALPHA {
                        let iy = y0 + y as isize;
                        for x in 0..ALPHA {
                            let ix = x0 + x as isize;
                            let row = &mut d[y * ALPHA + x];
                            if iy < 0 || ix < 0 || iy >= q.ih as isize || ix >= q.iw as isize {
                                *row = [0.0; CB];
                            } else {
                                let at = q.src_idx(img, iy as usize, ix as usize, c0);
                                row[..cb].copy_from_slice(&src[at..at + cb]);
                            }
                        }
                    }
                    transform::input(&d, &mut out);
                    for (xi, o) in out.iter().enumerate() {
                        // SAFETY: row t - t0 < chunk of point xi, channels
                        // c0..c0+cb < K: inside V, and written by this tile
                        // only.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                o.as_ptr(),
                                v.ptr().add((xi * chunk + t - t0) * k + c0),
                                cb,
                            )
                        };
                    }
                }
            })
        });
    }

    /// `M[xi] = V[xi] · U[xi]` for the first `rows` tiles of the chunk.
    fn multiply(&mut self, rows: usize) {
        let (k, n, chunk) = (self.q.ic, self.q.oc, self.chunk);
        let m = SendPtr(self.m.as_mut_ptr());
        let v = &self.v;
        match &self.weights {
            Weights::Packed(packs) => {
                let panels = n.div_ceil(NR);
                (0..XI * panels).into_par_iter().for_each(|item| {
                    let (xi, j) = (item / panels, item % panels);
                    let (n0, n1) = (j * NR, n.min(j * NR + NR));
                    // SAFETY: AVX-512 is available (checked when planned);
                    // V's rows for xi hold `rows` rows of K floats, and this
                    // item alone writes M's columns n0..n1 of point xi.
                    unsafe {
                        packs[xi].gemm(
                            rows,
                            v.as_ptr().add(xi * chunk * k),
                            k,
                            n0,
                            n1,
                            m.ptr().add(xi * chunk * n + n0),
                            n,
                            None,
                        )
                    };
                });
            }
            Weights::Plain(u) => {
                (0..XI).into_par_iter().for_each(|xi| {
                    // SAFETY: as above; the crate reads V's and U's
                    // matrices of point xi and writes M's, which no other
                    // item touches.
                    unsafe {
                        blas::gemm_f32(
                            rows,
                            n,
                            k,
                            m.ptr().add(xi * chunk * n),
                            n,
                            false,
                            MatRef {
                                ptr: v.as_ptr().add(xi * chunk * k),
                                rs: k as isize,
                                cs: 1,
                            },
                            MatRef {
                                ptr: u.as_ptr().add(xi * k * n),
                                rs: n as isize,
                                cs: 1,
                            },
                        )
                    };
                });
            }
        }
    }

    /// `Aᵀ M A` of tiles `t0..t1` (rows `0..t1-t0`) into dst, plus bias.
    fn transform_output(&self, bias: Option<&[f32]>, dst: &mut [f32], t0: usize, t1: usize) {
        let q = self.q;
        let (n, chunk, isa) = (q.oc, self.chunk, self.isa);
        let out = SendPtr(dst.as_mut_ptr());
        let m = &self.m;
        (t0..t1).into_par_iter().with_min_len(4).for_each(|t| {
            let (img, ty, tx) = self.tile(t);
            let rows = M.min(q.oh - ty * M);
            let cols = M.min(q.ow - tx * M);
            on_isa!(isa, {
                let mut mt: [Lanes; XI] = [[0.0; CB]; XI];
                let mut y: [Lanes; M * M] = [[0.0; CB]; M * M];
                for c0 in (0..n).step_by(CB) {
                    let cb = CB.min(n - c0);
                    for (xi, row) in mt.iter_mut().enumerate() {
                        let at = (xi * chunk + t - t0) * n + c0;
                        row[..cb].copy_from_slice(&m[at..at + cb]);
                    }
                    transform::output(&mt, &mut y);
                    if let Some(b) = bias {
                        for row in y.iter_mut() {
                            for (x, bb) in row[..cb].iter_mut().zip(&b[c0..c0 + cb]) {
                                *x += bb;
                            }
                        }
                    }
                    for a in 0..rows {
                        for bcol in 0..cols {
                            let at = q.dst_idx(img, ty * M + a, tx * M + bcol, c0);
                            // SAFETY: a pixel of this tile inside dst (rows
                            // and cols clip the last tiles); tiles do not
                            // overlap, so no other item writes it.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    y[a * M + bcol].as_ptr(),
                                    out.ptr().add(at),
                                    cb,
                                )
                            };
                        }
                    }
                }
            })
        });
    }
}

impl ConvPlan for WinogradPlan {
    fn workspace_bytes(&self) -> usize {
        let weights = match &self.weights {
            Weights::Packed(p) => p.iter().map(PackedB::bytes).sum(),
            Weights::Plain(u) => 4 * u.len(),
        };
        weights + 4 * (self.v.len() + self.m.len())
    }

    fn kernel_name(&self) -> String {
        let base = format!("{}_conv_{}_f32_wino4x3", self.isa, self.dir);
        match self.weights {
            Weights::Packed(_) => base,
            Weights::Plain(_) => format!("{base}+gemm_f32({})", blas::gemm_isa()),
        }
    }

    fn execute(&mut self, args: ConvArgs<'_>) {
        args.assert_fits(&self.p);
        match args {
            ConvArgs::Fwd {
                src,
                wei,
                bias,
                dst,
            } if self.dir == Direction::Fwd => self.run(src, wei, bias, dst),
            ConvArgs::BwdData {
                diff_dst,
                wei,
                diff_src,
            } if self.dir == Direction::BwdData => self.run(diff_dst, wei, None, diff_src),
            args => panic!(
                "winograd plan for {} got {} arguments",
                self.dir,
                args.direction()
            ),
        }
    }
}

#[cfg(test)]
mod tests;
