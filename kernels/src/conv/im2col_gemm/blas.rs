//! The one place that calls the `gemm` crate: a single-threaded
//! `dst (+)= lhs · rhs` on strided f32 matrices.

use crate::Isa;

/// A read-only strided matrix: element `(i, j)` lives at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub struct MatRef {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

/// `dst[m x n] = lhs[m x k] · rhs[k x n]`, or `+=` when `accumulate`.
/// `dst` is row-major with row stride `dst_rs`.
///
/// Runs on the calling thread only (`Parallelism::None`): callers split the
/// work themselves over rayon's global pool.
///
/// # Safety
/// Every element addressed through `lhs`, `rhs` (`m x k`, `k x n`) must be
/// readable, every element of `dst` (`m` rows of `n`, stride `dst_rs`) must be
/// writable, and no other thread may touch those `dst` elements meanwhile.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_rs: usize,
    accumulate: bool,
    lhs: MatRef,
    rhs: MatRef,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                // SAFETY: row `i` of dst is writable per the contract above.
                unsafe { std::slice::from_raw_parts_mut(dst.add(i * dst_rs), n) }.fill(0.0);
            }
        }
        return;
    }
    // SAFETY: forwarded from the caller's contract. gemm computes
    // dst := alpha·dst + beta·lhs·rhs and reads dst only when read_dst is set.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            accumulate,
            lhs.ptr,
            lhs.cs,
            lhs.rs,
            rhs.ptr,
            rhs.cs,
            rhs.rs,
            if accumulate { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// The instruction set the `gemm` crate dispatches to on this CPU (it
/// mirrors gemm-common's own run-time check and cannot be forced lower).
pub fn gemm_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Scalar
}
