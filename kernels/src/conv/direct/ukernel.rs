//! Register-blocked micro-kernels, written once over [`Simd`] and compiled
//! per ISA behind `#[target_feature]` entry points.
//!
//! - [`Igemm`]: indirect GEMM tile (forward and backward-data). `MR` rows,
//!   each with its own input pointer per kernel tap, times `NR` columns of
//!   weights; rows whose tap falls in the padding point at a zero row, so the
//!   reduction loop has no branches for any stride, dilation or padding. A
//!   tile whose rows find every tap inside the input instead gives one
//!   pointer per row and one offset per tap ([`Igemm::tap_off`]).
//! - [`Bwdw`]: outer-product tile (backward-filter). `MR` input channels
//!   (broadcast) times `NR` output channels (vectors), reduced over runs of
//!   pixels that advance with a fixed stride.
//! - [`ColSum`]: per-channel sums (the bias gradient).
//!
//! Column tails use masked loads/stores, so nothing past `n` columns is read
//! or written; row tails are the callers' business (for `Igemm`, the zero
//! row or row 0's data, whose results are not stored; an exact-`MR`
//! instantiation for `Bwdw`).
#![allow(clippy::needless_range_loop)] // index loops over const-size register tiles read best

use super::simd::{Scalar, Simd};
use super::util::Origin;
use crate::Isa;

/// Most rows of any ISA's tile; callers size their pointer arrays with it.
pub(super) const MRMAX: usize = 6;
/// Most kernel taps per `Igemm` call; longer kernels are split into calls
/// that accumulate (keeps the pointer tables on the stack).
pub(super) const TMAX: usize = 16;

/// Rows x columns of the register tile for `isa`.
pub(super) fn tile(isa: Isa) -> (usize, usize) {
    match isa {
        // 6 x 4 zmm = 24 accumulators + 4 weight vectors + 1 broadcast of 32.
        Isa::Avx512 => (6, 64),
        // 6 x 2 ymm = 12 accumulators + 2 + 1 of 16.
        Isa::Avx2 => (6, 16),
        Isa::Scalar => (4, 4),
    }
}

/// Bytes of weights one `Igemm` pass may use: about a quarter of L2 (1.25
/// MiB per core on the Xeons this was tuned on). The block is packed and
/// read sequentially, so the L2 streamer keeps up with the kernel; longer
/// passes (all 9 taps of a 3x3 up to 128 channels, all 512 channels of a
/// tap) mean fewer output round trips and pointer setups per FLOP, which
/// measured 5-30% faster than L1-sized (32 KiB) blocks.
const B_BLOCK_BYTES: usize = 288 * 1024;

/// Splits an `Igemm` reduction of `taps x k` rows of `nr` weights into
/// passes of `(taps per pass, k per pass)` that fit [`B_BLOCK_BYTES`]:
/// whole `k` when it fits (fewest output round trips), as many taps as then
/// fit, else `k` cut evenly.
pub(super) fn reduction_block(taps: usize, k: usize, nr: usize) -> (usize, usize) {
    let rows = (B_BLOCK_BYTES / (4 * nr)).max(1);
    let kc = k.div_ceil(k.div_ceil(rows));
    let tb = (rows / kc).clamp(1, TMAX.min(taps));
    (tb, kc)
}

/// How many column blocks of `tb x kc x nr` weights one pass over a tile of
/// rows may take together: as many as share [`B_BLOCK_BYTES`], at least one.
/// A tile's row pointers (by the border, 54 for a 3x3 tile of 6 pixels,
/// each with its padding test) are then set up once per run of blocks, not
/// once per block, and the rows stay in L1 from one block to the next.
pub(super) fn blocks_per_pass(tb: usize, kc: usize, nr: usize) -> usize {
    (B_BLOCK_BYTES / (4 * tb * kc * nr).max(1)).max(1)
}

/// Splits the flattened `(group, block)` range `blk` (`per_group` blocks
/// per group) into runs of at most `run` blocks that stay in one group:
/// yields `(group, flattened block range)`.
pub(super) fn block_runs(
    blk: (usize, usize),
    per_group: usize,
    run: usize,
) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> {
    let mut at = blk.0;
    std::iter::from_fn(move || {
        if at >= blk.1 {
            return None;
        }
        let g = at / per_group;
        let end = blk.1.min((g + 1) * per_group).min(at + run.max(1));
        let r = (g, at..end);
        at = end;
        Some(r)
    })
}

/// How an `Igemm` tile starts.
#[derive(Clone, Copy)]
pub(super) enum Init {
    Zero,
    /// Every row starts from these `n` values (the bias).
    Bias(*const f32),
    /// Add onto what the output rows hold already.
    Acc,
}

/// One indirect-GEMM tile: `out[i][0..n] (+)= Σ_t Σ_c a[t][i][c] * b[t][c][0..n]`.
pub(super) struct Igemm {
    /// `ntaps * MR` row pointers, tap-major; each valid for `kc` reads.
    /// With `tap_off`, `MR` row pointers instead, which tap `t` moves by
    /// `tap_off[t]` elements: only the moved pointers need be valid (for
    /// `kc` reads), a row's own may lie outside the input.
    pub a: *const *const f32,
    /// Null, or `ntaps` element offsets: a tile whose every row finds every
    /// tap inside the input, so that one pointer per row and one offset
    /// per tap replace a table of a pointer per row and tap built for
    /// every tile. With `col` below, ResNet-50's stem forward went from
    /// 11.4 to 9.0 ms (ABBA, Zen 5, AVX-512, 2 threads; the offsets alone
    /// measured 1.03x, the column alone about level).
    pub tap_off: *const isize,
    /// `ntaps` weight pointers; row `c` of tap `t` is at `b[t] + c * ldb`,
    /// valid for `n` reads.
    pub b: *const *const f32,
    pub ntaps: usize,
    pub kc: usize,
    pub ldb: usize,
    /// At least `m` output row pointers, each moved by `col` elements;
    /// only the first `m` are used. (The kernel adds `col` itself: a table
    /// of moved pointers built just before was read back as vectors the
    /// scalar stores could not forward to, and each such load waited for
    /// the previous tile's output stores to drain: 13% of the stem
    /// forward's samples in `perf`, Zen 5, 2 threads.)
    pub c: *const *mut f32,
    pub col: usize,
    pub m: usize,
    /// Valid columns, `1 <= n <= NR`.
    pub n: usize,
    pub init: Init,
    /// Write the whole vectors of the result with non-temporal stores
    /// ([`Simd::stream`]): the tile's last pass over an output too large
    /// for the caches.
    pub stream: bool,
}

/// One tile of a GEMM on packed rows: `c[i][0..n] (+)= Σ_p a[p][i] · b[p][0..n]`
/// for `i < m`, A one panel of `MR` rows stored `[kc][MR]` (see
/// `packed_rows`), so the kernel walks one pointer through A where the
/// unpacked tile keeps one per row.
pub(super) struct Panel {
    pub a: *const f32,
    pub b: *const f32,
    pub ldb: usize,
    pub kc: usize,
    pub c: *mut f32,
    pub ldc: usize,
    /// Valid rows, `1 <= m <= MR`, and columns, `1 <= n <= NV·L`.
    pub m: usize,
    pub n: usize,
    /// Add onto what `c` holds instead of overwriting it.
    pub acc: bool,
}

/// Rows of the panel tile for a product `n` columns wide: where `n` is at
/// most half a vector, the column tile's rows ([`panel_by_columns`]: two
/// vectors of rows, four for one or two columns); [`panel_narrow_mr`]
/// rows of one vector where `n` fits in one; else the wide tile's rows.
pub(super) fn panel_rows(isa: Isa, n: usize) -> usize {
    match isa {
        Isa::Scalar => 4,
        _ if by_columns(isa, n) => isa.f32_lanes() * if n <= 2 { 4 } else { 2 },
        _ if n <= isa.f32_lanes() => panel_narrow_mr(isa),
        _ => tile(isa).0,
    }
}

/// Whether a panel product `n` columns wide runs on [`panel_by_columns`].
pub(super) fn by_columns(isa: Isa, n: usize) -> bool {
    isa != Isa::Scalar && n >= 1 && 2 * n <= isa.f32_lanes()
}

/// Rows of the narrow panel tile, one accumulator each: more than an
/// FMA's latency times its ports (six would wait on their FMAs), as many
/// as the registers hold beside the broadcasts. AVX-512's 32 registers
/// take 16: against 12, on the Zen 5 (ABBA, LSTM forward at batch 16,
/// h64 t200 and h256 t25), 1.12x and 1.06x on one thread, 1.07x and 1.05x
/// on two (whose teams' shares of 64 or 256 units also come out even in
/// panels of 16). AVX2's 16 registers take 12.
pub(super) const fn panel_narrow_mr(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 16,
        _ => 12,
    }
}
// `entry_points!` spells them out as literals: they must agree.
const _: () = assert!(panel_narrow_mr(Isa::Avx512) == 16 && panel_narrow_mr(Isa::Avx2) == 12);
/// The most rows of [`panel_narrow_mr`].
pub(super) const PANEL_NARROW_MAX: usize = 16;
/// The most rows of any panel tile: the column tile's four AVX-512 vectors.
pub(super) const PANEL_MAX_ROWS: usize = 64;

/// Fills the `mr` row pointers of tap slot `tb` of an indirection buffer.
/// Row `i` starts at pixel `org[i] = (y, x, element offset)` of `base`; the
/// tap moves it by `(dy, dx)` pixels, `doff` elements. A pixel outside
/// `h x w` (padding, no contributing pixel, or a row past the tile, whose
/// `y` is far negative) reads `zero` instead, so the kernel never branches.
///
/// # Safety
/// `base` plus the offset of every pixel inside `h x w` must stay within
/// one allocation.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn point_tap_rows(
    a: &mut [*const f32],
    tb: usize,
    org: &[Origin],
    mr: usize,
    (dy, dx, doff): (isize, isize, isize),
    (h, w): (usize, usize),
    base: *const f32,
    zero: *const f32,
) {
    for i in 0..mr {
        let (y, x, off) = org[i];
        let inside = ((y + dy) as usize) < h && ((x + dx) as usize) < w;
        a[tb * mr + i] = if inside {
            base.offset(off + doff)
        } else {
            zero
        };
    }
}

/// The row and column shifts of one pass's taps: a tile whose every row,
/// moved by each, stays inside the input can run on one pointer per row
/// and one offset per tap ([`Igemm::tap_off`]).
#[derive(Clone, Copy)]
pub(super) struct Reach {
    dy: (isize, isize),
    dx: (isize, isize),
}

impl Reach {
    /// The span of `shifts`, (rows, columns) each; `None` for no shifts
    /// (a pass without taps has nothing to keep inside).
    pub(super) fn of(shifts: impl Iterator<Item = (isize, isize)>) -> Option<Reach> {
        shifts.fold(None, |r: Option<Reach>, (dy, dx)| {
            Some(match r {
                None => Reach {
                    dy: (dy, dy),
                    dx: (dx, dx),
                },
                Some(r) => Reach {
                    dy: (r.dy.0.min(dy), r.dy.1.max(dy)),
                    dx: (r.dx.0.min(dx), r.dx.1.max(dx)),
                },
            })
        })
    }

    /// Whether every row of `org` finds every shift inside `h x w`.
    #[inline(always)]
    pub(super) fn inside(&self, org: &[Origin], (h, w): (usize, usize)) -> bool {
        org.iter().all(|&(y, x, _)| {
            y + self.dy.0 >= 0
                && ((y + self.dy.1) as usize) < h
                && x + self.dx.0 >= 0
                && ((x + self.dx.1) as usize) < w
        })
    }
}

/// Points `a[0..mr]` at the tile's rows' origins for [`Igemm::tap_off`]:
/// row `i < m` at `base + org[i]`'s offset, rows past the tile at row 0's
/// (they read real data, and their results are not stored). An origin
/// may lie outside `base` (in the padding, before a later pass's taps);
/// only the moved pointers are read. `reads`: the pass's tap offsets, the
/// floats read at each (`kc`) and the floats behind `base`, checked in
/// debug builds.
///
/// # Safety
/// `m >= 1`, and every row's origin moved by each of `reads`' offsets
/// must start `kc` floats inside `base`'s `len` ([`Reach::inside`]).
#[inline(always)]
pub(super) unsafe fn point_rows(
    a: &mut [*const f32],
    org: &[Origin],
    (mr, m): (usize, usize),
    base: *const f32,
    (offs, kc, len): (&[isize], usize, usize),
) {
    debug_assert!(org[..m].iter().all(|&(_, _, off)| offs
        .iter()
        .all(|&d| off + d >= 0 && (off + d) as usize + kc <= len)));
    for i in 0..mr {
        let (_, _, off) = org[if i < m { i } else { 0 }];
        a[i] = base.wrapping_offset(off);
    }
}

/// One backward-filter tile: `out[i][0..n] (+)= Σ_runs Σ_p a[p][i] * b[p][0..n]`.
pub(super) struct Bwdw {
    /// Base pointers; run `r` starts at `a + runs[r].0` and `b + runs[r].1`.
    pub a: *const f32,
    pub b: *const f32,
    pub runs: *const (usize, usize),
    pub nruns: usize,
    /// Pixels per run and the element step between them in `a` and `b`.
    pub len: usize,
    pub sa: usize,
    pub sb: usize,
    /// Output tile: `m` rows (the instantiated `MR`) of `ldc` stride.
    pub c: *mut f32,
    pub ldc: usize,
    pub n: usize,
    /// Add onto the output instead of overwriting it.
    pub acc: bool,
}

/// `out[0..n] += Σ_runs Σ_p b[p][0..n]`, the same runs as [`Bwdw`].
pub(super) struct ColSum {
    pub b: *const f32,
    pub runs: *const usize,
    pub nruns: usize,
    pub len: usize,
    pub sb: usize,
    pub out: *mut f32,
    pub n: usize,
}

/// Loads vector `j` of a row of `NV` vectors, the last one masked.
#[inline(always)]
unsafe fn ld<S: Simd, const NV: usize, const MASK: bool>(
    p: *const f32,
    j: usize,
    last: S::M,
) -> S::V {
    if MASK && j == NV - 1 {
        S::load_m(p.add(j * S::L), last)
    } else {
        S::load(p.add(j * S::L))
    }
}

#[inline(always)]
unsafe fn st<S: Simd, const NV: usize, const MASK: bool>(
    p: *mut f32,
    j: usize,
    last: S::M,
    v: S::V,
) {
    if MASK && j == NV - 1 {
        S::store_m(p.add(j * S::L), last, v)
    } else {
        S::store(p.add(j * S::L), v)
    }
}

#[inline(always)]
unsafe fn igemm_body<
    S: Simd,
    const MR: usize,
    const PF: usize,
    const NV: usize,
    const MASK: bool,
>(
    k: &Igemm,
) {
    let last = S::mask(k.n - (NV - 1) * S::L);
    let mut acc = [[S::zero(); NV]; MR];
    match k.init {
        Init::Zero => {}
        Init::Bias(bp) => {
            for j in 0..NV {
                let v = ld::<S, NV, MASK>(bp, j, last);
                for i in 0..MR {
                    acc[i][j] = v;
                }
            }
        }
        Init::Acc => {
            for i in 0..MR.min(k.m) {
                let cp = (*k.c.add(i)).add(k.col);
                for j in 0..NV {
                    acc[i][j] = ld::<S, NV, MASK>(cp, j, last);
                }
            }
        }
    }
    for t in 0..k.ntaps {
        let mut ap = [std::ptr::null::<f32>(); MR];
        if k.tap_off.is_null() {
            for i in 0..MR {
                ap[i] = *k.a.add(t * MR + i);
            }
        } else {
            let d = *k.tap_off.add(t);
            for i in 0..MR {
                ap[i] = (*k.a.add(i)).wrapping_offset(d);
            }
        }
        let mut bp = *k.b.add(t);
        for c in 0..k.kc {
            if PF > 0 {
                // Past the pass's end this touches the next block's
                // weights (or past the pack): a prefetch never faults.
                S::prefetch(bp.wrapping_add(PF * k.ldb));
            }
            let mut bv = [S::zero(); NV];
            for j in 0..NV {
                bv[j] = ld::<S, NV, MASK>(bp, j, last);
            }
            for i in 0..MR {
                let av = S::splat(*ap[i].add(c));
                for j in 0..NV {
                    acc[i][j] = S::fma(av, bv[j], acc[i][j]);
                }
            }
            bp = bp.add(k.ldb);
        }
    }
    // The streamed store branches per vector on its address (in
    // `Simd::stream`). Choosing among four copies of this loop once per
    // tile instead made LLVM stop unrolling it and keep the accumulators
    // on the stack, stored on every step of the FMA loop (the stem 0.91x);
    // so did a streamed branch in the packed GEMM's store loop (2-3x).
    for i in 0..MR.min(k.m) {
        let cp = (*k.c.add(i)).add(k.col);
        for j in 0..NV {
            if k.stream && !(MASK && j == NV - 1) {
                S::stream(cp.add(j * S::L), acc[i][j]);
            } else {
                st::<S, NV, MASK>(cp, j, last, acc[i][j]);
            }
        }
    }
}

#[inline(always)]
unsafe fn panel_body<S: Simd, const MR: usize, const NV: usize, const MASK: bool>(k: &Panel) {
    let last = S::mask(k.n - (NV - 1) * S::L);
    let mut acc = [[S::zero(); NV]; MR];
    if k.acc {
        for i in 0..MR.min(k.m) {
            for j in 0..NV {
                acc[i][j] = ld::<S, NV, MASK>(k.c.add(i * k.ldc), j, last);
            }
        }
    }
    let (mut ap, mut bp) = (k.a, k.b);
    for _ in 0..k.kc {
        let mut bv = [S::zero(); NV];
        for j in 0..NV {
            bv[j] = ld::<S, NV, MASK>(bp, j, last);
        }
        for i in 0..MR {
            let av = S::splat(*ap.add(i));
            for j in 0..NV {
                acc[i][j] = S::fma(av, bv[j], acc[i][j]);
            }
        }
        ap = ap.add(MR);
        bp = bp.add(k.ldb);
    }
    for i in 0..MR.min(k.m) {
        for j in 0..NV {
            st::<S, NV, MASK>(k.c.add(i * k.ldc), j, last, acc[i][j]);
        }
    }
}

#[inline(always)]
unsafe fn bwdw_body<S: Simd, const MR: usize, const NV: usize, const MASK: bool>(k: &Bwdw) {
    let last = S::mask(k.n - (NV - 1) * S::L);
    let mut acc = [[S::zero(); NV]; MR];
    if k.acc {
        for i in 0..MR {
            for j in 0..NV {
                acc[i][j] = ld::<S, NV, MASK>(k.c.add(i * k.ldc), j, last);
            }
        }
    }
    for r in 0..k.nruns {
        let (ao, bo) = *k.runs.add(r);
        let mut ap = k.a.add(ao);
        let mut bp = k.b.add(bo);
        for _ in 0..k.len {
            let mut bv = [S::zero(); NV];
            for j in 0..NV {
                bv[j] = ld::<S, NV, MASK>(bp, j, last);
            }
            for i in 0..MR {
                let av = S::splat(*ap.add(i));
                for j in 0..NV {
                    acc[i][j] = S::fma(av, bv[j], acc[i][j]);
                }
            }
            ap = ap.add(k.sa);
            bp = bp.add(k.sb);
        }
    }
    for i in 0..MR {
        for j in 0..NV {
            st::<S, NV, MASK>(k.c.add(i * k.ldc), j, last, acc[i][j]);
        }
    }
}

#[inline(always)]
unsafe fn colsum_body<S: Simd, const NV: usize, const MASK: bool>(k: &ColSum) {
    let last = S::mask(k.n - (NV - 1) * S::L);
    let mut acc = [S::zero(); NV];
    for j in 0..NV {
        acc[j] = ld::<S, NV, MASK>(k.out, j, last);
    }
    for r in 0..k.nruns {
        let mut bp = k.b.add(*k.runs.add(r));
        for _ in 0..k.len {
            for j in 0..NV {
                acc[j] = S::add(acc[j], ld::<S, NV, MASK>(bp, j, last));
            }
            bp = bp.add(k.sb);
        }
    }
    for j in 0..NV {
        st::<S, NV, MASK>(k.out, j, last, acc[j]);
    }
}

/// Picks the `(NV, MASK)` instantiation that covers `n` columns exactly.
macro_rules! by_nv {
    ($S:ty, $n:expr, $f:ident [$($pre:tt),*] ($arg:expr)) => {{
        let n = $n;
        let nv = n.div_ceil(<$S as Simd>::L);
        let mask = n % <$S as Simd>::L != 0;
        match (nv, mask) {
            (1, false) => $f::<$S, $($pre,)* 1, false>($arg),
            (1, true) => $f::<$S, $($pre,)* 1, true>($arg),
            (2, false) => $f::<$S, $($pre,)* 2, false>($arg),
            (2, true) => $f::<$S, $($pre,)* 2, true>($arg),
            (3, false) => $f::<$S, $($pre,)* 3, false>($arg),
            (3, true) => $f::<$S, $($pre,)* 3, true>($arg),
            (4, false) => $f::<$S, $($pre,)* 4, false>($arg),
            (4, true) => $f::<$S, $($pre,)* 4, true>($arg),
            _ => unreachable!("tile wider than 4 vectors"),
        }
    }};
}

#[inline(always)]
unsafe fn igemm_any<S: Simd, const MR: usize, const PF: usize>(k: &Igemm) {
    by_nv!(S, k.n, igemm_body[MR, PF](k))
}

/// A [`Panel`] tile for a batch of at most half a vector: the panel's rows
/// run along the vectors (`MV` vectors of rows) and each of the `NJ`
/// columns of B is broadcast, so that no lane computes padding; the
/// results go out by column.
#[inline(always)]
unsafe fn panel_cols_body<S: Simd, const MV: usize, const NJ: usize>(k: &Panel) {
    let mut acc = [[S::zero(); MV]; NJ];
    let (mut ap, mut bp) = (k.a, k.b);
    for _ in 0..k.kc {
        let mut av = [S::zero(); MV];
        for v in 0..MV {
            av[v] = S::load(ap.add(v * S::L));
        }
        for j in 0..NJ {
            let bj = S::splat(*bp.add(j));
            for v in 0..MV {
                acc[j][v] = S::fma(av[v], bj, acc[j][v]);
            }
        }
        ap = ap.add(MV * S::L);
        bp = bp.add(k.ldb);
    }
    // A whole panel into rows as wide as the product (the recurrent
    // layers' steps): transposed in registers where the ISA can.
    if k.m == MV * S::L && k.ldc == NJ && S::stores_rows(NJ) {
        for v in 0..MV {
            let cols: [S::V; NJ] = std::array::from_fn(|j| acc[j][v]);
            S::store_rows(&cols, k.c.add(v * S::L * NJ), k.acc);
        }
        return;
    }
    // At most 4 vectors of 16 rows.
    let mut out = [[0f32; 64]; NJ];
    for j in 0..NJ {
        for v in 0..MV {
            S::store(out[j].as_mut_ptr().add(v * S::L), acc[j][v]);
        }
    }
    for i in 0..k.m {
        let row = k.c.add(i * k.ldc);
        for j in 0..NJ {
            let p = row.add(j);
            *p = if k.acc { *p + out[j][i] } else { out[j][i] };
        }
    }
}

#[inline(always)]
unsafe fn panel_cols_any<S: Simd>(k: &Panel, mr: usize) {
    match (mr / S::L, k.n) {
        (4, 1) => panel_cols_body::<S, 4, 1>(k),
        (4, 2) => panel_cols_body::<S, 4, 2>(k),
        // The last columns of a batch run in halves (see `PackedRows`).
        (2, 1) => panel_cols_body::<S, 2, 1>(k),
        (2, 2) => panel_cols_body::<S, 2, 2>(k),
        (2, 3) => panel_cols_body::<S, 2, 3>(k),
        (2, 4) => panel_cols_body::<S, 2, 4>(k),
        (2, 5) => panel_cols_body::<S, 2, 5>(k),
        (2, 6) => panel_cols_body::<S, 2, 6>(k),
        (2, 7) => panel_cols_body::<S, 2, 7>(k),
        (2, 8) => panel_cols_body::<S, 2, 8>(k),
        _ => unreachable!("column tile of {mr} rows and {} columns", k.n),
    }
}

#[inline(always)]
unsafe fn panel_any<S: Simd, const MR: usize>(k: &Panel) {
    by_nv!(S, k.n, panel_body[MR](k))
}

#[inline(always)]
unsafe fn bwdw_mr<S: Simd, const MR: usize>(k: &Bwdw) {
    by_nv!(S, k.n, bwdw_body[MR](k))
}

#[inline(always)]
unsafe fn bwdw_any<S: Simd>(k: &Bwdw, m: usize) {
    match m {
        1 => bwdw_mr::<S, 1>(k),
        2 => bwdw_mr::<S, 2>(k),
        3 => bwdw_mr::<S, 3>(k),
        4 => bwdw_mr::<S, 4>(k),
        5 => bwdw_mr::<S, 5>(k),
        6 => bwdw_mr::<S, 6>(k),
        _ => unreachable!("bwd-filter tile taller than MRMAX"),
    }
}

#[inline(always)]
unsafe fn colsum_any<S: Simd>(k: &ColSum) {
    by_nv!(S, k.n, colsum_body[](k))
}

/// One `#[target_feature]` entry point per kernel and ISA: the generic
/// bodies above are inlined into them and compiled for that ISA.
macro_rules! entry_points {
    ($mod:ident, $S:ident, $feat:literal, $mr:literal, $pf:literal, $narrow:literal) => {
        #[cfg(target_arch = "x86_64")]
        mod $mod {
            use super::super::simd::$S;
            use super::*;

            #[target_feature(enable = $feat)]
            pub(super) unsafe fn igemm(k: &Igemm) {
                igemm_any::<$S, $mr, $pf>(k)
            }
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn panel(k: &Panel, mr: usize) {
                if mr == $narrow {
                    if k.n == <$S as Simd>::L {
                        panel_body::<$S, $narrow, 1, false>(k)
                    } else {
                        panel_body::<$S, $narrow, 1, true>(k)
                    }
                } else {
                    panel_any::<$S, $mr>(k)
                }
            }
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn panel_cols(k: &Panel, mr: usize) {
                panel_cols_any::<$S>(k, mr)
            }
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn bwdw(k: &Bwdw, m: usize) {
                bwdw_any::<$S>(k, m)
            }
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn colsum(k: &ColSum) {
                colsum_any::<$S>(k)
            }
        }
    };
}

// The fifth figure: how many rows of weights ahead the `Igemm` tile
// prefetches. On the AVX2 EPYC, 16 rows (1 KiB) ahead made most 3x3
// layers 7-13% faster, forward and backward-data, in ABBA runs beside no
// prefetch (one, layer3.1.conv2's forward, measured 0.93x; 4 and 32 rows
// were slower than 16). AVX-512 is left without: its
// rows are 4 lines wide, and no AVX-512 machine was there to measure one.
// The last: the narrow panel tile's rows, [`panel_narrow_mr`].
entry_points!(avx512, Avx512, "avx512f", 6, 0, 16);
entry_points!(avx2, Avx2, "avx2,fma", 6, 16, 12);

/// Runs one [`Igemm`] tile with `isa`'s kernel.
///
/// # Safety
/// `isa` must be supported by this CPU (plans assert it), and every pointer
/// in `k` valid as documented on [`Igemm`].
pub(super) unsafe fn igemm(isa: Isa, k: &Igemm) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::igemm(k),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::igemm(k),
        _ => igemm_any::<Scalar, 4, 0>(k),
    }
}

/// One tile of rows with its input pointers (`a`: a slot of `MR` row
/// pointers per tap of `taps`, or with `tap_off` `MR` pointers and an
/// offset per tap), run by [`BlockRun::run`] over a range of column
/// blocks: the pointers serve every block, only the weights and the
/// output columns move.
pub(super) struct BlockRun<'a> {
    pub a: &'a [*const f32],
    /// `None`, or one offset per slot of `taps` with `MR` row pointers in
    /// `a` (see [`Igemm::tap_off`]).
    pub tap_off: Option<&'a [isize]>,
    /// The kernel taps of the slots (what the weights are looked up by).
    pub taps: &'a [usize],
    pub kc: usize,
    pub ldb: usize,
    /// The output rows' starts (column 0 of the group).
    pub rows: &'a [*mut f32],
    /// See [`Igemm::stream`].
    pub stream: bool,
}

impl BlockRun<'_> {
    /// Runs blocks `blks`; `block(blk)` gives a block's first column, its
    /// columns and how its tile starts, `weights(blk, tap)` its weights for
    /// a tap. A tile with no taps that adds onto its output is skipped (it
    /// would load and store it unchanged).
    ///
    /// # Safety
    /// As [`igemm`], for every block: the pointers `a`, `rows` (plus the
    /// block's columns) and `weights` give must be valid for it.
    #[inline(always)]
    pub(super) unsafe fn run(
        &self,
        isa: Isa,
        blks: std::ops::Range<usize>,
        block: impl Fn(usize) -> (usize, usize, Init),
        weights: impl Fn(usize, usize) -> *const f32,
    ) {
        let mut b = [std::ptr::null::<f32>(); TMAX];
        for blk in blks {
            let (col, n, init) = block(blk);
            if self.taps.is_empty() && matches!(init, Init::Acc) {
                continue;
            }
            for (bp, &tap) in b.iter_mut().zip(self.taps) {
                *bp = weights(blk, tap);
            }
            let k = Igemm {
                a: self.a.as_ptr(),
                tap_off: self.tap_off.map_or(std::ptr::null(), |o| o.as_ptr()),
                b: b.as_ptr(),
                ntaps: self.taps.len(),
                kc: self.kc,
                ldb: self.ldb,
                c: self.rows.as_ptr(),
                col,
                m: self.rows.len(),
                n,
                init,
                stream: self.stream,
            };
            igemm(isa, &k);
        }
    }
}

/// Runs one [`Panel`] tile of `mr` rows, `mr` from [`panel_rows`].
///
/// # Safety
/// As [`igemm`]: `k.a` valid for `kc·mr` reads, `k.b` for `kc` rows of
/// `n` reads `ldb` apart, `k.c` for `m` rows of `n` `ldc` apart.
pub(super) unsafe fn panel(isa: Isa, k: &Panel, mr: usize) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::panel(k, mr),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::panel(k, mr),
        _ => panel_any::<Scalar, 4>(k),
    }
}

/// Runs one [`Panel`] tile by columns: `1 <= n`, `2·n <= lanes`, `mr` from
/// [`panel_rows`] ([`by_columns`] must hold), or two vectors of rows for
/// a half of a wider batch (`PackedRows`' halves: `n` from 1 to 8).
///
/// # Safety
/// As [`panel`].
pub(super) unsafe fn panel_by_columns(isa: Isa, k: &Panel, mr: usize) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::panel_cols(k, mr),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::panel_cols(k, mr),
        _ => unreachable!("no column tile for {isa}"),
    }
}

/// Runs one [`Bwdw`] tile of exactly `m` rows (`1 <= m <= tile(isa).0`).
///
/// # Safety
/// As [`igemm`]; the tile reads `m` consecutive floats at each `a` step.
pub(super) unsafe fn bwdw(isa: Isa, k: &Bwdw, m: usize) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::bwdw(k, m),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::bwdw(k, m),
        _ => bwdw_any::<Scalar>(k, m),
    }
}

/// Runs one [`ColSum`].
///
/// # Safety
/// As [`igemm`].
pub(super) unsafe fn colsum(isa: Isa, k: &ColSum) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::colsum(k),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::colsum(k),
        _ => colsum_any::<Scalar>(k),
    }
}

/// `to[kk * ldt + j] = from[j * lda + kk]` for `j < n`, `kk < kc`: the
/// weight transpose of backward-data's per-pass packing.
///
/// # Safety
/// As [`igemm`]; `from` valid for `n` rows of `kc` reads `lda` apart, `to`
/// for `kc` rows of `n` writes `ldt` apart.
pub(super) unsafe fn transpose(
    isa: Isa,
    from: *const f32,
    lda: usize,
    to: *mut f32,
    ldt: usize,
    n: usize,
    kc: usize,
) {
    let (mut nj, mut nk) = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 {
        (nj, nk) = (n / 16 * 16, kc / 16 * 16);
        transpose16_avx512(from, lda, to, ldt, nj, nk);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    // The edges the vector blocks left: columns past `nj`, rows past `nk`.
    for j in 0..n {
        let row = from.add(j * lda);
        let k_start = if j < nj { nk } else { 0 };
        for kk in k_start..kc {
            *to.add(kk * ldt + j) = *row.add(kk);
        }
    }
}

/// 16 x 16 block transposes over `nj x nk` (both multiples of 16).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16_avx512(
    from: *const f32,
    lda: usize,
    to: *mut f32,
    ldt: usize,
    nj: usize,
    nk: usize,
) {
    use std::arch::x86_64::*;
    for j0 in (0..nj).step_by(16) {
        for k0 in (0..nk).step_by(16) {
            let src = from.add(j0 * lda + k0);
            let mut r = [_mm512_setzero_ps(); 16];
            for i in 0..16 {
                r[i] = _mm512_loadu_ps(src.add(i * lda));
            }
            // 32-bit interleave of row pairs, then 64-bit, then 128-bit lanes.
            let mut t = [_mm512_setzero_ps(); 16];
            for i in 0..8 {
                t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            for q in 0..4 {
                let (a0, a1, b0, b1) = (t[4 * q], t[4 * q + 1], t[4 * q + 2], t[4 * q + 3]);
                r[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(
                    _mm512_castps_pd(a0),
                    _mm512_castps_pd(b0),
                ));
                r[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(
                    _mm512_castps_pd(a0),
                    _mm512_castps_pd(b0),
                ));
                r[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(
                    _mm512_castps_pd(a1),
                    _mm512_castps_pd(b1),
                ));
                r[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(
                    _mm512_castps_pd(a1),
                    _mm512_castps_pd(b1),
                ));
            }
            for h in 0..2 {
                for i in 0..4 {
                    t[8 * h + i] = _mm512_shuffle_f32x4::<0x88>(r[8 * h + i], r[8 * h + 4 + i]);
                    t[8 * h + 4 + i] = _mm512_shuffle_f32x4::<0xdd>(r[8 * h + i], r[8 * h + 4 + i]);
                }
            }
            for i in 0..8 {
                r[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[8 + i]);
                r[8 + i] = _mm512_shuffle_f32x4::<0xdd>(t[i], t[8 + i]);
            }
            let dst = to.add(k0 * ldt + j0);
            for i in 0..16 {
                _mm512_storeu_ps(dst.add(i * ldt), r[i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reach_holds_exactly_when_every_tap_is_inside() {
        assert!(Reach::of(std::iter::empty()).is_none());
        // A 3x3 kernel's shifts from tap (0, 0) over a 5 x 4 image.
        let r = Reach::of((0..3).flat_map(|dy| (0..3).map(move |dx| (dy, dx)))).unwrap();
        let at = |y: isize, x: isize| r.inside(&[(y, x, 0)], (5, 4));
        assert!(at(0, 0) && at(2, 1));
        assert!(!at(-1, 0) && !at(0, -1) && !at(3, 0) && !at(0, 2));
        // Every row of a tile must hold.
        assert!(!r.inside(&[(0, 0, 0), (3, 0, 0)], (5, 4)));
    }

    #[test]
    fn block_runs_stay_in_one_group_and_cover_the_range() {
        let runs: Vec<_> = block_runs((3, 14), 4, 3).collect();
        assert_eq!(
            runs,
            vec![
                (0, 3..4),
                (1, 4..7),
                (1, 7..8),
                (2, 8..11),
                (2, 11..12),
                (3, 12..14)
            ]
        );
        assert_eq!(block_runs((0, 0), 4, 3).count(), 0);
        assert_eq!(
            block_runs((0, 5), 8, 100).collect::<Vec<_>>(),
            vec![(0, 0..5)]
        );
        assert_eq!(blocks_per_pass(9, 64, 16), 8);
        assert_eq!(blocks_per_pass(9, 512, 16), 1);
    }

    #[test]
    fn transpose_matches_scalar() {
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
            if !isa.is_supported() {
                continue;
            }
            for (n, kc) in [(64, 128), (48, 37), (5, 16), (17, 33), (64, 64)] {
                let lda = kc + 3;
                let ldt = 64 + 1;
                let from: Vec<f32> = (0..n * lda).map(|i| i as f32).collect();
                let mut to = vec![f32::NAN; kc * ldt];
                unsafe { transpose(isa, from.as_ptr(), lda, to.as_mut_ptr(), ldt, n, kc) };
                for j in 0..n {
                    for kk in 0..kc {
                        assert_eq!(to[kk * ldt + j], from[j * lda + kk], "{isa} {n}x{kc}");
                    }
                }
            }
        }
    }
}
