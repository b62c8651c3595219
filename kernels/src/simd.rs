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

/// Asks for the cache line at `p` into L1 ahead of its use: a hint,
/// which never faults, so `p` may point anywhere.
#[inline(always)]
pub(crate) fn prefetch(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of any address is architecturally a no-op hint.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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
