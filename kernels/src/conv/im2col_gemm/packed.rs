//! A small packed GEMM with an AVX-512 micro-kernel (and an AVX2 one over
//! the same panels, a quarter of a panel at a time), for the single-tap
//! (1x1) convolutions with many pixels, forward and (where the reduction is
//! 64 or more) backward-data, and for Winograd's 36 GEMMs (whose
//! transforms fill the panels themselves; its panels schedule and its
//! backward-filter, which reads A transposed, run [`gemm_panels`]), and for
//! `crate::gemm`'s packed path. It
//! reads the pixel rows in place and
//! prefetches the next micro-tile's, where the `gemm` crate packs them per
//! call; it also fuses the bias, which the crate adds in a pass of its own.
//!
//! The weights `B[K x N]` are packed once per call into panels of `NR`
//! output channels (`[panel][K][NR]`, zero-padded), shared by all work
//! items. The pixel rows `A` are read in place (unit column stride) and
//! broadcast; each micro-tile is `MR` pixels x `NR` channels, kept in 24
//! zmm accumulators (on AVX2, four tiles of `MR` x 16 in 12 ymm each),
//! with the bias added (or dst accumulated) at store;
//! where the caller asks and the reduction takes one pass, whole vectors
//! starting on a cache line go out with non-temporal stores.

use crate::Isa;
use rayon::prelude::*;

/// Output channels per panel (four zmm vectors).
pub const NR: usize = 64;
/// Pixel rows per micro-tile.
const MR: usize = 6;
/// Reduction depth per pass: the micro-tiles walk down all rows of A
/// (from L2) over one `KC x NR` panel slice (64 KiB, from L2 too). 256
/// against 128, which kept the slice in L1 (Zen 4 VM, 2 threads, ABBA, 3
/// rounds): ResNet-50's 1x1 layers with a 256- or 512-channel reduction
/// 1.00-1.075x per pass, median 1.04x, forward and backward-data; fewer
/// passes re-read C less, and more outputs take a single pass, which
/// streams.
pub(crate) const KC: usize = 256;

/// Whether the packed path runs on `isa` here: its micro-kernels are
/// AVX-512's and AVX2's. (Its users other than the 1x1 convolutions were
/// measured on AVX-512 only, and take it there only.)
pub fn available(isa: Isa) -> bool {
    matches!(isa, Isa::Avx512 | Isa::Avx2) && isa.is_supported()
}

/// Whether the packed path's users other than the 1x1 convolutions
/// (Winograd, `crate::gemm` and through it the recurrent layers) take it on
/// `isa`: on AVX-512, where they were measured against the `gemm` crate.
pub fn available_for_all(isa: Isa) -> bool {
    isa == Isa::Avx512 && available(isa)
}

/// `B[k x n]` packed into `NR`-wide panels, multiplied on `isa`.
pub struct PackedB {
    buf: Vec<f32>,
    k: usize,
    n: usize,
    isa: Isa,
}

impl PackedB {
    /// Panels for `k x n`, for [`PackedB::gemm`] on `isa`, which
    /// [`available`] must accept.
    pub fn new(k: usize, n: usize, isa: Isa) -> Self {
        assert!(available(isa), "packed GEMM on {isa}");
        PackedB {
            buf: vec![0.0; n.div_ceil(NR) * k * NR],
            k,
            n,
            isa,
        }
    }

    pub fn bytes(&self) -> usize {
        4 * self.buf.len()
    }

    /// The panels, `[panel][k][NR]`, for callers that fill them in that
    /// layout themselves (columns past `n` in the last panel are never
    /// stored by [`PackedB::gemm`]): a pointer from `as_mut_ptr`, which a
    /// later read of the buffer leaves valid.
    pub fn panels_ptr(&mut self) -> *mut f32 {
        self.buf.as_mut_ptr()
    }

    /// Packs the row-major `B(i, j) = b[i·rs + j]` (`i < k`, `j < n`).
    pub fn pack(&mut self, b: &[f32], rs: usize) {
        let (k, n) = (self.k, self.n);
        if k == 0 || n == 0 {
            return;
        }
        assert!(b.len() >= (k - 1) * rs + n, "weights too small");
        self.buf
            .par_chunks_mut(k * NR)
            .enumerate()
            .for_each(|(pi, panel)| {
                let j0 = pi * NR;
                let w = NR.min(n - j0);
                for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                    row[..w].copy_from_slice(&b[i * rs + j0..][..w]);
                }
            });
    }

    /// `dst[rows x (n1-n0)] = A[rows x k] · B[:, n0..n1] (+ bias[n0..n1])`.
    /// `n0` must be a multiple of `NR`. With `stream`, a reduction of one
    /// pass (`k` at most `KC`) writes each whole vector that starts on a
    /// cache line with a non-temporal store (see `crate::stream`).
    ///
    /// # Safety
    /// `a` must address `rows` rows of `k` readable floats with row stride
    /// `a_rs`; `dst` `rows` rows of `n1 - n0` writable floats with row stride
    /// `dst_rs`, touched by no other thread meanwhile; `bias` (when given)
    /// `n1 - n0` readable floats. With
    /// `stream`, the calling thread must call `crate::stream::fence` before
    /// another thread reads `dst` (the stores are weakly ordered).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
        &self,
        rows: usize,
        a: *const f32,
        a_rs: usize,
        n0: usize,
        n1: usize,
        dst: *mut f32,
        dst_rs: usize,
        bias: Option<*const f32>,
        stream: bool,
    ) {
        assert!(n0.is_multiple_of(NR) && n1 <= self.n && n0 <= n1);
        let k = self.k;
        // SAFETY: forwarded from this function's contract; the panels of
        // columns n0.. start at panel n0 / NR, k rows each.
        unsafe {
            run_tiles::<false>(
                self.isa,
                rows,
                k,
                a,
                a_rs,
                self.buf.as_ptr().add((n0 / NR) * k * NR),
                k,
                n0,
                n1,
                dst,
                dst_rs,
                bias,
                false,
                stream,
            )
        }
    }
}

/// `C[rows x (n1-n0)] (+)= A · B[:, n0..n1]` over a reduction of `k`,
/// with A stored either way (`A(i, p)` at `a[i·a_rs + p]`, or where `ta`
/// transposed, at `a[p·a_rs + i]`, `p < k`: Winograd's backward-filter and
/// the general GEMM's two layouts, see `crate::gemm`) and B in panels of
/// [`NR`] columns, `k_stride` rows apart (`[panel][k_stride][NR]`, of
/// which the first `k` rows are used). `n0` must be a multiple of `NR`.
/// Adds to C where `acc`, else overwrites it.
///
/// # Safety
/// `a` must address A's `rows x k` readable floats as `ta` says; `b` the
/// panels of columns `n0..n1` (each `k_stride·NR` floats, zeros past the
/// last column); `c` `rows` rows of `n1 - n0` writable floats, `c_rs`
/// apart, touched by no other thread meanwhile. Only call where
/// [`available`] accepts `isa`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_panels(
    isa: Isa,
    rows: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    ta: bool,
    b: *const f32,
    k_stride: usize,
    n0: usize,
    n1: usize,
    c: *mut f32,
    c_rs: usize,
    acc: bool,
) {
    assert!(n0.is_multiple_of(NR) && n0 <= n1 && k <= k_stride);
    // SAFETY: forwarded from this function's contract.
    unsafe {
        if ta {
            run_tiles::<true>(
                isa, rows, k, a, a_rs, b, k_stride, n0, n1, c, c_rs, None, acc, false,
            )
        } else {
            run_tiles::<false>(
                isa, rows, k, a, a_rs, b, k_stride, n0, n1, c, c_rs, None, acc, false,
            )
        }
    }
}

/// Packs rows `k0..k0 + kc` of `B[k x n]` (row-major, or stored `n x k`
/// where `tb`) into `dst` as `[panel][kc][NR]`, zeros past column `n`: the
/// panels [`gemm_panels`] reads, `k_stride = kc`.
pub fn pack_panels(b: &[f32], k: usize, n: usize, tb: bool, k0: usize, kc: usize, dst: &mut [f32]) {
    assert!(k0 + kc <= k && b.len() >= k * n);
    let dst = &mut dst[..n.div_ceil(NR) * kc * NR];
    let fill = |pi: usize, panel: &mut [f32]| {
        let j0 = pi * NR;
        let w = NR.min(n - j0);
        if tb {
            // B(i, j) at b[j·k + i]: a panel's column runs along a row of
            // the storage, so read by columns and scatter into the panel.
            for j in 0..w {
                let col = &b[(j0 + j) * k + k0..][..kc];
                for (i, &v) in col.iter().enumerate() {
                    panel[i * NR + j] = v;
                }
            }
            if w < NR {
                for row in panel.chunks_exact_mut(NR) {
                    row[w..].fill(0.0);
                }
            }
        } else {
            for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                row[..w].copy_from_slice(&b[(k0 + i) * n + j0..][..w]);
                row[w..].fill(0.0);
            }
        }
    };
    if kc * n < 1 << 16 {
        dst.chunks_mut(kc * NR)
            .enumerate()
            .for_each(|(pi, p)| fill(pi, p));
    } else {
        dst.par_chunks_mut(kc * NR)
            .enumerate()
            .for_each(|(pi, p)| fill(pi, p));
    }
}

/// The loops of both GEMMs: blocks of the reduction (`KC`), panels of `NR`
/// columns, micro-tiles of `MR` rows. `b` is the panel of columns `n0..`,
/// panels `k_stride·NR` floats apart; A is read as `TA` says (see
/// [`avx512_gemm_f32_6x64`]); the bias is added by the first block, and C
/// is added to where `acc` or after the first block; a single block
/// streams its stores where `stream` (and not `acc`). With no reduction
/// (`k == 0`) C becomes the bias or zeros, or stays as it is where `acc`.
///
/// # Safety
/// The callers' contracts ([`PackedB::gemm`], [`gemm_panels`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn run_tiles<const TA: bool>(
    isa: Isa,
    rows: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: *const f32,
    k_stride: usize,
    n0: usize,
    n1: usize,
    c: *mut f32,
    c_rs: usize,
    bias: Option<*const f32>,
    acc: bool,
    stream: bool,
) {
    assert!(available(isa), "packed GEMM on {isa}");
    if k == 0 {
        if !acc {
            let w = n1 - n0;
            for i in 0..rows {
                // SAFETY: row i of C, per the callers' contracts.
                let d = unsafe { std::slice::from_raw_parts_mut(c.add(i * c_rs), w) };
                match bias {
                    // SAFETY: w bias floats, per the callers' contracts.
                    Some(b) => d.copy_from_slice(unsafe { std::slice::from_raw_parts(b, w) }),
                    None => d.fill(0.0),
                }
            }
        }
        return;
    }
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        let first = k0 == 0;
        let mut j0 = n0;
        while j0 < n1 {
            let w = NR.min(n1 - j0);
            let mut i0 = 0;
            while i0 < rows {
                let mr = MR.min(rows - i0);
                let tile = Tile {
                    k: kc,
                    // SAFETY (all four): in bounds per the callers'
                    // contracts and the panel layout.
                    a: unsafe { a.add(if TA { k0 * a_rs + i0 } else { i0 * a_rs + k0 }) },
                    a_rs,
                    b: unsafe { b.add(((j0 - n0) / NR) * k_stride * NR + k0 * NR) },
                    c: unsafe { c.add(i0 * c_rs + (j0 - n0)) },
                    c_rs,
                    w,
                    bias: if first {
                        bias.map(|p| unsafe { p.add(j0 - n0) })
                    } else {
                        None
                    },
                    acc: acc || !first,
                    // Only a single pass streams: after a first pass has
                    // stored C, its lines are already read and cached.
                    stream: stream && !acc && kc == k,
                };
                // SAFETY: `isa` runs here (asserted above) and the tile
                // addresses memory as checked above.
                unsafe {
                    match (isa, tile.stream) {
                        (Isa::Avx512, true) => tile_rows::<TA, true>(mr, &tile),
                        (Isa::Avx512, false) => tile_rows::<TA, false>(mr, &tile),
                        (Isa::Avx2, true) => tile_rows_avx2::<TA, true>(mr, &tile),
                        (Isa::Avx2, false) => tile_rows_avx2::<TA, false>(mr, &tile),
                        _ => unreachable!("packed GEMM on {isa}"),
                    }
                }
                i0 += mr;
            }
            j0 += NR;
        }
        k0 += kc;
    }
}

/// The micro-kernel instantiated for `mr` rows, streaming or not: a
/// run-time `stream` flag in its store loop made LLVM keep the
/// accumulators on the stack inside the reduction loop (2.4x slower).
///
/// # Safety
/// As [`avx512_gemm_f32_6x64`].
#[inline(always)]
unsafe fn tile_rows<const TA: bool, const ST: bool>(mr: usize, tile: &Tile) {
    // SAFETY: forwarded.
    unsafe {
        match mr {
            6 => avx512_gemm_f32_6x64::<6, TA, ST>(tile),
            5 => avx512_gemm_f32_6x64::<5, TA, ST>(tile),
            4 => avx512_gemm_f32_6x64::<4, TA, ST>(tile),
            3 => avx512_gemm_f32_6x64::<3, TA, ST>(tile),
            2 => avx512_gemm_f32_6x64::<2, TA, ST>(tile),
            _ => avx512_gemm_f32_6x64::<1, TA, ST>(tile),
        }
    }
}

/// [`tile_rows`] on AVX2: the panel's four 16-column quarters, one after
/// another, each through [`avx2_gemm_f32_6x16`] (A's `mr` rows stay in L1
/// between them).
///
/// # Safety
/// As [`avx2_gemm_f32_6x16`].
#[inline(always)]
unsafe fn tile_rows_avx2<const TA: bool, const ST: bool>(mr: usize, tile: &Tile) {
    for q in 0..tile.w.div_ceil(16) {
        let quarter = Tile {
            // SAFETY: column 16q of the panel and of C's tile, inside
            // them (16q < w <= NR).
            b: unsafe { tile.b.add(16 * q) },
            c: unsafe { tile.c.add(16 * q) },
            bias: tile.bias.map(|p| unsafe { p.add(16 * q) }),
            w: (tile.w - 16 * q).min(16),
            ..*tile
        };
        // SAFETY: forwarded.
        unsafe {
            match mr {
                6 => avx2_gemm_f32_6x16::<6, TA, ST>(&quarter),
                5 => avx2_gemm_f32_6x16::<5, TA, ST>(&quarter),
                4 => avx2_gemm_f32_6x16::<4, TA, ST>(&quarter),
                3 => avx2_gemm_f32_6x16::<3, TA, ST>(&quarter),
                2 => avx2_gemm_f32_6x16::<2, TA, ST>(&quarter),
                _ => avx2_gemm_f32_6x16::<1, TA, ST>(&quarter),
            }
        }
    }
}

/// One micro-tile: `C[M x w] (+)= A[M x k] · Bpanel[k x NR][:, ..w]`.
#[derive(Clone, Copy)]
struct Tile {
    k: usize,
    a: *const f32,
    a_rs: usize,
    /// Packed panel rows, `NR` floats apart.
    b: *const f32,
    c: *mut f32,
    c_rs: usize,
    /// Valid columns, `1..=NR`.
    w: usize,
    bias: Option<*const f32>,
    acc: bool,
    /// Store whole, line-aligned vectors non-temporally.
    stream: bool,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512_gemm_f32_6x64<const M: usize, const TA: bool, const ST: bool>(t: &Tile) {
    use std::arch::x86_64::*;
    let mut r = [[_mm512_setzero_ps(); 4]; M];
    let (a, b) = (t.a, t.b);
    for p in 0..t.k {
        // SAFETY: row p of the packed panel (NR floats) and step p of the
        // M rows of A (a column, or with `TA` a row) are in bounds (see
        // `PackedB::gemm`, `gemm_panels`).
        unsafe {
            let bp = b.add(p * NR);
            let bv = [
                _mm512_loadu_ps(bp),
                _mm512_loadu_ps(bp.add(16)),
                _mm512_loadu_ps(bp.add(32)),
                _mm512_loadu_ps(bp.add(48)),
            ];
            // The next micro-tile's rows, one row per step: over the 16
            // steps of a cache line every row's line is asked for, a tile
            // (about 1,500 cycles) ahead of its use. Without it the first
            // broadcast of each step waited on memory (19% of the samples).
            // `wrapping_add`: past the last tile the address is never read.
            // With A transposed (`TA`: element (i, p) at `p·a_rs + i`) a
            // step's M values are adjacent and the steps walk forwards,
            // which the hardware prefetcher follows.
            if !TA {
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add((M + p % M) * t.a_rs + p).cast::<i8>());
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let at = if TA { p * t.a_rs + i } else { i * t.a_rs + p };
                let av = _mm512_set1_ps(*a.add(at));
                for v in 0..4 {
                    ri[v] = _mm512_fmadd_ps(av, bv[v], ri[v]);
                }
            }
        }
    }
    let mask = |v: usize| -> __mmask16 {
        let left = t.w.saturating_sub(16 * v).min(16);
        ((1u32 << left) - 1) as __mmask16
    };
    let masks = [mask(0), mask(1), mask(2), mask(3)];
    for (i, ri) in r.iter_mut().enumerate() {
        // SAFETY: row i of C holds w valid columns; masked lanes beyond w
        // are neither read nor written. A streamed store writes a whole
        // vector (its mask full: 16 valid columns) at a 64-byte aligned
        // address, as `_mm512_stream_ps` requires (checked just before).
        unsafe {
            let c = t.c.add(i * t.c_rs);
            for v in 0..4 {
                if masks[v] == 0 {
                    continue;
                }
                let mut x = ri[v];
                if t.acc {
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(masks[v], c.add(16 * v)));
                }
                if let Some(bias) = t.bias {
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(masks[v], bias.add(16 * v)));
                }
                let at = c.add(16 * v);
                if ST && masks[v] == u16::MAX && (at as usize).is_multiple_of(64) {
                    _mm512_stream_ps(at, x);
                } else {
                    _mm512_mask_storeu_ps(at, masks[v], x);
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn avx512_gemm_f32_6x64<const M: usize, const TA: bool, const ST: bool>(_: &Tile) {
    unreachable!("packed GEMM without AVX-512")
}

/// [`avx512_gemm_f32_6x64`] on AVX2 over 16 of the panel's columns (their
/// rows still `NR` floats apart): `M x 16` in 12 ymm accumulators, two
/// for B and one broadcast, of the 16 registers. A streamed row writes its
/// two vectors where they fill one whole cache line.
///
/// # Safety
/// As [`avx512_gemm_f32_6x64`], with `t.w <= 16`; AVX2 and FMA available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_gemm_f32_6x16<const M: usize, const TA: bool, const ST: bool>(t: &Tile) {
    use std::arch::x86_64::*;
    let mut r = [[_mm256_setzero_ps(); 2]; M];
    let (a, b) = (t.a, t.b);
    for p in 0..t.k {
        // SAFETY: as in `avx512_gemm_f32_6x64`; the 16 columns are inside
        // the panel's row.
        unsafe {
            let bp = b.add(p * NR);
            let bv = [_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8))];
            // As the AVX-512 kernel: the next micro-tile's rows.
            if !TA {
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add((M + p % M) * t.a_rs + p).cast::<i8>());
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let at = if TA { p * t.a_rs + i } else { i * t.a_rs + p };
                let av = _mm256_broadcast_ss(&*a.add(at));
                for v in 0..2 {
                    ri[v] = _mm256_fmadd_ps(av, bv[v], ri[v]);
                }
            }
        }
    }
    // Lane j of vector v is valid where 8v + j < w.
    let mask = |v: usize| -> __m256i {
        let left = t.w.saturating_sub(8 * v).min(8) as i32;
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(left),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    };
    let masks = [mask(0), mask(1)];
    let full = [t.w >= 8, t.w >= 16];
    for (i, ri) in r.iter_mut().enumerate() {
        // SAFETY: row i of C holds w valid columns; masked lanes beyond w
        // are neither read nor written. A streamed row writes 16 valid
        // columns at a 64-byte aligned address, one whole line (its two
        // vectors 32-byte aligned, as `_mm256_stream_ps` requires).
        unsafe {
            let c = t.c.add(i * t.c_rs);
            let mut x = *ri;
            // Masked moves only for a partial vector: AMD's Zen runs a
            // masked store (`vmaskmovps`) as a slow microcoded sequence. A
            // vector with no valid column is not touched (nor its address
            // formed: it may lie past the end of C or the bias).
            for v in 0..2 {
                if t.w <= 8 * v {
                    continue;
                }
                if t.acc {
                    let y = if full[v] {
                        _mm256_loadu_ps(c.add(8 * v))
                    } else {
                        _mm256_maskload_ps(c.add(8 * v), masks[v])
                    };
                    x[v] = _mm256_add_ps(x[v], y);
                }
                if let Some(bias) = t.bias {
                    let y = if full[v] {
                        _mm256_loadu_ps(bias.add(8 * v))
                    } else {
                        _mm256_maskload_ps(bias.add(8 * v), masks[v])
                    };
                    x[v] = _mm256_add_ps(x[v], y);
                }
            }
            if ST && t.w == 16 && (c as usize).is_multiple_of(64) {
                _mm256_stream_ps(c, x[0]);
                _mm256_stream_ps(c.add(8), x[1]);
            } else {
                for v in 0..2 {
                    if full[v] {
                        _mm256_storeu_ps(c.add(8 * v), x[v]);
                    } else if t.w > 8 * v {
                        _mm256_maskstore_ps(c.add(8 * v), masks[v], x[v]);
                    }
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn avx2_gemm_f32_6x16<const M: usize, const TA: bool, const ST: bool>(_: &Tile) {
    unreachable!("packed GEMM without AVX2")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::rng::fill_uniform;

    /// [`PackedB::gemm`] on every ISA with a micro-kernel here, against a
    /// naive sum: reductions of one and three passes, a partial last panel
    /// and partial quarters (AVX2), row tiles of every height, a bias, a
    /// column block past the first panel, and a dst row stride past its
    /// width.
    #[test]
    fn every_micro_kernel_matches_a_naive_sum() {
        // (rows, k, n): quarters of 16, 9, 8 (one whole vector), 7 and 6
        // columns, with and without a bias (odd cases have none).
        let cases = [
            (17, 40, 64),
            (13, 2 * KC + 7, 150),
            (6, 1, 9),
            (4, 2 * KC + 7, 72),
            (3, KC + 1, 79),
            (2, 5, 8),
        ];
        for (case, (rows, k, n)) in cases.into_iter().enumerate() {
            let with_bias = case % 2 == 0;
            let mut a = vec![0.0; rows * k];
            let mut b = vec![0.0; k * n];
            let mut bias = vec![0.0; n];
            fill_uniform(&mut a, 1, 1.0);
            fill_uniform(&mut b, 2, 1.0);
            fill_uniform(&mut bias, 3, 1.0);
            let dst_rs = n + 5;
            for isa in Isa::supported().into_iter().filter(|&i| available(i)) {
                let mut pb = PackedB::new(k, n, isa);
                pb.pack(&b, n);
                for n0 in (0..n).step_by(NR) {
                    let mut dst = vec![f32::NAN; rows * dst_rs];
                    // SAFETY: a holds rows x k, dst rows rows of dst_rs >=
                    // n - n0, bias n floats.
                    unsafe {
                        pb.gemm(
                            rows,
                            a.as_ptr(),
                            k,
                            n0,
                            n,
                            dst.as_mut_ptr(),
                            dst_rs,
                            with_bias.then(|| bias.as_ptr().add(n0)),
                            false,
                        )
                    };
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    for i in 0..rows {
                        for j in n0..n {
                            let s: f64 = (0..k)
                                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                                .sum();
                            let b = if with_bias { bias[j] as f64 } else { 0.0 };
                            want.push((s + b) as f32);
                            got.push(dst[i * dst_rs + j - n0]);
                        }
                        assert!(dst[i * dst_rs + n - n0..(i + 1) * dst_rs]
                            .iter()
                            .all(|v| v.is_nan()));
                    }
                    let e = rel_l2_error(&got, &want);
                    assert!(e < 1e-6, "{isa} {rows}x{k}x{n} from {n0}: {e}");
                }
            }
        }
    }
}
