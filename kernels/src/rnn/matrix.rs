//! The matrix work around the gate passes: the GEMMs (one per step, or
//! one over the whole sequence), transposes between the `[feature][mb]`
//! steps and row-major tensors, and row sums.

use super::shape::RnnShape;
use crate::bandwidth::cache_bytes;
use crate::conv::direct::{rows_gemm, strided_fits, transpose_avx512_strided, PackedRows};
use crate::gemm::{sgemm_acc, GemmShape, SendPtr};
use crate::Isa;
use rayon::prelude::*;

/// Time-step order of a direction.
pub(super) fn steps(t: usize, reversed: bool) -> impl Iterator<Item = usize> {
    (0..t).map(move |k| if reversed { t - 1 - k } else { k })
}

/// The largest `W_ih` (bytes) whose input product is computed step by
/// step (see `set_forward`): half of a 1 MiB L2, beside the states.
pub(super) const PER_STEP_INPUT_BYTES: usize = 512 * 1024;

/// Whether layer `l`'s forward computes its input product over every step
/// as `[t][gates·h]` rows (a batch of one, where it is not computed step
/// by step): on AVX-512 on `W_ih` transposed, which the `gemm` crate
/// reads without packing it (see `set_forward`).
pub(super) fn rows_input_product(shape: &RnnShape, l: usize) -> bool {
    shape.mb == 1 && !input_product_per_step(shape, l)
}

/// Whether layer `l`'s forward computes its input product step by step
/// (its `W_ih` fits in [`PER_STEP_INPUT_BYTES`]) rather than as one GEMM
/// over every step.
pub fn input_product_per_step(shape: &RnnShape, l: usize) -> bool {
    shape.cell.gates() * shape.hidden * shape.layer_input(l) * 4 <= PER_STEP_INPUT_BYTES
}

/// The largest weights (bytes) [`pack_for_steps`] packs: packing reads
/// and writes them once per pass, which larger ones (h 1024 and up) would
/// feel, and their products are long enough for the pool.
const PACKED_WEIGHT_BYTES: usize = 4 << 20;
/// The longest reduction packed: one column tile of B (`k` x up to four
/// vectors) stays within a quarter of a 1 MiB L2.
const PACKED_K_BYTES: usize = 256 << 10;

/// Packs one set's recurrent weights `a` (`blocks·bm × k`, the gates'
/// blocks of rows) into `packed` for its per-step products with a batch
/// of `n`: the packed GEMM walks one pointer through a panel of rows where
/// the unpacked one keeps one per row (1.5-2.6x faster on one thread on
/// the small shapes of `packed_rows_beside_rows_gemm`), and packing once
/// per pass costs one read of the weights; their steps then run on a team
/// (see `team_steps`). (The forward calls this only from
/// `FWD_PACK_MIN_STEPS` steps where the batch is a vector or wider.) A
/// batch of at most half a vector runs on a tile
/// whose vectors run along the weights' rows, broadcasting each column
/// (512x1x128 in 5 µs against the `gemm` crate's 18 µs, 512x4x128 in 11
/// against 46). Weights over [`PACKED_WEIGHT_BYTES`], or a reduction over
/// [`PACKED_K_BYTES`], stay unpacked unless the batch is narrow (see
/// [`packs`]). Returns the packed weights, or `None` where the products
/// stay with [`step_gemm`]'s other paths.
pub(super) fn pack_for_steps<'p>(
    isa: Isa,
    a: &[f32],
    blocks: usize,
    bm: usize,
    k: usize,
    n: usize,
    packed: &'p mut PackedRows,
) -> Option<&'p PackedRows> {
    if !packs(isa, blocks * bm, k, n, true) {
        return None;
    }
    packed.pack(isa, a, blocks, bm, k, n);
    Some(packed)
}

/// [`pack_for_steps`] of the input's weights `a` (`blocks·bm × k`),
/// small ones only (a large `W_ih` is read once by one product over every
/// step instead), in the panels of the recurrent weights' pack `like`
/// where there is one: a team member's share of `W_hh`'s panels is then
/// its share of `W_ih`'s, though the two weights' sizes may give them
/// different tiles (the halves start at 4 MiB).
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_input_for_steps<'p>(
    isa: Isa,
    a: &[f32],
    blocks: usize,
    bm: usize,
    k: usize,
    n: usize,
    like: Option<&PackedRows>,
    packed: &'p mut PackedRows,
) -> Option<&'p PackedRows> {
    if !packs(isa, blocks * bm, k, n, false) {
        return None;
    }
    match like {
        Some(like) => {
            debug_assert_eq!(like.block_rows(), bm, "W_hh's blocks are W_ih's");
            packed.pack_like(like, a, k)
        }
        None => packed.pack(isa, a, blocks, bm, k, n),
    }
    Some(packed)
}

/// [`pack_for_steps`] of one block given transposed (`a_t` is `k×m`):
/// the backward's `W_hhᵀ` straight from `W_hh`, with no transposed copy;
/// large weights too where the batch is narrow.
pub(super) fn pack_transposed_for_steps<'p>(
    isa: Isa,
    a_t: &[f32],
    m: usize,
    k: usize,
    n: usize,
    packed: &'p mut PackedRows,
) -> Option<&'p PackedRows> {
    if !packs(isa, m, k, n, true) {
        return None;
    }
    packed.pack_transposed(isa, a_t, m, k, n);
    Some(packed)
}

/// Whether [`pack_for_steps`] packs `m×k` weights for products `n` wide
/// on `isa`: small ones always; larger ones (`large_narrow`, for the
/// recurrent weights read at every step) where the batch is narrow:
/// - where it runs on the column tile ([`PackedRows::runs_by_columns`]:
///   at most half a vector, or on AVX-512 one vector in halves), whatever
///   their size. Unpacked, those products went to the `gemm` crate (below
///   a vector) or `rows_gemm`: the crate streamed the weights at 24-27
///   GB/s where the packed column tile, split over the team, streams them
///   at 45-52 (2 threads, Zen 5: 6144x8x1536 in 1448 against 731 µs,
///   8192x8x2048 in 2550 against 1483);
/// - else at most one vector, on the narrow panel tile, where they fit in
///   the cache counted on: on AVX2, and on AVX-512 for weights under the
///   halves' 4 MiB whose reduction is too long for the small packs (the
///   backward's `W_hhᵀ` at h384). Measured on AVX-512 before the halves:
///   LSTM forward and backward-data at h1024, 2 threads, ABBA, 1.07x and
///   1.12x at batch 16, 1.41x and 1.50x at batch 12; at h1536, streaming
///   from DRAM, 0.93x and 0.99x at batch 16.
///
/// Wider batches stay on `rows_gemm` (on large weights the packed wide
/// tile was 0.8-1.0x of it at 32 and 64 columns).
fn packs(isa: Isa, m: usize, k: usize, n: usize, large_narrow: bool) -> bool {
    let lanes = isa.f32_lanes();
    let small = m * k * 4 <= PACKED_WEIGHT_BYTES && k * 4 * 4 * lanes <= PACKED_K_BYTES;
    if small || !large_narrow || isa == Isa::Scalar {
        return small;
    }
    PackedRows::runs_by_columns(isa, n, m * k)
        || ((1..=lanes).contains(&n)
            && k * 4 * lanes <= PACKED_K_BYTES
            && (m * k * 4) as u64 <= cache_bytes())
}

/// The widest batch any ISA packs large weights for (AVX-512's 16
/// lanes): the workspace, sized before the pass picks its ISA, holds room
/// for them up to it (see [`packs`]).
const NARROW_BATCH_MAX: usize = 16;

/// Floats a [`PackedRows`] for `blocks·bm × k` weights must hold room for:
/// none where [`pack_for_steps`] never packs them for a batch of `n`
/// (`large_narrow` as in [`packs`]; `None` past `usize`).
pub(super) fn packed_floats(
    blocks: usize,
    bm: usize,
    k: usize,
    n: usize,
    large_narrow: bool,
) -> Option<usize> {
    let bytes = blocks.checked_mul(bm)?.checked_mul(k)?.checked_mul(4)?;
    let narrow = large_narrow && (1..=NARROW_BATCH_MAX).contains(&n);
    if bytes > PACKED_WEIGHT_BYTES && !narrow {
        return Some(0);
    }
    PackedRows::floats_for(blocks, bm, k)
}

/// One step's product, `C[m×n] (+)= A[m×k]·B[k×n]` (weights × states, `n`
/// the batch): on the weights packed by [`pack_for_steps`] where they
/// were, else on the no-packing GEMM, whose weights stream once and whose
/// states stay in cache, unless the batch is narrower than one vector,
/// where the tiled GEMM wastes fewer lanes. Measured beside the tiled GEMM
/// on the per-step shapes with `rows_gemm_beside_sgemm`.
#[allow(clippy::too_many_arguments)]
pub(super) fn step_gemm(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    packed: Option<&PackedRows>,
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    if let Some(p) = packed {
        p.gemm(b, c, acc);
    } else if n >= isa.f32_lanes() {
        rows_gemm(isa, m, n, k, a, b, c, acc);
    } else {
        gemm(isa, m, n, k, a, false, b, false, c, acc);
    }
}

/// `C = op(A)·op(B)` (or `+=`) on contiguous row-major operands, on
/// `isa` (see [`crate::gemm`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
    c: &mut [f32],
    acc: bool,
) {
    let s = GemmShape {
        m,
        n,
        k,
        trans_a: ta,
        trans_b: tb,
    };
    sgemm_acc(isa, &s, a, b, c, acc);
}

/// `row[r][..] += v[r]` over a `[rows][width]` matrix.
pub(super) fn add_rows(isa: Isa, m: &mut [f32], width: usize, v: &[f32]) {
    crate::on_isa!(isa, {
        for (row, &b) in m.chunks_mut(width).zip(v) {
            for x in row {
                *x += b;
            }
        }
    });
}

/// `dst[c][r] = src[r][c]` for a `rows x cols` row-major `src`: on
/// AVX-512, 16 x 16 blocks through registers where both sides are at
/// least a block ([`transpose_avx512_strided`]); else tiles of `T x T`
/// copied through a small buffer, so that a tile touches `T` pages of
/// each side (large weights span a page per row, and walking one side by
/// columns would miss the TLB at every element), bands of `T` rows of
/// `src` in parallel.
pub(super) fn transpose(isa: Isa, src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    assert_eq!(dst.len(), rows * cols);
    transpose_strided(isa, src, rows, cols, dst, rows);
}

/// [`transpose`] into rows of `dst` `stride` apart:
/// `dst[c·stride + r] = src[r][c]`.
// `tile[r][c]` reads the tile by columns: an index loop says so best.
#[allow(clippy::needless_range_loop)]
pub(super) fn transpose_strided(
    isa: Isa,
    src: &[f32],
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    stride: usize,
) {
    const T: usize = 32;
    assert_eq!(src.len(), rows * cols);
    assert!(stride >= rows);
    if rows == 0 || cols == 0 {
        return;
    }
    // The tiled copy below moves one float at a time out of its buffer:
    // the backward's `W_hh` (2048 x 512 at h512) took 4.8% of an LSTM's
    // backward-data pass that way (batch 32, 2 threads, Zen 4).
    if rows >= 16 && cols >= 16 && transpose_avx512_strided(isa, src, rows, cols, dst, stride) {
        return;
    }
    assert!(strided_fits(dst.len(), rows, cols, stride), "dst size");
    let out = SendPtr(dst.as_mut_ptr());
    let band = |r0: usize| {
        let rn = T.min(rows - r0);
        let mut tile = [[0f32; T]; T];
        for c0 in (0..cols).step_by(T) {
            let cn = T.min(cols - c0);
            for (r, t) in tile.iter_mut().enumerate().take(rn) {
                let row = &src[(r0 + r) * cols + c0..];
                if cn == T {
                    // A constant length: vector moves, not a memmove call.
                    t.copy_from_slice(&row[..T]);
                } else {
                    t[..cn].copy_from_slice(&row[..cn]);
                }
            }
            for c in 0..cn {
                // SAFETY: row c0+c of dst, columns r0..r0+rn: inside dst,
                // and only this band writes those columns.
                let d = unsafe {
                    std::slice::from_raw_parts_mut(out.get().add((c0 + c) * stride + r0), rn)
                };
                for (r, v) in d.iter_mut().enumerate() {
                    *v = tile[r][c];
                }
            }
        }
    };
    let bands = rows.div_ceil(T);
    // Per-step transposes stay on the calling thread: waking the pool
    // once per step costs more than it saves below about 2^18 values.
    if rows * cols < 1 << 18 {
        (0..bands).for_each(|b| band(b * T));
    } else {
        (0..bands).into_par_iter().for_each(|b| band(b * T));
    }
}

/// `dst[c][r] += src[r][c]` (`src` `rows x cols` with row stride
/// `stride`, starting at column `offset`).
#[allow(clippy::needless_range_loop)] // as in `transpose_strided`
pub(super) fn transpose_add(
    src: &[f32],
    rows: usize,
    cols: usize,
    stride: usize,
    offset: usize,
    dst: &mut [f32],
) {
    // In 32 x 32 tiles, so that both sides are read in runs of 32.
    const T: usize = 32;
    let mut tile = [[0f32; T]; T];
    for r0 in (0..rows).step_by(T) {
        let rn = T.min(rows - r0);
        for c0 in (0..cols).step_by(T) {
            let cn = T.min(cols - c0);
            for (r, t) in tile.iter_mut().enumerate().take(rn) {
                t[..cn].copy_from_slice(&src[(r0 + r) * stride + offset + c0..][..cn]);
            }
            for c in 0..cn {
                let d = &mut dst[(c0 + c) * rows + r0..][..rn];
                for (r, v) in d.iter_mut().enumerate() {
                    *v += tile[r][c];
                }
            }
        }
    }
}

/// Row `prev` of `rows` (or `first` when there is none) to read and row
/// `k` to write: rows of `len` values.
pub(super) fn split_rows<'a>(
    rows: &'a mut [f32],
    prev: Option<usize>,
    k: usize,
    len: usize,
    first: &'a [f32],
) -> (&'a [f32], &'a mut [f32]) {
    match prev {
        None => (first, &mut rows[k * len..][..len]),
        Some(p) if p < k => {
            let (a, b) = rows.split_at_mut(k * len);
            (&a[p * len..][..len], &mut b[..len])
        }
        Some(p) => {
            let (a, b) = rows.split_at_mut(p * len);
            (&b[..len], &mut a[k * len..][..len])
        }
    }
}

/// `out[r] = Σ_c m[r][c]` over rows of `width`.
pub(super) fn row_sums(isa: Isa, m: &[f32], width: usize, out: &mut [f32]) {
    // Sixteen running sums per row: a single one is a chain of dependent
    // additions that the compiler may not reorder, so it would not
    // vectorise.
    const L: usize = 16;
    crate::on_isa!(isa, {
        for (o, r) in out.iter_mut().zip(m.chunks(width.max(1))) {
            let mut acc = [0f32; L];
            let mut lanes = r.chunks_exact(L);
            for c in &mut lanes {
                for (a, &v) in acc.iter_mut().zip(c) {
                    *a += v;
                }
            }
            *o = acc.iter().sum::<f32>() + lanes.remainder().iter().sum::<f32>();
        }
    });
}

/// `dst.copy_from_slice(src)` for the few floats of a batch, in pieces of
/// a constant 8 that compile to vector moves: a slice's copy of a length
/// known only at run time is a call to `memmove`, 9% of an LSTM's
/// backward-weights samples at batch 8 (h128, 100 steps: 51,200 calls of
/// 32 bytes). [`to_columns`] of that shape went from 81-111 to 63-71 µs
/// (2 threads, Zen 4); at batches of 16 and 32 the two were within noise.
#[inline]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len());
    let mut d8 = dst.chunks_exact_mut(8);
    let mut s8 = src.chunks_exact(8);
    for (d, s) in (&mut d8).zip(&mut s8) {
        // As arrays: a copy of a constant size.
        let d: &mut [f32; 8] = d.try_into().expect("a chunk of 8");
        *d = s.try_into().expect("a chunk of 8");
    }
    for (d, s) in d8.into_remainder().iter_mut().zip(s8.remainder()) {
        *d = *s;
    }
}

/// `[t][rows][mb]` as `[rows][t·mb]`: each step's block side by side.
pub(super) fn to_columns(src: &[f32], t: usize, rows: usize, mb: usize, dst: &mut [f32]) {
    let tb = t * mb;
    let dst = &mut dst[..rows * tb];
    if tb == 0 {
        return;
    }
    let fill = |r: usize, out: &mut [f32]| {
        for (k, o) in out.chunks_mut(mb).enumerate() {
            copy_short(o, &src[(k * rows + r) * mb..][..mb]);
        }
    };
    if rows * tb < 1 << 18 {
        dst.chunks_mut(tb).enumerate().for_each(|(r, o)| fill(r, o));
    } else {
        dst.par_chunks_mut(tb)
            .enumerate()
            .for_each(|(r, o)| fill(r, o));
    }
}
