//! The one place that calls the `gemm` crate: a single-threaded
//! `dst (+)= lhs · rhs` on strided f32 matrices, on the ISA the crate picks
//! itself or, below it, on AVX2 through the crate's own AVX2 micro-kernels
//! (so that `--isa avx2` on an AVX-512 CPU times what an AVX2 CPU runs).

use crate::Isa;

/// A read-only strided matrix: element `(i, j)` lives at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub struct MatRef {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

/// `dst[m x n] = lhs[m x k] · rhs[k x n]`, or `+=` when `accumulate`, on
/// [`nearest`]`(isa)`. `dst` is row-major with row stride `dst_rs`.
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
    isa: Isa,
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
    let run = if nearest(isa) == gemm_isa() {
        gemm::gemm::<f32>
    } else {
        avx2::gemm
    };
    // SAFETY: forwarded from the caller's contract. gemm computes
    // dst := alpha·dst + beta·lhs·rhs and reads dst only when read_dst is set.
    unsafe {
        run(
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

/// Whether [`gemm_f32`] runs on `isa` here: the ISA the `gemm` crate picks
/// itself ([`gemm_isa`]), or AVX2 below it.
pub fn runs_on(isa: Isa) -> bool {
    isa == gemm_isa() || (isa == Isa::Avx2 && avx2::available())
}

/// `isa` where [`runs_on`] accepts it, else the crate's own ([`gemm_isa`]):
/// what [`gemm_f32`] runs on. (Scalar kernels have no GEMM of their own:
/// with `--isa scalar`, `cnnbench gemm`, the fully connected and the
/// recurrent layers run the crate's, and Winograd's transforms are scalar
/// around the crate's GEMMs where a test plans them so.)
pub fn nearest(isa: Isa) -> Isa {
    if runs_on(isa) {
        isa
    } else {
        gemm_isa()
    }
}

/// Why [`runs_on`] refuses `isa`, for an algorithm's `supports`.
pub fn refusal(isa: Isa) -> Result<(), String> {
    if runs_on(isa) {
        return Ok(());
    }
    let here: Vec<&str> = Isa::ALL
        .into_iter()
        .filter(|&i| runs_on(i))
        .map(Isa::name)
        .collect();
    Err(format!(
        "its GEMMs run on {} here, not {isa}; use --isa auto",
        here.join(" or ")
    ))
}

/// The `gemm` crate's AVX2 micro-kernels (`gemm_f32::microkernel::fma`),
/// instantiated here as gemm-common's `gemm_def!` does for the crate's own
/// dispatch, which picks AVX-512 whenever the CPU has it.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use gemm_common::simd::{MixedSimd, V3};
    use gemm_f32::microkernel::fma::f32::{H_M, H_N, H_UKR, MR_DIV_N, NR, UKR};

    /// f32 lanes of a 256-bit register.
    const N: usize = 8;

    /// Whether this CPU has what the AVX2 micro-kernels need (x86-64-v3).
    pub fn available() -> bool {
        <V3 as MixedSimd<f32, f32, f32, f32>>::try_new().is_some()
    }

    /// `gemm::gemm` on AVX2: its normalisation (a row-major dst is run
    /// transposed, since the micro-kernels write columns; negative strides
    /// are flipped), then gemm-common's driver with the AVX2 kernels.
    ///
    /// # Safety
    /// As [`gemm::gemm`]; and [`available`] must hold.
    // Not inlined, as the crate's own `gemm_basic`: the driver is large.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
        m: usize,
        n: usize,
        k: usize,
        mut dst: *mut f32,
        dst_cs: isize,
        dst_rs: isize,
        read_dst: bool,
        lhs: *const f32,
        lhs_cs: isize,
        lhs_rs: isize,
        rhs: *const f32,
        rhs_cs: isize,
        rhs_rs: isize,
        alpha: f32,
        beta: f32,
        conj_dst: bool,
        conj_lhs: bool,
        conj_rhs: bool,
        parallelism: gemm::Parallelism,
    ) {
        // As gemm 0.19's `gemm::gemm`, line by line.
        let (
            m,
            n,
            mut dst_cs,
            mut dst_rs,
            mut lhs,
            mut lhs_cs,
            mut lhs_rs,
            mut rhs,
            mut rhs_cs,
            mut rhs_rs,
            conj_lhs,
            conj_rhs,
        ) = if dst_cs.abs() < dst_rs.abs() {
            (
                n, m, dst_rs, dst_cs, rhs, rhs_rs, rhs_cs, lhs, lhs_rs, lhs_cs, conj_rhs, conj_lhs,
            )
        } else {
            (
                m, n, dst_cs, dst_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs, conj_lhs, conj_rhs,
            )
        };
        if dst_rs < 0 && m > 0 {
            dst = dst.wrapping_offset((m - 1) as isize * dst_rs);
            dst_rs = -dst_rs;
            lhs = lhs.wrapping_offset((m - 1) as isize * lhs_rs);
            lhs_rs = -lhs_rs;
        }
        if dst_cs < 0 && n > 0 {
            dst = dst.wrapping_offset((n - 1) as isize * dst_cs);
            dst_cs = -dst_cs;
            rhs = rhs.wrapping_offset((n - 1) as isize * rhs_cs);
            rhs_cs = -rhs_cs;
        }
        if lhs_cs < 0 && k > 0 {
            lhs = lhs.wrapping_offset((k - 1) as isize * lhs_cs);
            lhs_cs = -lhs_cs;
            rhs = rhs.wrapping_offset((k - 1) as isize * rhs_rs);
            rhs_rs = -rhs_rs;
        }
        let simd = <V3 as MixedSimd<f32, f32, f32, f32>>::try_new().expect("x86-64-v3 CPU");
        // SAFETY: forwarded from the caller's contract; the micro-kernels
        // are the ones gemm-common pairs with V3.
        unsafe {
            gemm_common::gemm::gemm_basic_generic::<
                _,
                f32,
                N,
                { MR_DIV_N * N },
                NR,
                MR_DIV_N,
                H_M,
                H_N,
            >(
                simd,
                m,
                n,
                k,
                dst,
                dst_cs,
                dst_rs,
                read_dst,
                lhs,
                lhs_cs,
                lhs_rs,
                rhs,
                rhs_cs,
                rhs_rs,
                alpha,
                beta,
                conj_dst,
                conj_lhs,
                conj_rhs,
                |a, b, c| a * b + c,
                &UKR,
                &H_UKR,
                false,
                parallelism,
            )
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod avx2 {
    pub fn available() -> bool {
        false
    }
    pub unsafe fn gemm(
        _: usize,
        _: usize,
        _: usize,
        _: *mut f32,
        _: isize,
        _: isize,
        _: bool,
        _: *const f32,
        _: isize,
        _: isize,
        _: *const f32,
        _: isize,
        _: isize,
        _: f32,
        _: f32,
        _: bool,
        _: bool,
        _: bool,
        _: gemm::Parallelism,
    ) {
        unreachable!("AVX2 off x86_64")
    }
}

/// The instruction set the `gemm` crate dispatches to on this CPU (it
/// mirrors gemm-common's own run-time check; [`gemm_f32`] goes below it to
/// AVX2 only).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::rng::fill_uniform;

    /// On every ISA it runs here (on an AVX-512 CPU: the crate's own
    /// AVX-512 and the AVX2 instantiation): A read as rows and as columns,
    /// a dst row stride past its width, overwrite then accumulate, and an
    /// empty reduction (which `gemm_f32` answers itself, on any ISA).
    #[test]
    fn every_isa_matches_the_reference() {
        let (m, n, k, dst_rs) = (37, 29, 45, 33);
        let mut a = vec![0.0; m * k];
        let mut b = vec![0.0; k * n];
        fill_uniform(&mut a, 1, 1.0);
        fill_uniform(&mut b, 2, 1.0);
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum::<f64>() as f32;
            }
        }
        let rows = |dst: &[f32]| -> Vec<f32> {
            dst.chunks(dst_rs).flat_map(|r| &r[..n]).copied().collect()
        };
        let isas: Vec<Isa> = Isa::supported()
            .into_iter()
            .filter(|&i| runs_on(i))
            .collect();
        if Isa::detect() == Isa::Avx512 {
            assert!(isas.contains(&Isa::Avx2), "{isas:?}");
        }
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let rhs = MatRef {
            ptr: b.as_ptr(),
            rs: n as isize,
            cs: 1,
        };
        for isa in isas {
            for (what, lhs) in [
                (
                    "rows",
                    MatRef {
                        ptr: a.as_ptr(),
                        rs: k as isize,
                        cs: 1,
                    },
                ),
                (
                    "columns",
                    MatRef {
                        ptr: at.as_ptr(),
                        rs: 1,
                        cs: m as isize,
                    },
                ),
            ] {
                let mut dst = vec![f32::NAN; m * dst_rs];
                // SAFETY: lhs and rhs address m x k and k x n of live
                // buffers; dst holds m rows of dst_rs >= n.
                unsafe { gemm_f32(isa, m, n, k, dst.as_mut_ptr(), dst_rs, false, lhs, rhs) };
                let e = rel_l2_error(&rows(&dst), &want);
                assert!(e < 1e-6, "{isa} {what}: {e}");
                // SAFETY: as above.
                unsafe { gemm_f32(isa, m, n, k, dst.as_mut_ptr(), dst_rs, true, lhs, rhs) };
                let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
                let e = rel_l2_error(&rows(&dst), &twice);
                assert!(e < 1e-6, "{isa} {what} accumulated: {e}");
                // SAFETY: as above; with k = 0 nothing is read.
                unsafe { gemm_f32(isa, m, n, 0, dst.as_mut_ptr(), dst_rs, false, lhs, rhs) };
                assert!(rows(&dst).iter().all(|&v| v == 0.0), "{isa} {what}: k = 0");
            }
        }
    }

    #[test]
    fn the_isas_it_runs_on() {
        let best = gemm_isa();
        assert!(runs_on(best) && nearest(best) == best);
        // Scalar is never run: the crate's own pick stands in for it.
        if best != Isa::Scalar {
            assert!(!runs_on(Isa::Scalar));
            assert_eq!(nearest(Isa::Scalar), best);
            let why = refusal(Isa::Scalar).unwrap_err();
            assert!(
                why.contains("not scalar") && !why.contains("scalar or"),
                "{why}"
            );
        }
        if best == Isa::Avx512 {
            assert!(runs_on(Isa::Avx2) && nearest(Isa::Avx2) == Isa::Avx2);
            assert!(refusal(Isa::Scalar).unwrap_err().contains("avx512 or avx2"));
        }
    }
}
