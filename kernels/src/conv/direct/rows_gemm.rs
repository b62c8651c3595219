//! A row-major GEMM with no packing, on the indirect-GEMM micro-kernel:
//! `C[m×n] (+)= A[m×k] · B[k×n]`, for the products a packing GEMM is too
//! heavy for: the recurrent layers' per-step products (weights × states,
//! `n` = the batch), where the weights are read once per step and the
//! states stay in cache, so packing the weights on every call (as the
//! `gemm` crate does) and handing out tiles costs as much as the
//! arithmetic when the hidden state is small.

use super::ukernel::{igemm, reduction_block, tile, Igemm, Init, MRMAX};
use crate::bandwidth::cache_bytes;
use crate::gemm::SendPtr;
use crate::Isa;
use rayon::prelude::*;

/// Multiply-adds below which one thread does the whole product (about
/// 10-20 µs of work here). A recurrent layer calls this once per step, and
/// waking the pool's threads for each call, as a smaller bound did
/// (2^18), spent 40% of a small LSTM's time in the scheduler.
const PARALLEL_MACS: usize = 1 << 21;

/// `C = A·B`, or `C += A·B` when `accumulate`; A is `m×k`, B `k×n`, C
/// `m×n`, all row-major and contiguous. Row tiles run in parallel on the
/// current rayon pool when the product is large enough.
#[allow(clippy::too_many_arguments)]
pub fn rows_gemm(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) {
    assert_eq!(a.len(), m * k, "A size");
    assert_eq!(b.len(), k * n, "B size");
    assert_eq!(c.len(), m * n, "C size");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return;
    }
    let isa = if isa.is_supported() { isa } else { Isa::Scalar };
    let (mr, nr) = tile(isa);
    let tiles = m.div_ceil(mr);
    let threads = rayon::current_num_threads();
    let macs = m * n * k;
    // Passes over k whose strip of B stays in L2 while A streams, and
    // bands of rows (see `rows`), or one band of every row.
    let (_, kc) = reduction_block(1, k, nr.min(n));
    let bands = kc * n * 4 <= B_WHOLE_BYTES || (m * k * 4) as u64 > cache_bytes();
    let band = match bands {
        true => (A_BAND_BYTES / (4 * kc * mr)).max(1) * mr,
        false => m,
    };
    let blocks = (kc, band);
    if threads == 1 || macs < PARALLEL_MACS || tiles < 2 {
        // SAFETY: every row of C is this call's.
        unsafe {
            rows(
                isa,
                0,
                m,
                n,
                k,
                a,
                b,
                SendPtr(c.as_mut_ptr()),
                accumulate,
                blocks,
            )
        };
        return;
    }
    // About four tasks per thread, in whole tiles.
    let per = tiles.div_ceil(4 * threads) * mr;
    let cp = SendPtr(c.as_mut_ptr());
    (0..m.div_ceil(per)).into_par_iter().for_each(|t| {
        let r0 = t * per;
        let r1 = (r0 + per).min(m);
        // SAFETY: tasks own disjoint row ranges of C.
        unsafe { rows(isa, r0, r1, n, k, a, b, cp, accumulate, blocks) };
    });
}

/// Rows `r0..r1` of the product, on one thread, per block of `kc` of the
/// reduction (whose strip of B for one column tile, `kc x nr`, stays in
/// L2), in bands of `band` rows whose block of A stays in L2 while every
/// column tile passes; or in one band of every row, which reads A once
/// per column tile. `rows_gemm` takes bands where B's whole block of the
/// reduction stays in L2 too, or A outgrows the cache counted on; reading A
/// per column tile from DRAM had taken DeepBench's h4096 LSTM forward
/// (its input product over every step: A 268 MB, 50 tiles) to 0.92x of
/// the `gemm` crate. Bands over every-row-per-tile, one thread against
/// the other on 2 threads (Zen 5, ABBA): 16384x3200x4096 1.11x,
/// 6144x400x1536 1.09x, 4096x128x1024 1.07x, smaller shapes 0.95-1.04x;
/// but 4096x3200x1024 (A in L3, B's 13 MB block of the reduction read
/// from L3 by each band) 0.84x, which keeps every row per tile.
///
/// # Safety
/// `c` points at the `m×n` output, whose rows `r0..r1` nobody else
/// touches meanwhile; `a`, `b` have the sizes `rows_gemm` checked.
#[allow(clippy::too_many_arguments)]
unsafe fn rows(
    isa: Isa,
    r0: usize,
    r1: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: SendPtr,
    accumulate: bool,
    (kc, band): (usize, usize),
) {
    let (mr, nr) = tile(isa);
    let c = c.get();
    for k0 in (0..k).step_by(kc) {
        let kb = kc.min(k - k0);
        let init = if k0 > 0 || accumulate {
            Init::Acc
        } else {
            Init::Zero
        };
        for s0 in (r0..r1).step_by(band) {
            let s1 = (s0 + band).min(r1);
            for j0 in (0..n).step_by(nr) {
                let nb = nr.min(n - j0);
                let bp = b.as_ptr().add(k0 * n + j0);
                for i0 in (s0..s1).step_by(mr) {
                    let valid = mr.min(s1 - i0);
                    let mut ap = [std::ptr::null::<f32>(); MRMAX];
                    let mut cp = [std::ptr::null_mut::<f32>(); MRMAX];
                    for i in 0..mr {
                        // Rows past the tile's end read row i0 again; their
                        // results are not stored.
                        let row = if i < valid { i0 + i } else { i0 };
                        ap[i] = a.as_ptr().add(row * k + k0);
                        cp[i] = c.add(row * n + j0);
                    }
                    let tile = Igemm {
                        a: ap.as_ptr(),
                        tap_off: std::ptr::null(),
                        b: &bp,
                        ntaps: 1,
                        kc: kb,
                        ldb: n,
                        c: cp.as_ptr(),
                        col: 0,
                        m: valid,
                        n: nb,
                        init,
                        stream: false,
                    };
                    igemm(isa, &tile);
                }
            }
        }
    }
}

/// The largest block of B (`kc x n`) taken to stay in L2 whole.
const B_WHOLE_BYTES: usize = 512 << 10;

/// Bytes of A one band of rows keeps in L2 (see `rows`): a quarter of a
/// 1 MiB L2, beside the strip of B.
const A_BAND_BYTES: usize = 256 << 10;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::gemm::{reference, GemmShape};
    use crate::rng::fill_uniform;

    #[test]
    fn every_isa_matches_the_reference_gemm() {
        let shapes = [
            (1, 1, 1),
            (7, 5, 3),
            (6, 64, 9),
            (13, 65, 70),
            (256, 32, 64),
            (97, 130, 300),
            (1024, 8, 1100),
            // B's block of the reduction past B_WHOLE_BYTES: column tiles
            // over every row; and bands of 54 rows (the last partial) over
            // two blocks of the reduction.
            (70, 1100, 130),
            (130, 70, 2300),
        ];
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
            if !isa.is_supported() {
                continue;
            }
            for &(m, n, k) in &shapes {
                check_gemm(isa, m, n, k, |a, b, c, acc| {
                    rows_gemm(isa, m, n, k, a, b, c, acc)
                });
            }
        }
    }

    /// Runs `gemm(a, b, c, accumulate)` on seeded row-major operands
    /// (`m×k` times `k×n`) against the reference, overwriting and then
    /// accumulating.
    pub(in crate::conv::direct) fn check_gemm(
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        gemm: impl Fn(&[f32], &[f32], &mut [f32], bool),
    ) {
        check_gemm_within(isa, m, n, k, 1e-6, gemm)
    }

    /// [`check_gemm`] within a relative L2 error of `tol` (f32 sums over
    /// longer reductions drift further from the reference's).
    fn check_gemm_within(
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        tol: f64,
        gemm: impl Fn(&[f32], &[f32], &mut [f32], bool),
    ) {
        let mut a = vec![0.0; m * k];
        let mut b = vec![0.0; k * n];
        let mut c0 = vec![0.0; m * n];
        fill_uniform(&mut a, 1, 1.0);
        fill_uniform(&mut b, 2, 1.0);
        fill_uniform(&mut c0, 3, 1.0);
        let s = GemmShape {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
        };
        let mut want = vec![0.0; m * n];
        reference(&s, &a, &b, &mut want);
        let mut c = vec![f32::NAN; m * n];
        gemm(&a, &b, &mut c, false);
        let e = rel_l2_error(&c, &want);
        assert!(e < tol, "{isa} {m}x{n}x{k}: {e}");
        // Accumulating adds the product onto what C held.
        let mut c = c0.clone();
        gemm(&a, &b, &mut c, true);
        let sum: Vec<f32> = want.iter().zip(&c0).map(|(p, q)| p + q).collect();
        let e = rel_l2_error(&c, &sum);
        assert!(e < tol, "{isa} {m}x{n}x{k} accumulating: {e}");
    }

    #[test]
    fn bands_over_blocks_of_the_reduction_on_one_thread() {
        // On one thread a task holds every row, so several bands run, the
        // last partial. 130x20x5000: bands of 24 rows over two blocks of
        // the reduction (2500 each) with AVX-512's and AVX2's tiles, of 12
        // over one with the scalar tile; 130x70x2300: bands of 54 rows over
        // two blocks with AVX-512's, every row per column tile with AVX2's
        // (B's block past B_WHOLE_BYTES); 70x1100x130: every row per tile.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        one.install(|| {
            for isa in Isa::supported() {
                for (m, n, k) in [(130, 20, 5000), (130, 70, 2300), (70, 1100, 130)] {
                    check_gemm_within(isa, m, n, k, 4e-6, |a, b, c, acc| {
                        rows_gemm(isa, m, n, k, a, b, c, acc)
                    });
                }
            }
        });
    }

    #[test]
    fn an_empty_reduction_zeroes_or_keeps_c() {
        let mut c = vec![5.0; 6];
        rows_gemm(Isa::detect(), 2, 3, 0, &[], &[], &mut c, true);
        assert_eq!(c, [5.0; 6]);
        rows_gemm(Isa::detect(), 2, 3, 0, &[], &[], &mut c, false);
        assert_eq!(c, [0.0; 6]);
    }
}

/// Interleaved timing of this GEMM and the tiled `gemm` crate one on the
/// recurrent layers' per-step shapes (`gates·h × mb × h`):
/// `cargo test -p cnnbench-kernels --release rows_gemm_beside_sgemm -- --ignored --nocapture`.
#[cfg(test)]
#[test]
#[ignore]
fn rows_gemm_beside_sgemm() {
    use crate::clock::Stopwatch;
    use crate::gemm::{sgemm_acc, GemmShape};
    let isa = Isa::detect();
    for (m, n, k) in [
        (256, 32, 64),
        (512, 128, 128),
        (1024, 16, 256),
        (2048, 64, 512),
        (4096, 64, 1024),
        (6144, 8, 1536),
        (8192, 32, 2048),
    ] {
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let mut c = vec![0.0f32; m * n];
        let reps = (1usize << 28) / (m * n * k) + 3;
        let s = GemmShape {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
        };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..6 {
            for first in [round % 2 == 0, round % 2 == 1] {
                let t0 = Stopwatch::start();
                for _ in 0..reps {
                    if first {
                        rows_gemm(isa, m, n, k, &a, &b, &mut c, true);
                    } else {
                        sgemm_acc(isa, &s, &a, &b, &mut c, true);
                    }
                }
                let us = t0.elapsed_s() * 1e6 / reps as f64;
                if first {
                    ours.push(us)
                } else {
                    theirs.push(us)
                }
            }
        }
        ours.sort_by(f64::total_cmp);
        theirs.sort_by(f64::total_cmp);
        let (o, t) = (ours[3], theirs[3]);
        println!(
            "{m}x{n}x{k}: rows_gemm {o:.1} us, gemm crate {t:.1} us, ratio {:.2}",
            t / o
        );
    }
}
