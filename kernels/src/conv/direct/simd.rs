//! The handful of vector operations the micro-kernels need, one impl per ISA,
//! so that a single generic kernel body serves AVX-512, AVX2 and scalar.
//!
//! Every method is `#[inline(always)]` and carries no target feature itself:
//! it is inlined into a `#[target_feature]` entry point (see `ukernel`), and
//! only there do the intrinsics it calls get inlined as instructions.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// One SIMD flavour. `V` is a vector of `L` f32 lanes, `M` a lane mask.
///
/// # Safety
/// The x86 impls may only run inside functions compiled with their target
/// features, on a CPU that has them; pointers must be valid for the lanes
/// touched (all `L` lanes, or the lanes set in the mask).
pub(super) trait Simd {
    type V: Copy;
    type M: Copy;
    const L: usize;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    unsafe fn load(p: *const f32) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Mask of the first `n` lanes, `1 <= n <= L`.
    unsafe fn mask(n: usize) -> Self::M;
    /// Loads the masked lanes, zeroes the others; touches no other memory.
    unsafe fn load_m(p: *const f32, m: Self::M) -> Self::V;
    unsafe fn store_m(p: *mut f32, m: Self::M, v: Self::V);
    /// `a * b + c`.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// Whether [`Simd::store_rows`] transposes `nj` columns on this ISA.
    #[inline(always)]
    fn stores_rows(nj: usize) -> bool {
        let _ = nj;
        false
    }
    /// Writes the `L × NJ` block whose column `j` is `cols[j]` (lane `i`
    /// its row `i`) as `L` rows of `NJ` values one after another from `c`,
    /// added onto what is there when `acc`. Only where
    /// [`Simd::stores_rows`]`(NJ)`; else it panics.
    ///
    /// # Safety
    /// `c` must be valid for `L·NJ` writes, and reads when `acc`.
    #[inline(always)]
    unsafe fn store_rows<const NJ: usize>(cols: &[Self::V; NJ], c: *mut f32, acc: bool) {
        let _ = (cols, c, acc);
        unreachable!("no row transposition of {NJ} columns on this ISA")
    }
    /// Stores `v` at `p`, or adds it onto what `p` holds when `acc`.
    ///
    /// # Safety
    /// `p` valid for `L` reads and writes.
    #[inline(always)]
    unsafe fn store_or_add(p: *mut f32, v: Self::V, acc: bool) {
        let v = if acc { Self::add(Self::load(p), v) } else { v };
        Self::store(p, v)
    }
    /// Stores `v` at `p` around the caches (non-temporal) where `p` is
    /// aligned enough for that (a vector's width, or 16 bytes: then as
    /// 16-byte pieces), else as [`Simd::store`]. Weakly ordered: the caller
    /// fences (`crate::stream::fence`) before another thread reads `p`.
    ///
    /// # Safety
    /// `p` valid for `L` writes.
    #[inline(always)]
    unsafe fn stream(p: *mut f32, v: Self::V) {
        Self::store(p, v)
    }
    /// Asks for the cache line at `p` ahead of its use; a hint, which
    /// never faults, so `p` may point anywhere.
    #[inline(always)]
    unsafe fn prefetch(p: *const f32) {
        crate::simd::prefetch(p)
    }
}

/// Portable fallback: one lane, plain multiply-add (a software `mul_add`
/// would be far slower without hardware FMA).
pub(super) struct Scalar;

impl Simd for Scalar {
    type V = f32;
    type M = bool;
    const L: usize = 1;
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> f32 {
        *p
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: f32) {
        *p = v
    }
    #[inline(always)]
    unsafe fn mask(n: usize) -> bool {
        n >= 1
    }
    #[inline(always)]
    unsafe fn load_m(p: *const f32, m: bool) -> f32 {
        if m {
            *p
        } else {
            0.0
        }
    }
    #[inline(always)]
    unsafe fn store_m(p: *mut f32, m: bool, v: f32) {
        if m {
            *p = v
        }
    }
    #[inline(always)]
    unsafe fn fma(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
    #[inline(always)]
    unsafe fn add(a: f32, b: f32) -> f32 {
        a + b
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Simd for Avx512 {
    type V = __m512;
    type M = __mmask16;
    const L: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        _mm512_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut f32, v: __m512) {
        if (p as usize).is_multiple_of(64) {
            _mm512_stream_ps(p, v)
        } else if (p as usize).is_multiple_of(16) {
            _mm_stream_ps(p, _mm512_castps512_ps128(v));
            _mm_stream_ps(p.add(4), _mm512_extractf32x4_ps::<1>(v));
            _mm_stream_ps(p.add(8), _mm512_extractf32x4_ps::<2>(v));
            _mm_stream_ps(p.add(12), _mm512_extractf32x4_ps::<3>(v));
        } else {
            _mm512_storeu_ps(p, v)
        }
    }
    #[inline(always)]
    unsafe fn mask(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }
    #[inline(always)]
    unsafe fn load_m(p: *const f32, m: __mmask16) -> __m512 {
        _mm512_maskz_loadu_ps(m, p)
    }
    #[inline(always)]
    unsafe fn store_m(p: *mut f32, m: __mmask16, v: __m512) {
        _mm512_mask_storeu_ps(p, m, v)
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    fn stores_rows(nj: usize) -> bool {
        matches!(nj, 1 | 2 | 4 | 8)
    }
    /// For `NJ` of 1, 2, 4 or 8: `log2 NJ` rounds of two-source permutes,
    /// each merging pairs of column groups `w` wide into groups `2w` wide
    /// (so 24 permutes for 16 rows of 8), instead of 16·`NJ` scalar stores.
    #[inline(always)]
    unsafe fn store_rows<const NJ: usize>(cols: &[__m512; NJ], c: *mut f32, acc: bool) {
        assert!(Self::stores_rows(NJ));
        let mut cur = [_mm512_setzero_ps(); 8];
        cur[..NJ].copy_from_slice(cols);
        let cur = merge_columns(cur, NJ);
        for (k, &v) in cur[..NJ].iter().enumerate() {
            Self::store_or_add(c.add(16 * k), v, acc);
        }
    }
}

/// Writes the 16 columns `c0..c0 + 16` of 16 rows (`from[i]`, each at
/// least `c0 + 16` long) transposed: column `c0 + j` as one vector of the
/// 16 rows' values at `dst + j·stride`. A packed panel's 16-row group,
/// where one float at a time (a bounds-checked read and a store each)
/// took 11% of a batch-1 h256 LSTM's forward on the Zen 5: the same four
/// rounds of merges as [`Avx512::store_rows`] for 16 columns, 64 permutes
/// for 256 floats.
///
/// # Safety
/// An AVX-512 CPU; `dst` valid for writes of 16 floats at each of the 16
/// strides.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn store_transposed_16x16(
    from: &[&[f32]; 16],
    c0: usize,
    dst: *mut f32,
    stride: usize,
) {
    // Vector i: row i's 16 values, read as the "columns" of a 16 x 16
    // block whose rows the merges put in vectors of their own.
    let cur: [__m512; 16] = std::array::from_fn(|i| {
        let row = &from[i][c0..c0 + 16];
        _mm512_loadu_ps(row.as_ptr())
    });
    let cur = merge_columns(cur, 16);
    for (j, &v) in cur.iter().enumerate() {
        _mm512_storeu_ps(dst.add(j * stride), v);
    }
}

/// Rows of the panels [`panel6_16`] writes: the AVX-512 tile's.
pub(super) const PANEL6_ROWS: usize = 6;

/// Writes the 16 columns `c0..c0 + 16` of 6 rows (`from[i]`, each at least
/// `c0 + 16` long) as a panel of 6 rows, `dst[c·6 + i] = from[i][c0 + c]`:
/// 96 floats in six vectors, lane `p` of vector `j` being float `16j + p`
/// of the block, so row `(16j + p) % 6` of column `(16j + p) / 6`, which
/// six masked one-source permutes put in place. The weights of a
/// recurrent layer at a batch over 16 pack in panels of 6 rows, which one
/// float at a time (a bounds-checked read and a store each) took 37% of a
/// one-step GRU forward's samples (h512, batch 32, 2 threads, Zen 4),
/// against 21% in its GEMM. With this, LSTM forwards (h512 at batch 32
/// and 64, h256 at 32 over 150 steps) ran 1.02-1.06x (ABBA, 6 rounds).
///
/// # Safety
/// An AVX-512 CPU; `dst` valid for writes of 96 floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn panel6_16(from: &[&[f32]; PANEL6_ROWS], c0: usize, dst: *mut f32) {
    let rows: [__m512; PANEL6_ROWS] =
        std::array::from_fn(|i| _mm512_loadu_ps(from[i][c0..c0 + 16].as_ptr()));
    for (j, (index, masks)) in PANEL6_INDEX.iter().zip(&PANEL6_MASK).enumerate() {
        let idx = _mm512_loadu_si512(index.as_ptr().cast());
        let mut v = _mm512_setzero_ps();
        for (&row, &mask) in rows.iter().zip(masks) {
            v = _mm512_mask_permutexvar_ps(v, mask, idx, row);
        }
        _mm512_storeu_ps(dst.add(16 * j), v);
    }
}

/// [`panel6_16`]'s column per lane: lane `p` of vector `j` holds column
/// `(16j + p) / 6`.
#[cfg(target_arch = "x86_64")]
const PANEL6_INDEX: [[i32; 16]; PANEL6_ROWS] = {
    let mut idx = [[0i32; 16]; PANEL6_ROWS];
    let mut j = 0;
    while j < PANEL6_ROWS {
        let mut p = 0;
        while p < 16 {
            idx[j][p] = ((16 * j + p) / PANEL6_ROWS) as i32;
            p += 1;
        }
        j += 1;
    }
    idx
};

/// [`panel6_16`]'s lanes per row: bit `p` of `[j][r]` is set where lane `p`
/// of vector `j` holds row `r`.
#[cfg(target_arch = "x86_64")]
const PANEL6_MASK: [[u16; PANEL6_ROWS]; PANEL6_ROWS] = {
    let mut mask = [[0u16; PANEL6_ROWS]; PANEL6_ROWS];
    let mut j = 0;
    while j < PANEL6_ROWS {
        let mut p = 0;
        while p < 16 {
            mask[j][(16 * j + p) % PANEL6_ROWS] |= 1 << p;
            p += 1;
        }
        j += 1;
    }
    mask
};

/// The merges of [`Avx512::store_rows`] and [`store_transposed_16x16`]:
/// `cur[..nj]` are `nj` (1, 2, 4, 8 or 16) columns of 16 rows (lane `i`:
/// row `i`); `log2 nj` rounds of two-source permutes merge pairs of column
/// groups `w` wide into groups `2w` wide, so that vector `k` of the result
/// holds rows `k·16/nj..` one after another, `nj` values each.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn merge_columns<const N: usize>(mut cur: [__m512; N], nj: usize) -> [__m512; N] {
    let mut w = 1usize;
    while w < nj {
        // Lane i of the merged vector `lo`: tuple t = i / 2w of the two
        // groups' row t, from X (lanes t·w..) then Y (16 + t·w..); `hi`
        // takes the rows 8/w further on, its indices 8 more.
        let lo = _mm512_loadu_si512(MERGE_INDEX[w.trailing_zeros() as usize].as_ptr().cast());
        let hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
        let mut next = [_mm512_setzero_ps(); N];
        for g in 0..nj / (2 * w) {
            for chunk in 0..w {
                let x = cur[2 * g * w + chunk];
                let y = cur[(2 * g + 1) * w + chunk];
                next[2 * (g * w + chunk)] = _mm512_permutex2var_ps(x, lo, y);
                next[2 * (g * w + chunk) + 1] = _mm512_permutex2var_ps(x, hi, y);
            }
        }
        cur = next;
        w *= 2;
    }
    cur
}

/// [`Avx512::store_rows`]'s and [`store_transposed_16x16`]'s permute
/// indices for groups `w = 2^s` wide:
/// lane `i` (tuple `t = i / 2w`, place `p = i % 2w`) takes X's lane
/// `t·w + p` for `p < w`, else Y's lane `t·w + p - w` (Y's lanes are 16 on).
#[cfg(target_arch = "x86_64")]
const MERGE_INDEX: [[i32; 16]; 4] = {
    let mut idx = [[0i32; 16]; 4];
    let mut s = 0;
    while s < 4 {
        let w = 1 << s;
        let mut i = 0;
        while i < 16 {
            let (t, p) = (i / (2 * w), i % (2 * w));
            idx[s][i] = if p < w {
                (t * w + p) as i32
            } else {
                (16 + t * w + p - w) as i32
            };
            i += 1;
        }
        s += 1;
    }
    idx
};

#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Simd for Avx2 {
    type V = __m256;
    type M = __m256i;
    const L: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        _mm256_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut f32, v: __m256) {
        if (p as usize).is_multiple_of(32) {
            _mm256_stream_ps(p, v)
        } else if (p as usize).is_multiple_of(16) {
            _mm_stream_ps(p, _mm256_castps256_ps128(v));
            _mm_stream_ps(p.add(4), _mm256_extractf128_ps::<1>(v));
        } else {
            _mm256_storeu_ps(p, v)
        }
    }
    #[inline(always)]
    unsafe fn mask(n: usize) -> __m256i {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
    #[inline(always)]
    unsafe fn load_m(p: *const f32, m: __m256i) -> __m256 {
        _mm256_maskload_ps(p, m)
    }
    #[inline(always)]
    unsafe fn store_m(p: *mut f32, m: __m256i, v: __m256) {
        _mm256_maskstore_ps(p, m, v)
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    fn stores_rows(nj: usize) -> bool {
        matches!(nj, 1 | 2 | 4)
    }
    /// For `NJ` of 1, 2 or 4: unpacks within 128-bit halves, then the
    /// halves recombined (12 shuffles for 8 rows of 4).
    #[inline(always)]
    unsafe fn store_rows<const NJ: usize>(cols: &[__m256; NJ], c: *mut f32, acc: bool) {
        let rows: [__m256; NJ] = match NJ {
            1 => std::array::from_fn(|k| cols[k]),
            2 => {
                // lo: rows 0-1 | 4-5, hi: rows 2-3 | 6-7; then the halves in order.
                let lo = _mm256_unpacklo_ps(cols[0], cols[1]);
                let hi = _mm256_unpackhi_ps(cols[0], cols[1]);
                let out = [
                    _mm256_permute2f128_ps::<0x20>(lo, hi),
                    _mm256_permute2f128_ps::<0x31>(lo, hi),
                ];
                std::array::from_fn(|k| out[k])
            }
            4 => {
                let t0 = _mm256_unpacklo_ps(cols[0], cols[1]);
                let t1 = _mm256_unpackhi_ps(cols[0], cols[1]);
                let t2 = _mm256_unpacklo_ps(cols[2], cols[3]);
                let t3 = _mm256_unpackhi_ps(cols[2], cols[3]);
                // Rows r and r + 4 of all four columns, r = 0..4.
                let pd = |x: __m256| _mm256_castps_pd(x);
                let ps = |x: __m256d| _mm256_castpd_ps(x);
                let u0 = ps(_mm256_unpacklo_pd(pd(t0), pd(t2)));
                let u1 = ps(_mm256_unpackhi_pd(pd(t0), pd(t2)));
                let u2 = ps(_mm256_unpacklo_pd(pd(t1), pd(t3)));
                let u3 = ps(_mm256_unpackhi_pd(pd(t1), pd(t3)));
                let out = [
                    _mm256_permute2f128_ps::<0x20>(u0, u1),
                    _mm256_permute2f128_ps::<0x20>(u2, u3),
                    _mm256_permute2f128_ps::<0x31>(u0, u1),
                    _mm256_permute2f128_ps::<0x31>(u2, u3),
                ];
                std::array::from_fn(|k| out[k])
            }
            _ => unreachable!("no row transposition of {NJ} columns on AVX2"),
        };
        for (k, &v) in rows.iter().enumerate() {
            Self::store_or_add(c.add(8 * k), v, acc);
        }
    }
}
