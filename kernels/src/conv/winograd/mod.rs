//! Winograd's F(4x4, 3x3) for 3x3 convolutions at stride 1, in all three
//! directions: 36 multiplications for each 4x4 block of outputs and pair
//! of channels, where the direct convolution does 144 (see [`transform`]).
//! The time it saves is real arithmetic not done, so the GFLOP/s reported
//! for it count the direct convolution's FLOPs: they are an effective rate
//! and can pass the FMA peak.
//!
//! A forward (or backward-data) call:
//! 1. the filter transform `U = G w Gᵀ`, 36 matrices of `K x N` (input x
//!    output channels), written straight into the GEMM's packed panels
//!    and shared by all threads;
//! 2. then each thread takes chunks of tiles through all the rest in its
//!    own scratch, sized to stay in its L2: the input transform `V = Bᵀ d
//!    B` of every 6x6 tile (36 matrices of `tiles x K`), then per panel of
//!    64 output channels the 36 GEMMs `M = V·U` and the output transform
//!    `Aᵀ M A` of that panel into dst, with the bias.
//!
//! Where the transformed weights outgrow half the cache counted on
//! ([`crate::bandwidth::cache_bytes`]; 512 channels each way: 37.7 MB),
//! step 2 would stream them from DRAM once per chunk; those layers instead
//! transform every tile's input first, then give each item one panel of
//! output channels, whose weights it transforms into its thread's scratch
//! and runs over many tiles ([`Schedule::Panels`]). `winograd_panels`
//! ([`Winograd::PANELS`]) takes panels at every size, for `auto` to time
//! beside `winograd`.
//!
//! Backward-data is the forward convolution of diff_dst with the weights
//! flipped and transposed (padding `2 - p`), so it runs the same code on
//! that problem; its filter transform reads the weights in that order.
//! Backward-filter is F(3x3, 4x4) on the same points ([`bwd_filter`]).
//!
//! The GEMMs run on the packed AVX-512 micro-kernel of the 1x1 layers
//! ([`super::im2col_gemm::packed`]) where the plan's ISA is AVX-512, else
//! on the `gemm` crate's kernels for it; the transforms run on that ISA.

mod bwd_filter;
mod transform;

use super::im2col_gemm::blas::{self, MatRef};
use super::im2col_gemm::packed::{self, PackedB, NR};
use super::im2col_gemm::par::{SendPtr, Slots};
use super::{f32_tolerance, ConvAlgo, ConvArgs, ConvPlan, ConvShape, Direction, PLAN_SMALL_BYTES};
use crate::{on_isa, Isa};
use rayon::prelude::*;
use transform::{Lanes, ALPHA, CB, M, XI};

/// Bytes of one thread's transformed tiles (`V` and one panel of `M`): most
/// of a 1 MiB L2. On the 2-core Zen 5, one run each of ResNet-50's 56x56,
/// 28x28 and 14x14 3x3 layers, forward and backward-data: 1.00-1.03x over
/// 512 KiB, 1.02-1.07x over 256 KiB, and 1.03-1.19x over chunks of 8 MiB
/// shared by all threads in three parallel passes, one per step (but 0.75x
/// of those on the 7x7 layer of 512 channels, which the direct convolution
/// runs faster than either; 2.5 MiB was level in the whole model).
const SCRATCH_BYTES: usize = 768 << 10;

/// Rows of the weights (input channels of the problem that runs) per item
/// of the filter transform: its taps take 36 KiB of stack.
const FILTER_ROWS: usize = 16;

/// Relative L2 error allowed: the transforms scale values by up to 5 and
/// sum 36 points, so F(4x4, 3x3) rounds more than a direct sum; measured
/// 2-4e-6 on random layers of 64-512 channels (`numpy`, f32).
const TOLERANCE: f64 = 5e-5;

/// F(4x4, 3x3), as two algorithms that differ only in when they take
/// [`Schedule::Panels`]: [`Winograd::BY_SIZE`] and [`Winograd::PANELS`].
pub struct Winograd {
    always_panels: bool,
}

impl Winograd {
    /// `winograd`: panels where the transformed weights outgrow half the
    /// cache counted on ([`panels_past_cache`]), else chunks.
    pub const BY_SIZE: Winograd = Winograd {
        always_panels: false,
    };
    /// `winograd_panels`: panels wherever they apply (forward and
    /// backward-data), for `auto` to time beside `winograd`: which schedule
    /// wins below the cache depends on the machine. On the 2-core Xeon
    /// with 480 MiB of L3 (family 6, model 167), ResNet-50's 14x14 layer of
    /// 256 channels (9.4 MB of transformed weights) ran 1.49x forward and
    /// 1.63x backward-data on panels (ABBA, 3 rounds; one `--algo all` run:
    /// 1.22x and 1.64x); on the Zen 4 panels lost there (0.96-1.00x).
    pub const PANELS: Winograd = Winograd {
        always_panels: true,
    };
}

impl ConvAlgo for Winograd {
    fn name(&self) -> &'static str {
        if self.always_panels {
            "winograd_panels"
        } else {
            "winograd"
        }
    }

    fn supports(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Result<(), String> {
        if p.g != 1 {
            return Err("runs one group only".into());
        }
        if (p.kh, p.kw, p.sh, p.sw, p.dh, p.dw) != (3, 3, 1, 1, 0, 0) {
            return Err("runs 3x3 kernels at stride 1 without dilation only".into());
        }
        if p.ph > 2 || p.pw > 2 {
            return Err("runs padding of at most 2 only".into());
        }
        // (Not the thread count: asking rayon for it would build its
        // global pool before the session sizes it.)
        if self.always_panels && dir == Direction::BwdFilter {
            return Err("runs forward and backward-data only (backward-filter: winograd)".into());
        }
        blas::refusal(isa)
    }

    fn plan(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Box<dyn ConvPlan> {
        Box::new(WinogradPlan::new(p, dir, isa, self.always_panels))
    }

    fn workspace_bound(&self, p: &ConvShape, dir: Direction, isa: Isa) -> u128 {
        WinogradPlan::bytes_bound(p, dir, isa, self.always_panels) + PLAN_SMALL_BYTES
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
    weights: Weights,
    schedule: Schedule,
    scratch: Slots<Scratch>,
    /// The backward-filter's buffers (that direction only).
    filter: Option<bwd_filter::FilterGrad>,
}

/// How the forward and backward-data GEMMs walk tiles and output channels.
enum Schedule {
    /// Each item takes a chunk of tiles through every panel of output
    /// channels, its `V` and `M` in the thread's L2; the transformed weights
    /// are read once per chunk of `chunk` tiles (the rows of each GEMM).
    Chunks { chunk: usize },
    /// `V` of every tile first (`[point][tiles][K]`, shared), then each item
    /// transforms the weights of one panel of [`NR`] output channels into
    /// its thread's scratch and runs it over its share of the tiles, `tiles`
    /// at a time: the transformed weights never leave the thread, `V` is
    /// read once per panel. Where the transformed weights outgrow half the
    /// cache counted on ([`panels_past_cache`]), or always under
    /// [`Winograd::PANELS`].
    Panels { v: Vec<f32>, tiles: usize },
}

/// One thread's `V` (`[point][chunk][K]`, [`Schedule::Chunks`]) or
/// transformed weights of one panel (`[point][K][NR]`,
/// [`Schedule::Panels`]), and `M` for one panel of output channels
/// (`[point][chunk or tiles][NR]`).
struct Scratch {
    v: Vec<f32>,
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

/// Tiles per chunk of the forward and backward-data GEMMs: whole
/// micro-tiles (6 rows), at least one, whose `V` and `M` take about
/// `scratch_bytes`.
fn chunk_tiles(k: usize, tiles: usize, scratch_bytes: usize) -> usize {
    let per_tile = XI * (k + NR) * 4;
    (scratch_bytes / per_tile)
        .clamp(1, tiles.max(1))
        .div_ceil(6)
        * 6
}

/// Whether [`Winograd::BY_SIZE`] takes [`Schedule::Panels`] for a GEMM of
/// `k` x `n` channels: where the transformed weights outgrow half the cache counted
/// on, so that [`Schedule::Chunks`] would stream them from DRAM once per
/// chunk of tiles, and where the threads' panels of transformed weights
/// (one each) take no more than that shared transform (a thread per 64
/// output channels at most). ABBA, 3-4 rounds on the 2-core Zen 4, forward
/// and backward-data, panels against chunks: with 512 channels each way
/// (37.7 MB of them) at 7x7 over batches 2-64 and at 14x14, panels win
/// (1.2-1.4x before their weights' transform moved into the item, 1.1-1.8x
/// more after); with 256 channels (9.4 MB), 0.96-1.00x at batches 16 and
/// 32 but 1.12x at 8 (14x14) and 0.98x at 28x28; with 64-128 channels,
/// 0.81-0.99x. (Other machines differ: [`Winograd::PANELS`].)
fn panels_past_cache(k: usize, n: usize) -> bool {
    let u_bytes = 4 * XI * k * n;
    let threads = rayon::current_num_threads().max(1);
    threads * NR <= n && 2 * u_bytes as u64 > crate::bandwidth::cache_bytes()
}

/// Tiles per item of [`Schedule::Panels`] over `tiles` tiles and `n` output
/// channels: as many as keep an item's M (36 rows of NR floats a tile) in
/// the L2, and few enough that every thread gets two items; `None` without
/// tiles.
fn panel_tiles(n: usize, tiles: usize) -> Option<usize> {
    if tiles == 0 {
        return None;
    }
    let threads = rayon::current_num_threads().max(1);
    let panels = n.div_ceil(NR);
    let per_item = (SCRATCH_BYTES / (4 * XI * NR))
        .min(tiles.div_ceil((2 * threads).div_ceil(panels)))
        .max(1);
    Some(per_item)
}

/// Tiles per item where `dir` of the problem `q` (as it runs) takes
/// [`Schedule::Panels`]: always (`always`, [`Winograd::PANELS`]) or past the
/// cache ([`panels_past_cache`]); never backward-filter.
fn schedule_panels(q: &ConvShape, dir: Direction, always: bool) -> Option<usize> {
    match dir {
        Direction::BwdFilter => None,
        _ if always || panels_past_cache(q.ic, q.oc) => panel_tiles(q.oc, tile_count(q)),
        _ => None,
    }
}

/// Output tiles of `M x M` pixels in the forward problem `q`, over its
/// batch.
fn tile_count(q: &ConvShape) -> usize {
    q.mb * q.oh.div_ceil(M) * q.ow.div_ceil(M)
}

/// The forward problem that runs `dir` of `p` (see [`WinogradPlan::q`]).
fn runs(p: &ConvShape, dir: Direction) -> ConvShape {
    match dir {
        Direction::Fwd => *p,
        Direction::BwdData => transposed(p),
        Direction::BwdFilter => *p,
    }
}

impl WinogradPlan {
    /// The bytes [`WinogradPlan::new`] allocates (see
    /// [`ConvAlgo::workspace_bound`]): in [`Schedule::Chunks`] the
    /// transformed weights and each thread's `V` and `M`; in
    /// [`Schedule::Panels`] the shared `V` and each thread's weight panel
    /// and `M`; or the backward-filter's buffers.
    fn bytes_bound(p: &ConvShape, dir: Direction, isa: Isa, always_panels: bool) -> u128 {
        let q = runs(p, dir);
        let u = |v: usize| v as u128;
        let (k, n) = (u(q.ic), u(q.oc));
        let tiles = tile_count(&q);
        let xi = u(XI);
        if dir == Direction::BwdFilter {
            return bwd_filter::FilterGrad::bytes_bound(
                q.ic,
                q.oc,
                tiles,
                isa,
                bwd_filter::CHUNK_BYTES,
            );
        }
        let chunk = chunk_tiles(q.ic, tiles, SCRATCH_BYTES);
        let threads = u(rayon::current_num_threads().max(1));
        match schedule_panels(&q, dir, always_panels) {
            None => {
                let weights = if packed::available_for_all(isa) {
                    4 * xi * k * u(q.oc.div_ceil(NR) * NR)
                } else {
                    4 * xi * k * n
                };
                weights + threads * 4 * xi * u(chunk) * (k + u(NR))
            }
            Some(per_item) => 4 * xi * u(tiles) * k + threads * 4 * xi * (k + u(per_item)) * u(NR),
        }
    }

    /// A plan that takes [`Schedule::Panels`] past the cache, or wherever
    /// it applies with `always_panels`.
    fn new(p: &ConvShape, dir: Direction, isa: Isa, always_panels: bool) -> Self {
        let bytes = match dir {
            Direction::BwdFilter => bwd_filter::CHUNK_BYTES,
            _ => SCRATCH_BYTES,
        };
        let panels = schedule_panels(&runs(p, dir), dir, always_panels);
        Self::with_scratch_bytes(p, dir, isa, bytes, panels)
    }

    /// A plan whose threads' `V` and `M` take about `scratch_bytes` each,
    /// or for backward-filter whose chunks' `V` and `H` do (tests use small
    /// ones to run many chunks of one to a few tiles). `panels` picks
    /// [`Schedule::Panels`] with that many tiles an item (forward and
    /// backward-data; at most every tile).
    fn with_scratch_bytes(
        p: &ConvShape,
        dir: Direction,
        isa: Isa,
        scratch_bytes: usize,
        panels: Option<usize>,
    ) -> Self {
        assert!(
            isa.is_supported(),
            "winograd planned for {isa}, which this CPU lacks"
        );
        let q = runs(p, dir);
        let (k, n) = (q.ic, q.oc);
        let (tiles_h, tiles_w) = (q.oh.div_ceil(M), q.ow.div_ceil(M));
        let tiles = q.mb * tiles_h * tiles_w;
        let filter = (dir == Direction::BwdFilter)
            .then(|| bwd_filter::FilterGrad::new(k, n, tiles, isa, scratch_bytes));
        let schedule = match (dir, panels) {
            (Direction::BwdFilter, _) | (_, None) => Schedule::Chunks {
                chunk: chunk_tiles(k, tiles, scratch_bytes),
            },
            (_, Some(per_item)) => Schedule::Panels {
                v: vec![0.0; XI * tiles * k],
                tiles: per_item.clamp(1, tiles.max(1)),
            },
        };
        let weights = if filter.is_some() || matches!(schedule, Schedule::Panels { .. }) {
            // The backward-filter keeps its own buffers, and panels
            // transform their weights in their thread's scratch.
            Weights::Plain(Vec::new())
        } else if packed::available_for_all(isa) {
            Weights::Packed((0..XI).map(|_| PackedB::new(k, n, isa)).collect())
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
            weights,
            scratch: Slots::new(|| match (dir, &schedule) {
                (Direction::BwdFilter, _) => Scratch {
                    v: Vec::new(),
                    m: Vec::new(),
                },
                (_, &Schedule::Chunks { chunk }) => Scratch {
                    v: vec![0.0; XI * chunk * k],
                    m: vec![0.0; XI * chunk * NR],
                },
                (_, &Schedule::Panels { tiles, .. }) => Scratch {
                    v: vec![0.0; XI * k * NR],
                    m: vec![0.0; XI * tiles * NR],
                },
            }),
            schedule,
            filter,
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

    /// Forward (or backward-data) in the plan's schedule. In
    /// [`Schedule::Chunks`] each thread takes a chunk of tiles through all
    /// three steps in its own scratch, so that `V` and `M` stay in its L2:
    /// the input transform, then per panel of [`NR`] output channels the 36
    /// GEMMs and the output transform of that panel.
    fn run(&mut self, src: &[f32], wei: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
        let tc = match &mut self.schedule {
            Schedule::Panels { v, tiles: per_item } => {
                let (v, per_item) = (SendPtr(v.as_mut_ptr()), *per_item);
                return self.run_panels(src, wei, bias, dst, v, per_item);
            }
            Schedule::Chunks { chunk } => *chunk,
        };
        self.transform_filter(wei);
        let (tiles, n) = (self.tiles(), self.q.oc);
        let out = SendPtr(dst.as_mut_ptr());
        (0..tiles.div_ceil(tc)).into_par_iter().for_each(|ti| {
            let (t0, t1) = (ti * tc, tiles.min(ti * tc + tc));
            let mut s = self.scratch.lock();
            let Scratch { v, m } = &mut *s;
            let (v, m) = (SendPtr(v.as_mut_ptr()), SendPtr(m.as_mut_ptr()));
            self.input_tiles(src, t0, t1, v, tc);
            for n0 in (0..n).step_by(NR) {
                let n1 = n.min(n0 + NR);
                for xi in 0..XI {
                    // SAFETY: point xi's `tc` rows of NR floats in this
                    // thread's M.
                    let to = unsafe { m.ptr().add(xi * tc * NR) };
                    self.multiply(t1 - t0, v, tc, xi, n0, n1, to, NR);
                }
                self.output_tiles(bias, out, t0, t1, m, tc, n0, n1);
            }
        });
    }

    /// [`Schedule::Panels`]: the input transform of every tile into `v`
    /// (`[point][tiles][K]`), then per item one panel of [`NR`] output
    /// channels: its weights' transform into the thread's scratch, then
    /// over its share of the tiles, `per_item` at a time, the 36 GEMMs and
    /// the output transform.
    fn run_panels(
        &self,
        src: &[f32],
        wei: &[f32],
        bias: Option<&[f32]>,
        dst: &mut [f32],
        v: SendPtr,
        per_item: usize,
    ) {
        let (tiles, k, n) = (self.tiles(), self.q.ic, self.q.oc);
        if tiles == 0 {
            return;
        }
        // Six tiles an item: the input transform is cheap per tile, and
        // small items balance the threads.
        (0..tiles.div_ceil(6)).into_par_iter().for_each(|i| {
            let (t0, t1) = (6 * i, tiles.min(6 * i + 6));
            // SAFETY: rows t0.. of each point's `tiles` rows of K floats:
            // `input_tiles` writes rows `xi * tiles + t - t0` from here,
            // those of tiles t0..t1 only, which no other item writes.
            let at = SendPtr(unsafe { v.ptr().add(t0 * k) });
            self.input_tiles(src, t0, t1, at, tiles);
        });
        let out = SendPtr(dst.as_mut_ptr());
        let chunks = tiles.div_ceil(per_item);
        let panels = n.div_ceil(NR);
        // Two items a thread at least: where panels are fewer, each splits
        // its tiles, and each part transforms the panel's weights again.
        let threads = rayon::current_num_threads().max(1);
        let splits = (2 * threads).div_ceil(panels).clamp(1, chunks);
        (0..panels * splits).into_par_iter().for_each(|item| {
            let (n0, part) = ((item / splits) * NR, item % splits);
            let n1 = n.min(n0 + NR);
            let mut s = self.scratch.lock();
            let Scratch { v: u, m } = &mut *s;
            let (u, m) = (SendPtr(u.as_mut_ptr()), SendPtr(m.as_mut_ptr()));
            // SAFETY: point xi's K rows of NR floats in this thread's
            // scratch.
            unsafe { self.filter_rows(wei, n0, 0, k, |xi, kk| u.ptr().add((xi * k + kk) * NR)) };
            if n1 - n0 < NR {
                // The panel's columns past N are zeros, as in packed
                // weights (a previous panel left its own there).
                for row in 0..XI * k {
                    // SAFETY: row `row`'s columns n1 - n0..NR of the
                    // thread's weight panel.
                    unsafe {
                        std::ptr::write_bytes(u.ptr().add(row * NR + n1 - n0), 0, NR - (n1 - n0))
                    };
                }
            }
            for ci in chunks * part / splits..chunks * (part + 1) / splits {
                let (t0, t1) = (ci * per_item, tiles.min(ci * per_item + per_item));
                for xi in 0..XI {
                    // SAFETY: V's rows of tiles t0..t1 of point xi, written
                    // above and only read from now on; point xi's weights
                    // and `per_item` rows of NR floats of M, in this
                    // thread's scratch.
                    unsafe {
                        self.multiply_panel(
                            t1 - t0,
                            v.ptr().add((xi * tiles + t0) * k),
                            u.ptr().add(xi * k * NR),
                            n1 - n0,
                            m.ptr().add(xi * per_item * NR),
                        )
                    };
                }
                self.output_tiles(bias, out, t0, t1, m, per_item, n0, n1);
            }
        });
    }

    /// `to = a · b` for `rows` rows of `a` (K floats apart) and `cols`
    /// columns of `b`, a `K x NR` row-major panel, into rows [`NR`] floats
    /// apart.
    ///
    /// # Safety
    /// `a`, `b` and `to` address that much; nothing else writes `to`
    /// meanwhile.
    unsafe fn multiply_panel(
        &self,
        rows: usize,
        a: *const f32,
        b: *const f32,
        cols: usize,
        to: *mut f32,
    ) {
        let k = self.q.ic;
        // SAFETY: the caller's contract; a row-major K x NR matrix is one
        // panel of the packed layout.
        unsafe {
            if packed::available_for_all(self.isa) {
                packed::gemm_panels(self.isa, rows, k, a, k, false, b, k, 0, cols, to, NR, false)
            } else {
                self.gemm_plain(rows, cols, a, b, NR, to, NR)
            }
        }
    }

    /// `to = a · b` on the `gemm` crate: `rows` rows of `a` (K floats
    /// apart), `cols` columns of `b` (rows `b_rs` apart), rows of `to`
    /// `to_rs` apart.
    ///
    /// # Safety
    /// `a`, `b` and `to` address that much; nothing else writes `to`
    /// meanwhile.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_plain(
        &self,
        rows: usize,
        cols: usize,
        a: *const f32,
        b: *const f32,
        b_rs: usize,
        to: *mut f32,
        to_rs: usize,
    ) {
        let k = self.q.ic;
        let (a, b) = (
            MatRef {
                ptr: a,
                rs: k as isize,
                cs: 1,
            },
            MatRef {
                ptr: b,
                rs: b_rs as isize,
                cs: 1,
            },
        );
        // SAFETY: the caller's contract.
        unsafe { blas::gemm_f32(self.isa, rows, cols, k, to, to_rs, false, a, b) }
    }

    /// `U = G w Gᵀ` for every pair of channels, into the GEMM's layout.
    fn transform_filter(&mut self, wei: &[f32]) {
        let (k, n) = (self.q.ic, self.q.oc);
        // Where each point's matrix starts, from `as_mut_ptr` (no slice
        // reference that a later read of the buffers would freeze).
        let mut bases = [SendPtr(std::ptr::null_mut()); XI];
        match &mut self.weights {
            Weights::Packed(packs) => {
                for (b, pack) in bases.iter_mut().zip(packs.iter_mut()) {
                    *b = SendPtr(pack.panels_ptr());
                }
            }
            Weights::Plain(u) => {
                for (xi, b) in bases.iter_mut().enumerate() {
                    // SAFETY: point xi's K x N matrix inside U.
                    *b = SendPtr(unsafe { u.as_mut_ptr().add(xi * k * n) });
                }
            }
        }
        let bases = &bases;
        // Where point `xi`, row `kk`, columns `c0..` go: a panel of NR
        // columns (c0 is a multiple of CB = NR) or a plain row.
        let panel_w = match self.weights {
            Weights::Packed(_) => NR,
            Weights::Plain(_) => n,
        };
        const { assert!(CB == NR) };
        let blocks = n.div_ceil(CB);
        let items = blocks * k.div_ceil(FILTER_ROWS);
        (0..items).into_par_iter().for_each(|item| {
            let (b, r0) = (item % blocks, (item / blocks) * FILTER_ROWS);
            let c0 = b * CB;
            let base = (c0 / panel_w) * k * panel_w + c0 % panel_w;
            // SAFETY: row kk's columns c0..c0+CB of point xi's matrix (K
            // rows of panels of panel_w columns, or of N), written by this
            // item only.
            unsafe {
                self.filter_rows(wei, c0, r0, k.min(r0 + FILTER_ROWS), |xi, kk| {
                    bases[xi].ptr().add(base + kk * panel_w)
                })
            };
        });
    }

    /// `U = G w Gᵀ` of rows `r0..r1` (input channels of the problem that
    /// runs) and the block of [`CB`] output channels `c0..`, row `kk` of
    /// point `xi` written where `to(xi, kk)` says (`min(CB, N - c0)`
    /// floats).
    ///
    /// # Safety
    /// Each `to(xi, kk)` addresses that many writable floats that no other
    /// thread touches meanwhile.
    unsafe fn filter_rows(
        &self,
        wei: &[f32],
        c0: usize,
        r0: usize,
        r1: usize,
        to: impl Fn(usize, usize) -> *mut f32,
    ) {
        let (k, n, isa) = (self.q.ic, self.q.oc, self.isa);
        let cb = CB.min(n - c0);
        let bwd = self.dir == Direction::BwdData;
        let end = r1;
        for r0 in (r0..end).step_by(FILTER_ROWS) {
            let r1 = end.min(r0 + FILTER_ROWS);
            on_isa!(isa, {
                // Rows r0..r1's nine taps of columns c0..c0+cb. Filled by
                // plain loops over contiguous runs: with one closure for
                // both directions the compiler gathered every float, even
                // forward (half of a 7x7 layer's time went there).
                let mut taps: [[Lanes; 9]; FILTER_ROWS] = [[[0.0; CB]; 9]; FILTER_ROWS];
                if bwd {
                    // The original weights flipped and transposed: tap
                    // 8 - t's row c holds columns kk contiguously.
                    for t in 0..9 {
                        for c in 0..cb {
                            let at = ((8 - t) * n + c0 + c) * k;
                            for (row, x) in taps.iter_mut().zip(&wei[at + r0..at + r1]) {
                                row[t][c] = *x;
                            }
                            // The next step's run of this one, where this
                            // call takes it: 576 runs a step, each a line
                            // of its own 2 KiB row (512 channels), are more
                            // streams than the hardware follows (its load
                            // stalled, 14% of a 7x7 layer's samples).
                            if r1 < end {
                                crate::simd::prefetch(wei[at..].as_ptr().wrapping_add(r1));
                            }
                        }
                    }
                } else {
                    for (row, kk) in taps.iter_mut().zip(r0..r1) {
                        for (t, wt) in row.iter_mut().enumerate() {
                            let at = (t * k + kk) * n + c0;
                            copy_lanes(&wei[at..at + cb], wt.as_mut_ptr());
                        }
                    }
                }
                let mut u: [Lanes; XI] = [[0.0; CB]; XI];
                let mut scratch: [Lanes; ALPHA * 3] = [[0.0; CB]; ALPHA * 3];
                for (w, kk) in taps.iter().zip(r0..r1) {
                    transform::filter(w, &mut u, &mut scratch);
                    for (xi, ux) in u.iter().enumerate() {
                        copy_lanes(&ux[..cb], to(xi, kk));
                    }
                }
            })
        }
    }

    /// `V = Bᵀ d B` of tiles `t0..t1` into rows `0..t1-t0` of each point's
    /// `cap` rows of K floats at `v`.
    fn input_tiles(&self, src: &[f32], t0: usize, t1: usize, v: SendPtr, cap: usize) {
        let q = self.q;
        let (k, isa) = (q.ic, self.isa);
        on_isa!(isa, {
            let mut d: [Lanes; XI] = [[0.0; CB]; XI];
            let mut out: [Lanes; XI] = [[0.0; CB]; XI];
            let mut scratch: [Lanes; XI] = [[0.0; CB]; XI];
            for t in t0..t1 {
                let (img, ty, tx) = self.tile(t);
                let y0 = (ty * M) as isize - q.ph as isize;
                let x0 = (tx * M) as isize - q.pw as isize;
                for c0 in (0..k).step_by(CB) {
                    let cb = CB.min(k - c0);
                    if cb == CB {
                        // A whole block: read src and write V in place.
                        // Arrays filled by loops: `std::array::from_fn` was
                        // not inlined here (4% of a layer's samples).
                        let mut rows: [&Lanes; XI] = [&ZERO_LANES; XI];
                        for (p, row) in rows.iter_mut().enumerate() {
                            let (iy, ix) = (y0 + (p / ALPHA) as isize, x0 + (p % ALPHA) as isize);
                            if iy >= 0 && ix >= 0 && iy < q.ih as isize && ix < q.iw as isize {
                                let at = q.src_idx(img, iy as usize, ix as usize, c0);
                                *row = src[at..at + CB].try_into().expect("CB floats");
                            }
                        }
                        let mut to: [*mut Lanes; XI] = [std::ptr::null_mut(); XI];
                        for (xi, p) in to.iter_mut().enumerate() {
                            // SAFETY: row t - t0 < cap of point xi, channels
                            // c0..c0+CB <= K: 36 distinct rows inside V,
                            // which only this call writes and nothing here
                            // reads.
                            *p = unsafe {
                                v.ptr().add((xi * cap + t - t0) * k + c0).cast::<Lanes>()
                            };
                        }
                        // SAFETY: as just said.
                        unsafe { transform::input_in_place(&rows, &to, &mut scratch) };
                        continue;
                    }
                    for y in 0..ALPHA {
                        let iy = y0 + y as isize;
                        for x in 0..ALPHA {
                            let ix = x0 + x as isize;
                            let row = &mut d[y * ALPHA + x];
                            if iy < 0 || ix < 0 || iy >= q.ih as isize || ix >= q.iw as isize {
                                *row = [0.0; CB];
                            } else {
                                let at = q.src_idx(img, iy as usize, ix as usize, c0);
                                copy_lanes(&src[at..at + cb], row.as_mut_ptr());
                            }
                        }
                    }
                    transform::input(&d, &mut out, &mut scratch);
                    for (xi, o) in out.iter().enumerate() {
                        // SAFETY: row t - t0 < cap of point xi, channels
                        // c0..c0+cb <= K: inside V, and written by this call
                        // only.
                        let to = unsafe { v.ptr().add((xi * cap + t - t0) * k + c0) };
                        copy_lanes(&o[..cb], to);
                    }
                }
            }
        })
    }

    /// `M[xi][.., n0..n1] = V[xi] · U[xi][.., n0..n1]` for `rows` rows of V
    /// (`cap` rows per point at `v`), into `to` with row stride `to_rs`.
    #[allow(clippy::too_many_arguments)]
    fn multiply(
        &self,
        rows: usize,
        v: SendPtr,
        cap: usize,
        xi: usize,
        n0: usize,
        n1: usize,
        to: *mut f32,
        to_rs: usize,
    ) {
        let (k, n) = (self.q.ic, self.q.oc);
        // SAFETY: point xi's rows of V (cap rows of K floats) exist; the
        // caller owns `rows` rows of n1 - n0 floats at `to`.
        let a = unsafe { v.ptr().add(xi * cap * k) };
        match &self.weights {
            // SAFETY: AVX-512 is available (checked when planned); as above.
            Weights::Packed(packs) => unsafe {
                packs[xi].gemm(rows, a, k, n0, n1, to, to_rs, None, false)
            },
            // SAFETY: as above; U's matrix of point xi is K x N.
            Weights::Plain(u) => unsafe {
                self.gemm_plain(
                    rows,
                    n1 - n0,
                    a,
                    u.as_ptr().add(xi * k * n + n0),
                    n,
                    to,
                    to_rs,
                )
            },
        }
    }

    /// `Aᵀ M A` of tiles `t0..t1` into dst's channels `n0..n1`, plus bias;
    /// M holds rows `0..t1-t0` of `cap` per point, [`NR`] floats apart,
    /// column 0 being channel `n0`.
    #[allow(clippy::too_many_arguments)]
    fn output_tiles(
        &self,
        bias: Option<&[f32]>,
        out: SendPtr,
        t0: usize,
        t1: usize,
        m: SendPtr,
        cap: usize,
        n0: usize,
        n1: usize,
    ) {
        let q = self.q;
        let isa = self.isa;
        on_isa!(isa, {
            let mut mt: [Lanes; XI] = [[0.0; CB]; XI];
            let mut y: [Lanes; M * M] = [[0.0; CB]; M * M];
            let mut scratch: [Lanes; M * ALPHA] = [[0.0; CB]; M * ALPHA];
            let mut junk: [Lanes; M * M] = [[0.0; CB]; M * M];
            for t in t0..t1 {
                let (img, ty, tx) = self.tile(t);
                let rows = M.min(q.oh - ty * M);
                let cols = M.min(q.ow - tx * M);
                for c0 in (n0..n1).step_by(CB) {
                    let cb = CB.min(n1 - c0);
                    if cb == CB {
                        // A whole block: read M and write dst in place;
                        // outputs past dst's edge go to a row of junk each.
                        // SAFETY: inside M (cap rows of NR per point), which
                        // no thread writes meanwhile.
                        let mut from: [&Lanes; XI] = [&ZERO_LANES; XI];
                        for (xi, row) in from.iter_mut().enumerate() {
                            // SAFETY: as said above.
                            *row = unsafe {
                                &*m.ptr()
                                    .add((xi * cap + t - t0) * NR + c0 - n0)
                                    .cast::<Lanes>()
                            };
                        }
                        let add: &Lanes = match bias {
                            Some(b) => b[c0..c0 + CB].try_into().expect("CB floats"),
                            None => &ZERO_LANES,
                        };
                        let mut to: [*mut Lanes; M * M] = [std::ptr::null_mut(); M * M];
                        for (i, p) in to.iter_mut().enumerate() {
                            let (a, bcol) = (i / M, i % M);
                            *p = if a < rows && bcol < cols {
                                let at = q.dst_idx(img, ty * M + a, tx * M + bcol, c0);
                                // SAFETY: a pixel of this tile inside dst;
                                // tiles do not overlap, so no other call
                                // writes it.
                                unsafe { out.ptr().add(at).cast::<Lanes>() }
                            } else {
                                junk[i].as_mut_ptr().cast::<Lanes>()
                            };
                        }
                        // SAFETY: 16 distinct rows (pixels, or junk rows),
                        // none of them read here.
                        unsafe { transform::output_in_place(&from, add, &to, &mut scratch) };
                        continue;
                    }
                    for (xi, row) in mt.iter_mut().enumerate() {
                        let at = (xi * cap + t - t0) * NR + c0 - n0;
                        // SAFETY: inside M (cap rows of NR per point),
                        // which no thread writes meanwhile.
                        let from = unsafe { std::slice::from_raw_parts(m.ptr().add(at), cb) };
                        copy_lanes(from, row.as_mut_ptr());
                    }
                    transform::output(&mt, &mut y, &mut scratch);
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
                            // overlap, so no other call writes it.
                            let to = unsafe { out.ptr().add(at) };
                            copy_lanes(&y[a * M + bcol][..cb], to);
                        }
                    }
                }
            }
        })
    }
}

/// The padding's row of the input transform, and the bias that is none.
static ZERO_LANES: Lanes = [0.0; CB];

/// Copies `from` to `to`: a block of [`CB`] floats as four 16-float moves,
/// which compile to vector loads and stores; a copy of run-time length
/// calls `memmove` (20% of a 56x56 layer's samples went there).
#[inline(always)]
fn copy_lanes(from: &[f32], to: *mut f32) {
    type Quarter = [f32; CB / 4];
    if from.len() == CB {
        for i in 0..4 {
            // SAFETY: 16 floats at offset 16·i of `from` (CB long) and, per
            // the caller, of `to`, which no other thread touches meanwhile.
            unsafe {
                let v = std::ptr::read_unaligned(from.as_ptr().add(16 * i).cast::<Quarter>());
                std::ptr::write_unaligned(to.add(16 * i).cast::<Quarter>(), v);
            }
        }
    } else {
        // SAFETY: `to` addresses `from.len()` writable floats (caller).
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), to, from.len()) }
    }
}

impl ConvPlan for WinogradPlan {
    fn workspace_bytes(&self) -> usize {
        let weights = match &self.weights {
            Weights::Packed(p) => p.iter().map(PackedB::bytes).sum(),
            Weights::Plain(u) => 4 * u.len(),
        };
        let scratch: usize = (0..self.scratch.len())
            .map(|i| {
                let s = self.scratch.read(i);
                4 * (s.v.len() + s.m.len())
            })
            .sum();
        let all_v = match &self.schedule {
            Schedule::Panels { v, .. } => 4 * v.len(),
            Schedule::Chunks { .. } => 0,
        };
        weights + scratch + all_v + self.filter.as_ref().map_or(0, |f| f.bytes())
    }

    fn kernel_name(&self) -> String {
        // Names the schedule too where it is the panels one.
        let schedule = match self.schedule {
            Schedule::Panels { .. } => "+panels",
            Schedule::Chunks { .. } => "",
        };
        let base = format!("{}_conv_{}_f32_wino4x3{schedule}", self.isa, self.dir);
        let packed = match &self.filter {
            Some(f) => f.packed(),
            None => packed::available_for_all(self.isa),
        };
        if packed {
            base
        } else {
            format!("{base}+gemm_f32({})", blas::nearest(self.isa))
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
            ConvArgs::BwdFilter {
                src,
                diff_dst,
                diff_wei,
                diff_bias,
            } if self.dir == Direction::BwdFilter => {
                self.run_bwd_filter(src, diff_dst, diff_wei, diff_bias)
            }
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
