//! Dense f32 GEMM for `cnnbench gemm` and the fully connected layers:
//! row-major `C[m×n] = op(A)·op(B)`, tiled over rayon's global pool, each
//! tile one single-threaded call of the `gemm` crate's micro-kernels.

/// The instruction set the tiles run with (the `gemm` crate picks it).
pub use crate::conv::im2col_gemm::blas::gemm_isa;
use crate::conv::im2col_gemm::blas::{gemm_f32, MatRef};
use rayon::prelude::*;

/// `C[m×n] = op(A)[m×k] · op(B)[k×n]`. A is stored `m×k` row-major, or
/// `k×m` when `trans_a`; B is stored `k×n`, or `n×k` when `trans_b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: bool,
    pub trans_b: bool,
}

impl GemmShape {
    pub fn flops(&self) -> u64 {
        2 * self.m as u64 * self.n as u64 * self.k as u64
    }

    /// A's element (i, p) and B's element (p, j) as strided views.
    fn views(&self, a: &[f32], b: &[f32]) -> (MatRef, MatRef) {
        let (m, n, k) = (self.m as isize, self.n as isize, self.k as isize);
        let a = if self.trans_a {
            MatRef {
                ptr: a.as_ptr(),
                rs: 1,
                cs: m,
            }
        } else {
            MatRef {
                ptr: a.as_ptr(),
                rs: k,
                cs: 1,
            }
        };
        let b = if self.trans_b {
            MatRef {
                ptr: b.as_ptr(),
                rs: 1,
                cs: k,
            }
        } else {
            MatRef {
                ptr: b.as_ptr(),
                rs: n,
                cs: 1,
            }
        };
        (a, b)
    }
}

/// Rows per tile: about 4 tiles per thread, in multiples of 48 rows
/// (whole micro-tiles of 6, 8, 12, 16 or 24 rows).
fn tile_rows(s: &GemmShape, threads: usize) -> usize {
    let per = s.m.div_ceil(4 * threads.max(1));
    per.div_ceil(48).max(1) * 48
}

/// Columns per tile: whole rows of C unless there are too few row tiles.
fn tile_cols(s: &GemmShape, threads: usize, rows: usize) -> usize {
    let row_tiles = s.m.div_ceil(rows);
    if row_tiles >= 2 * threads {
        return s.n.max(1);
    }
    let want = (2 * threads).div_ceil(row_tiles);
    s.n.div_ceil(want).div_ceil(64).max(1) * 64
}

/// Computes `c = op(a)·op(b)` in parallel on the current rayon pool.
pub fn sgemm(s: &GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    sgemm_acc(s, a, b, c, false)
}

/// [`sgemm`], or `c += op(a)·op(b)` when `accumulate` (the recurrent
/// layers add the hidden state's product to the input's).
pub fn sgemm_acc(s: &GemmShape, a: &[f32], b: &[f32], c: &mut [f32], accumulate: bool) {
    assert_eq!(a.len(), s.m * s.k, "A size");
    assert_eq!(b.len(), s.k * s.n, "B size");
    assert_eq!(c.len(), s.m * s.n, "C size");
    if s.m == 0 || s.n == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    let rows = tile_rows(s, threads);
    let cols = tile_cols(s, threads, rows);
    let views = Views(s.views(a, b));
    let col_tiles = s.n.div_ceil(cols);
    // Each task owns a block of whole rows of C and walks its column tiles.
    c.par_chunks_mut(rows * s.n)
        .enumerate()
        .flat_map_iter(|(ti, block)| {
            let r0 = ti * rows;
            let mrows = block.len() / s.n;
            let ptr = SendPtr(block.as_mut_ptr());
            (0..col_tiles).map(move |tj| (r0, mrows, tj, ptr))
        })
        .for_each(|(r0, mrows, tj, ptr): (usize, usize, usize, SendPtr)| {
            let (av, bv) = views.get();
            let c0 = tj * cols;
            let ncols = cols.min(s.n - c0);
            let lhs = MatRef {
                // SAFETY: row r0 of op(A) is inside `a`.
                ptr: unsafe { av.ptr.offset(r0 as isize * av.rs) },
                ..av
            };
            let rhs = MatRef {
                // SAFETY: column c0 of op(B) is inside `b`.
                ptr: unsafe { bv.ptr.offset(c0 as isize * bv.cs) },
                ..bv
            };
            // SAFETY: this task alone writes rows r0.. r0+mrows, columns
            // c0.. c0+ncols of C; the views address only A's and B's
            // elements.
            unsafe {
                let base = ptr.get();
                gemm_f32(mrows, ncols, s.k, base.add(c0), s.n, accumulate, lhs, rhs);
            }
        });
}

/// A pointer into a buffer whose disjoint parts parallel tasks write
/// (tiles of C here, bands of a transpose in `rnn`).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut f32);
// SAFETY: every user has its tasks write disjoint elements (see `sgemm`).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// By value, so closures capture the whole `SendPtr`.
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

/// The read-only views of A and B, shared by every task.
#[derive(Clone, Copy)]
struct Views((MatRef, MatRef));
// SAFETY: A and B are only read while `sgemm` borrows them.
unsafe impl Send for Views {}
unsafe impl Sync for Views {}

impl Views {
    /// By value, so closures capture the whole `Views` (not its fields).
    fn get(self) -> (MatRef, MatRef) {
        self.0
    }
}

/// The naive reference, accumulating in f64.
pub fn reference(s: &GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (av, bv) = s.views(a, b);
    c.par_chunks_mut(s.n.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            for (j, out) in row.iter_mut().enumerate() {
                let mut acc = 0f64;
                for p in 0..s.k {
                    let ai = i as isize * av.rs + p as isize * av.cs;
                    let bi = p as isize * bv.rs + j as isize * bv.cs;
                    acc += a[ai as usize] as f64 * b[bi as usize] as f64;
                }
                *out = acc as f32;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::rng::fill_uniform;

    #[test]
    fn reference_by_hand() {
        // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]; with B transposed,
        // B stored as [5 7; 6 8].
        let s = GemmShape {
            m: 2,
            n: 2,
            k: 2,
            trans_a: false,
            trans_b: false,
        };
        let mut c = [0.0; 4];
        reference(&s, &[1., 2., 3., 4.], &[5., 6., 7., 8.], &mut c);
        assert_eq!(c, [19., 22., 43., 50.]);
        let t = GemmShape { trans_b: true, ..s };
        reference(&t, &[1., 2., 3., 4.], &[5., 7., 6., 8.], &mut c);
        assert_eq!(c, [19., 22., 43., 50.]);
    }

    #[test]
    fn tiled_gemm_matches_the_reference() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (7, 5, 3),
            (97, 130, 61),
            (300, 17, 256),
            (5, 1000, 9),
        ] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let s = GemmShape {
                    m,
                    n,
                    k,
                    trans_a: ta,
                    trans_b: tb,
                };
                let mut a = vec![0.0; m * k];
                let mut b = vec![0.0; k * n];
                fill_uniform(&mut a, 1, 1.0);
                fill_uniform(&mut b, 2, 1.0);
                let mut got = vec![f32::NAN; m * n];
                let mut want = vec![0.0; m * n];
                sgemm(&s, &a, &b, &mut got);
                reference(&s, &a, &b, &mut want);
                let e = rel_l2_error(&got, &want);
                assert!(e < 1e-5, "{s:?}: {e}");
                // Accumulating adds the product again.
                sgemm_acc(&s, &a, &b, &mut got, true);
                let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
                let e = rel_l2_error(&got, &twice);
                assert!(e < 1e-5, "{s:?} accumulated: {e}");
            }
        }
    }
}
