//! Dense f32 GEMM for `cnnbench gemm`, the fully connected layers and the
//! recurrent layers' sequence-long products: row-major
//! `C[m×n] = op(A)·op(B)` over rayon's global pool, on AVX-512 through the
//! packed micro-kernel of the 1x1 convolutions where the shape suits it,
//! else in tiles, each one single-threaded call of the `gemm` crate's
//! micro-kernels (see [`Path`]). Every entry takes the ISA to run on; the
//! tiles run on [`nearest`] to it.

/// The ISA the tiles run on for a requested one: that ISA, or the `gemm`
/// crate's own pick below AVX2 (where the packed path is off too).
pub use crate::conv::im2col_gemm::blas::nearest;
use crate::conv::im2col_gemm::blas::{gemm_f32, MatRef};
use crate::conv::im2col_gemm::packed::{self, NR};
use crate::Isa;
use rayon::prelude::*;
use std::cell::RefCell;

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
/// (whole micro-tiles of 6, 8, 12, 16 or 24 rows). Each tile's call of
/// the `gemm` crate packs all of op(B) it reads, so where B is over half
/// the cache counted on, every row tile packs it again from memory: there,
/// where the tiles would be short (see [`FEW_ROWS`]), one row tile per
/// thread, in multiples of 16 rows (an even split matters more than a
/// partial micro-tile at a tile's end: 512 rows on 2 threads are 256 and
/// 256, not 288 and 224), the columns splitting too (see [`tile_cols`]);
/// and so too wherever A is not transposed and B outgrows a core's L2
/// (see [`TALL_B_BYTES`]).
/// On 2 threads of a Xeon VM (family 6, model 167), ABBA, 3 rounds
/// (results/reference/cpu-gemm-xeon-avx512/):
/// 512x2048x3200 (26 MB of B) 1.37x, 512x4096x4096 1.33x, 1024x8192x2048
/// 1.36x, where shapes whose tiles did not change moved 1.08-1.11x in the
/// same runs; capped at AVX2 1.22-1.63x (unchanged ones 1.02-1.04x).
fn tile_rows(s: &GemmShape, threads: usize) -> usize {
    tile_rows_within(s, threads, crate::bandwidth::cache_bytes())
}

/// [`tile_rows`] with `cache` bytes counted on.
fn tile_rows_within(s: &GemmShape, threads: usize, cache: u64) -> usize {
    let threads = threads.max(1);
    let per = s.m.div_ceil(4 * threads);
    let rows = per.div_ceil(48).max(1) * 48;
    let b_bytes = 4 * s.k as u64 * s.n as u64;
    let short_over_cache = b_bytes > cache / 2 && rows < FEW_ROWS;
    let a_in_place = !s.trans_a && b_bytes > TALL_B_BYTES;
    if short_over_cache || a_in_place {
        let one_per_thread = s.m.div_ceil(threads).div_ceil(16).max(1) * 16;
        return rows.max(one_per_thread);
    }
    rows
}

/// B's size (bytes) over which a product whose A is not transposed runs
/// one row tile per thread, whatever the default tiles' height: B is then
/// larger than this Xeon's L2 per core (2 MiB; not measured on CPUs with
/// 1 MiB), so each extra row tile packs it again from L3 or memory. On 2
/// threads of a Xeon VM (family 6, model 167), ABBA, 6 rounds
/// (results/reference/cpu-gemm-xeon-avx512/abba-gemm-tall-tiles.txt),
/// capped at AVX2: 2048x512x3200 1.16x, 2048x3200x512 (B transposed)
/// 1.13x, 1024x1024x1024 1.19x, 2048x2048x2048 1.18x, 1024x256x4800 1.21x,
/// 4096x4096x4096 1.06x; on AVX-512, the shapes on this path:
/// 2048x3200x512 1.27x, 2048x2048x2048 1.18x, 4096x4096x4096 1.05x. In
/// the same runs, shapes whose code did not change (A transposed; on
/// AVX-512 those on [`Path::Packed`]) moved 0.97-1.05x. The LSTMs capped
/// at AVX2 (abba-lstm-tall-tiles-avx2.txt): weight gradients 1.00-1.18x,
/// forwards (their input product is 2048x3200x512 with B transposed at
/// h512 batch 128) 1.02-1.12x; on AVX-512, where those products take
/// other paths, 0.96-1.07x (abba-lstm-tall-tiles-avx512.txt). With A
/// transposed (the recurrent layers' input gradient) a first version that
/// split those too measured 0.79-0.94x on 3200x512x2048 and 3200x2048x512
/// capped at AVX2, and 0.92-1.01x on AVX-512 (6-8 rounds, not kept), so
/// they keep four tiles per thread.
const TALL_B_BYTES: u64 = 2 << 20;

/// Default tile height (rows) from which [`tile_rows`] keeps four tiles
/// per thread over a B larger than half the cache. Since [`TALL_B_BYTES`]
/// this matters only where A is transposed (or where half the cache is
/// under 2 MiB): there tiles of any height splitting one per thread
/// measured 0.79-1.01x. An earlier ABBA of tall tiles split on DeepBench's
/// LSTMs of hidden 1024 to 2048 (0.87-1.12x, 2 rounds) had timed mostly
/// passes that run no tiled GEMM at all.
const FEW_ROWS: usize = 256;

/// Columns per tile: whole rows of C unless there are too few row tiles.
fn tile_cols(s: &GemmShape, threads: usize, rows: usize) -> usize {
    let row_tiles = s.m.div_ceil(rows);
    if row_tiles >= 2 * threads {
        return s.n.max(1);
    }
    let want = (2 * threads).div_ceil(row_tiles);
    s.n.div_ceil(want).div_ceil(64).max(1) * 64
}

/// Computes `c = op(a)·op(b)` in parallel on the current rayon pool, on
/// `isa` (see the module's note).
pub fn sgemm(isa: Isa, s: &GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    sgemm_acc(isa, s, a, b, c, false)
}

/// [`sgemm`], or `c += op(a)·op(b)` when `accumulate` (the recurrent
/// layers add the hidden state's product to the input's).
pub fn sgemm_acc(isa: Isa, s: &GemmShape, a: &[f32], b: &[f32], c: &mut [f32], accumulate: bool) {
    // Checked: the packed path's pointer arithmetic relies on these.
    assert_eq!(Some(a.len()), s.m.checked_mul(s.k), "A size");
    assert_eq!(Some(b.len()), s.k.checked_mul(s.n), "B size");
    assert_eq!(Some(c.len()), s.m.checked_mul(s.n), "C size");
    if s.m == 0 || s.n == 0 {
        return;
    }
    if Path::for_shape(isa, s) == Path::Packed {
        return sgemm_packed(s, 1, a, 0, b, c, accumulate, pack_rows(s.n));
    }
    let isa = nearest(isa);
    let threads = rayon::current_num_threads();
    let rows = tile_rows(s, threads);
    let cols = tile_cols(s, threads, rows);
    let views = Views(s.views(a, b));
    let col_tiles = s.n.div_ceil(cols);
    // Each task owns one column tile of a block of rows of C. A block's
    // column tiles are tasks of their own: `tile_cols` splits columns
    // where there are fewer than two blocks per thread, and with a single
    // block (a fully connected layer's 16 rows at batch 16) they are the
    // only split.
    c.par_chunks_mut(rows * s.n)
        .enumerate()
        .flat_map(|(ti, block)| {
            let r0 = ti * rows;
            let mrows = block.len() / s.n;
            let ptr = SendPtr(block.as_mut_ptr());
            (0..col_tiles)
                .into_par_iter()
                .map(move |tj| (r0, mrows, tj, ptr))
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
                gemm_f32(
                    isa,
                    mrows,
                    ncols,
                    s.k,
                    base.add(c0),
                    s.n,
                    accumulate,
                    lhs,
                    rhs,
                );
            }
        });
}

/// Which code runs a shape: [`Path::Packed`] on AVX-512 where its bounds
/// (see [`Path::for_shape`]) hold, else the `gemm` crate's tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The `gemm` crate's micro-kernels in rayon tiles (each tile packs
    /// its own A and B).
    Tiled,
    /// B packed once per chunk of the reduction into 64-column panels,
    /// shared by every task, and `avx512_gemm_f32_6x64` reading A in place
    /// (the 1x1 convolutions' GEMM).
    Packed,
}

impl Path {
    /// The path [`sgemm_acc`] takes for `s` on `isa`. Packed needs AVX-512,
    /// - 64 to 1024 columns, the last panel's padding at most a quarter of
    ///   them: the micro-tile is 64 wide;
    /// - a C of at least 2^17 values (so at least 128 rows): below it each
    ///   task's block is too small to repay packing and reading all of B.
    ///
    /// Where the bounds come from: development runs with the packed path
    /// on every shape (2 threads, Zen 4, ABBA, not kept) lost on narrow
    /// or small outputs (1024x32x1024 0.50x, 256x64x3200 0.71x,
    /// 48x1000x2048 0.88x) and on the widest (4096x4096x4096 0.91x;
    /// 2048x2048x2048 1.05x in one run and 0.96x in another). Inside them,
    /// the kept runs (results/reference/cpu-gemm-zen4-avx512/) gave 0.97x
    /// to 1.10x per GEMM, within this VM's noise on some, and the LSTM
    /// backward-weights of hidden 256 and 512, whose products reduce over
    /// the whole sequence, 1.10x to 1.17x.
    pub fn for_shape(isa: Isa, s: &GemmShape) -> Path {
        let padded = s.n.div_ceil(NR) * NR;
        let wide = s.n >= NR && s.n <= 1024 && 4 * padded <= 5 * s.n;
        if packed::available_for_all(isa) && wide && s.m * s.n >= 1 << 17 {
            Path::Packed
        } else {
            Path::Tiled
        }
    }

    /// `packed` or `tiled`, the records' `algo`.
    pub fn name(self) -> &'static str {
        match self {
            Path::Tiled => "tiled",
            Path::Packed => "packed",
        }
    }

    /// The kernel on `isa`, for records: `avx512_gemm_f32_6x64` or
    /// `gemm_f32(avx2)` (the tiles' ISA, [`nearest`] to `isa`).
    pub fn kernel(self, isa: Isa) -> String {
        match self {
            Path::Tiled => format!("gemm_f32({})", nearest(isa)),
            Path::Packed => "avx512_gemm_f32_6x64".into(),
        }
    }
}

/// The most floats of B packed at once: a longer reduction is packed and
/// run in chunks of rows, so that the pack stays within 16 MiB whatever
/// B's size (a VGG fully connected layer's weights are 400 MiB).
const PACK_FLOATS: usize = 4 << 20;

/// Rows of a B `n` wide packed at once: [`PACK_FLOATS`] of its panels.
fn pack_rows(n: usize) -> usize {
    PACK_FLOATS / (n.div_ceil(NR) * NR)
}

thread_local! {
    /// B's panels, kept between calls: a fresh 16 MiB buffer per call
    /// would fault its pages in every time.
    static PACK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Whether [`sgemm_batched_acc`] runs `batches` products of shape `s` on
/// the packed path: where [`Path::for_shape`] picks it for the batch as
/// one GEMM (`m·batches` rows), and each product has at least two
/// micro-tiles of rows (a narrower one would read the packed B again for
/// every few rows).
pub fn batch_packs(isa: Isa, s: &GemmShape, batches: usize) -> bool {
    let whole = GemmShape {
        m: s.m.saturating_mul(batches),
        ..*s
    };
    s.m >= 12 && Path::for_shape(isa, &whole) == Path::Packed
}

/// `C_t (+)= op(A_t)·op(B)` for `t < batches`, on the packed path where
/// [`batch_packs`], else each product on [`sgemm_acc`]: `s` is one
/// product's shape,
/// `A_t` starts at `a[t·a_stride]` (stored as `s.trans_a` says), and the
/// `C_t` are stacked (`c` is `[batches·m][n]`). The recurrent layers'
/// input gradient reads each step's gate gradients where they lie this
/// way, without first gathering every step's into one matrix.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_batched_acc(
    isa: Isa,
    s: &GemmShape,
    batches: usize,
    a: &[f32],
    a_stride: usize,
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) {
    let a_len = (batches.saturating_sub(1))
        .checked_mul(a_stride)
        .and_then(|v| v.checked_add(s.m.checked_mul(s.k)?));
    assert!(
        batches == 0 || a_len.is_some_and(|l| a.len() >= l),
        "A size"
    );
    assert_eq!(Some(b.len()), s.k.checked_mul(s.n), "B size");
    let c_len = batches.checked_mul(s.m).and_then(|v| v.checked_mul(s.n));
    assert_eq!(Some(c.len()), c_len, "C size");
    if s.m == 0 || s.n == 0 || batches == 0 {
        return;
    }
    if batch_packs(isa, s, batches) {
        return sgemm_packed(s, batches, a, a_stride, b, c, accumulate, pack_rows(s.n));
    }
    for (t, ct) in c.chunks_mut(s.m * s.n).enumerate() {
        sgemm_acc(isa, s, &a[t * a_stride..][..s.m * s.k], b, ct, accumulate);
    }
}

/// [`sgemm_batched_acc`] on [`Path::Packed`] (a single GEMM is a batch
/// of one): B packed into panels of [`NR`] columns, `chunk` rows of the
/// reduction at a time, shared by every task; A read in place; tasks own
/// blocks of rows of one `C_t`, and groups of panels where there are too
/// few rows for the threads.
#[allow(clippy::too_many_arguments)]
fn sgemm_packed(
    s: &GemmShape,
    batches: usize,
    a: &[f32],
    a_stride: usize,
    b: &[f32],
    c: &mut [f32],
    acc: bool,
    chunk: usize,
) {
    let (m, n, k) = (s.m, s.n, s.k);
    debug_assert!(a.len() >= (batches - 1) * a_stride + m * k && c.len() == batches * m * n);
    if k == 0 {
        if !acc {
            c.fill(0.0);
        }
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    let panels = n.div_ceil(NR);
    let kb = chunk.clamp(1, k);
    // Rows per task: about four tasks per thread, whole micro-tiles of 6,
    // at most 384 (a slice of them one micro-kernel pass deep, 256 floats,
    // 384 KiB, is read from L2 while the panels pass over it), and within
    // one product.
    let rows = ((m * batches).div_ceil(4 * threads).div_ceil(6) * 6)
        .clamp(6, 384)
        .min(m.div_ceil(6) * 6);
    let blocks_per_product = m.div_ceil(rows);
    let row_blocks = blocks_per_product * batches;
    // Panels per task: at most 8 (512 columns), so that the task's block
    // of C (384 x 512, 768 KiB) stays in L2 over the chunk's reduction;
    // fewer where the row blocks alone are too few for the threads.
    let groups = if row_blocks >= 2 * threads {
        1
    } else {
        (4 * threads).div_ceil(row_blocks).min(panels)
    };
    let groups = groups.max(panels.div_ceil(8));
    let per_group = panels.div_ceil(groups);
    let groups = panels.div_ceil(per_group);
    let (a_rs, ta) = if s.trans_a { (m, true) } else { (k, false) };
    let mut run = |buf: &mut Vec<f32>| {
        if buf.len() < panels * kb * NR {
            buf.resize(panels * kb * NR, 0.0);
        }
        let out = SendPtr(c.as_mut_ptr());
        // Only read through (`SendPtr` is for tasks' disjoint writes).
        let a_ptr = SendPtr(a.as_ptr().cast_mut());
        for k0 in (0..k).step_by(kb) {
            let kc = kb.min(k - k0);
            packed::pack_panels(b, k, n, s.trans_b, k0, kc, buf);
            let b_ptr = SendPtr(buf.as_ptr().cast_mut());
            (0..row_blocks * groups).into_par_iter().for_each(|item| {
                let (rb, g) = (item / groups, item % groups);
                let (t, i0) = (rb / blocks_per_product, (rb % blocks_per_product) * rows);
                let n0 = g * per_group * NR;
                let n1 = ((g + 1) * per_group * NR).min(n);
                let a0 = t * a_stride + if ta { k0 * a_rs + i0 } else { i0 * a_rs + k0 };
                // SAFETY: rows i0.. of C_t, columns n0..n1, belong to this
                // task alone; A_t's elements (i, k0..k0+kc) and the panels
                // of columns n0..n1 (kc rows each) are in bounds.
                unsafe {
                    // Path::Packed and `batch_packs` hold on AVX-512 only.
                    packed::gemm_panels(
                        Isa::Avx512,
                        rows.min(m - i0),
                        kc,
                        a_ptr.get().add(a0),
                        a_rs,
                        ta,
                        b_ptr.get().add(n0 / NR * kc * NR),
                        kc,
                        n0,
                        n1,
                        out.get().add((t * m + i0) * n + n0),
                        n,
                        acc || k0 > 0,
                    );
                }
            });
        }
    };
    // A task of this pool that calls a GEMM while the thread waits in
    // another's (work stealing) finds the buffer borrowed: it packs into
    // its own, allocated for the call. (The kept buffer, up to 16 MiB per
    // calling thread, lives as long as the thread and is not counted in
    // any workspace figure.)
    PACK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => run(&mut buf),
        Err(_) => run(&mut Vec::new()),
    });
}

/// A pointer into a buffer whose disjoint parts parallel tasks write
/// (tiles of C here, bands of a transpose in `rnn`), or that they only
/// read (A and B's panels in `sgemm_packed`).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut f32);
// SAFETY: every user has its tasks write disjoint elements, or only read
// (see `sgemm`, `sgemm_packed`).
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

    /// Random A and B for `s` (seeds `seed`, `seed + 1`) and the
    /// reference C.
    fn case(s: &GemmShape, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut a = vec![0.0; s.m * s.k];
        let mut b = vec![0.0; s.k * s.n];
        fill_uniform(&mut a, seed, 1.0);
        fill_uniform(&mut b, seed + 1, 1.0);
        let mut want = vec![0.0; s.m * s.n];
        reference(s, &a, &b, &mut want);
        (a, b, want)
    }

    /// Every storage of A and B for `m x n x k`.
    fn transposes(m: usize, n: usize, k: usize) -> impl Iterator<Item = GemmShape> {
        [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .map(move |(ta, tb)| GemmShape {
                m,
                n,
                k,
                trans_a: ta,
                trans_b: tb,
            })
    }

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
    fn packed_gemm_matches_the_reference_in_chunks_and_panel_groups() {
        if !packed::available(Isa::Avx512) {
            return;
        }
        // (m, n, k, chunk): several chunks of the reduction (the last one
        // short), one row block split over panel groups, a ragged last
        // panel, a reduction of one; a chunk of several micro-kernel
        // passes (`packed::KC`, 256).
        for &(m, n, k, chunk) in &[
            (97, 130, 61, 16),
            (50, 100, 600, 600),
            (300, 64, 256, 100),
            (6, 200, 9, 1000),
            (64, 70, 1, 128),
            (64, 64, 0, 128),
        ] {
            for s in transposes(m, n, k) {
                let (a, b, want) = case(&s, 1);
                for threads in [1, 2, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let mut got = vec![f32::NAN; m * n];
                    pool.install(|| sgemm_packed(&s, 1, &a, 0, &b, &mut got, false, chunk));
                    let e = rel_l2_error(&got, &want);
                    assert!(e < 1e-5, "{s:?} chunk {chunk} threads {threads}: {e}");
                    pool.install(|| sgemm_packed(&s, 1, &a, 0, &b, &mut got, true, chunk));
                    let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
                    let e = rel_l2_error(&got, &twice);
                    assert!(e < 1e-5, "{s:?} chunk {chunk} accumulated: {e}");
                }
            }
        }
    }

    #[test]
    fn batched_products_match_one_at_a_time() {
        // (m, n, k, batches, gap between the A's): packed where AVX-512
        // is, and through the public entry (packed or one by one).
        for &(m, n, k, batches, gap) in &[
            (32, 128, 200, 7, 5),
            (13, 70, 33, 4, 0),
            (64, 512, 96, 5, 64),
        ] {
            for (ta, tb) in [(false, false), (true, false), (true, true)] {
                let s = GemmShape {
                    m,
                    n,
                    k,
                    trans_a: ta,
                    trans_b: tb,
                };
                let stride = m * k + gap;
                let mut a = vec![0.0; batches * stride];
                let mut b = vec![0.0; k * n];
                fill_uniform(&mut a, 3, 1.0);
                fill_uniform(&mut b, 4, 1.0);
                let mut want = vec![0.0; batches * m * n];
                for (t, w) in want.chunks_mut(m * n).enumerate() {
                    reference(&s, &a[t * stride..][..m * k], &b, w);
                }
                for isa in Isa::supported() {
                    let mut got = vec![f32::NAN; want.len()];
                    sgemm_batched_acc(isa, &s, batches, &a, stride, &b, &mut got, false);
                    let e = rel_l2_error(&got, &want);
                    assert!(e < 1e-5, "{s:?} x{batches} on {isa}: {e}");
                }
                if !packed::available(Isa::Avx512) {
                    continue;
                }
                // Several row blocks per product need several threads.
                for threads in [1, 2, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let mut got = vec![1.0; want.len()];
                    pool.install(|| sgemm_packed(&s, batches, &a, stride, &b, &mut got, true, 40));
                    let plus_one: Vec<f32> = want.iter().map(|v| v + 1.0).collect();
                    let e = rel_l2_error(&got, &plus_one);
                    assert!(e < 1e-5, "{s:?} x{batches} on {threads}: {e}");
                }
            }
        }
    }

    #[test]
    fn packed_shapes_through_the_public_entry_and_from_inside_a_task() {
        // 2100 rows on one thread: blocks of the 384-row cap; 160 x 1000:
        // a ragged last panel. Then the same GEMM from inside tasks of a
        // small pool, which may find the calling thread's buffer borrowed.
        for (m, n, k, threads) in [(2100, 64, 20, 1), (160, 1000, 37, 2)] {
            let s = GemmShape {
                m,
                n,
                k,
                trans_a: false,
                trans_b: true,
            };
            let isa = Isa::detect();
            assert_eq!(
                Path::for_shape(isa, &s) == Path::Packed,
                packed::available_for_all(isa)
            );
            let (a, b, want) = case(&s, 5);
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut got = vec![f32::NAN; m * n];
            pool.install(|| sgemm(isa, &s, &a, &b, &mut got));
            let e = rel_l2_error(&got, &want);
            assert!(e < 1e-5, "{s:?}: {e}");
            let nested: Vec<f64> = pool.install(|| {
                (0..4)
                    .into_par_iter()
                    .map(|_| {
                        let mut c = vec![f32::NAN; m * n];
                        sgemm(isa, &s, &a, &b, &mut c);
                        rel_l2_error(&c, &want)
                    })
                    .collect()
            });
            assert!(nested.iter().all(|&e| e < 1e-5), "{s:?} nested: {nested:?}");
        }
    }

    #[test]
    fn row_tiles_are_one_per_thread_where_b_outgrows_the_cache() {
        // A transposed: only the bound on B over half the cache applies.
        let s = GemmShape {
            m: 512,
            n: 2048,
            k: 3200,
            trans_a: true,
            trans_b: false,
        };
        // 26 MB of B: over half of 32 MiB, under half of 64 MiB.
        assert_eq!(tile_rows_within(&s, 2, 32 << 20), 256);
        assert_eq!(tile_rows_within(&s, 2, 64 << 20), 96);
        // An odd split: multiples of 16 rows, the last tile shorter.
        let odd = GemmShape { m: 1000, ..s };
        assert_eq!(tile_rows_within(&odd, 2, 32 << 20), 512);
        // Many rows per tile already, A transposed: four tiles per thread.
        let tall = GemmShape { m: 3200, ..s };
        assert_eq!(tile_rows_within(&tall, 2, 32 << 20), 432);
        // Fewer rows than threads' tiles: never more row tiles than before.
        let short = GemmShape { m: 32, ..s };
        assert_eq!(tile_rows_within(&short, 2, 32 << 20), 48);
        // Then each row tile runs as two column tiles.
        assert_eq!(tile_cols(&s, 2, 256), 1024);
        // The bound: four tiles per thread of 240 rows split, of 288 not.
        assert_eq!(
            tile_rows_within(&GemmShape { m: 1920, ..s }, 2, 32 << 20),
            960
        );
        assert_eq!(
            tile_rows_within(&GemmShape { m: 1921, ..s }, 2, 32 << 20),
            288
        );
        // B of exactly half the cache stays as it was; one thread, one tile.
        let half = GemmShape { k: 2048, ..s };
        assert_eq!(tile_rows_within(&half, 2, 32 << 20), 96);
        assert_eq!(tile_rows_within(&s, 1, 32 << 20), 512);
    }

    #[test]
    fn row_tiles_are_one_per_thread_where_a_is_in_place_and_b_outgrows_l2() {
        // The LSTM h512 batch 128 weight gradient: 6.5 MB of B.
        let s = GemmShape {
            m: 2048,
            n: 512,
            k: 3200,
            trans_a: false,
            trans_b: false,
        };
        assert_eq!(tile_rows_within(&s, 2, 32 << 20), 1024);
        assert_eq!(
            tile_rows_within(&GemmShape { m: 1000, ..s }, 2, 32 << 20),
            512
        );
        // B transposed counts the same; A transposed keeps four per thread.
        let nt = GemmShape { trans_b: true, ..s };
        assert_eq!(tile_rows_within(&nt, 2, 32 << 20), 1024);
        let tn = GemmShape { trans_a: true, ..s };
        assert_eq!(tile_rows_within(&tn, 2, 32 << 20), 288);
        // The bound: B of exactly 2 MiB stays, a row more of it splits.
        let at = GemmShape { k: 1024, ..s };
        assert_eq!(tile_rows_within(&at, 2, 32 << 20), 288);
        let over = GemmShape { k: 1025, ..s };
        assert_eq!(tile_rows_within(&over, 2, 32 << 20), 1024);
        // B over half the cache too, tall tiles: one per thread.
        let big = GemmShape {
            m: 3200,
            n: 2048,
            ..s
        };
        assert_eq!(tile_rows_within(&big, 2, 32 << 20), 1600);
        // Never shorter than the default tiles: 32 rows on 2 threads.
        assert_eq!(tile_rows_within(&GemmShape { m: 32, ..s }, 2, 32 << 20), 48);
    }

    #[test]
    fn the_packed_path_is_for_wide_shapes_on_avx512() {
        let s = |m, n| GemmShape {
            m,
            n,
            k: 512,
            trans_a: false,
            trans_b: false,
        };
        let wide = if packed::available(Isa::Avx512) {
            Path::Packed
        } else {
            Path::Tiled
        };
        // Packed is AVX-512 code: an AVX2 run tiles everything.
        assert_eq!(Path::for_shape(Isa::Avx2, &s(2048, 512)), Path::Tiled);
        let isa = Isa::Avx512;
        assert_eq!(Path::for_shape(isa, &s(2048, 512)), wide);
        assert_eq!(Path::for_shape(isa, &s(2048, 64)), wide);
        assert_eq!(Path::for_shape(isa, &s(128, 1024)), wide);
        assert_eq!(Path::for_shape(isa, &s(2048, 2048)), Path::Tiled);
        assert_eq!(Path::for_shape(isa, &s(1024, 64)), Path::Tiled);
        assert_eq!(Path::for_shape(isa, &s(1024, 32)), Path::Tiled);
        // 100 columns pad to 128: over a quarter wasted.
        assert_eq!(Path::for_shape(isa, &s(1024, 100)), Path::Tiled);
        // Batches: 200 products of 11 rows are wide enough as one GEMM,
        // but each too narrow.
        assert_eq!(batch_packs(isa, &s(12, 512), 200), wide == Path::Packed);
        assert!(!batch_packs(isa, &s(11, 512), 200));
        // 1000 columns pad to 1024: 24 of the last panel's 64 empty, under
        // a quarter of 1000.
        assert_eq!(Path::for_shape(isa, &s(2048, 1000)), wide);
        assert_eq!(Path::for_shape(isa, &s(120, 1024)), Path::Tiled);
        assert_eq!(Path::for_shape(isa, &s(4096, 4096)), Path::Tiled);
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
            for s in transposes(m, n, k) {
                let (a, b, want) = case(&s, 1);
                for isa in Isa::supported() {
                    let mut got = vec![f32::NAN; m * n];
                    sgemm(isa, &s, &a, &b, &mut got);
                    let e = rel_l2_error(&got, &want);
                    assert!(e < 1e-5, "{s:?} on {isa}: {e}");
                    // Accumulating adds the product again.
                    sgemm_acc(isa, &s, &a, &b, &mut got, true);
                    let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
                    let e = rel_l2_error(&got, &twice);
                    assert!(e < 1e-5, "{s:?} on {isa} accumulated: {e}");
                }
            }
        }
    }
}
