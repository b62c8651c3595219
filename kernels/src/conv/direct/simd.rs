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
    /// Asks for the cache line at `p` ahead of its use; a hint, which
    /// never faults, so `p` may point anywhere.
    #[inline(always)]
    unsafe fn prefetch(p: *const f32) {
        #[cfg(target_arch = "x86_64")]
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
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
}

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
}
