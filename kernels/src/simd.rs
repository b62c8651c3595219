//! Run-time ISA dispatch for the memory-bound kernels.
//!
//! These kernels are plain loops that LLVM vectorises well; what matters is
//! that they are compiled for the vector width the CPU has. [`on_isa!`]
//! inlines a loop body into a `#[target_feature]` function for the ISA
//! chosen once at run time ([`Isa::detect`]), over the portable build.

use crate::Isa;

/// `on_isa!(isa, body)`: evaluates the expression `body` compiled for
/// `isa` ([`with_isa`] with the closure forced inline). Use it inside each
/// parallel task (a closure handed to rayon is not inlined into it), and
/// mark any closure the body calls in its loops `#[inline(always)]` too.
///
/// Why forced: a closure that LLVM declines to inline into the
/// `#[target_feature]` function stays compiled for the portable baseline.
/// Before this macro, ReLU's backward ran on SSE2 (4 lanes) and its
/// two-consumer form ran scalar, at about half the memory bandwidth.
#[macro_export]
macro_rules! on_isa {
    ($isa:expr, $body:expr) => {
        $crate::simd::with_isa(
            $isa,
            #[inline(always)]
            || $body,
        )
    };
}

/// Runs `f` compiled for `isa` if LLVM inlines `f`: call it through
/// [`on_isa!`], which makes sure.
#[inline(always)]
pub fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa` values other than Scalar are only produced for CPUs
        // that support them (`Isa::detect`, `Isa::is_supported`).
        Isa::Avx512 if Isa::Avx512.is_supported() => unsafe { avx512(f) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if Isa::Avx2.is_supported() => unsafe { avx2(f) },
        _ => f(),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Elements per parallel task for streaming kernels: large enough to
/// amortise scheduling, small enough to balance two to a few dozen threads.
pub const CHUNK: usize = 1 << 15;

/// Floats a streamed pass stages in L1 before it writes them out: several
/// rows at once, so that each non-temporal copy fills whole lines.
pub const STAGE: usize = 4096;

/// Whether a pass writing `out` (rows of `c` floats) should write it with
/// non-temporal stores: `out` is larger than the largest cache, so no
/// reader could find it there anyway, and the stores then skip reading
/// each line before overwriting it (a third of a copy's traffic). Needs
/// vector stores (AVX2 or AVX-512) and rows that fit the stage.
pub(crate) fn streams(isa: Isa, out: &[f32], c: usize) -> bool {
    matches!(isa, Isa::Avx512 | Isa::Avx2)
        && isa.is_supported()
        && c <= STAGE
        && ((out.len() * 4) as u64 > crate::bandwidth::largest_cache_bytes_or_32m()
            || stream_any_size())
}

/// Tests stream tensors of any size (set by the test that compares the two
/// paths; any other test running meanwhile must get the same results).
#[cfg(test)]
pub(crate) static STREAM_ANY_SIZE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

#[cfg(test)]
fn stream_any_size() -> bool {
    STREAM_ANY_SIZE.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(not(test))]
fn stream_any_size() -> bool {
    false
}

/// Writes `rows` (a whole number of `c`-float rows) through `f`, which
/// fills rows `i..i + k` of it given a staging slice of `k * c` floats and
/// `i`; the staged floats then go to `rows` with non-temporal stores
/// (ordinary ones for a part line at either end). For `isa`s that
/// [`streams`] accepts. Ends with a store fence, so that the rows are
/// visible to whichever thread reads them next. Call it inside
/// [`on_isa!`] with `f` marked `#[inline(always)]`, as any loop body there.
#[inline(always)]
pub(crate) fn stream_rows(
    isa: Isa,
    c: usize,
    rows: &mut [f32],
    mut f: impl FnMut(&mut [f32], usize),
) {
    assert!(c > 0 && c <= STAGE && rows.len().is_multiple_of(c));
    // `stream_copy` runs `isa`'s instructions.
    assert!(
        isa.is_supported(),
        "streaming stores on a CPU without {isa}"
    );
    let k = STAGE / c;
    let mut stage = [0f32; STAGE];
    let n = rows.len() / c;
    let mut i = 0;
    while i < n {
        let m = k.min(n - i);
        let stage = &mut stage[..m * c];
        f(stage, i);
        let dst = &mut rows[i * c..(i + m) * c];
        // SAFETY: `dst` and `stage` are `m * c` floats; the ISA is
        // supported (asserted above).
        unsafe { stream_copy(isa, dst.as_mut_ptr(), stage.as_ptr(), m * c) };
        i += m;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is baseline on x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Copies `n` floats, the whole 64-byte lines of `dst` with non-temporal
/// stores and any part line at either end with ordinary ones.
///
/// # Safety
/// Both valid for `n` floats, not overlapping; `isa` supported.
unsafe fn stream_copy(isa: Isa, dst: *mut f32, src: *const f32, n: usize) {
    // Floats before `dst`'s first line boundary, then whole lines.
    let head = (dst.align_offset(64)).min(n);
    let body = (n - head) / 16 * 16;
    std::ptr::copy_nonoverlapping(src, dst, head);
    let (d, s) = (dst.add(head), src.add(head));
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 => stream_lines_avx512(d, s, body),
        Isa::Avx2 => stream_lines_avx2(d, s, body),
        Isa::Scalar => std::ptr::copy_nonoverlapping(s, d, body),
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        std::ptr::copy_nonoverlapping(s, d, body);
    }
    std::ptr::copy_nonoverlapping(s.add(body), d.add(body), n - head - body);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_lines_avx512(dst: *mut f32, src: *const f32, n: usize) {
    use std::arch::x86_64::{_mm512_loadu_ps, _mm512_stream_ps};
    for i in (0..n).step_by(16) {
        _mm512_stream_ps(dst.add(i), _mm512_loadu_ps(src.add(i)));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_lines_avx2(dst: *mut f32, src: *const f32, n: usize) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_stream_ps};
    for i in (0..n).step_by(8) {
        _mm256_stream_ps(dst.add(i), _mm256_loadu_ps(src.add(i)));
    }
}
